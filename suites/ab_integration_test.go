package suites_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/reckon-ci/reckon/gate"
)

// Pre-merge A/B in one run (fixtures/specs/ab.yaml): configs main and pr are two builds of the
// reference engine (pr's command is fixtures/engines/refengine-pr-slow.sh, the engine with a 2x
// kernel slowdown), each launched 3 times in a balanced interleaved order with 2 trials per
// launch; and the same spec split over two shards and joined by reckon merge.

const abThroughput = "throughput pr decode output_throughput vs main"

// reckon runs the reckon binary with args from the repository root.
func reckon(t *testing.T, args ...string) (exit int, stdout, stderr string) {
	t.Helper()
	cmd := exec.Command(filepath.Join(repoRoot, "bin", "reckon"), args...)
	cmd.Dir = repoRoot
	cmd.Env = append(os.Environ(), marker(t))
	var so, se bytes.Buffer
	cmd.Stdout, cmd.Stderr = &so, &se
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode(), so.String(), se.String()
	} else if err != nil {
		t.Fatalf("run reckon %v: %v", args, err)
	}
	return 0, so.String(), se.String()
}

// mergeRun runs reckon merge over dirs and reads the merged reports back.
func mergeRun(t *testing.T, dirs ...string) *gateRun {
	t.Helper()
	out := t.TempDir()
	exit, so, se := reckon(t, append([]string{"merge", "--quiet", "--out", out}, dirs...)...)
	r := &gateRun{exit: exit, stdout: so, stderr: se, out: out}
	r.load(t)
	return r
}

func TestABSlowPRIsRedWithLaunchesAsTheUnit(t *testing.T) {
	t.Parallel() // a gate run of its own: engines on free ports, reports in t.TempDir
	r := redGate(t, "ab.yaml")
	c := r.check(t, abThroughput)
	if c.Status != gate.StatusFailed || c.Stat == nil || c.Stat.Outcome != "regression" {
		t.Fatalf("%s: %s/%s: %s", abThroughput, c.Status, c.Outcome, c.Message)
	}
	for _, want := range []string{"pr: output_throughput -", "vs main", "): regression [unit: launch, 3 vs 3 launches of 2 trials; between-launch CV pr ", ", main ", "; within-launch CV pr "} {
		if !strings.Contains(c.Message, want) {
			t.Errorf("verdict lacks %q: %s", want, c.Message)
		}
	}
	if !strings.Contains(c.Details, "launches are the statistical unit") || !strings.Contains(c.Details, "pr launch means: ") {
		t.Errorf("details:\n%s", c.Details)
	}
	for _, k := range []string{"between_launch_cv_head", "between_launch_cv_base", "within_launch_cv_head", "within_launch_cv_base"} {
		if _, ok := c.Metrics[k]; !ok {
			t.Errorf("metrics lack %s: %v", k, c.Metrics)
		}
	}
	// The run order: main pr | pr main | main pr.
	var order []string
	for _, l := range r.results.LaunchOrder {
		order = append(order, fmt.Sprintf("%s#%d/%d", l.Config, l.Launch, l.Of))
	}
	if got, want := strings.Join(order, " "), "main#1/3 pr#1/3 pr#2/3 main#2/3 main#3/3 pr#3/3"; got != want {
		t.Errorf("launch order %q, want %q", got, want)
	}
	for _, cfg := range r.results.Configs {
		perLaunch := map[int]int{}
		for _, tr := range cfg.Trials {
			perLaunch[tr.Launch]++
		}
		if cfg.Launches != 3 || perLaunch[1] != 2 || perLaunch[2] != 2 || perLaunch[3] != 2 {
			t.Errorf("config %s: %d launches, trials per launch %v", cfg.Name, cfg.Launches, perLaunch)
		}
	}
	summary, err := os.ReadFile(filepath.Join(r.out, "summary.md"))
	if err != nil {
		t.Fatal(err)
	}
	// The Markdown sanitiser breaks "#1" with a zero-width space (no issue reference); read past it.
	text := strings.ReplaceAll(string(summary), "\u200b", "")
	for _, want := range []string{"### Launch order", `main\#1 → pr\#1 → pr\#2 → main\#2 → main\#3 → pr\#3`, "between-launch CV pr", "within-launch CV pr"} {
		if !strings.Contains(text, want) {
			t.Errorf("summary.md lacks %q", want)
		}
	}
	// The other checks pass: only the PR's speed regressed.
	if n := r.results.Count(); n.Failed != 1 || n.Errors != 0 {
		t.Errorf("counts %+v\n%s", n, r.dump())
	}
	// spec check shows each config's own argv (main's build and the PR's).
	exit, so, se := reckon(t, "spec", "check", "--json", filepath.Join("fixtures", "specs", "ab.yaml"))
	if exit != 0 {
		t.Fatalf("spec check: exit %d\n%s", exit, se)
	}
	if !strings.Contains(so, `"bin/refengine"`) || !strings.Contains(so, `"fixtures/engines/refengine-pr-slow.sh"`) {
		t.Errorf("spec check --json does not show both commands:\n%s", so)
	}
}

// verdicts maps each check's name to its status and outcome.
func verdicts(r *gate.Run) map[string]string {
	out := map[string]string{}
	for _, c := range r.Checks {
		out[c.Name] = string(c.Status) + "/" + string(c.Outcome)
	}
	return out
}

func TestShardsMergeToTheUnshardedVerdicts(t *testing.T) {
	t.Parallel() // a gate run of its own: engines on free ports, reports in t.TempDir
	full := redGate(t, "ab.yaml")
	// --shard-by config puts main and pr on different shards: merge judges their comparison.
	s1 := gateSpec(t, "ab.yaml", "--shard", "1/2", "--shard-by", "config")
	s2 := gateSpec(t, "ab.yaml", "--shard", "2/2", "--shard-by", "config")
	for i, s := range []*gateRun{s1, s2} {
		if s.exit != 0 || s.results.Shard == nil || len(s.results.Shard.Configs) != 1 || len(s.results.Shard.Deferred) != 2 {
			t.Fatalf("shard %d: exit %d, shard %+v\n%s", i+1, s.exit, s.results.Shard, s.dump())
		}
	}
	if s1.results.Shard.Configs[0] == s2.results.Shard.Configs[0] {
		t.Fatalf("both shards ran %s", s1.results.Shard.Configs[0])
	}
	m := mergeRun(t, s2.out, s1.out) // any order
	if m.exit != 1 {
		t.Fatalf("merge: exit %d\n%s\n%s", m.exit, m.stderr, m.dump())
	}
	want, got := verdicts(full.results), verdicts(m.results)
	for name, v := range want {
		if got[name] != v {
			t.Errorf("%s: merged %q, unsharded %q", name, got[name], v)
		}
	}
	if len(got) != len(want) {
		t.Errorf("merged %d checks, unsharded %d", len(got), len(want))
	}
	// The statistical verdicts agree within their confidence intervals (the two measure the
	// same effect: their intervals overlap).
	fc, mc := full.check(t, abThroughput), m.check(t, abThroughput)
	if fc.Stat == nil || mc.Stat == nil {
		t.Fatalf("%s: no statistical result (unsharded %v, merged %v)", abThroughput, fc.Stat, mc.Stat)
	}
	if f, m := fc.Stat, mc.Stat; m.CILow > f.CIHigh || f.CILow > m.CIHigh {
		t.Errorf("ratio unsharded %.3f [%.3f, %.3f], merged %.3f [%.3f, %.3f]", f.Ratio, f.CILow, f.CIHigh, m.Ratio, m.CILow, m.CIHigh)
	}
	if !strings.Contains(mc.Details, "judged by reckon merge") || len(m.results.MergedFrom) != 2 || len(m.junit.Suites) == 0 {
		t.Errorf("merged check details %q, merged_from %d", mc.Details, len(m.results.MergedFrom))
	}
	summary, _ := os.ReadFile(filepath.Join(m.out, "summary.md"))
	if !strings.Contains(string(summary), "merged from 2 shards on 1 testbed key(s)") {
		t.Errorf("summary.md headline:\n%s", summary)
	}

	// By group (the default) main and pr stay together in shard 1 (the run above, in effect);
	// shard 2 is empty and says so (TestShardPlanKeepsTiedConfigsTogether covers the partition).
	g2 := gateSpec(t, "ab.yaml", "--shard", "2/2")
	if g2.exit != 0 || g2.results.Shard == nil || len(g2.results.Shard.Configs) != 0 || len(g2.results.Checks) != 0 || !strings.Contains(g2.stdout, "EMPTY SHARD: --shard 2/2") {
		t.Fatalf("by group: exit %d, shard %+v\n%s", g2.exit, g2.results.Shard, g2.stdout)
	}

	// Shards of different testbed keys: the comparison is refused, not judged.
	other := t.TempDir()
	b, err := os.ReadFile(filepath.Join(s2.out, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	var raw map[string]any
	if err := json.Unmarshal(b, &raw); err != nil {
		t.Fatal(err)
	}
	raw["testbed_key"] = "gpu-8x-h100-nvlink-0000"
	b, _ = json.Marshal(raw)
	if err := os.WriteFile(filepath.Join(other, "results.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	mx := mergeRun(t, s1.out, other)
	if mx.exit != 3 {
		t.Errorf("mixed testbeds: exit %d, want 3\n%s", mx.exit, mx.dump())
	}
	for _, name := range []string{abThroughput, "relative pr kv_cache_tokens >= 0.9 x main"} {
		c := mx.check(t, name)
		if c.Status != gate.StatusError || !strings.Contains(c.Message, "not judged: its configs ran on different testbeds") {
			t.Errorf("%s: %s: %s", name, c.Status, c.Message)
		}
	}

	// Bad input: flags, a missing shard, a directory that is not a shard.
	spec := filepath.Join("fixtures", "specs", "ab.yaml")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--shard", "3/2"}, `--shard "3/2": expected I/N with 1 <= I <= N`},
		{[]string{"--shard", "1/2", "--shard-by", "rack"}, `--shard-by "rack": expected group or config`},
		{[]string{"--shard-by", "config"}, "--shard-by needs --shard I/N"},
	} {
		if exit, _, se := reckon(t, append([]string{"gate", "--spec", spec, "--out", t.TempDir()}, tc.args...)...); exit != 2 || !strings.Contains(se, tc.want) {
			t.Errorf("gate %v: exit %d: %s", tc.args, exit, se)
		}
	}
	if exit, _, se := reckon(t, "merge", "--out", t.TempDir(), s1.out); exit != 2 || !strings.Contains(se, `missing shard 2/2 of spec "ab"`) {
		t.Errorf("missing shard: exit %d: %s", exit, se)
	}
	if exit, _, se := reckon(t, "merge", "--out", t.TempDir(), s1.out, full.out); exit != 2 || !strings.Contains(se, "not the output of a shard") {
		t.Errorf("unsharded input: exit %d: %s", exit, se)
	}
}

// TestABNumericsFaultInPRIsRed: the PR's build computes wrong (custom allreduce off by 1e-2) while
// main's is correct; the equivalence check of the two builds fails with the calibrated reason.
func TestABNumericsFaultInPRIsRed(t *testing.T) {
	t.Parallel() // a gate run of its own: engines on free ports, reports in t.TempDir
	r := redGate(t, "ab-numerics.yaml")
	c := r.check(t, "equivalence pr vs main")
	if c.Status != gate.StatusFailed || !strings.HasPrefix(c.Message, "pr vs main: not equivalent (calibrated by twin main-nccl): near-bitwise expected") {
		t.Errorf("%s/%s: %s", c.Status, c.Outcome, c.Message)
	}
	if n := r.results.Count(); n.Failed != 1 || n.Errors != 0 {
		t.Errorf("counts %+v\n%s", n, r.dump())
	}
	var args []string
	for _, cfg := range r.results.Configs {
		if cfg.Name == "pr" {
			args = cfg.Args
		}
	}
	if len(args) == 0 || args[0] != "fixtures/engines/refengine-pr-numerics.sh" {
		t.Errorf("pr's argv %q: not its own command", args)
	}
}
