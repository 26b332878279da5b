package reporters

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/reckon-ci/reckon/gate"
)

// TerminalOptions say how WriteTerminal renders.
type TerminalOptions struct {
	// Color adds ANSI colours (set it only when the output is a terminal and NO_COLOR is unset).
	Color bool
	// MaxFailures bounds the failures listed (the rest are counted); 0 means 20.
	MaxFailures int
}

// Per-item limits of the terminal report.
const (
	termLineRunes   = 300
	termWrapCols    = 100 // a verdict's message, why and next step wrap here instead of being cut
	termDefaultFail = 20
	termUndecided   = 12
)

// WriteTerminal writes the report a person reads in a terminal after reckon gate or reckon
// merge: plain text (no Markdown or HTML), coloured only when opts.Color is set. It leads with
// the verdict and counts, then the failures and errors with their one-line reasons and
// explanations, then the undecided checks with what would decide them (NextStep), then a compact
// table of the configs. The closing line (verdict and every count) is the command's own.
func WriteTerminal(w io.Writer, r *gate.Run, opts TerminalOptions) error {
	if r == nil {
		return fmt.Errorf("write terminal report: nil run")
	}
	if _, err := io.WriteString(w, renderTerminal(r, opts)); err != nil {
		return fmt.Errorf("write terminal report: %w", err)
	}
	return nil
}

// termText is the one place engine and spec text enters the terminal report: cleaned of escape
// sequences and control characters and folded onto one line of at most maxRunes runes.
func termText(s string, maxRunes int) string { return oneLine(s, maxRunes) }

// ANSI styles of the terminal report.
const (
	ansiReset  = "\x1b[0m"
	ansiBold   = "\x1b[1m"
	ansiDim    = "\x1b[2m"
	ansiRed    = "\x1b[31m"
	ansiGreen  = "\x1b[32m"
	ansiYellow = "\x1b[33m"
)

type termWriter struct {
	b     strings.Builder
	color bool
}

// style wraps s in an ANSI style when colour is on.
func (t *termWriter) style(code, s string) string {
	if !t.color || s == "" {
		return s
	}
	return code + s + ansiReset
}

func (t *termWriter) line(format string, args ...any) {
	fmt.Fprintf(&t.b, format, args...)
	t.b.WriteByte('\n')
}

// wrapped writes label+text indented by indent, wrapped at termWrapCols columns on spaces (a
// word longer than a line stays whole); continuation lines are indented under the text. Nothing
// is cut: the caller has already shortened text with fitMessage, which keeps the fix.
func (t *termWriter) wrapped(indent, label, text string) {
	if text == "" {
		return
	}
	for _, l := range wrapWords(text, termWrapCols-len(indent)-len(label)) {
		t.line("%s%s%s", indent, label, l)
		label = strings.Repeat(" ", len(label))
	}
}

// wrapWords splits text into lines of at most width runes at spaces.
func wrapWords(text string, width int) []string {
	width = max(width, 20)
	var lines []string
	cur := ""
	for _, w := range strings.Fields(text) {
		switch {
		case cur == "":
			cur = w
		case utf8.RuneCountInString(cur)+1+utf8.RuneCountInString(w) <= width:
			cur += " " + w
		default:
			lines = append(lines, cur)
			cur = w
		}
	}
	if cur != "" {
		lines = append(lines, cur)
	}
	return lines
}

func renderTerminal(r *gate.Run, opts TerminalOptions) string {
	t := &termWriter{color: opts.Color}
	maxFail := opts.MaxFailures
	if maxFail <= 0 {
		maxFail = termDefaultFail
	}
	checks := r.EffectiveChecks()
	n := r.Count() // the one count: the closing line and every report use it
	termHeader(t, r, n)
	termFailures(t, r, checks, maxFail)
	termUndecidedChecks(t, r, checks)
	if tbl := termConfigTable(r, checks); tbl != "" {
		t.line("")
		t.line("%s", t.style(ansiBold, "Configs"))
		t.b.WriteString(tbl)
	}
	return t.b.String()
}

// termHeader writes the verdict and title line, the line of counts, testbed, duration,
// provenance and options, and a note when the run was interrupted.
func termHeader(t *termWriter, r *gate.Run, n gate.Counts) {
	verdict, vstyle := r.Verdict(), ansiRed
	if verdict == gate.RunPass {
		vstyle = ansiGreen
	} else if verdict == gate.RunInterrupted {
		vstyle = ansiYellow
	}
	title := "reckon gate on " + termText(r.SpecName, 120)
	if r.Engine != "" {
		title += " (" + termText(r.Engine, 40) + ")"
	}
	t.line("%s  %s", t.style(ansiBold+vstyle, verdict), t.style(ansiBold, title))
	var meta []string
	meta = append(meta, fmt.Sprintf("%d checks", n.Total))
	if r.TestbedKey != "" {
		meta = append(meta, "testbed "+termText(r.TestbedKey, 80))
	}
	if !r.StartedAt.IsZero() && r.FinishedAt.After(r.StartedAt) {
		meta = append(meta, fmtDuration(r.FinishedAt.Sub(r.StartedAt).Seconds()))
	}
	for _, p := range provenance(r) {
		meta = append(meta, p[0]+" "+termText(p[1], 60))
	}
	if r.Strict {
		meta = append(meta, "--strict")
	}
	if r.LabelFilter != "" {
		meta = append(meta, "filter "+termText(r.LabelFilter, 80))
	}
	if sh := shardLine(r); sh != "" {
		meta = append(meta, termText(sh, 120))
	}
	t.line("  %s", t.style(ansiDim, strings.Join(meta, " · ")))
	if r.Interrupted {
		why := ""
		if r.InterruptReason != "" {
			why = " (" + termText(r.InterruptReason, 200) + ")"
		}
		t.line("  %s", t.style(ansiYellow, fmt.Sprintf("interrupted%s: results are partial; %d selected checks were not run", why, n.NotRun)))
	}
}

// termFailures writes the failed and errored checks, at most maxFail of them.
func termFailures(t *termWriter, r *gate.Run, checks []gate.Check, maxFail int) {
	var bad []*gate.Check
	for i := range checks {
		if s := checks[i].EffectiveStatus(); s == gate.StatusFailed || s == gate.StatusError {
			bad = append(bad, &checks[i])
		}
	}
	if len(bad) == 0 {
		return
	}
	t.line("")
	t.line("%s", t.style(ansiBold, fmt.Sprintf("Failures (%d)", len(bad))))
	for i, c := range bad {
		if i == maxFail {
			t.line("  ... and %d more (summary.md, report.html)", len(bad)-i)
			break
		}
		termFailure(t, r, c)
	}
}

// termUndecidedChecks writes the checks that decided nothing (at most termUndecided of them),
// each with its message and next step.
func termUndecidedChecks(t *termWriter, r *gate.Run, checks []gate.Check) {
	und := gate.UndecidedChecks(checks)
	if len(und) == 0 {
		return
	}
	t.line("")
	t.line("%s", t.style(ansiBold, fmt.Sprintf("Undecided (%d): neither passed nor failed%s", len(und), map[bool]string{true: "; --strict fails them", false: ""}[!r.Strict])))
	for i, c := range und {
		if i == termUndecided {
			t.line("  ... and %d more", len(und)-i)
			break
		}
		where := c.Config
		if where == "" {
			where = CrossConfig
		}
		t.line("  %s %s · %s: %s", t.style(ansiYellow, "UNDECIDED"), termText(where, 60), termText(c.Name, 120), termText(outcomeText(c), 40))
		t.wrapped("      ", "", Line(c, 2*termLineRunes))
		if next := NextStep(c); next != "" {
			t.wrapped("      ", "next: ", fitMessage(next, 2*termLineRunes))
		}
	}
}

// termFailure is one failure: status, config, check and the one-line verdict, then why and, for
// an infrastructure error, the engine log's last line and where the whole log is.
func termFailure(t *termWriter, r *gate.Run, c *gate.Check) {
	tag := t.style(ansiRed+ansiBold, "FAIL ")
	if c.EffectiveStatus() == gate.StatusError {
		tag = t.style(ansiYellow+ansiBold, "ERROR")
		if c.EffectiveCategory() == gate.CategoryUnverified {
			tag = t.style(ansiRed+ansiBold, "UNVERIFIED")
		}
	}
	where := c.Config
	if where == "" {
		where = CrossConfig
	}
	msg := Line(c, 2*termLineRunes)
	if msg == "" {
		msg = termText(c.Kind, 40) + " check failed"
	}
	t.line("  %s %s · %s", tag, t.style(ansiBold, termText(where, 60)), termText(c.Name, 120))
	t.wrapped("      ", "", msg)
	if e := explanation(r, c); e != "" {
		t.wrapped("      ", "why: ", fitMessage(e, 2*termLineRunes))
	}
	if c.EffectiveStatus() == gate.StatusError {
		if cfg := r.ConfigNamed(c.Config); cfg != nil {
			if last := termText(lastLines(cleanText(cfg.LogTail), 1), termLineRunes); last != "" {
				t.line("      log: %s", last)
			}
			if cfg.LogPath != "" {
				t.line("      full log: %s", termText(cfg.LogPath, 200))
			}
		}
	}
}

// termConfigTable is one row per config: launches, allreduce, KV cache, median output throughput
// (as the verdicts compute it) and its checks' tally.
func termConfigTable(r *gate.Run, checks []gate.Check) string {
	if len(r.Configs) == 0 {
		return ""
	}
	rows := [][]string{{"config", "launches", "allreduce", "KV tokens", "KV GiB", "output tok/s", "checks"}}
	right := []bool{false, true, false, true, true, true, false}
	tally := map[string]*gate.Counts{}
	for i := range checks {
		c := &checks[i]
		if tally[c.Config] == nil {
			tally[c.Config] = &gate.Counts{}
		}
		one := gate.CountChecks([]gate.Check{*c})
		add(tally[c.Config], one)
	}
	for i := range r.Configs {
		c := &r.Configs[i]
		name := termText(c.Name, 40)
		if c.LaunchError != "" {
			name += " (did not start)"
		}
		tput := strings.Join(throughputTexts(r, c), "; ")
		rows = append(rows, []string{
			name, strconv.Itoa(c.Launches), orDash(termText(str(c.Engine, keyAllreduce), 20)),
			orDash(trimDash(mdNum(c.Engine, keyKVTokens))), orDash(trimDash(mdNum(c.Engine, keyKVGiB))),
			orDash(termText(tput, 80)), tallyText(tally[c.Name]),
		})
	}
	if ct := tally[""]; ct != nil {
		rows = append(rows, []string{CrossConfig, "", "", "", "", "", tallyText(ct)})
	}
	widths := make([]int, len(rows[0]))
	for _, row := range rows {
		for j, cell := range row {
			widths[j] = max(widths[j], utf8.RuneCountInString(cell))
		}
	}
	var b strings.Builder
	for _, row := range rows {
		b.WriteString(" ")
		for j, cell := range row {
			pad := strings.Repeat(" ", widths[j]-utf8.RuneCountInString(cell))
			b.WriteString(" ")
			if right[j] {
				b.WriteString(pad + cell)
			} else if j < len(row)-1 {
				b.WriteString(cell + pad)
			} else {
				b.WriteString(cell)
			}
			b.WriteString(" ")
		}
		b.WriteString("\n")
	}
	out := b.String()
	lines := strings.Split(out, "\n")
	for i := range lines {
		lines[i] = strings.TrimRight(lines[i], " ")
	}
	return strings.Join(lines, "\n")
}

// trimDash turns mdNum's "–" for a missing value into "".
func trimDash(s string) string {
	if s == "–" {
		return ""
	}
	return s
}

func add(dst *gate.Counts, c gate.Counts) {
	dst.Total += c.Total
	dst.Passed += c.Passed
	dst.Failed += c.Failed
	dst.Errors += c.Errors
	dst.Inconclusive += c.Inconclusive
	dst.NoBaseline += c.NoBaseline
	dst.Skipped += c.Skipped
	dst.NotRun += c.NotRun
}

// tallyText is a config's checks in a few words, e.g. "3 passed, 1 failed, 1 undecided".
func tallyText(c *gate.Counts) string {
	if c == nil || c.Total == 0 {
		return "-"
	}
	var parts []string
	put := func(n int, what string) {
		if n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, what))
		}
	}
	put(c.Passed, "passed")
	put(c.Failed, "failed")
	put(c.Errors, map[bool]string{true: "error", false: "errors"}[c.Errors == 1])
	put(c.Unverified, "unverified")
	put(c.Inconclusive+c.NoBaseline, "undecided")
	put(c.Skipped, "skipped")
	put(c.NotRun, "not run")
	return strings.Join(parts, ", ")
}
