package suites_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/reckon-ci/reckon/gate"
)

// Record, then judge, over relaunches: a config of a workload with launches: 2 and trials: 2
// has 4 trials, and its per-config checks on traffic (a result floor, error_rate) are judged
// after its last launch over all 4, live and after reckon merge. Config burst's engine fails
// every 4th request in its second launch only (--fault-fail-every 4 --fault-fail-launch 1, the
// launch index read from a counter file of its own): its error rate is red live and after merge,
// and green without the fault.

const (
	relaunchFloor = "floor output_throughput >= 1 (decode)"
	relaunchRate  = "error_rate <= 1% (decode)"
)

// relaunchSpec writes the spec into a fresh directory (absolute paths: the engine, the model
// and each config's launch counter) and returns its path.
func relaunchSpec(t *testing.T, fault bool) string {
	t.Helper()
	dir := t.TempDir()
	burst := "[--clock-launch-counter, " + filepath.Join(dir, "burst.count")
	if fault {
		burst += `, --fault-fail-every, "4", --fault-fail-launch, "1"`
	}
	y := `name: relaunch-evidence
engine:
  kind: sglang
  command: [` + filepath.Join(repoRoot, "bin", "refengine") + `]
  model: ` + filepath.Join(repoRoot, "fixtures", "models", "tiny.json") + `
  tp_size: 1
  ready_timeout: 60s
  stop_grace: 5s
configs:
  - name: steady
    args: [--clock-launch-counter, ` + filepath.Join(dir, "steady.count") + `]
  - name: burst
    args: ` + burst + `]
workloads:
  - name: decode
    concurrency: 2
    num_prompts: 8
    input_len: 8
    output_len: 8
    trials: 2
    launches: 2
    request_timeout: 30s
checks:
  - kind: floor
    metric: output_throughput
    min: 1
  - kind: error_rate
    max: 1%
`
	p := filepath.Join(dir, "relaunch.yaml")
	if err := os.WriteFile(p, []byte(y), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// gateAt runs reckon gate on a spec file anywhere and reads its reports back.
func gateAt(t *testing.T, specPath string, extra ...string) *gateRun {
	t.Helper()
	out := t.TempDir()
	exit, so, se := reckon(t, append([]string{"gate", "--spec", specPath, "--out", out, "--quiet"}, extra...)...)
	r := &gateRun{exit: exit, stdout: so, stderr: se, out: out}
	r.load(t)
	assertNoSurvivors(t)
	return r
}

// configCheck is the entry of a per-config check of one config.
func (r *gateRun) configCheck(t *testing.T, name, config string) gate.Check {
	t.Helper()
	for _, c := range r.results.Checks {
		if c.Name == name && c.Config == config {
			return c
		}
	}
	t.Fatalf("no check %q of config %s\n%s", name, config, r.dump())
	return gate.Check{}
}

// assertRelaunchVerdicts checks the verdicts of the relaunch spec: the floors count 4 trials,
// steady's error rate passes, burst's fails naming launch 2 (when fault).
func assertRelaunchVerdicts(t *testing.T, where string, r *gateRun, fault bool) {
	t.Helper()
	for _, cfg := range []string{"steady", "burst"} {
		f := r.configCheck(t, relaunchFloor, cfg)
		if f.Status != gate.StatusPassed || !strings.Contains(f.Message, "median of 4 trials of decode") {
			t.Errorf("%s: %s %s: %s: %s", where, cfg, relaunchFloor, f.Status, f.Message)
		}
		t.Logf("%s: %s [%s]", where, f.Message, f.Status)
	}
	s := r.configCheck(t, relaunchRate, "steady")
	if s.Status != gate.StatusPassed || !strings.Contains(s.Message, "over 4 trials of decode in 2 launches") {
		t.Errorf("%s: steady %s: %s: %s", where, relaunchRate, s.Status, s.Message)
	}
	t.Logf("%s: %s [%s]", where, s.Message, s.Status)
	b := r.configCheck(t, relaunchRate, "burst")
	if !fault {
		t.Logf("%s: %s [%s]", where, b.Message, b.Status)
		if b.Status != gate.StatusPassed || !strings.Contains(b.Message, "error rate 0% <= max 1% (0 failed of ") {
			t.Errorf("%s: burst without the fault: %s: %s", where, b.Status, b.Message)
		}
		return
	}
	if b.Status != gate.StatusFailed || b.Category != gate.CategoryBrokenInvariant ||
		!strings.Contains(b.Message, "> max 1% (") || !strings.Contains(b.Message, "over 4 trials of decode in 2 launches; failures in launch 2: ") || strings.Contains(b.Message, "launch 1:") {
		t.Errorf("%s: burst %s: %s/%s: %s", where, relaunchRate, b.Status, b.Category, b.Message)
	}
	t.Logf("%s: %s [%s]", where, b.Message, b.Status)
}

func TestRelaunchedConfigsAreJudgedOverEveryLaunch(t *testing.T) {
	t.Parallel() // gate runs of their own: engines on free ports, reports in t.TempDir
	if testing.Short() {
		t.Skip("integration")
	}
	// Each gate run gets its own spec file, so that its launch counters start at 0.
	live := gateAt(t, relaunchSpec(t, true))
	if live.exit != 1 {
		t.Fatalf("live: exit %d, want 1\n%s", live.exit, live.dump())
	}
	assertRelaunchVerdicts(t, "live", live, true)
	for _, c := range live.results.Configs {
		if c.Launches != 2 || len(c.Trials) != 4 {
			t.Errorf("config %s: %d launches, %d trials recorded", c.Name, c.Launches, len(c.Trials))
		}
	}

	// Shards by config (steady in one, burst in the other), joined by reckon merge: merge
	// judges the per-config checks again from the recorded evidence, to the same verdicts.
	faulty := relaunchSpec(t, true) // both shards run one spec; burst runs in one of them
	s1 := gateAt(t, faulty, "--shard", "1/2", "--shard-by", "config")
	s2 := gateAt(t, faulty, "--shard", "2/2", "--shard-by", "config")
	m := mergeRun(t, s1.out, s2.out)
	if m.exit != 1 {
		t.Fatalf("merge: exit %d\n%s\n%s", m.exit, m.stderr, m.dump())
	}
	assertRelaunchVerdicts(t, "merged", m, true)
	for _, c := range m.results.Checks {
		if c.Kind == "merge" {
			t.Errorf("merge found the shards' outcomes disagreeing with their evidence: %s", c.Message)
		}
	}

	// A shard that states "pass" over its recorded failures: merge judges the evidence, keeps
	// the check red and turns the merge red saying so (a kind needs no line in merge for it).
	burstShard := s2
	if burstShard.results.Shard.Configs[0] != "burst" {
		burstShard = s1
	}
	b, err := os.ReadFile(filepath.Join(burstShard.out, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	var raw map[string]any
	if err := json.Unmarshal(b, &raw); err != nil {
		t.Fatal(err)
	}
	for _, c := range raw["checks"].([]any) {
		if e := c.(map[string]any); e["name"] == relaunchRate && e["config"] == "burst" {
			e["outcome"], e["status"], e["category"] = "pass", "passed", ""
		}
	}
	tampered := t.TempDir()
	b, _ = json.Marshal(raw)
	if err := os.WriteFile(filepath.Join(tampered, "results.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	other := s1.out
	if burstShard == s1 {
		other = s2.out
	}
	mt := mergeRun(t, other, tampered)
	if mt.exit != 1 {
		t.Fatalf("tampered merge: exit %d\n%s", mt.exit, mt.dump())
	}
	if c := mt.configCheck(t, relaunchRate, "burst"); c.Status != gate.StatusFailed || !strings.Contains(c.Message, "judged again by reckon merge: the shard recorded pass") {
		t.Errorf("tampered merge: %s: %s", c.Status, c.Message)
	}
	if c := mt.check(t, "merge: the shards' stated outcomes agree with their evidence"); c.Status != gate.StatusFailed || !strings.Contains(c.Message, "the shard says pass, its evidence says fail") {
		t.Errorf("tampered merge: %s: %s", c.Status, c.Message)
	}

	// Without the fault: green.
	clean := gateAt(t, relaunchSpec(t, false))
	if clean.exit != 0 {
		t.Fatalf("without the fault: exit %d\n%s", clean.exit, clean.dump())
	}
	assertRelaunchVerdicts(t, "clean", clean, false)
}
