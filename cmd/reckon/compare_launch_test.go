package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeResultsJSON writes a reckon results.json with one config per entry of launches (its
// output_throughput per launch, per trial).
func writeResultsJSON(t *testing.T, dir, name string, configs map[string][][]float64) string {
	t.Helper()
	type trial struct {
		Workload string             `json:"workload"`
		Index    int                `json:"index"`
		Launch   int                `json:"launch,omitempty"`
		Metrics  map[string]float64 `json:"metrics"`
	}
	type config struct {
		Name   string  `json:"name"`
		Trials []trial `json:"trials"`
	}
	doc := struct {
		Schema  string   `json:"schema"`
		Configs []config `json:"configs"`
	}{Schema: "reckon.results/v2"}
	for n, ls := range configs {
		c := config{Name: n}
		for l, vs := range ls {
			for _, v := range vs {
				c.Trials = append(c.Trials, trial{Workload: "decode", Index: len(c.Trials), Launch: l + 1,
					Metrics: map[string]float64{"output_throughput": v, "median_ttft_ms": 50}})
			}
		}
		doc.Configs = append(doc.Configs, c)
	}
	data, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// Two results.json files with launch indices are compared with launches as the unit: a head
// launch that landed 6% slow against a base whose launches spread 3% is no regression, though
// its trials, counted as replicates, would be one.
func TestCompareLaunchesAsUnit(t *testing.T) {
	dir := t.TempDir()
	base := writeResultsJSON(t, dir, "base.json", map[string][][]float64{"main": {
		{1000, 1008, 995, 1003, 998}, {1040, 1035, 1046, 1042, 1038}, {975, 980, 970, 978, 973}}})
	head := writeResultsJSON(t, dir, "head.json", map[string][][]float64{"pr": {{940, 945, 938, 942, 944}}})
	out, errs, code := execCmd(t, newCompareCmd(), "--base", base, "--head", head, "--json", "--gate", "output_throughput")
	var doc struct {
		Metrics []compareRow `json:"metrics"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("exit %d: %v\n%s\n%s", code, err, out, errs)
	}
	var row *compareRow
	for i := range doc.Metrics {
		if doc.Metrics[i].Metric == "output_throughput" {
			row = &doc.Metrics[i]
		}
	}
	if row == nil || row.Unit != "launch" || row.LaunchesBase != 3 || row.LaunchesHead != 1 || row.Verdict == "regression" || code != 0 {
		t.Fatalf("exit %d, row %+v", code, row)
	}
	// All of base in one launch: one launch per side, so the between-launch CV is the prior.
	flat := writeResultsJSON(t, dir, "flat.json", map[string][][]float64{"main": {{1000, 1008, 995, 1003, 998, 1040, 1035, 1046, 1042, 1038, 975, 980, 970, 978, 973}}})
	out, _, _ = execCmd(t, newCompareCmd(), "--base", flat, "--head", head)
	if !strings.Contains(out, "unit: launch (1 base vs 1 head launches") || !strings.Contains(out, "assumed 3.0%") {
		t.Errorf("one launch per side uses the prior:\n%s", out)
	}
	out, _, _ = execCmd(t, newCompareCmd(), "--base", base, "--head", head, "--between-launch-cv", "1%")
	if !strings.Contains(out, "unit: launch (3 base vs 1 head launches; each launch's mean is one replicate); between-launch variation: measured in the compared launches (3 base, 1 head)") {
		t.Errorf("table note:\n%s", out)
	}
}

// A results.json with several configs needs --base-config / --head-config; both sides may come
// from one file. A results.json against trial files of another tool is judged per trial.
func TestCompareResultsJSONConfigs(t *testing.T) {
	dir := t.TempDir()
	var slow [][]float64
	var fast [][]float64
	for l := 0; l < 3; l++ {
		f := 1 + 0.01*float64(l%2)
		fast = append(fast, []float64{1000 * f, 1004 * f, 998 * f})
		slow = append(slow, []float64{900 * f, 903 * f, 898 * f})
	}
	run := writeResultsJSON(t, dir, "results.json", map[string][][]float64{"nccl": fast, "custom-ar": slow})
	_, errs, code := execCmd(t, newCompareCmd(), "--base", run, "--head", run)
	if code != 2 || !strings.Contains(errs, "2 configs have trials") || !strings.Contains(errs, "--base-config") {
		t.Errorf("no config named: exit %d: %s", code, errs)
	}
	out, errs, code := execCmd(t, newCompareCmd(), "--base", run, "--base-config", "nccl", "--head", run, "--head-config", "custom-ar")
	if code != 1 || !strings.Contains(out, "regression") || !strings.Contains(out, "unit: launch (3 base vs 3 head launches") {
		t.Errorf("custom-ar vs nccl: exit %d\n%s\n%s", code, out, errs)
	}
	_, errs, code = execCmd(t, newCompareCmd(), "--base", run, "--base-config", "tree", "--head", run, "--head-config", "nccl")
	if code != 2 || !strings.Contains(errs, `no config "tree" with trials`) {
		t.Errorf("unknown config: exit %d: %s", code, errs)
	}
	_, errs, code = execCmd(t, newCompareCmd(), "--base", run, "--base-config", "nccl", "--head", run, "--head-config", "nccl", "--between-launch-cv", "0")
	if code != 2 || !strings.Contains(errs, "--between-launch-cv") {
		t.Errorf("bad prior: exit %d: %s", code, errs)
	}
	vllm := writeVLLMTrials(t, t.TempDir(), 5, 1000, 50, 3)
	out, errs, code = execCmd(t, newCompareCmd(), append([]string{"--head", run, "--head-config", "nccl", "--base"}, vllm...)...)
	if !strings.Contains(out, "unit: trial (one side's files carry no launch indices") {
		t.Errorf("mixed: exit %d\n%s\n%s", code, out, errs)
	}
}
