package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/reckon-ci/reckon/gate"
)

const specNeedYAML = `name: default
engine:
  kind: sglang
  command: [bin/refengine]
  model: fixtures/models/tiny.json
  tp_size: 1
configs:
  - name: nccl
workloads:
  - name: chat
    concurrency: 4
    num_prompts: 8
    input_len: 16
    output_len: 16
    trials: 2
    launches: 3
checks:
  - kind: throughput
    config: nccl
    workload: chat
    metric: output_throughput
    against: baseline
    min_effect: 5%
`

// spec check --baselines plans each statistical check from the baseline's measured noise: with
// between-launch CV ~4% and 3 launches of 2 trials, a 5% min_effect needs more launches.
func TestSpecCheckNeeds(t *testing.T) {
	dir := t.TempDir()
	p := writeResults(t, dir, 1, "nccl")
	r, err := gate.ReadResults(p)
	if err != nil {
		t.Fatal(err)
	}
	r.Configs[0].Trials = nil
	for i, v := range []float64{1200, 1205, 1250, 1245, 1190, 1185} {
		r.Configs[0].Trials = append(r.Configs[0].Trials, gate.Trial{Workload: "chat", Index: i, Launch: 1 + i/2,
			Metrics: map[string]float64{"output_throughput": v}})
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
	if _, errs, code := execCmd(t, newBaselineCmd(), "record", "--from", p, "--baselines", bdir); code != 0 {
		t.Fatalf("record: exit %d: %s", code, errs)
	}
	specPath := filepath.Join(dir, "default.yaml")
	if err := os.WriteFile(specPath, []byte(specNeedYAML), 0o644); err != nil {
		t.Fatal(err)
	}
	out, errs, code := execCmd(t, newSpecCmd(), "check", specPath, "--baselines", bdir)
	if code != 0 {
		t.Fatalf("spec check: exit %d: %s %s", code, out, errs)
	}
	want := "needs on testbed cpu-test-1234: throughput nccl chat output_throughput vs baseline: to decide min_effect 5.0% (95% power at alpha 0.01) with between-launch CV"
	if !strings.Contains(out, want) || !strings.Contains(out, "measured in the baseline's 3 launches") || !strings.Contains(out, "launch(es) per side of 2 trials (now 3 x 2)") {
		t.Errorf("spec check --baselines:\n%s\nwant %q", out, want)
	}
	out, _, code = execCmd(t, newSpecCmd(), "check", "--json", specPath, "--baselines", bdir)
	var res specCheckResult
	if code != 0 || json.Unmarshal([]byte(out), &res) != nil || len(res.Needs) != 1 || res.Needs[0].Need.Launches <= 3 || res.Needs[0].Need.Trials != 2 {
		t.Errorf("--json: exit %d, needs %+v\n%s", code, res.Needs, out)
	}
	// No baseline of the spec: a note, not an error; without --baselines nothing is planned.
	out, _, code = execCmd(t, newSpecCmd(), "check", specPath, "--baselines", t.TempDir())
	if code != 0 || !strings.Contains(out, "needs: no baseline of spec default") {
		t.Errorf("no baseline: exit %d\n%s", code, out)
	}
	out, _, _ = execCmd(t, newSpecCmd(), "check", specPath)
	if strings.Contains(out, "needs") {
		t.Errorf("without --baselines:\n%s", out)
	}
}

// specHistoryYAML judges the simulated nights' series (spec default, config nccl, workload c8 on
// testbed cpu-2core-sim): once by the nightly detector, once as an A/B whose launch noise the
// history teaches.
const specHistoryYAML = `name: default
engine:
  kind: sglang
  command: [bin/refengine]
  model: fixtures/models/tiny.json
configs:
  - name: nccl
  - name: other
workloads:
  - name: c8
    concurrency: 8
    num_prompts: 16
    input_len: 32
    output_len: 32
    trials: 5
checks:
  - kind: throughput
    config: nccl
    workload: c8
    metric: output_throughput
    against: history
    min_effect: 6%
    power: 80%
  - kind: throughput
    config: other
    workload: c8
    metric: output_throughput
    against: config:nccl
    test: detect
    min_effect: 6%
    power: 80%
`

// spec check --history plans from the stored runs: the nightly detector replayed over the stored
// nights (the newest as tonight) states the drop it would find, and an A/B check is planned from
// the launch noise of the history's runs. Too few nights say so (the bootstrap), and a bad store
// is named.
func TestSpecCheckNeedsFromHistory(t *testing.T) {
	dir := t.TempDir()
	specPath := filepath.Join(dir, "default.yaml")
	if err := os.WriteFile(specPath, []byte(specHistoryYAML), 0o644); err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(dir, "h.db")
	files := simulateNights(t, dir, 20, 99, 1)
	if _, e, code := historyCLI(t, append([]string{"add", "--history", db}, files[:3]...)...); code != 0 {
		t.Fatalf("history add: %d %s", code, e)
	}
	out, errs, code := execCmd(t, newSpecCmd(), "check", specPath, "--history", db)
	if code != 0 {
		t.Fatalf("spec check: exit %d: %s %s", code, out, errs)
	}
	if !strings.Contains(out, "vs history: not enough history") || !strings.Contains(out, "bootstrap") {
		t.Errorf("3 nights: want the bootstrap said:\n%s", out)
	}
	if _, e, code := historyCLI(t, append([]string{"add", "--history", db}, files[3:]...)...); code != 0 {
		t.Fatalf("history add: %d %s", code, e)
	}
	out, errs, code = execCmd(t, newSpecCmd(), "check", specPath, "--history", db)
	if code != 0 {
		t.Fatalf("spec check: exit %d: %s %s", code, out, errs)
	}
	for _, want := range []string{
		"testbed cpu-2core-sim: throughput nccl c8 output_throughput vs history: the nightly detector over 19 stored nights (the newest replayed as tonight) would find a drop of",
		"needs on testbed cpu-2core-sim: throughput other c8 output_throughput vs nccl: to decide min_effect 6.0% (80% power",
		"measured by the history of nccl: 20 one-launch runs",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("spec check --history:\n%s\nwant %q", out, want)
		}
	}
	out, _, code = execCmd(t, newSpecCmd(), "check", specPath, "--history", filepath.Join(dir, "missing", "h.db"))
	if code != 0 || !strings.Contains(out, "directory "+filepath.Join(dir, "missing")+" does not exist") {
		t.Errorf("a store in a missing directory: exit %d\n%s", code, out)
	}
}
