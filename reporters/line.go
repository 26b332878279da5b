package reporters

import (
	"strings"

	"github.com/reckon-ci/reckon/gate"
)

// A judged check's one line of words is written in one place: Sentence composes it (when the
// suites record the check, and again, idempotently, for a check read back from results), and
// Line is what every report prints (JUnit's message, Markdown, HTML, the terminal), shortened by
// FitMessage, which never cuts the last clause, where the fix or the next step is.

// Sentence is the one line of words of a judged check: its config first ("custom-ar: ..."
// unless the message already starts with it; the judge's own "NAME: " prefix dropped), the verdict's message, the run-policy flag that alone
// failed it ("(fails under --strict)"; flag "" when none), and the first clause of its
// explanation when the message does not already carry it ("...; KV cache -91% (10.42 -> 0.90
// GiB)"). Each part is added only when absent, so Sentence of a sentence is itself.
func Sentence(c gate.Check, flag string) string {
	msg := strings.TrimSpace(strings.TrimPrefix(c.Message, c.Name+": "))
	if c.Config != "" && msg != "" && !namesFirst(msg, c.Config) && !namesFirst(c.Message, c.Config) {
		msg = c.Config + ": " + msg
	}
	if msg == "" {
		msg = strings.TrimSpace(c.Message)
	}
	if flag != "" && !strings.Contains(msg, "(fails under "+flag+")") {
		msg = strings.TrimSpace(msg + " (fails under " + flag + ")")
	}
	if first, _, _ := strings.Cut(c.Explanation, "; "); first != "" && !strings.Contains(msg, first) {
		msg += "; " + first
	}
	return msg
}

// namesFirst reports whether msg already starts with config ("custom-ar: ...", "pr vs main: ...").
func namesFirst(msg, config string) bool {
	return strings.HasPrefix(msg, config+": ") || strings.HasPrefix(msg, config+" ")
}

// Line is c's one line as a report prints it, in about maxRunes runes (FitMessage: the fix kept
// whole): the one function from a judged check to its words that JUnit, Markdown, HTML and the
// terminal use.
func Line(c *gate.Check, maxRunes int) string { return fitMessage(Sentence(*c, ""), maxRunes) }
