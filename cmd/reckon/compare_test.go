package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/reckon-ci/reckon/gate"
)

// execCmd runs a freshly built command (so flag values never leak between tests) and returns its
// stdout, stderr and exit code.
func execCmd(t *testing.T, cmd *cobra.Command, args ...string) (string, string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&errb)
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
		if err.Error() != "" {
			errb.WriteString(err.Error())
		}
	}
	return out.String(), errb.String(), code
}

// writeVLLMTrials writes n vLLM `bench serve --save-result` files with output_throughput around
// tput (CV 1%) and median TTFT around ttft.
func writeVLLMTrials(t *testing.T, dir string, n int, tput, ttft float64, seed uint64) []string {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 1))
	noise := func() float64 { return math.Exp(0.01 * rng.NormFloat64()) }
	var paths []string
	for i := 0; i < n; i++ {
		ot := tput * noise()
		tt := ttft * noise()
		res := map[string]any{
			"date": "20261129-093000", "backend": "vllm", "model_id": "tiny", "num_prompts": 200, "request_rate": "inf",
			"max_concurrency": 16, "duration": 200 * 128 / ot, "completed": 200, "failed": 0,
			"total_input_tokens": 204800, "total_output_tokens": 25600,
			"request_throughput": ot / 128, "output_throughput": ot, "total_token_throughput": ot * 9,
			"mean_ttft_ms": tt * 1.1, "median_ttft_ms": tt, "std_ttft_ms": tt * 0.2, "p99_ttft_ms": tt * 2,
			"mean_tpot_ms": 10 * noise(), "median_tpot_ms": 10 * noise(), "p99_tpot_ms": 14 * noise(),
			"mean_itl_ms": 10 * noise(), "median_itl_ms": 9.8 * noise(), "p99_itl_ms": 20 * noise(),
			"mean_e2el_ms": 1400 * noise(), "median_e2el_ms": 1380 * noise(),
		}
		data, _ := json.MarshalIndent(res, "", "  ")
		p := filepath.Join(dir, fmt.Sprintf("trial%02d.json", i))
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	return paths
}

func TestCompareRegression(t *testing.T) {
	dir := t.TempDir()
	base := writeVLLMTrials(t, filepath.Join(mkdir(t, dir, "base")), 5, 1200, 50, 1)
	head := writeVLLMTrials(t, filepath.Join(mkdir(t, dir, "head")), 5, 1080, 50, 2) // -10%
	args := append(append([]string{"--base"}, base...), "--head")
	args = append(args, head...)
	out, errs, code := execCmd(t, newCompareCmd(), args...)
	if code != 1 {
		t.Fatalf("exit %d, want 1\n%s\n%s", code, out, errs)
	}
	if !strings.Contains(out, "output_throughput*") || !strings.Contains(out, "regression") || !strings.Contains(out, "5 base vs 5 head trials") {
		t.Errorf("table:\n%s", out)
	}
	// JSON form.
	out, _, code = execCmd(t, newCompareCmd(), append(args, "--json")...)
	if code != 1 {
		t.Fatalf("json exit %d", code)
	}
	var doc struct {
		Metrics []map[string]any `json:"metrics"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("json: %v\n%s", err, out)
	}
	found := false
	for _, m := range doc.Metrics {
		for _, k := range []string{"metric", "direction", "base_median", "head_median", "ratio", "ci_low", "ci_high", "p_value", "verdict"} {
			if _, ok := m[k]; !ok {
				t.Errorf("row lacks %s: %v", k, m)
			}
		}
		if m["metric"] == "output_throughput" {
			found = true
			if m["verdict"] != "regression" || m["direction"] != "higher_is_better" || math.Abs(m["ratio"].(float64)-0.9) > 0.02 {
				t.Errorf("output_throughput row: %v", m)
			}
		}
	}
	if !found {
		t.Error("no output_throughput row")
	}
}

func TestCompareNoRegressionAndCommaForm(t *testing.T) {
	dir := t.TempDir()
	base := writeVLLMTrials(t, mkdir(t, dir, "base"), 5, 1200, 50, 3)
	head := writeVLLMTrials(t, mkdir(t, dir, "head"), 5, 1200, 50, 4)
	out, errs, code := execCmd(t, newCompareCmd(), "--base="+strings.Join(base, ","), "--head="+strings.Join(head, ","), "--alpha", "0.01", "--min-effect", "3%")
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errs)
	}
	if !strings.Contains(out, "no change") {
		t.Errorf("table:\n%s", out)
	}
}

func TestCompareSGLangJSONL(t *testing.T) {
	dir := t.TempDir()
	var lines []string
	for i, v := range []float64{1000, 1010, 995, 1005, 990} {
		lines = append(lines, fmt.Sprintf(`{"backend":"sglang","dataset_name":"random","output_throughput":%v,"median_ttft_ms":%v,"median_itl_ms":9.5,"completed":200,"run":%d}`, v, 40+float64(i)/10, i))
	}
	basePath := filepath.Join(dir, "base.jsonl")
	os.WriteFile(basePath, []byte(strings.Join(lines, "\n")+"\n"), 0o644)
	headPath := filepath.Join(dir, "head.jsonl")
	os.WriteFile(headPath, []byte(strings.ReplaceAll(strings.Join(lines, "\n"), `"median_ttft_ms":4`, `"median_ttft_ms":6`)), 0o644)
	out, errs, code := execCmd(t, newCompareCmd(), "--base", basePath, "--head", headPath)
	if code != 1 || !strings.Contains(out, "median_ttft_ms*") {
		t.Fatalf("exit %d\n%s\n%s", code, out, errs)
	}
}

func TestCompareBadInput(t *testing.T) {
	dir := t.TempDir()
	base := writeVLLMTrials(t, dir, 3, 1000, 50, 5)
	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(bad, []byte("{\"output_throughput\": 1000,\n oops}"), 0o644)
	cases := [][]string{
		{"--base", base[0]},                                    // no head
		{"--base", base[0], "--head", bad},                     // corrupt file
		{"--base", base[0], "--head", base[1], "--alpha", "2"}, // bad alpha
		{base[0]}, // stray argument
		{"--base", base[0], "--head", base[1], "--gate", "model_id"},
		{"--base", base[0], "--head", filepath.Join(dir, "missing.json")},
	}
	for _, args := range cases {
		_, errs, code := execCmd(t, newCompareCmd(), args...)
		if code != 2 || errs == "" {
			t.Errorf("%v: exit %d, stderr %q", args, code, errs)
		}
	}
	_, errs, _ := execCmd(t, newCompareCmd(), "--base", base[0], "--head", bad)
	if !strings.Contains(errs, "bad.json") || !strings.Contains(errs, "line") {
		t.Errorf("error does not name file and line: %q", errs)
	}
}

func mkdir(t *testing.T, parts ...string) string {
	t.Helper()
	p := filepath.Join(parts...)
	if err := os.MkdirAll(p, 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestCompareRealTrials compares real reference-engine trials (gate/testdata/trials, reckon's
// result format): nccl vs custom allreduce at tp 2 are the same computation, so no gated
// regression; the same nccl trials against themselves scaled down 15% are a regression.
func TestCompareRealTrials(t *testing.T) {
	base, _ := filepath.Glob("../../gate/testdata/trials/refengine-tp2-nccl/trial0*.json")
	head, _ := filepath.Glob("../../gate/testdata/trials/refengine-tp2-custom-ar/*.json")
	if len(base) < 6 || len(head) < 6 {
		t.Fatalf("fixtures: %d %d", len(base), len(head))
	}
	base = base[:6]
	args := append(append([]string{"--json", "--base"}, base...), "--head")
	out, errs, code := execCmd(t, newCompareCmd(), append(args, head...)...)
	if code != 0 {
		t.Fatalf("exit %d: %s\n%s", code, errs, out)
	}
	if !strings.Contains(out, `"metric": "output_throughput"`) {
		t.Errorf("output:\n%s", out)
	}
	// Slow head: the same files with every throughput scaled by 0.85 and latencies by 1/0.85.
	dir := t.TempDir()
	var slow []string
	for i, p := range head {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		var doc map[string]any
		if err := json.Unmarshal(data, &doc); err != nil {
			t.Fatal(err)
		}
		for k, v := range doc {
			if f, ok := v.(float64); ok {
				switch {
				case strings.HasSuffix(k, "_throughput"):
					doc[k] = f * 0.85
				case strings.HasSuffix(k, "_ms"):
					doc[k] = f / 0.85
				}
			}
		}
		data, _ = json.Marshal(doc)
		sp := filepath.Join(dir, fmt.Sprintf("slow%d.json", i))
		os.WriteFile(sp, data, 0o644)
		slow = append(slow, sp)
	}
	out, _, code = execCmd(t, newCompareCmd(), append(append(append([]string{"--base"}, base...), "--head"), slow...)...)
	if code != 1 || !strings.Contains(out, "regression") {
		t.Errorf("slow head: exit %d\n%s", code, out)
	}
}

func TestRowVerdict(t *testing.T) {
	r := &gate.StatResult{Outcome: gate.Regression}
	if rowVerdict(r, true) != "regression" || rowVerdict(r, false) != "worse" {
		t.Error("regression")
	}
	r.Outcome = gate.Improvement
	if rowVerdict(r, false) != "better" {
		t.Error("improvement")
	}
	r.Outcome = gate.Undecided
	if rowVerdict(r, false) != "inconclusive" {
		t.Error("inconclusive")
	}
}
