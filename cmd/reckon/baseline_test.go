package main

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/reckon-ci/reckon/gate"
)

func writeResults(t *testing.T, dir string, scale float64, configs ...string) string {
	t.Helper()
	run := &gate.Run{SpecName: "default", Engine: "refengine", TestbedKey: "cpu-test-1234", GitCommit: "abc1234",
		Testbed:   map[string]any{"cpu_model": "test", "cores": 2.0},
		StartedAt: time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC), FinishedAt: time.Date(2026, 11, 29, 9, 10, 0, 0, time.UTC)}
	for _, c := range configs {
		cfg := gate.Config{Name: c, Launches: 1, Engine: map[string]any{"kv_cache_tokens": 180224.0, "version": "0.1.0", "cuda_graph_gib": math.NaN()}}
		for i, v := range []float64{1200, 1210, 1195, 1205, 1190} {
			cfg.Trials = append(cfg.Trials, gate.Trial{Workload: "chat", Index: i,
				Metrics: map[string]float64{"output_throughput": v * scale, "median_ttft_ms": 50 + float64(i)}})
		}
		run.Configs = append(run.Configs, cfg)
	}
	run.Configs = append(run.Configs, gate.Config{Name: "numerics-only", Launches: 1})
	p := filepath.Join(dir, "results.json")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := gate.WriteResults(f, run); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestBaselineRecordDiffShow(t *testing.T) {
	dir := t.TempDir()
	bdir := filepath.Join(dir, "baselines")
	res := writeResults(t, dir, 1, "nccl", "custom-ar")
	out, errs, code := execCmd(t, newBaselineCmd(), "record", "--from", res, "--dir", bdir)
	if code != 0 {
		t.Fatalf("record: %d %s %s", code, out, errs)
	}
	path := gate.BaselinePath(bdir, "cpu-test-1234", "default")
	b, err := gate.LoadBaseline(bdir, "cpu-test-1234", "default")
	if err != nil {
		t.Fatal(err)
	}
	if len(b.Configs) != 2 || len(b.Samples("nccl", "chat", "output_throughput")) != 5 || b.Provenance.EngineVersion != "0.1.0" ||
		b.Provenance.GitCommit != "abc1234" || b.Provenance.Source != res {
		t.Errorf("baseline: %+v", b)
	}
	if !strings.Contains(out, "recorded "+path) {
		t.Errorf("record output:\n%s", out)
	}
	// A second record without --force is refused (exit 1) and changes nothing.
	res2 := writeResults(t, t.TempDir(), 0.9, "nccl", "custom-ar")
	_, errs, code = execCmd(t, newBaselineCmd(), "record", "--from", res2, "--dir", bdir)
	if code != 1 || !strings.Contains(errs, "--force") {
		t.Errorf("no force: %d %s", code, errs)
	}
	// diff shows the change.
	out, _, code = execCmd(t, newBaselineCmd(), "diff", "--from", res2, "--dir", bdir)
	if code != 0 || !strings.Contains(out, "output_throughput") || !strings.Contains(out, "-10.0%") || !strings.Contains(out, "1200.0 (5)") {
		t.Errorf("diff: %d\n%s", code, out)
	}
	// --force replaces.
	if _, errs, code = execCmd(t, newBaselineCmd(), "record", "--from", res2, "--dir", bdir, "--force"); code != 0 {
		t.Fatalf("force: %d %s", code, errs)
	}
	if b, _ := gate.ReadBaseline(path); b.Samples("nccl", "chat", "output_throughput")[0] != 1080 {
		t.Errorf("not replaced")
	}
	// --merge adds a new config.
	res3 := writeResults(t, t.TempDir(), 1, "eagle3")
	if _, errs, code = execCmd(t, newBaselineCmd(), "record", "--from", res3, "--dir", bdir, "--merge"); code != 0 {
		t.Fatalf("merge: %d %s", code, errs)
	}
	if b, _ := gate.ReadBaseline(path); len(b.Configs) != 3 {
		t.Errorf("merge: %d configs", len(b.Configs))
	}
	out, _, code = execCmd(t, newBaselineCmd(), "show", "--dir", bdir)
	if code != 0 || !strings.Contains(out, "cpu-test-1234") || !strings.Contains(out, "custom-ar,eagle3,nccl") {
		t.Errorf("show list: %d\n%s", code, out)
	}
	out, _, code = execCmd(t, newBaselineCmd(), "show", "--dir", bdir, "cpu-test-1234", "default")
	if code != 0 || !strings.Contains(out, "eagle3 ") || !strings.Contains(out, "engine refengine 0.1.0") {
		t.Errorf("show one: %d\n%s", code, out)
	}
	// A corrupt baseline is reported by show and diff.
	os.WriteFile(path, []byte(`{"schema": "reckon.baseline/v1", "spec_name": 3}`), 0o644)
	_, errs, code = execCmd(t, newBaselineCmd(), "diff", "--from", res2, "--dir", bdir)
	if code != 2 || !strings.Contains(errs, path) || !strings.Contains(errs, "spec_name") {
		t.Errorf("corrupt: %d %s", code, errs)
	}
}

func TestBaselineRecordBadResults(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "results.json")
	os.WriteFile(p, []byte(`{"schema":"reckon.results/v1","spec_name":"default","configs":[]}`), 0o644)
	_, errs, code := execCmd(t, newBaselineCmd(), "record", "--from", p, "--dir", dir)
	if code != 2 || !strings.Contains(errs, "testbed_key is empty") {
		t.Errorf("%d %s", code, errs)
	}
	_, errs, code = execCmd(t, newBaselineCmd(), "record", "--dir", dir)
	if code != 2 || !strings.Contains(errs, "--from") {
		t.Errorf("%d %s", code, errs)
	}
}
