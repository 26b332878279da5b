package gate

import (
	"errors"
	"fmt"
	"github.com/reckon-ci/reckon/spec"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

func sampleBaseline(configs ...string) *Baseline {
	b := &Baseline{Schema: BaselineSchema, SpecName: "default", TestbedKey: "h200x1-3f9a2c",
		Testbed:    map[string]any{"gpu_model": "NVIDIA H200", "gpu_count": 1.0},
		Provenance: Provenance{RecordedAt: time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC), GitCommit: "35e9fae", Engine: "refengine", EngineVersion: "0.1.0", ReckonVersion: "dev", Source: "out/results.json"}}
	for i, c := range configs {
		b.Configs = append(b.Configs, BaselineConfig{Name: c, Workloads: []BaselineWorkload{{Name: "chat",
			Metrics: map[string]MetricSamples{
				"output_throughput": NewMetricSamples([]float64{100 + float64(i), 101, 99.5, 100.2, 100.8}, "tok/s"),
				"median_ttft_ms":    NewMetricSamples([]float64{50, 51, 49}, "ms"),
			}}}})
	}
	return b
}

func TestBaselineRoundTrip(t *testing.T) {
	dir := t.TempDir()
	b := sampleBaseline("nccl", "custom-ar")
	path := BaselinePath(dir, b.TestbedKey, b.SpecName)
	if err := WriteBaseline(path, b, false); err != nil {
		t.Fatal(err)
	}
	got, err := LoadBaseline(dir, "h200x1-3f9a2c", "default")
	if err != nil {
		t.Fatal(err)
	}
	if s := got.Samples("custom-ar", "chat", "output_throughput"); len(s) != 5 || s[0] != 101 {
		t.Errorf("samples %v", s)
	}
	if got.Samples("custom-ar", "chat", "nope") != nil || got.Samples("x", "chat", "output_throughput") != nil {
		t.Error("missing entries should be nil")
	}
	if got.Provenance.GitCommit != "35e9fae" || got.Path() != path {
		t.Errorf("provenance %+v path %s", got.Provenance, got.Path())
	}
	data, _ := os.ReadFile(path)
	if !strings.Contains(string(data), "\n  \"spec_name\": \"default\"") || strings.Index(string(data), `"custom-ar"`) > strings.Index(string(data), `"nccl"`) {
		t.Errorf("not indented / not sorted:\n%s", data)
	}
	// Refuses to replace without force; replaces with force.
	err = WriteBaseline(path, sampleBaseline("nccl"), false)
	if !errors.Is(err, ErrBaselineExists) || !strings.Contains(err.Error(), "--force") {
		t.Fatalf("no force: %v", err)
	}
	if err := WriteBaseline(path, sampleBaseline("nccl"), true); err != nil {
		t.Fatal(err)
	}
	if got, _ := ReadBaseline(path); len(got.Configs) != 1 {
		t.Errorf("force did not replace: %d configs", len(got.Configs))
	}
	// No temporary files are left behind.
	ents, _ := os.ReadDir(filepath.Dir(path))
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".tmp") {
			t.Errorf("leftover %s", e.Name())
		}
	}
}

func TestLoadBaselineMissing(t *testing.T) {
	_, err := LoadBaseline(t.TempDir(), "h100x8-pcie-1234", "default")
	var nb *ErrNoBaseline
	if !errors.As(err, &nb) || !IsNoBaseline(err) || !strings.Contains(err.Error(), "no baseline for testbed h100x8-pcie-1234") ||
		!strings.Contains(err.Error(), "reckon baseline record --from") {
		t.Fatalf("got %v", err)
	}
	v := NoBaselineVerdict("throughput", "nccl", string(spec.KindThroughput), err)
	if v.Outcome != NoBaseline {
		t.Errorf("verdict %s", v.Outcome)
	}
	if _, err := LoadBaseline(t.TempDir(), "../etc", "default"); err == nil || IsNoBaseline(err) {
		t.Errorf("path traversal: %v", err)
	}
}

func TestLoadBaselineCorrupt(t *testing.T) {
	good, err := sampleBaseline("nccl").Encode()
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, content, want string
	}{
		{"truncated", string(good[:len(good)/2]), "unexpected end of JSON"},
		{"syntax", strings.Replace(string(good), `"median_ttft_ms": {`, `"median_ttft_ms": {,`, 1), "line "},
		{"schema", strings.Replace(string(good), BaselineSchema, "reckon.baseline/v0", 1), `field schema: "reckon.baseline/v0"; expected "reckon.baseline/v1"`},
		{"no schema", strings.Replace(string(good), `"schema": "reckon.baseline/v1",`, ``, 1), "field schema: missing"},
		{"unknown field", strings.Replace(string(good), `"spec_name"`, `"spec_nmae": "x", "spec_name"`, 1), `unknown field "spec_nmae"`},
		{"type", strings.Replace(string(good), `"samples": [`, `"samples": ["fast", `, 1), "field configs.workloads.metrics.samples: expected float64"},
		{"median edited", strings.Replace(string(good), `"median": 50`, `"median": 40`, 1), "configs[0].workloads[0].metrics.median_ttft_ms.median: 40 but the median of the samples is 50"},
		{"empty samples", strings.Replace(string(good), "\"samples\": [\n                50,\n                51,\n                49\n              ]", `"samples": []`, 1), "metrics.median_ttft_ms.samples: empty"},
		{"absurd sample", strings.Replace(string(good), "\"samples\": [\n                50,", "\"samples\": [\n                1.5e308,", 1), "metrics.median_ttft_ms.samples[0]: 1.5e+308 is outside the range of a measurement"},
		{"duplicate key", strings.Replace(string(good), `"spec_name"`, `"configs": [], "spec_name"`, 1), `field "configs": duplicate key "configs"`},
		{"duplicate metric", strings.Replace(string(good), `"median_ttft_ms": {`, `"median_ttft_ms": {"unit": "s", "samples": [1], "median": 1}, "median_ttft_ms": {`, 1), `duplicate key "median_ttft_ms"`},
		{"other testbed", strings.Replace(string(good), `"testbed_key": "h200x1-3f9a2c"`, `"testbed_key": "a100x8-0000"`, 1), `testbed_key is "a100x8-0000"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.content == string(good) {
				t.Fatal("replacement did not apply")
			}
			dir := t.TempDir()
			path := BaselinePath(dir, "h200x1-3f9a2c", "default")
			os.MkdirAll(filepath.Dir(path), 0o755)
			if err := os.WriteFile(path, []byte(c.content), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := LoadBaseline(dir, "h200x1-3f9a2c", "default")
			if err == nil || IsNoBaseline(err) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("got %v; want an error naming %s and %q", err, path, c.want)
			}
			// A corrupt file is never overwritten, even with force.
			if c.name == "other testbed" {
				return // valid on its own; only misplaced
			}
			if err := WriteBaseline(path, sampleBaseline("nccl"), true); err == nil || !strings.Contains(err.Error(), "unreadable") {
				t.Errorf("overwrote a corrupt baseline: %v", err)
			}
		})
	}
}

func TestMergeBaselineConcurrentGoroutines(t *testing.T) {
	path := BaselinePath(t.TempDir(), "h200x1-3f9a2c", "default")
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for i := 0; i < 16; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			errs <- MergeBaseline(path, sampleBaseline(fmt.Sprintf("cfg%02d", i)), false)
		}(i)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	b, err := ReadBaseline(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(b.Configs) != 16 {
		t.Errorf("lost configs: %d of 16", len(b.Configs))
	}
	if err := MergeBaseline(path, sampleBaseline("cfg03"), false); !errors.Is(err, ErrBaselineExists) {
		t.Errorf("replacing a config without force: %v", err)
	}
}

// TestMergeBaselineConcurrentProcesses runs this test binary twice at once; each child merges
// its own configs into one baseline file. Nothing may be lost or corrupted.
func TestMergeBaselineConcurrentProcesses(t *testing.T) {
	if path := os.Getenv("RECKON_BASELINE_CHILD_PATH"); path != "" {
		who := os.Getenv("RECKON_BASELINE_CHILD_ID")
		for i := 0; i < 15; i++ {
			if err := MergeBaseline(path, sampleBaseline(fmt.Sprintf("%s-%02d", who, i)), false); err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(1)
			}
		}
		os.Exit(0)
	}
	path := BaselinePath(t.TempDir(), "h200x1-3f9a2c", "default")
	var cmds []*exec.Cmd
	for _, id := range []string{"a", "b"} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestMergeBaselineConcurrentProcesses$")
		cmd.Env = append(os.Environ(), "RECKON_BASELINE_CHILD_PATH="+path, "RECKON_BASELINE_CHILD_ID="+id)
		var out strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, cmd)
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("child %s output:\n%s", id, out.String())
			}
		})
	}
	for _, c := range cmds {
		if err := c.Wait(); err != nil {
			t.Errorf("child: %v", err)
		}
	}
	b, err := ReadBaseline(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(b.Configs) != 30 {
		t.Errorf("lost configs: %d of 30", len(b.Configs))
	}
}

func TestDiffBaselines(t *testing.T) {
	old := sampleBaseline("nccl", "custom-ar")
	nb := sampleBaseline("nccl", "eagle3")
	nb.Configs[0].Workloads[0].Metrics["output_throughput"] = NewMetricSamples([]float64{90, 91, 89}, "tok/s")
	ch := DiffBaselines(old, nb)
	got := map[string]BaselineChange{}
	for _, c := range ch {
		got[c.Config+"/"+c.Metric] = c
	}
	if c := got["nccl/output_throughput"]; c.Status != "changed" || c.OldN != 5 || c.NewN != 3 || !near(c.Change, 90.0/100.2-1, 1e-9) {
		t.Errorf("changed: %+v", c)
	}
	if got["nccl/median_ttft_ms"].Status != "unchanged" || got["custom-ar/median_ttft_ms"].Status != "removed" || got["eagle3/output_throughput"].Status != "added" {
		t.Errorf("statuses: %+v", ch)
	}
	if len(DiffBaselines(nil, nb)) != 4 {
		t.Error("diff from nothing")
	}
}
