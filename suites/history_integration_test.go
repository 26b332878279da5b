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
	"time"

	"github.com/reckon-ci/reckon/gate"
)

// historySpec is gate-policy.yaml's engine with one config and a throughput check against the
// history of earlier nights.
const historySpec = `name: history-gate
engine:
  kind: sglang
  command: [%s]
  model: %s
  tp_size: 1
  ready_timeout: 60s
  stop_grace: 5s
configs:
  - name: base
workloads:
  - name: decode
    concurrency: 4
    num_prompts: 8
    input_len: 16
    output_len: 8
    warmup: 1
    trials: 3
    seed: 1
    request_timeout: 30s
checks:
  - kind: throughput
    config: base
    workload: decode
    metric: output_throughput
    against: history
    history_runs: 4
    alpha: 0.05
    min_effect: 5%%
`

// runReckon runs the reckon binary and returns stdout, stderr and the exit code.
func runReckon(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(filepath.Join(repoRoot, "bin", "reckon"), args...)
	cmd.Dir = repoRoot
	cmd.Env = append(os.Environ(), marker(t), "RECKON_HISTORY=")
	var so, se bytes.Buffer
	cmd.Stdout, cmd.Stderr = &so, &se
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		return so.String(), se.String(), ee.ExitCode()
	} else if err != nil {
		t.Fatalf("run reckon %v: %v", args, err)
	}
	return so.String(), se.String(), 0
}

// TestGateAgainstHistory: `against: history` end to end. Night 1 has no history (no_baseline;
// the run is appended). In another store, four earlier nights made of night 1's trials are
// stored whose throughput was 3x tonight's:
// tonight's run is a regression reported as a change point at tonight's run with its commit
// range. Judged against four nights at a third of its throughput, it passes.
func TestGateAgainstHistory(t *testing.T) {
	t.Parallel() // a gate run of its own: engines on free ports, reports in t.TempDir
	if testing.Short() {
		t.Skip("integration")
	}
	dir := t.TempDir()
	specPath := filepath.Join(dir, "history.yaml")
	spec := fmt.Sprintf(historySpec, filepath.Join(repoRoot, "bin", "refengine"), filepath.Join(repoRoot, "fixtures", "models", "tiny.json"))
	if err := os.WriteFile(specPath, []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	night := func(db, out, commit string) (string, string, int) {
		return runReckon(t, "gate", "--spec", specPath, "--out", out, "--quiet", "--history", db, "--commit", commit)
	}
	first := filepath.Join(dir, "first.db")
	out1 := filepath.Join(dir, "night1")
	so, se, code := night(first, out1, "1111111111111111")
	if code != 0 || !strings.Contains(so, "1 no baseline") || !strings.Contains(so, "history: appended run 1 to "+first) {
		t.Fatalf("night 1: exit %d\n%s\n%s", code, so, tail(se, 30))
	}
	night1, err := gate.ReadResults(filepath.Join(out1, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	// Earlier nights, made from night 1's trials scaled by factor, appended with history add.
	seed := func(db string, factor float64) {
		for i := 0; i < 4; i++ {
			r := *night1
			r.StartedAt = night1.StartedAt.Add(-time.Duration(5-i) * 24 * time.Hour)
			r.GitCommit = fmt.Sprintf("%04daaaaaaaaaaaa", i)
			r.Configs = nil
			for _, c := range night1.Configs {
				var trials []gate.Trial
				for _, tr := range c.Trials {
					m := map[string]float64{}
					for k, v := range tr.Metrics {
						m[k] = v
						if k == "output_throughput" {
							m[k] = v * factor * (1 + 0.01*float64(i%2))
						}
					}
					trials = append(trials, gate.Trial{Workload: tr.Workload, Index: tr.Index, Metrics: m})
				}
				c.Trials = trials
				r.Configs = append(r.Configs, c)
			}
			var b bytes.Buffer
			if err := json.NewEncoder(&b).Encode(&r); err != nil {
				t.Fatal(err)
			}
			p := filepath.Join(dir, fmt.Sprintf("seed-%g-%d.json", factor, i))
			if err := os.WriteFile(p, b.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
			if so, se, code := runReckon(t, "history", "add", "--history", db, p); code != 0 {
				t.Fatalf("history add: %d %s %s", code, so, se)
			}
		}
	}
	db := filepath.Join(dir, "fast.db")
	seed(db, 3)
	so, se, code = night(db, filepath.Join(dir, "night2"), "3333333333333333")
	if code != 1 || !strings.Contains(so, "change point at tonight's run (0003aaaaaaaa..333333333333)") {
		t.Fatalf("against a faster history: exit %d, want 1 with the change point\n%s\n%s", code, so, tail(se, 30))
	}
	// The gate's reports got the check's history as a sparkline (4 seeded nights, tonight).
	res, err := gate.ReadResults(filepath.Join(dir, "night2", "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	trend := 0
	for _, c := range res.Checks {
		if c.Kind == "throughput" {
			trend = len(c.Trend)
			t.Logf("%s\n%s", c.Message, c.Details)
		}
	}
	page, _ := os.ReadFile(filepath.Join(dir, "night2", "report.html"))
	if trend != 5 || !strings.Contains(string(page), `aria-label="history"`) {
		t.Errorf("trend of %d runs (want 5); sparkline in report.html: %v", trend, strings.Contains(string(page), `aria-label="history"`))
	}
	slow := filepath.Join(dir, "slow.db")
	seed(slow, 1.0/3)
	so, se, code = night(slow, filepath.Join(dir, "night3"), "4444444444444444")
	if code != 0 || !strings.Contains(so, "PASS") {
		t.Fatalf("against a slower history: exit %d, want 0\n%s\n%s", code, so, tail(se, 30))
	}
	// A store that cannot be reached: the gate's verdict stands, the files are kept, and the
	// run is an infrastructure error that says how to append it later.
	out4 := filepath.Join(dir, "night4")
	_, se, code = night("postgres://nobody@127.0.0.1:1/none?sslmode=disable&connect_timeout=2", out4, "5555555555555555")
	if code != 3 || !strings.Contains(se, "reckon history add "+filepath.Join(out4, "results.json")) {
		t.Fatalf("unreachable history: exit %d, want 3\n%s", code, tail(se, 30))
	}
	if _, err := os.Stat(filepath.Join(out4, "results.json")); err != nil {
		t.Fatal(err)
	}
}
