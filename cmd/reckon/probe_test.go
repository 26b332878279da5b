package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/reckon-ci/reckon/gate"
	"github.com/reckon-ci/reckon/wire"
)

const (
	torchProbeFixture = "../../ci/probes/testdata/torch_allreduce_probe_h200x2.json"
	refProbeFixture   = "../../ci/probes/testdata/refengine_probe_tp8.json"
)

// runProbeCmd runs `probe ARGS...` on a freshly built command (no flag values leak between
// tests) and returns stdout and the exit code main would use.
func runProbeCmd(t *testing.T, args ...string) (string, int, error) {
	t.Helper()
	var out bytes.Buffer
	cmd := newProbeCmd()
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(args)
	cmd.SilenceErrors, cmd.SilenceUsage = true, true
	err := cmd.Execute()
	code := 0
	if err != nil {
		code = 2
		var ee *exitError
		if errors.As(err, &ee) {
			code = ee.code
		}
	}
	return out.String(), code, err
}

// readFixture decodes a probe fixture leniently, so that a test can break it and write it back.
func readFixture(t *testing.T, path string) *wire.AllReduceProbe {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var p wire.AllReduceProbe
	if err := json.Unmarshal(data, &p); err != nil {
		t.Fatal(err)
	}
	return &p
}

func writeProbe(t *testing.T, p *wire.AllReduceProbe) string {
	t.Helper()
	data, err := json.MarshalIndent(p, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "probe.json")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// findCase returns the case of p with the given size, dtype and inputs.
func findCase(t *testing.T, p *wire.AllReduceProbe, size int64, dtype, inputs string) *wire.AllReduceProbeCase {
	t.Helper()
	for i := range p.Results {
		c := &p.Results[i]
		if c.SizeBytes == size && c.DType == dtype && c.Inputs == inputs {
			return c
		}
	}
	t.Fatalf("no case %d B %s %s", size, dtype, inputs)
	return nil
}

func TestProbeCheckPassesRealProbes(t *testing.T) {
	for _, f := range []string{torchProbeFixture, refProbeFixture} {
		out, code, err := runProbeCmd(t, "check", f)
		if code != 0 {
			t.Fatalf("%s: exit %d (%v), want 0:\n%s", f, code, err, out)
		}
		if !strings.HasPrefix(out, "PASS  "+f) || !(strings.Contains(out, "[uncalibrated: reckon.allreduce-probe/v1") || strings.Contains(out, "calibrated rule holds")) {
			t.Errorf("%s: output does not start with a PASS line:\n%.600s", f, out)
		}
	}
	// Both files at once, as JSON: one verdict per file, in order.
	out, code, err := runProbeCmd(t, "check", "--json", torchProbeFixture, refProbeFixture)
	if code != 0 {
		t.Fatalf("exit %d (%v)", code, err)
	}
	var vs []gate.Verdict
	if err := json.Unmarshal([]byte(out), &vs); err != nil {
		t.Fatalf("--json output is not a verdict list: %v\n%.400s", err, out)
	}
	if len(vs) != 2 || vs[0].Name != torchProbeFixture || vs[1].Name != refProbeFixture || vs[0].Outcome != gate.Pass || vs[1].Outcome != gate.Pass {
		t.Fatalf("verdicts %+v", vs)
	}
	if vs[0].Metrics["cases"] != 68 || vs[0].Metrics["calibrated"] != 0 || vs[1].Metrics["calibrated"] != 1 {
		t.Errorf("torch fixture: %v cases, want 68; calibrated %v and %v, want 0 (v1) and 1 (v2)", vs[0].Metrics["cases"], vs[0].Metrics["calibrated"], vs[1].Metrics["calibrated"])
	}
}

// TestProbeCheckCalibrated: the calibrated fixtures pass; each fault or control fixture exits 1
// with its reason on the first line; the calibration flags take effect or are rejected.
func TestProbeCheckCalibrated(t *testing.T) {
	const dir = "../../ci/probes/testdata/"
	for _, f := range []string{"refengine_probe_tp2.json", "refengine_probe_tp4.json", "torch_gloo_probe_cpu_tp4.json"} {
		out, code, err := runProbeCmd(t, "check", dir+f)
		if code != 0 || !strings.Contains(strings.SplitN(out, "\n", 2)[0], "calibrated rule holds") {
			t.Errorf("%s: exit %d (%v):\n%.500s", f, code, err, out)
		}
	}
	for _, tc := range []struct{ file, want string }{
		{"faults/refengine_tp4_candidate_scale.json", "FAIL  "},
		{"faults/refengine_tp2_candidate_scale.json", "near-bitwise rule"},
		{"faults/refengine_tp4_candidate_drop_peer.json", "one_shot is not exact on integer inputs"},
		{"faults/refengine_tp4_candidate_stale.json", "one_shot is not exact on integer inputs"},
		{"faults/refengine_tp4_candidate_fallback.json", "took its custom path in only 0 of"},
		{"faults/refengine_tp4_no_controls.json", "ERROR  "},
	} {
		out, code, err := runProbeCmd(t, "check", dir+tc.file)
		first := strings.SplitN(out, "\n", 2)[0]
		if code != 1 || !strings.Contains(first, tc.want) {
			t.Errorf("%s: exit %d (%v), want 1 with %q:\n%.500s", tc.file, code, err, tc.want, first)
		}
	}
	// A 1.0x bound is inside the spread of the correct twins: the negative controls say so.
	out, code, _ := runProbeCmd(t, "check", "--max-nrmse-ratio", "1", dir+"refengine_probe_tp4.json")
	if code != 1 || !strings.Contains(out, "calibration does not hold: negative control") {
		t.Errorf("--max-nrmse-ratio 1: exit %d:\n%.400s", code, out)
	}
	for _, bad := range [][]string{{"--max-nrmse-ratio", "0.9"}, {"--max-nrmse-ratio", "Inf"}, {"--floor-ulp", "-1"}} {
		if _, code, err := runProbeCmd(t, append([]string{"check"}, append(bad, dir+"refengine_probe_tp4.json")...)...); code != 2 || err == nil || !strings.Contains(err.Error(), bad[0]) {
			t.Errorf("%v: exit %d (%v), want 2 naming the flag", bad, code, err)
		}
	}
}

func TestProbeCheckFailsFaults(t *testing.T) {
	for _, tc := range []struct {
		name   string
		break_ func(t *testing.T, p *wire.AllReduceProbe)
		want   string
	}{
		{"error above tolerance", func(t *testing.T, p *wire.AllReduceProbe) {
			// A stale peer buffer on 2 ranks errs by about half the magnitude.
			a := &findCase(t, p, 1<<20, "bfloat16", "random").Algorithms[1]
			a.MaxRelErr, a.MaxAbsErr, a.Exact = 0.5, 3, false
		}, "symm_mem_one_shot max_rel_err 0.5"},
		{"inexact on integers", func(t *testing.T, p *wire.AllReduceProbe) {
			a := &findCase(t, p, 4096, "float32", "integer").Algorithms[2]
			a.Exact, a.MaxAbsErr, a.MaxRelErr = false, 1, 1e-3
		}, "symm_mem_two_shot is not exact on integer inputs"},
		{"ranks disagree", func(t *testing.T, p *wire.AllReduceProbe) {
			no := false
			findCase(t, p, 1024, "float32", "random").Algorithms[1].RanksIdentical = &no
		}, "left the ranks holding different results"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := readFixture(t, torchProbeFixture)
			tc.break_(t, p)
			out, code, err := runProbeCmd(t, "check", writeProbe(t, p))
			if code != 1 {
				t.Fatalf("exit %d (%v), want 1:\n%.600s", code, err, out)
			}
			var ee *exitError
			if !errors.As(err, &ee) || ee.err != nil {
				t.Errorf("want a quiet withExitCode(1, nil), got %v", err)
			}
			if !strings.HasPrefix(out, "FAIL  ") || !strings.Contains(strings.SplitN(out, "\n", 2)[0], tc.want) {
				t.Errorf("first line does not name the fault %q:\n%.600s", tc.want, out)
			}
		})
	}
}

// TestProbeCheckTolerance: --max-rel-err tightens a dtype's limit below a real measurement (fail)
// and loosens it above a fault (pass); a malformed override is a usage error.
func TestProbeCheckTolerance(t *testing.T) {
	if _, code, _ := runProbeCmd(t, "check", "--max-rel-err", "bfloat16=1e-3", torchProbeFixture); code != 1 {
		t.Errorf("bfloat16 limit 1e-3 under the measured 3.9e-3: exit %d, want 1", code)
	}
	p := readFixture(t, torchProbeFixture)
	a := &findCase(t, p, 1<<20, "bfloat16", "random").Algorithms[1]
	a.MaxRelErr, a.MaxAbsErr, a.Exact = 0.01, 1, false
	path := writeProbe(t, p)
	if _, code, _ := runProbeCmd(t, "check", path); code != 1 {
		t.Errorf("bfloat16 error 0.01 on 2 ranks (default limit 3.9e-3): exit %d, want 1", code)
	}
	if out, code, _ := runProbeCmd(t, "check", "--max-rel-err", "bfloat16=2e-2", path); code != 0 {
		t.Errorf("with limit 2e-2: exit %d, want 0:\n%.400s", code, out)
	}
	for _, bad := range []string{"bfloat16", "bfloat16=0", "bfloat16=-1", "bfloat16=x", "fp8=1e-2", "float32=NaN", "float32=Inf"} {
		if _, code, err := runProbeCmd(t, "check", "--max-rel-err", bad, torchProbeFixture); code != 2 || err == nil || !strings.Contains(err.Error(), "--max-rel-err") {
			t.Errorf("--max-rel-err %s: exit %d (%v), want 2 naming the flag", bad, code, err)
		}
	}
}

func TestProbeCheckBadFiles(t *testing.T) {
	good, err := os.ReadFile(torchProbeFixture)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	write := func(name, content string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	for _, tc := range []struct {
		name, path string
		want       []string
	}{
		{"truncated", write("truncated.json", string(good[:len(good)/2])), []string{"truncated.json", "unexpected end of input"}},
		{"NaN", write("nan.json", strings.Replace(string(good), `"max_rel_err": 5.676413655475863e-08`, `"max_rel_err": NaN`, 1)),
			[]string{"nan.json", "line 17", "results[0].algorithms[0].max_rel_err", "NaN is not a JSON number"}},
		{"misspelt field", write("typo.json", strings.Replace(string(good), `"max_rel_err"`, `"max_rel_error"`, 1)),
			[]string{"typo.json", `line 17 col 11: unknown field "max_rel_error" in results[0].algorithms[0] (did you mean "max_rel_err"?)`}},
		{"not a probe", write("verdicts.json", `[{"check": "x", "outcome": "pass"}]`), []string{"verdicts.json", "expected an object"}},
		{"missing", filepath.Join(dir, "absent.json"), []string{"absent.json", "no such file"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, code, err := runProbeCmd(t, "check", tc.path)
			if code != 2 || err == nil {
				t.Fatalf("exit %d (%v), want 2:\n%.600s", code, err, out)
			}
			if !strings.HasPrefix(out, "ERROR  "+tc.path) {
				t.Errorf("no ERROR line for the file:\n%.600s", out)
			}
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q:\n%.800s", w, out)
				}
			}
		})
	}
	// A bad file among good ones: the good ones are still judged, and bad input wins (exit 2).
	out, code, _ := runProbeCmd(t, "check", torchProbeFixture, filepath.Join(dir, "absent.json"))
	if code != 2 || !strings.HasPrefix(out, "PASS  "+torchProbeFixture) || !strings.Contains(out, "ERROR  "+filepath.Join(dir, "absent.json")) {
		t.Errorf("exit %d, want 2 with both verdicts:\n%.600s", code, out)
	}
	if _, code, _ := runProbeCmd(t, "check"); code != 2 {
		t.Errorf("no file: exit %d, want 2", code)
	}
}
