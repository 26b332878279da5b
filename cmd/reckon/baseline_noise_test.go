package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/reckon-ci/reckon/gate"
)

// A run whose trials vary with CV 35% cannot support the checks: record warns, --strict
// refuses; a run with launches keeps them in the baseline.
func TestBaselineRecordNoise(t *testing.T) {
	dir := t.TempDir()
	p := writeResults(t, dir, 1, "nccl")
	r, err := gate.ReadResults(p)
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range []float64{1200, 600, 1500, 900, 1300} {
		r.Configs[0].Trials[i].Metrics["output_throughput"] = v
		r.Configs[0].Trials[i].Launch = 1 + i%3
	}
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := gate.WriteResults(f, r); err != nil {
		t.Fatal(err)
	}
	f.Close()
	bdir := filepath.Join(dir, "baselines")
	_, errs, code := execCmd(t, newBaselineCmd(), "record", "--from", p, "--dir", bdir, "--strict")
	if code != 2 || !strings.Contains(errs, "the noise cannot support the checks' min_effect (--strict)") || !strings.Contains(errs, "nccl/chat/output_throughput") {
		t.Fatalf("--strict: exit %d: %s", code, errs)
	}
	if _, err := os.Stat(gate.BaselinePath(bdir, "cpu-test-1234", "default")); err == nil {
		t.Fatal("--strict wrote a baseline")
	}
	_, errs, code = execCmd(t, newBaselineCmd(), "record", "--from", p, "--dir", bdir)
	if code != 0 || !strings.Contains(errs, "warning: nccl/chat/output_throughput: 3 launch(es), 5 trials") || !strings.Contains(errs, "too noisy to decide") {
		t.Fatalf("warning: exit %d: %s", code, errs)
	}
	b, err := gate.LoadBaseline(bdir, "cpu-test-1234", "default")
	if err != nil {
		t.Fatal(err)
	}
	if g := b.LaunchGroups("nccl", "chat", "output_throughput"); len(g) != 3 || len(g[0]) != 2 || len(g[2]) != 1 {
		t.Errorf("launch groups %v", g)
	}
	// A quiet one-launch run records with a note on the unmeasured between-launch variation.
	quiet := t.TempDir()
	_, errs, code = execCmd(t, newBaselineCmd(), "record", "--from", writeResults(t, quiet, 1, "nccl"), "--dir", filepath.Join(quiet, "b"), "--strict")
	if code != 0 || !strings.Contains(errs, "noise: nccl/chat/output_throughput") || !strings.Contains(errs, "record with launches >= 3 to measure it") {
		t.Errorf("quiet: exit %d: %s", code, errs)
	}
}
