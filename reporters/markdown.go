package reporters

import (
	"fmt"
	"github.com/reckon-ci/reckon/spec"
	"io"
	"strconv"
	"strings"

	"github.com/reckon-ci/reckon/gate"
	"github.com/reckon-ci/reckon/internal/num"
	"github.com/reckon-ci/reckon/internal/sanitize"
)

// MaxMarkdownBytes is the default size limit of summary.md. GitHub accepts 1 MiB in a job summary
// but only 65536 characters in a PR comment; the summary stays under both, cutting the least
// important sections first and saying what was cut.
const MaxMarkdownBytes = 60000

// Per-item limits inside the Markdown summary.
const (
	mdLogLines   = 30
	mdLogBytes   = 4096
	mdCellRunes  = 300
	mdVerdictLen = 400
)

// WriteMarkdown writes the Markdown summary of r (at most MaxMarkdownBytes): a headline with the
// verdict and counts, the failures and errors first (one line each, with the explanation and, for
// infrastructure errors, the engine log tail), then a table of the configs (KV cache, memory
// plan, throughput), one table of checks per config (verdicts, throughput vs baseline with its
// CI, equivalence), and the cross-config checks.
func WriteMarkdown(w io.Writer, r *gate.Run) error {
	return WriteMarkdownLimit(w, r, MaxMarkdownBytes)
}

// WriteMarkdownLimit is WriteMarkdown with an explicit size limit in bytes.
func WriteMarkdownLimit(w io.Writer, r *gate.Run, maxBytes int) error {
	if r == nil {
		return fmt.Errorf("write Markdown: nil run")
	}
	if _, err := io.WriteString(w, renderMarkdown(r, maxBytes)); err != nil {
		return fmt.Errorf("write Markdown: %w", err)
	}
	return nil
}

func renderMarkdown(r *gate.Run, maxBytes int) string {
	checks := r.EffectiveChecks()
	n := r.Count() // the one count: the closing line and every report use it
	var head strings.Builder
	mdHeadline(&head, r, n)
	mdWarnings(&head, r, checks, n)
	blocks := mdBlocks(r, checks)
	footer := "\n<sub>Details: junit.xml, results.json and report.html in the job's artifacts.</sub>\n"

	var out strings.Builder
	out.WriteString(head.String())
	for i, b := range blocks {
		if out.Len()+len(b)+len(footer)+200 > maxBytes {
			fmt.Fprintf(&out, "\n_Summary truncated to fit %d bytes: %d more sections are in report.html and junit.xml._\n", maxBytes, len(blocks)-i)
			break
		}
		out.WriteString(b)
	}
	out.WriteString(footer)
	s := out.String()
	if len(s) > maxBytes { // a headline longer than the limit: cut hard
		s = clip(s, maxBytes-64)
	}
	return s
}

// mdVerdict is the run's verdict as the summary's headline shows it.
func mdVerdict(r *gate.Run) string {
	switch r.Verdict() {
	case gate.RunInterrupted:
		return "⚠️ INTERRUPTED (partial results)"
	case gate.RunFail:
		return "❌ FAIL"
	case gate.RunUnverified:
		return "❓ FAIL (unverified checks)"
	case gate.RunInfra:
		return "💥 FAIL (infrastructure errors)"
	case gate.RunNothing:
		return "❌ FAIL (nothing verified)"
	}
	return "✅ PASS"
}

// mdHeadline writes the summary's heading (verdict, spec, engine) and its line of counts,
// options, testbed, duration, provenance and shard.
func mdHeadline(head *strings.Builder, r *gate.Run, n gate.Counts) {
	fmt.Fprintf(head, "## %s: reckon gate on `%s`", mdVerdict(r), mdCodeText(r.SpecName))
	if r.Engine != "" {
		fmt.Fprintf(head, " (%s)", mdEscape(r.Engine))
	}
	head.WriteString("\n\n")
	fmt.Fprintf(head, "**%s** of %d checks", n.String(), n.Total)
	if r.Strict {
		head.WriteString(" · `--strict`")
	}
	if r.LabelFilter != "" {
		fmt.Fprintf(head, " · filter `%s`", mdCodeText(r.LabelFilter))
	}
	if r.TestbedKey != "" {
		fmt.Fprintf(head, " · testbed `%s`", mdCodeText(r.TestbedKey))
	}
	if !r.StartedAt.IsZero() && r.FinishedAt.After(r.StartedAt) {
		fmt.Fprintf(head, " · %s", fmtDuration(r.FinishedAt.Sub(r.StartedAt).Seconds()))
	}
	for _, p := range provenance(r) {
		fmt.Fprintf(head, " · %s %s", p[0], mdEscape(p[1]))
	}
	if sh := shardLine(r); sh != "" {
		fmt.Fprintf(head, " · %s", mdEscape(sh))
	}
	head.WriteString("\n\n")
}

// mdWarnings writes the alerts under the headline: an interrupted run, and the checks that
// decided nothing (at most eight, each with its next step).
func mdWarnings(head *strings.Builder, r *gate.Run, checks []gate.Check, n gate.Counts) {
	if r.Interrupted {
		why := ""
		if r.InterruptReason != "" {
			why = " (" + mdEscape(oneLine(r.InterruptReason, mdVerdictLen)) + ")"
		}
		fmt.Fprintf(head, "> [!WARNING]\n> The run was interrupted%s before every check ran: these results are partial; %d selected checks were not run.\n\n", why, n.NotRun)
	}
	und := gate.UndecidedChecks(checks)
	if len(und) == 0 {
		return
	}
	fmt.Fprintf(head, "> [!WARNING]\n> %s decided nothing and %s not count as passed or failed (`--strict` fails them):\n", plural(len(und), "check"), map[bool]string{true: "does", false: "do"}[len(und) == 1])
	for i, c := range und {
		if i == 8 {
			fmt.Fprintf(head, "> - ... and %d more\n", len(und)-i)
			break
		}
		next := ""
		if n := NextStep(c); n != "" {
			next = " Next step: " + mdEscape(fitMessage(n, mdVerdictLen))
		}
		fmt.Fprintf(head, "> - `%s` (%s): %s.%s\n", mdCodeText(c.Name), mdEscape(outcomeText(c)), mdEscape(strings.TrimSuffix(Line(c, mdVerdictLen), ".")), next)
	}
	head.WriteString("\n")
}

// mdBlocks returns the summary's sections in priority order (failures, the config table, the
// launch order, a table per suite group), for the caller to cut from the end when over the limit.
func mdBlocks(r *gate.Run, checks []gate.Check) []string {
	var blocks []string
	var bad []*gate.Check
	for i := range checks {
		if s := checks[i].EffectiveStatus(); s == gate.StatusFailed || s == gate.StatusError {
			bad = append(bad, &checks[i])
		}
	}
	if len(bad) > 0 {
		blocks = append(blocks, "### Failures\n\n")
		for _, c := range bad {
			blocks = append(blocks, mdFailure(r, c))
		}
		blocks = append(blocks, "\n")
	}
	if t := mdConfigTable(r, checks); t != "" {
		blocks = append(blocks, t)
	}
	if order := launchOrderLine(r); order != "" {
		blocks = append(blocks, "### Launch order\n\n"+mdEscape(order)+"\n\n")
	}
	for _, g := range groupChecks(r, checks) {
		if len(g.checks) == 0 {
			continue
		}
		blocks = append(blocks, mdCheckTable(r, g))
	}
	return blocks
}

// mdFailure is one failure's bullet: the verdict, the explanation, and for an error its
// category (infrastructure, measurement, unverified) and the engine log tail.
func mdFailure(r *gate.Run, c *gate.Check) string {
	var b strings.Builder
	icon, what := "❌", ""
	if c.EffectiveStatus() == gate.StatusError {
		icon, what = "💥", " ("+errorLabel(c)+")"
		if c.EffectiveCategory() == gate.CategoryUnverified {
			icon = "❓"
		}
	}
	where := c.Config
	if where == "" {
		where = CrossConfig
	}
	msg := Line(c, mdVerdictLen)
	if msg == "" {
		msg = c.Kind + " check failed"
	}
	fmt.Fprintf(&b, "- %s **%s** · `%s`%s: %s\n", icon, mdEscape(where), mdCodeText(c.Name), what, mdEscape(msg))
	if e := explanation(r, c); e != "" {
		fmt.Fprintf(&b, "  - %s\n", mdEscape(fitMessage(e, 2*mdVerdictLen)))
	}
	if c.EffectiveStatus() == gate.StatusError {
		tail := ""
		if cfg := r.ConfigNamed(c.Config); cfg != nil && cfg.LogTail != "" {
			tail = cfg.LogTail
		} else if strings.Contains(c.Details, "\n") {
			tail = c.Details
		}
		if tail != "" {
			tail = clip(lastLines(sanitize.MarkdownCode(tail), mdLogLines), mdLogBytes)
			fence := mdFence(tail)
			fmt.Fprintf(&b, "  <details><summary>engine log tail</summary>\n\n  %stext\n%s\n  %s\n  </details>\n", fence, indent(tail, "  "), fence)
		}
	}
	return b.String()
}

// mdConfigTable is the overview: one row per config with its KV cache, memory plan and throughput.
func mdConfigTable(r *gate.Run, checks []gate.Check) string {
	if len(r.Configs) == 0 {
		return ""
	}
	engines := make([]map[string]any, len(r.Configs))
	for i := range r.Configs {
		engines[i] = r.Configs[i].Engine
	}
	var extra []string
	for _, k := range memoryKeys(engines...) {
		if k != keyWeights && k != keyGraph && k != keyAvailable {
			extra = append(extra, k)
		}
	}
	var b strings.Builder
	b.WriteString("### Configs\n\n| config | launches | allreduce | KV tokens | KV GiB | weights GiB | CUDA graph GiB | free GiB |")
	for _, k := range extra {
		fmt.Fprintf(&b, " %s GiB |", mdEscape(memLabel(k)))
	}
	b.WriteString(" output tok/s (median) | peak GPU MiB | throughput vs comparison (CI) | equivalence |\n|---|---:|---|---:|---:|---:|---:|---:|")
	for range extra {
		b.WriteString("---:|")
	}
	b.WriteString("---:|---:|---|---|\n")
	sums := configSummaries(checks)
	for i := range r.Configs {
		c := &r.Configs[i]
		name := mdEscape(c.Name)
		if c.LaunchError != "" {
			name += " 💥"
		}
		launches := strconv.Itoa(c.Launches)
		if c.Launches > max(1, plannedLaunches(r, c.Name)) {
			launches += " ⚠️" // more launches than the spec asked for (workload launches): say so
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s |", name, launches, mdCell(str(c.Engine, keyAllreduce)),
			mdNum(c.Engine, keyKVTokens), mdNum(c.Engine, keyKVGiB), mdNum(c.Engine, keyWeights), mdNum(c.Engine, keyGraph), mdNum(c.Engine, keyAvailable))
		for _, k := range extra {
			fmt.Fprintf(&b, " %s |", mdNum(c.Engine, k))
		}
		var tps []string
		for _, t := range throughputTexts(r, c) {
			tps = append(tps, mdEscape(t))
		}
		tput := orDash(strings.Join(tps, "<br>"))
		peak := "–"
		if p := maxOf(c.GPUPeakMiB); p > 0 {
			peak = num.Format(p)
		}
		var vs, eq []string
		if sm := sums[c.Name]; sm != nil {
			for _, it := range sm.throughput {
				vs = append(vs, statusIcon(it.check)+" "+it.lead+mdEscape(it.name))
			}
			for _, it := range sm.equivalence {
				eq = append(eq, statusIcon(it.check)+" "+it.lead+mdEscape(it.name))
			}
		}
		fmt.Fprintf(&b, " %s | %s | %s | %s |\n", tput, peak, orDash(strings.Join(vs, "<br>")), orDash(strings.Join(eq, "<br>")))
	}
	b.WriteString("\n")
	return b.String()
}

// mdCheckTable is the table of one suite's checks, with the statistics of statistical checks.
func mdCheckTable(r *gate.Run, g *suiteGroup) string {
	var b strings.Builder
	title := "Config `" + mdCodeText(g.name) + "`"
	if g.config == nil && g.name == CrossConfig {
		title = "Cross-config checks"
	}
	fmt.Fprintf(&b, "#### %s\n\n| | check | kind | verdict | Δ | CI | p |\n|---|---|---|---|---:|---|---:|\n", title)
	for _, c := range g.checks {
		delta, ci, p := "", "", ""
		if ratio(c) != nil {
			delta = num.Pct(*ratio(c) - 1)
		} else if baseMedian(c) != nil && headMedian(c) != nil && *baseMedian(c) != 0 {
			delta = num.Pct(*headMedian(c) / *baseMedian(c) - 1)
		}
		if ciLow(c) != nil && ciHigh(c) != nil {
			ci = fmt.Sprintf("[%s, %s]", num.Pct(*ciLow(c)-1), num.Pct(*ciHigh(c)-1))
		}
		if pValue(c) != nil {
			p = fmt.Sprintf("%.3g", *pValue(c))
		}
		verdict := Line(c, mdCellRunes)
		if baseMedian(c) != nil && headMedian(c) != nil {
			verdict += fmt.Sprintf(" (%s → %s)", num.Format(*baseMedian(c)), num.Format(*headMedian(c)))
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s |\n", statusIcon(c), mdCell(c.Name), mdCell(c.Kind), mdEscape(verdict), delta, ci, p)
	}
	b.WriteString("\n")
	return b.String()
}

func statusIcon(c *gate.Check) string {
	switch c.EffectiveStatus() {
	case gate.StatusPassed:
		return "✅"
	case gate.StatusFailed:
		return "❌"
	case gate.StatusSkipped:
		return "⏭️"
	}
	return "💥"
}

// mdNum formats an engine report value; GiB amounts always with two decimals.
func mdNum(m map[string]any, k string) string {
	v, ok := mapNum(m, k)
	switch {
	case !ok:
		return "–"
	case strings.HasSuffix(k, "_gib"):
		return fmt.Sprintf("%.2f", v)
	}
	return num.Format(v)
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}

// mdCell makes engine text safe in a table cell: one line, Markdown and HTML neutralised.
func mdCell(s string) string { return mdEscape(oneLine(s, mdCellRunes)) }

// mdEscape neutralises Markdown and HTML in text (sanitize.Markdown): markup, mentions,
// references, autolinks and bidi controls.
func mdEscape(s string) string { return sanitize.Markdown(s) }

// mdCodeText makes s safe inside a single-backtick code span.
func mdCodeText(s string) string {
	return strings.ReplaceAll(oneLine(sanitize.MarkdownCode(s), mdCellRunes), "`", "'")
}

// mdFence returns a code fence longer than any backtick run in s.
func mdFence(s string) string {
	longest, run := 0, 0
	for _, r := range s {
		if r == '`' {
			run++
			longest = max(longest, run)
		} else {
			run = 0
		}
	}
	return strings.Repeat("`", max(3, longest+1))
}

func indent(s, prefix string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i, l := range lines {
		lines[i] = prefix + l
	}
	return strings.Join(lines, "\n")
}

func orDash(s string) string {
	if s == "" {
		return "–"
	}
	return s
}

// summaryItem is one check shown in a config's overview row.
type summaryItem struct {
	check *gate.Check
	lead  string // reckon's own text (numbers), safe as it is
	name  string // the config or "baseline" it refers to (spec text)
}

// configSummary is what a config's overview row shows about its checks.
type configSummary struct {
	throughput  []summaryItem // statistical throughput checks: change and CI vs the comparison
	equivalence []summaryItem // equivalence checks this config takes part in
}

// configSummaries collects, per config, its throughput comparisons and equivalence results.
func configSummaries(checks []gate.Check) map[string]*configSummary {
	out := map[string]*configSummary{}
	get := func(name string) *configSummary {
		if out[name] == nil {
			out[name] = &configSummary{}
		}
		return out[name]
	}
	for i := range checks {
		c := &checks[i]
		against := c.Against
		if against == "" {
			against = "baseline"
		}
		switch {
		case c.Kind == string(spec.KindEquivalence):
			if c.Config != "" {
				get(c.Config).equivalence = append(get(c.Config).equivalence, summaryItem{c, "vs ", against})
			}
			if c.Against != "" {
				get(c.Against).equivalence = append(get(c.Against).equivalence, summaryItem{c, "reference for ", orDash(c.Config)})
			}
		case isThroughputCheck(c) && c.Config != "" && ratio(c) != nil:
			text := num.Pct(*ratio(c) - 1)
			if ciLow(c) != nil && ciHigh(c) != nil {
				text += fmt.Sprintf(" [%s, %s]", num.Pct(*ciLow(c)-1), num.Pct(*ciHigh(c)-1))
			}
			get(c.Config).throughput = append(get(c.Config).throughput, summaryItem{c, text + " vs ", against})
		}
	}
	return out
}
