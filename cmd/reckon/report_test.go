package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/reckon-ci/reckon/gate"
	"github.com/reckon-ci/reckon/reporters"
)

// TestReportReadsSchemaV1 re-renders a results.json of the previous schema: its statistical
// check (flat summary, outcome "regression") keeps its verdict and comes out as schema v2 with
// the result whole at "stat".
func TestReportReadsSchemaV1(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in", "results.json")
	if err := os.MkdirAll(filepath.Dir(in), 0o755); err != nil {
		t.Fatal(err)
	}
	v1 := `{"schema": "reckon.results/v1", "spec_name": "default", "engine": "refengine", "configs": [{"name": "nccl", "launches": 1}],
  "checks": [{"name": "throughput nccl decode output_throughput vs baseline", "kind": "throughput", "config": "nccl",
    "status": "failed", "outcome": "regression", "message": "nccl: output_throughput -12% vs baseline", "metric": "output_throughput",
    "base_median": 100, "head_median": 88, "ratio": 0.88, "ci_low": 0.85, "ci_high": 0.9, "p_value": 0.001, "duration_ns": 1}]}`
	if err := os.WriteFile(in, []byte(v1), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	so, errs, code := execCmd(t, newReportCmd(), "--results", in, "--out", out)
	if code != 0 || !strings.Contains(so, "0 passed, 1 failed") {
		t.Fatalf("exit %d: %s %s", code, so, errs)
	}
	r, err := gate.ReadResults(filepath.Join(out, reporters.JSONFile))
	if err != nil {
		t.Fatal(err)
	}
	c := r.Checks[0]
	if r.Schema != gate.ResultsSchema || c.Outcome != gate.Fail || c.Stat == nil || c.Stat.Outcome != gate.Regression || c.Stat.Ratio != 0.88 {
		t.Errorf("re-rendered: schema %s check %+v stat %+v", r.Schema, c, c.Stat)
	}
	if md, _ := os.ReadFile(filepath.Join(out, reporters.MarkdownFile)); !strings.Contains(string(md), "-12%") {
		t.Errorf("summary.md lacks the change:\n%s", md)
	}
}

func TestHistoryAddKnowsBothResultsSchemas(t *testing.T) {
	for schema, want := range map[string]bool{gate.ResultsSchema: true, gate.ResultsSchemaV1: true, "reckon.results/v9": false, "reckon.baseline/v1": false} {
		if got := isResultsFile([]byte(`{"schema": "` + schema + `"}`)); got != want {
			t.Errorf("isResultsFile(%s) = %v, want %v", schema, got, want)
		}
	}
}
