package reporters

import (
	"bytes"
	"strconv"
	"strings"
	"testing"

	"github.com/reckon-ci/reckon/gate"
)

// TestVerdictAndCounts: one verdict and one tally for the closing line, summary.md and
// report.html; a run is green only when something passed and nothing failed, errored or was cut
// short.
func TestVerdictAndCounts(t *testing.T) {
	pass := gate.Check{Verdict: gate.Verdict{Name: "p", Outcome: "pass"}, Status: gate.StatusPassed}
	fail := gate.Check{Verdict: gate.Verdict{Name: "f", Outcome: "fail"}, Status: gate.StatusFailed}
	infra := gate.Check{Verdict: gate.Verdict{Name: "e", Outcome: "error"}, Status: gate.StatusError}
	inc := gate.Check{Verdict: gate.Verdict{Name: "i", Outcome: "inconclusive", Message: "i: inconclusive"}, Status: gate.StatusSkipped}
	nob := gate.Check{Verdict: gate.Verdict{Name: "n", Outcome: "no_baseline"}, Status: gate.StatusSkipped}
	part := gate.Check{Verdict: gate.Verdict{Name: "q", Outcome: gate.OutcomePartial}, Status: gate.StatusSkipped}
	notRun := gate.Check{Verdict: gate.Verdict{Name: "r", Outcome: gate.OutcomeNotRun}, Status: gate.StatusSkipped}
	strictInc := gate.Check{Verdict: gate.Verdict{Name: "s", Outcome: "inconclusive"}, Status: gate.StatusFailed}
	for _, tc := range []struct {
		name        string
		run         gate.Run
		verdict     string
		green       bool
		counts      string
		headline    string
		undecidedMD bool
	}{
		{"every check passed", gate.Run{Checks: []gate.Check{pass, pass}}, gate.RunPass, true,
			"2 passed, 0 failed, 0 errors, 0 inconclusive, 0 no baseline, 0 skipped, 0 not run", "## ✅ PASS", false},
		{"a failure", gate.Run{Checks: []gate.Check{pass, fail, infra}}, gate.RunFail, false,
			"1 passed, 1 failed, 1 error, 0 inconclusive, 0 no baseline, 0 skipped, 0 not run", "## ❌ FAIL:", false},
		{"infrastructure only", gate.Run{Checks: []gate.Check{pass, infra}}, gate.RunInfra, false,
			"1 passed, 0 failed, 1 error, 0 inconclusive, 0 no baseline, 0 skipped, 0 not run", "## 💥 FAIL (infrastructure errors)", false},
		{"nothing judged", gate.Run{}, gate.RunNothing, false,
			"0 passed, 0 failed, 0 errors, 0 inconclusive, 0 no baseline, 0 skipped, 0 not run", "## ❌ FAIL (nothing verified)", false},
		{"only skipped", gate.Run{Checks: []gate.Check{part}}, gate.RunNothing, false,
			"0 passed, 0 failed, 0 errors, 0 inconclusive, 0 no baseline, 1 skipped, 0 not run", "## ❌ FAIL (nothing verified)", true},
		{"undecided checks count apart and are named", gate.Run{Checks: []gate.Check{pass, inc, nob, part}}, gate.RunPass, true,
			"1 passed, 0 failed, 0 errors, 1 inconclusive, 1 no baseline, 1 skipped, 0 not run", "## ✅ PASS", true},
		{"strict: inconclusive is a failure", gate.Run{Strict: true, Checks: []gate.Check{pass, strictInc}}, gate.RunFail, false,
			"1 passed, 1 failed, 0 errors, 0 inconclusive, 0 no baseline, 0 skipped, 0 not run", "## ❌ FAIL", false},
		{"interrupted", gate.Run{Interrupted: true, InterruptReason: "--timeout 3s elapsed", Checks: []gate.Check{pass, notRun}}, gate.RunInterrupted, false,
			"1 passed, 0 failed, 1 error, 0 inconclusive, 0 no baseline, 0 skipped, 1 not run", "## ⚠️ INTERRUPTED", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.run
			r.SpecName = "s"
			if got := r.Verdict(); got != tc.verdict {
				t.Errorf("verdict %q, want %q", got, tc.verdict)
			}
			if r.Green() != tc.green {
				t.Errorf("green %v, want %v", r.Green(), tc.green)
			}
			if got := r.Count().String(); got != tc.counts {
				t.Errorf("counts %q, want %q", got, tc.counts)
			}
			var md bytes.Buffer
			if err := WriteMarkdown(&md, &r); err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(md.String(), tc.headline) || !strings.Contains(md.String(), "**"+tc.counts+"**") {
				t.Errorf("summary.md headline:\n%s", md.String()[:min(md.Len(), 600)])
			}
			if got := strings.Contains(md.String(), "decided nothing"); got != tc.undecidedMD {
				t.Errorf("summary.md lists undecided checks: %v, want %v", got, tc.undecidedMD)
			}
			var html bytes.Buffer
			if err := WriteHTML(&html, &r); err != nil {
				t.Fatal(err)
			}
			if n := r.Count(); !strings.Contains(html.String(), "<b>"+strconv.Itoa(n.Inconclusive)+"</b> inconclusive") || !strings.Contains(html.String(), "<b>"+strconv.Itoa(n.NotRun)+"</b> not run") {
				t.Errorf("report.html lacks the counts")
			}
		})
	}
}

// TestProvenanceInEveryReport: the commit under test, the engine's version and reckon's version
// appear in summary.md, report.html and junit.xml's properties.
func TestProvenanceInEveryReport(t *testing.T) {
	r := &gate.Run{SpecName: "s", GitCommit: "0123456789abcdef0123", GitCommitSource: "GITHUB_SHA", EngineVersion: "sglang 0.5.1", ReckonVersion: "v1.2.3",
		Configs: []gate.Config{{Name: "a", EngineVersion: "sglang 0.5.1"}}, Checks: []gate.Check{{Verdict: gate.Verdict{Name: "p", Config: "a"}, Status: gate.StatusPassed}}}
	var md, html, junit bytes.Buffer
	if err := WriteMarkdown(&md, r); err != nil {
		t.Fatal(err)
	}
	if err := WriteHTML(&html, r); err != nil {
		t.Fatal(err)
	}
	if err := WriteJUnit(&junit, r); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string][]string{
		"summary.md":  {"commit 0123456789ab", "engine sglang 0.5.1", "reckon v1.2.3"},
		"report.html": {"0123456789abcdef0123 (GITHUB_SHA)", "sglang 0.5.1", "v1.2.3"},
		"junit.xml":   {`name="git_commit" value="0123456789abcdef0123"`, `name="git_commit_source" value="GITHUB_SHA"`, `name="engine_version" value="sglang 0.5.1"`, `name="reckon_version" value="v1.2.3"`},
	} {
		got := map[string]string{"summary.md": md.String(), "report.html": html.String(), "junit.xml": junit.String()}[name]
		for _, w := range want {
			if !strings.Contains(got, w) {
				t.Errorf("%s lacks %q", name, w)
			}
		}
	}
}
