package reporters

import (
	"bytes"
	"encoding/xml"
	"github.com/reckon-ci/reckon/spec"
	"html"
	"strings"
	"testing"

	"github.com/reckon-ci/reckon/gate"
)

// eagleFix is the end of the message of an EAGLE-3 probe that met SGLang's spec v2 logprob
// truncation (workload/probe_evidence.go): the part the user acts on.
const eagleFix = "launch with SGLANG_ENABLE_SPEC_V2=0 or a release that fixed it"

// eagleRun is a run whose failed check has a long message that ends with the fix.
func eagleRun() *gate.Run {
	r := sampleRun()
	detail := strings.Repeat("token 17 logprob missing from the /generate answer of prompt 3; ", 12)
	msg := "eagle3: logprob probe could not compare: /generate returned logprobs for 1 of 64 generated tokens (" +
		strings.TrimSuffix(detail, "; ") + "): known cause: SGLang speculative decoding v2 returns logprobs for the first output token only (sgl-project/sglang#14046); " + eagleFix
	r.Checks = append(r.Checks, gate.Check{Verdict: gate.Verdict{Name: "logprob probe", Kind: string(spec.KindEquivalence), Config: "eagle3", Outcome: "fail", Message: msg}, Status: gate.StatusFailed})
	return r
}

// TestFitMessageKeepsTheFix: a message too long for its place loses the middle of its detail,
// never its last clause; the old cut (oneLine) lost the fix, which is why this exists.
func TestFitMessageKeepsTheFix(t *testing.T) {
	msg := eagleRun().Checks[len(eagleRun().Checks)-1].Message
	for _, n := range []int{120, 200, 300, 400, 500} {
		got := fitMessage(msg, n)
		if !strings.HasSuffix(got, eagleFix) {
			t.Errorf("fitMessage(%d) lost the fix: %q", n, got)
		}
		if !strings.HasPrefix(got, "eagle3: logprob probe") || !strings.Contains(got, " … ") {
			t.Errorf("fitMessage(%d) = %q: want the head, a marked cut and the tail", n, got)
		}
		if n >= 300 && !strings.Contains(got, "known cause: SGLang speculative decoding v2") {
			t.Errorf("fitMessage(%d) = %q: want the whole known cause, it fits", n, got)
		}
		if l := len([]rune(got)); l > n+len(eagleFix) {
			t.Errorf("fitMessage(%d) is %d runes long", n, l)
		}
		if strings.HasSuffix(oneLine(msg, n), eagleFix) {
			t.Errorf("oneLine(%d) kept the fix: the fault this test guards against is gone from the fixture", n)
		}
	}
	if got := fitMessage("short; fine", 300); got != "short; fine" {
		t.Errorf("a short message changed: %q", got)
	}
	// Engine text with no clause structure keeps head and tail, bounded.
	long := strings.Repeat("x", 5000)
	if got := fitMessage(long, 300); len([]rune(got)) > 300 {
		t.Errorf("unstructured text not bounded: %d runes", len([]rune(got)))
	}
}

// TestEveryReportKeepsTheFix: the terminal summary, summary.md (its failure list and its check
// tables), report.html and junit.xml each show the EAGLE-3 fix whole.
func TestEveryReportKeepsTheFix(t *testing.T) {
	r := eagleRun()
	var term, md, page, ju bytes.Buffer
	if err := WriteTerminal(&term, r, TerminalOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := WriteMarkdown(&md, r); err != nil {
		t.Fatal(err)
	}
	if err := WriteHTML(&page, r); err != nil {
		t.Fatal(err)
	}
	if err := WriteJUnit(&ju, r); err != nil {
		t.Fatal(err)
	}
	// The terminal wraps long lines; the fix must be there once the wrapping is undone.
	if got := strings.Join(strings.Fields(term.String()), " "); !strings.Contains(got, eagleFix) {
		t.Errorf("terminal summary cut the fix:\n%s", term.String())
	}
	for _, l := range strings.Split(term.String(), "\n") {
		if n := len([]rune(l)); n > termWrapCols+20 {
			t.Errorf("terminal line of %d runes (wraps at %d): %q", n, termWrapCols, l)
		}
	}
	mdFix := sanitizeForMD(eagleFix)
	if n := strings.Count(md.String(), mdFix); n < 2 {
		t.Errorf("summary.md shows the fix %d times, want the failure list and the check table:\n%s", n, md.String())
	}
	if !strings.Contains(html.UnescapeString(page.String()), eagleFix) {
		t.Errorf("report.html cut the fix")
	}
	var doc struct {
		Suites []struct {
			Cases []struct {
				Failure *struct {
					Message string `xml:"message,attr"`
				} `xml:"failure"`
			} `xml:"testcase"`
		} `xml:"testsuite"`
	}
	if err := xml.Unmarshal(ju.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, s := range doc.Suites {
		for _, c := range s.Cases {
			if c.Failure != nil && strings.HasSuffix(c.Failure.Message, eagleFix) {
				found = true
			}
		}
	}
	if !found {
		t.Errorf("junit.xml: no failure message ends with the fix")
	}
}

// sanitizeForMD is the fix as summary.md escapes it.
func sanitizeForMD(s string) string { return mdEscape(s) }
