package suites_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/reckon-ci/reckon/gate"
)

// What a green run means (issue 16 items 1-2, issue 12 item 2), end to end on the real binary:
// the exact closing line and exit code of each case. fixtures/specs/gate-policy.yaml keeps these
// runs to a second or two each (two tp-1 configs, 8 prompts, 3 trials).

// exitGate runs a spec that must exit with want; integration tests skip under -short.
func exitGate(t *testing.T, want int, specFile string, extra ...string) *gateRun {
	t.Helper()
	if testing.Short() {
		t.Skip("integration")
	}
	r := gateSpec(t, specFile, extra...)
	if r.exit != want {
		t.Fatalf("%s %q: exit %d, want %d\n%s", specFile, extra, r.exit, want, r.dump())
	}
	return r
}

// wantClosing checks the run's closing line (the last line on stdout).
func wantClosing(t *testing.T, r *gateRun, want string) {
	t.Helper()
	lines := strings.Split(strings.TrimRight(r.stdout, "\n"), "\n")
	if got := lines[len(lines)-1]; got != want {
		t.Errorf("closing line:\n got %q\nwant %q", got, want)
	}
}

// gateNoReports runs `reckon gate` where it must stop before launching anything (bad input):
// no reports are read.
func gateNoReports(t *testing.T, specFile string, extra ...string) *gateRun {
	t.Helper()
	if testing.Short() {
		t.Skip("integration")
	}
	r := runGate(t, specFile, extra...)
	if _, err := os.Stat(filepath.Join(r.out, "logs")); err == nil {
		t.Errorf("bad input launched an engine (%s/logs exists)", r.out)
	}
	assertNoSurvivors(t)
	return r
}

func TestLabelFilterThatSelectsNothingIsBadInput(t *testing.T) {
	t.Parallel() // a gate run of its own: engines on free ports, reports in t.TempDir
	r := gateNoReports(t, "gate-policy.yaml", "--label-filter", "premege")
	if r.exit != 2 {
		t.Fatalf("exit %d, want 2\n%s", r.exit, r.stderr)
	}
	for _, want := range []string{`--label-filter "premege" selects no check of fixtures/specs/gate-policy.yaml; the labels of this spec are: base, head, health, memory, premerge, throughput`} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, r.stderr)
		}
	}
	// The good case: the intended label selects checks and the run goes ahead (and is green).
	if testing.Short() {
		return
	}
	ok := exitGate(t, 0, "gate-policy.yaml", "--label-filter", "premerge", "--baselines", t.TempDir())
	wantClosing(t, ok, "PASS: 6 passed, 0 failed, 0 errors, 0 inconclusive, 1 no baseline, 0 skipped, 0 not run")
}

func TestLabelFilterThatDropsAnInputNeedsAllowPartial(t *testing.T) {
	t.Parallel() // a gate run of its own: engines on free ports, reports in t.TempDir
	bad := gateNoReports(t, "gate-policy.yaml", "--label-filter", "head")
	want := `--label-filter "head" selects 1 check without their inputs: "relative head kv_cache_tokens >= 0.9 x base" needs config base; select those configs too (e.g. --label-filter '(head) || base') or pass --allow-partial to skip these checks`
	if bad.exit != 2 || !strings.Contains(bad.stderr, want) {
		t.Fatalf("exit %d, want 2 with %q\n%s", bad.exit, want, bad.stderr)
	}

	base := t.TempDir()
	r := exitGate(t, 0, "gate-policy.yaml", "--label-filter", "head", "--allow-partial", "--baselines", base)
	wantClosing(t, r, "PASS: 3 passed, 0 failed, 0 errors, 0 inconclusive, 1 no baseline, 1 skipped, 0 not run")
	rel := r.check(t, "relative head kv_cache_tokens >= 0.9 x base")
	if rel.Status != gate.StatusSkipped || rel.Outcome != gate.OutcomePartial || !strings.Contains(rel.Message, `--label-filter "head" left out config base`) {
		t.Errorf("partial check: %+v", rel)
	}
	summary, _ := os.ReadFile(filepath.Join(r.out, "summary.md"))
	if top := string(summary[:min(len(summary), 1200)]); !strings.Contains(top, "decided nothing") || !strings.Contains(top, "relative head kv_cache_tokens") {
		t.Errorf("summary.md does not say at the top what was not judged:\n%s", top)
	}

	// --strict: a check skipped for a missing input (and the missing baseline) fail the run.
	strict := exitGate(t, 1, "gate-policy.yaml", "--label-filter", "head", "--allow-partial", "--strict", "--baselines", base)
	wantClosing(t, strict, "FAIL: 3 passed, 2 failed, 0 errors, 0 inconclusive, 0 no baseline, 0 skipped, 0 not run")
	if c := strict.check(t, "relative head kv_cache_tokens >= 0.9 x base"); c.Status != gate.StatusFailed || !strings.Contains(c.Message, "fails under --strict") {
		t.Errorf("strict partial check: %+v", c)
	}
}

func TestStrictFailsNoBaselineAndInconclusive(t *testing.T) {
	t.Parallel() // a gate run of its own: engines on free ports, reports in t.TempDir
	base := t.TempDir()
	// No stored baseline: its own count, green without --strict, red with it.
	nb := exitGate(t, 0, "gate-policy.yaml", "--baselines", base)
	wantClosing(t, nb, "PASS: 6 passed, 0 failed, 0 errors, 0 inconclusive, 1 no baseline, 0 skipped, 0 not run")
	nbs := exitGate(t, 1, "gate-policy.yaml", "--baselines", base, "--strict")
	wantClosing(t, nbs, "FAIL: 6 passed, 1 failed, 0 errors, 0 inconclusive, 0 no baseline, 0 skipped, 0 not run")

	// A baseline the trials cannot decide against: half its samples far below any throughput the
	// engine reaches, half far above, so the test is neither significant nor inside the no-change
	// margin, whatever this machine measures.
	rec := exec.Command(filepath.Join(repoRoot, "bin", "reckon"), "baseline", "record", "--from", filepath.Join(nb.out, "results.json"), "--dir", base)
	rec.Dir = repoRoot
	if out, err := rec.CombinedOutput(); err != nil {
		t.Fatalf("baseline record: %v\n%s", err, out)
	}
	file := filepath.Join(base, nb.results.TestbedKey, "gate-policy.json")
	spread(t, file, "head", "decode", "output_throughput", []float64{1, 1e9, 1, 1e9, 1, 1e9})

	inc := exitGate(t, 0, "gate-policy.yaml", "--baselines", base)
	wantClosing(t, inc, "PASS: 6 passed, 0 failed, 0 errors, 1 inconclusive, 0 no baseline, 0 skipped, 0 not run")
	c := inc.check(t, "throughput head decode output_throughput vs baseline")
	if c.Status != gate.StatusSkipped || c.Outcome != "inconclusive" {
		t.Fatalf("inconclusive check: %+v", c)
	}
	summary, _ := os.ReadFile(filepath.Join(inc.out, "summary.md"))
	html, _ := os.ReadFile(filepath.Join(inc.out, "report.html"))
	if top := string(summary[:min(len(summary), 1200)]); !strings.Contains(top, "1 inconclusive") || !strings.Contains(top, "decided nothing") || !strings.Contains(top, c.Name) {
		t.Errorf("summary.md does not name the inconclusive check at the top:\n%s", top)
	}
	if !strings.Contains(string(html), "<b>1</b> inconclusive") || !strings.Contains(string(html), "decided nothing") {
		t.Errorf("report.html does not show the inconclusive count and check")
	}
	incs := exitGate(t, 1, "gate-policy.yaml", "--baselines", base, "--strict")
	wantClosing(t, incs, "FAIL: 6 passed, 1 failed, 0 errors, 0 inconclusive, 0 no baseline, 0 skipped, 0 not run")
	if c := incs.check(t, c.Name); c.Status != gate.StatusFailed || c.Outcome != "inconclusive" {
		t.Errorf("strict inconclusive: %+v", c)
	}
}

// spread replaces one metric's samples in a stored baseline file.
func spread(t *testing.T, file, config, workload, metric string, samples []float64) {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	done := false
	for _, c := range doc["configs"].([]any) {
		c := c.(map[string]any)
		if c["name"] != config {
			continue
		}
		for _, w := range c["workloads"].([]any) {
			w := w.(map[string]any)
			if w["name"] != workload {
				continue
			}
			m := w["metrics"].(map[string]any)[metric].(map[string]any)
			m["samples"] = samples
			m["median"] = (samples[0] + samples[1]) / 2
			done = true
		}
	}
	if !done {
		t.Fatalf("%s has no %s/%s/%s", file, config, workload, metric)
	}
	out, _ := json.MarshalIndent(doc, "", "  ")
	if err := os.WriteFile(file, out, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestTimeoutFailsClosed(t *testing.T) {
	t.Parallel() // a gate run of its own: engines on free ports, reports in t.TempDir
	neg := gateNoReports(t, "gate-policy.yaml", "--timeout", "-5s")
	if neg.exit != 2 || !strings.Contains(neg.stderr, "--timeout -5s: expected a positive duration") {
		t.Fatalf("--timeout -5s: exit %d\n%s", neg.exit, neg.stderr)
	}

	// timeout.yaml's first config measures for about half a minute; the run is stopped during it.
	r := exitGate(t, 1, "timeout.yaml", "--timeout", "3s")
	wantClosing(t, r, "INTERRUPTED: 1 passed, 0 failed, 2 errors, 0 inconclusive, 0 no baseline, 0 skipped, 6 not run (interrupted: --timeout 3s elapsed)")
	if !r.results.Interrupted || r.results.InterruptReason != "--timeout 3s elapsed" {
		t.Errorf("results.json: interrupted %v reason %q", r.results.Interrupted, r.results.InterruptReason)
	}
	// Every check the spec selects is in the results: judged, or listed as not run.
	n := r.results.Count()
	if n.NotRun == 0 || n.Passed+n.Failed+n.Errors+n.NotRun+n.Skipped+n.Inconclusive+n.NoBaseline != n.Total {
		t.Errorf("counts %+v", n)
	}
	// timeout.yaml defines 8 checks: per config launch, trials, engine log; two cross-config.
	if len(r.results.Checks) != 8 {
		t.Errorf("results list %d checks; timeout.yaml defines 8", len(r.results.Checks))
	}
	for _, c := range r.results.Checks {
		if c.Outcome == gate.OutcomeNotRun && (c.Status != gate.StatusSkipped || c.Message != "not run: --timeout 3s elapsed") {
			t.Errorf("not-run check: %+v", c)
		}
	}
	if r.junit.Tests != n.Total || r.junit.Errors == 0 {
		t.Errorf("junit: tests=%d errors=%d; want %d tests and the interruption as an error", r.junit.Tests, r.junit.Errors, n.Total)
	}
	rec := exec.Command(filepath.Join(repoRoot, "bin", "reckon"), "baseline", "record", "--from", filepath.Join(r.out, "results.json"), "--dir", t.TempDir())
	rec.Dir = repoRoot
	if out, err := rec.CombinedOutput(); err == nil || !strings.Contains(string(out), "interrupted") {
		t.Errorf("baseline record accepted the timed-out run: %v\n%s", err, out)
	}
}
