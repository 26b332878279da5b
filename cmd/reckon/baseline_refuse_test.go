package main

import (
	"github.com/reckon-ci/reckon/spec"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/reckon-ci/reckon/gate"
)

// A run whose trials measured nothing (every request failed: 0 tok/s) or whose measurement
// failed is never recorded as a baseline.
func TestBaselineRecordRefusesRunsThatMeasuredNothing(t *testing.T) {
	for _, tc := range []struct {
		name   string
		tamper func(r *gate.Run)
		want   string
	}{
		{"0 tok/s", func(r *gate.Run) {
			r.Configs[0].Trials[2].Metrics["output_throughput"] = 0
		}, "configs[nccl].trials[2] (workload chat): output_throughput is 0 tok/s"},
		{"negative", func(r *gate.Run) {
			r.Configs[0].Trials[0].Metrics["output_throughput"] = -5
		}, "output_throughput is -5 tok/s"},
		{"no request completed", func(r *gate.Run) {
			r.Configs[0].Trials[1].Metrics["completed"] = 0
		}, "completed is 0: no request completed"},
		{"a failed measurement", func(r *gate.Run) {
			r.Checks = append(r.Checks, gate.Check{Verdict: gate.Verdict{Name: "nccl: throughput trials (chat)", Kind: gate.KindMeasurement, Config: "nccl", Outcome: gate.Error, Message: "no request completed"}, Status: gate.StatusError})
		}, `check "nccl: throughput trials (chat)" is error`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			p := writeResults(t, dir, 1, "nccl")
			r, err := gate.ReadResults(p)
			if err != nil {
				t.Fatal(err)
			}
			tc.tamper(r)
			f, err := os.Create(p)
			if err != nil {
				t.Fatal(err)
			}
			if err := gate.WriteResults(f, r); err != nil {
				t.Fatal(err)
			}
			f.Close()
			bdir := filepath.Join(dir, "baselines")
			_, errs, code := execCmd(t, newBaselineCmd(), "record", "--from", p, "--dir", bdir)
			if code != 2 || !strings.Contains(errs, tc.want) {
				t.Errorf("exit %d: %s; want 2 and %q", code, errs, tc.want)
			}
			if _, err := os.Stat(gate.BaselinePath(bdir, "cpu-test-1234", "default")); err == nil {
				t.Error("a baseline was written")
			}
		})
	}
}

// A red run (custom-ar at -67% against nccl) is not recorded unless --allow-red says so; a check
// that only lacked a baseline (the first recording) does not make a run red.
func TestBaselineRecordRefusesARedRun(t *testing.T) {
	dir := t.TempDir()
	p := writeResults(t, dir, 1, "nccl")
	r, err := gate.ReadResults(p)
	if err != nil {
		t.Fatal(err)
	}
	r.Checks = append(r.Checks,
		gate.Check{Verdict: gate.Verdict{Name: "custom-ar not slower than nccl", Kind: string(spec.KindThroughput), Config: "nccl", Outcome: gate.Fail, Message: "output_throughput -67% vs nccl"}, Status: gate.StatusFailed},
		gate.Check{Verdict: gate.Verdict{Name: "nccl vs baseline", Kind: string(spec.KindThroughput), Config: "nccl", Outcome: gate.NoBaseline, Message: "no baseline"}, Status: gate.StatusFailed})
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := gate.WriteResults(f, r); err != nil {
		t.Fatal(err)
	}
	f.Close()
	bdir := filepath.Join(dir, "baselines")
	path := gate.BaselinePath(bdir, "cpu-test-1234", "default")
	_, errs, code := execCmd(t, newBaselineCmd(), "record", "--from", p, "--dir", bdir)
	if code != 2 || !strings.Contains(errs, `the run is red (FAIL): "custom-ar not slower than nccl" failed (output_throughput -67% vs nccl)`) || !strings.Contains(errs, "--allow-red") || strings.Contains(errs, "nccl vs baseline") {
		t.Errorf("exit %d: %s", code, errs)
	}
	if _, err := os.Stat(path); err == nil {
		t.Fatal("a red run was recorded")
	}
	// diff still shows what recording it would change.
	if out, errs, code := execCmd(t, newBaselineCmd(), "diff", "--from", p, "--dir", bdir); code != 0 || !strings.Contains(out, "nccl") {
		t.Errorf("diff of a red run: exit %d: %s %s", code, out, errs)
	}
	if _, errs, code := execCmd(t, newBaselineCmd(), "record", "--from", p, "--dir", bdir, "--allow-red"); code != 0 {
		t.Fatalf("--allow-red: exit %d: %s", code, errs)
	}
	b, err := gate.ReadBaseline(path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.Provenance.Note, "recorded from a red run (--allow-red, FAIL: 1 checks failed or errored)") {
		t.Errorf("note %q", b.Provenance.Note)
	}
}
