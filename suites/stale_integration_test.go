package suites_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestKilledRunLeavesNoStaleGreenReport: a run killed with SIGKILL before it writes its reports
// must not leave the previous run's (green) junit.xml and results.json in its output directory.
func TestKilledRunLeavesNoStaleGreenReport(t *testing.T) {
	t.Parallel() // a gate run of its own: engines on free ports, reports in t.TempDir
	if testing.Short() {
		t.Skip("integration")
	}
	out := t.TempDir()
	// An earlier run's output: reckon's marker (it removes reports only where it finds one) and
	// its reports.
	earlier := map[string]string{
		".reckon-out":  `{"schema": "reckon.out/v1", "run_id": "earlier", "dirs": {}}`,
		"results.json": `{"schema": "reckon.results/v2", "spec_name": "STALE green report of an earlier run"}`,
	}
	for _, f := range []string{"junit.xml", "summary.md", "report.html"} {
		earlier[f] = "STALE green report of an earlier run"
	}
	for f, content := range earlier {
		if err := os.WriteFile(filepath.Join(out, f), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(filepath.Join(repoRoot, "bin", "reckon"), "gate", "--spec", filepath.Join("fixtures", "specs", "hang.yaml"), "--out", out, "--quiet")
	cmd.Dir = repoRoot
	cmd.Env = append(os.Environ(), marker(t))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Wait until the run has started its engine (its log exists), then kill it.
	deadline := time.Now().Add(30 * time.Second)
	for {
		if m, _ := filepath.Glob(filepath.Join(out, "logs", "*.log")); len(m) > 0 {
			break
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			t.Fatal("the run never started an engine")
		}
		time.Sleep(50 * time.Millisecond) // polling for a file; not a readiness wait on the engine
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	for _, f := range []string{"junit.xml", "results.json", "summary.md", "report.html"} {
		b, err := os.ReadFile(filepath.Join(out, f))
		if err == nil && strings.Contains(string(b), "STALE") {
			t.Errorf("%s of the earlier run survived the new run's start", f)
		}
	}
	assertNoSurvivors(t)
}
