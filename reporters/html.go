package reporters

import (
	"fmt"
	"html/template"
	"io"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/reckon-ci/reckon/gate"
	"github.com/reckon-ci/reckon/internal/num"
)

// htmlBodyBytes caps the details and log text of one check in the HTML report.
const htmlBodyBytes = 64 << 10

type htmlPage struct {
	Title        string
	Verdict      string
	VerdictClass string
	Counts       gate.Counts
	Interrupted  bool
	// InterruptReason says what stopped an interrupted run.
	InterruptReason string
	// Undecided are the skipped checks that decided nothing (inconclusive, no baseline,
	// inputs filtered out), listed at the top.
	Undecided []htmlCheck
	Meta      [][2]string
	Failures  []htmlCheck
	Configs   []htmlConfig
	MemCols   []string
	Groups    []htmlGroup
	Charts    []svgChart
	Generated string
}

type htmlCheck struct {
	Icon, Class, Config, Name, Kind, Message, Explanation, Details, LogTail string
	Delta, CI, P, Medians, Duration                                         string
	Outcome                                                                 string
	// What names an errored check's category ("infrastructure error", "unverified: ...").
	What string
	// Next is what would decide an undecided check (NextStep); "" for others.
	Next  string
	Spark *sparkline
}

// sparkline is a check's history trend drawn in its row (Check.Trend).
type sparkline struct {
	Points       string
	LastX, LastY float64
	Tip          string
}

// sparklineOf draws trend in an 80x18 box, the last point marked; nil for fewer than 2 points.
func sparklineOf(trend []float64) *sparkline {
	var xs []float64
	for _, v := range trend {
		if !math.IsNaN(v) && !math.IsInf(v, 0) {
			xs = append(xs, v)
		}
	}
	if len(xs) < 2 {
		return nil
	}
	lo, hi := xs[0], xs[0]
	for _, v := range xs {
		lo, hi = math.Min(lo, v), math.Max(hi, v)
	}
	if hi == lo {
		hi, lo = hi+1, lo-1
	}
	var b strings.Builder
	s := &sparkline{}
	for i, v := range xs {
		x := 2 + float64(i)*76/float64(len(xs)-1)
		y := 16 - (v-lo)/(hi-lo)*14
		fmt.Fprintf(&b, "%.1f,%.1f ", x, y)
		s.LastX, s.LastY = x, y
	}
	s.Points = strings.TrimSpace(b.String())
	s.Tip = fmt.Sprintf("history: %d runs, %s .. %s, this run %s", len(xs), num.Format(lo), num.Format(hi), num.Format(xs[len(xs)-1]))
	return s
}

type htmlConfig struct {
	VsComparison, Equivalence                                                               []htmlBadge
	Name, Allreduce, KVTokens, KVGiB, Throughput, Peak, LaunchError, LogPath, LogTail, Args string
	Launches                                                                                int
	Mem                                                                                     []string
}

// htmlBadge is a status badge with a short text.
type htmlBadge struct {
	Class, Status, Text string
}

type htmlGroup struct {
	Title  string
	Checks []htmlCheck
}

// WriteHTML writes a self-contained HTML report of r: inline CSS and inline SVG charts
// (throughput per config and against its comparison with CI whiskers, the memory plan per config
// as stacked bars, TTFT/TPOT/ITL percentiles), the failures with their explanations and log
// tails, and every check. No external resource is referenced; all engine text is escaped by
// html/template.
func WriteHTML(w io.Writer, r *gate.Run) error {
	if r == nil {
		return fmt.Errorf("write HTML: nil run")
	}
	if err := htmlTemplate.Execute(w, buildPage(r)); err != nil {
		return fmt.Errorf("write HTML: %w", err)
	}
	return nil
}

func buildPage(r *gate.Run) *htmlPage {
	checks := r.EffectiveChecks()
	n := r.Count() // the one count: the closing line and every report use it
	p := &htmlPage{Title: "reckon: " + cleanText(r.SpecName), Counts: n, Interrupted: r.Interrupted, InterruptReason: cleanText(r.InterruptReason)}
	p.Verdict, p.VerdictClass = htmlVerdict(r)
	for _, c := range gate.UndecidedChecks(checks) {
		p.Undecided = append(p.Undecided, htmlCheckOf(r, c))
	}
	p.addMeta(r)
	for i := range checks {
		if s := checks[i].EffectiveStatus(); s == gate.StatusFailed || s == gate.StatusError {
			p.Failures = append(p.Failures, htmlCheckOf(r, &checks[i]))
		}
	}
	p.addConfigs(r, checks)
	p.addGroups(r, checks)
	p.addCharts(r, checks)
	if !r.FinishedAt.IsZero() {
		p.Generated = r.FinishedAt.UTC().Format(time.RFC3339)
	}
	return p
}

// htmlVerdict is the run's verdict as the report's banner shows it, and its CSS class.
func htmlVerdict(r *gate.Run) (text, class string) {
	switch r.Verdict() {
	case gate.RunInterrupted:
		return "INTERRUPTED (partial)", "warn"
	case gate.RunFail:
		return "FAIL", "fail"
	case gate.RunUnverified:
		return "FAIL (unverified checks)", "fail"
	case gate.RunInfra:
		return "FAIL (infrastructure errors)", "fail"
	case gate.RunNothing:
		return "FAIL (nothing verified)", "fail"
	default:
		return "PASS", "pass"
	}
}

// addMeta lists the run's metadata (spec, engine, testbed, times, options, versions and the
// testbed's fingerprint), leaving out what is empty.
func (p *htmlPage) addMeta(r *gate.Run) {
	meta := func(k, v string) {
		if v != "" {
			p.Meta = append(p.Meta, [2]string{k, cleanText(v)})
		}
	}
	meta("spec", r.SpecName)
	meta("spec file", r.SpecPath)
	meta("engine", r.Engine)
	meta("testbed", r.TestbedKey)
	if !r.StartedAt.IsZero() {
		meta("started", r.StartedAt.UTC().Format(time.RFC3339))
		if r.FinishedAt.After(r.StartedAt) {
			meta("duration", fmtDuration(r.FinishedAt.Sub(r.StartedAt).Seconds()))
		}
	}
	meta("label filter", r.LabelFilter)
	meta("shards", shardLine(r))
	meta("launch order", launchOrderLine(r))
	if r.Strict {
		meta("strict", "yes (no_baseline, inconclusive and checks missing an input fail)")
	}
	meta("git commit", strings.TrimSpace(r.GitCommit+" "+parens(r.GitCommitSource)))
	meta("engine version", r.EngineVersion)
	meta("reckon", r.ReckonVersion)
	for _, kv := range flatten("testbed", r.Testbed) {
		meta(kv[0], kv[1])
	}
}

// addConfigs adds a row per config: its launch, memory plan columns (the union of the configs'
// memory keys), throughput, peak GPU memory and the badges of its throughput and equivalence checks.
func (p *htmlPage) addConfigs(r *gate.Run, checks []gate.Check) {
	engines := make([]map[string]any, len(r.Configs))
	for i := range r.Configs {
		engines[i] = r.Configs[i].Engine
	}
	memKeys := memoryKeys(engines...)
	for _, k := range memKeys {
		p.MemCols = append(p.MemCols, memLabel(k)+" GiB")
	}
	sums := configSummaries(checks)
	for i := range r.Configs {
		c := &r.Configs[i]
		hc := htmlConfig{
			Name: cleanText(c.Name), Launches: c.Launches, Allreduce: cleanText(str(c.Engine, keyAllreduce)),
			KVTokens: mdNum(c.Engine, keyKVTokens), KVGiB: mdNum(c.Engine, keyKVGiB),
			LaunchError: cleanText(c.LaunchError), LogPath: cleanText(c.LogPath),
			LogTail: clip(cleanText(c.LogTail), htmlBodyBytes), Args: cleanText(strings.Join(c.Args, " ")),
		}
		for _, k := range memKeys {
			hc.Mem = append(hc.Mem, mdNum(c.Engine, k))
		}
		hc.Throughput = cleanText(strings.Join(throughputTexts(r, c), "; "))
		if pk := maxOf(c.GPUPeakMiB); pk > 0 {
			hc.Peak = num.Format(pk)
		}
		if sm := sums[c.Name]; sm != nil {
			for _, it := range sm.throughput {
				hc.VsComparison = append(hc.VsComparison, htmlBadge{htmlClass(it.check), htmlStatus(it.check), cleanText(it.lead + it.name)})
			}
			for _, it := range sm.equivalence {
				hc.Equivalence = append(hc.Equivalence, htmlBadge{htmlClass(it.check), htmlStatus(it.check), cleanText(it.lead + it.name)})
			}
		}
		p.Configs = append(p.Configs, hc)
	}
}

// addGroups adds the checks grouped by config, the cross-config checks under their own title.
func (p *htmlPage) addGroups(r *gate.Run, checks []gate.Check) {
	for _, g := range groupChecks(r, checks) {
		if len(g.checks) == 0 {
			continue
		}
		title := "Config " + cleanText(g.name)
		if g.config == nil && g.name == CrossConfig {
			title = "Cross-config checks"
		}
		hg := htmlGroup{Title: title}
		for _, c := range g.checks {
			hg.Checks = append(hg.Checks, htmlCheckOf(r, c))
		}
		p.Groups = append(p.Groups, hg)
	}
}

// addCharts adds the charts that have data (throughput per config and against the comparison,
// latency against the comparison, the memory plan, the latency percentiles), their texts cleaned.
func (p *htmlPage) addCharts(r *gate.Run, checks []gate.Check) {
	if ch := throughputPerConfigChart(r); ch != nil {
		p.Charts = append(p.Charts, *ch)
	}
	if ch := throughputVsBaselineChart(r, checks); ch != nil {
		p.Charts = append(p.Charts, *ch)
	}
	if ch := latencyVsBaselineChart(r, checks); ch != nil {
		p.Charts = append(p.Charts, *ch)
	}
	if ch := memoryPlanChart(r); ch != nil {
		p.Charts = append(p.Charts, *ch)
	}
	p.Charts = append(p.Charts, latencyCharts(r)...)
	for i := range p.Charts {
		sanitizeChart(&p.Charts[i])
	}
}

// sanitizeChart cleans the engine-derived texts of a chart (html/template escapes them too).
func sanitizeChart(c *svgChart) {
	for i := range c.Texts {
		c.Texts[i].Text = oneLine(c.Texts[i].Text, 80)
	}
	for i := range c.Rects {
		c.Rects[i].Tip = oneLine(c.Rects[i].Tip, 200)
	}
	for i := range c.Legend {
		c.Legend[i].Name = oneLine(c.Legend[i].Name, 60)
	}
}

// htmlStatus is the status pill text of a check (no emoji: the report must render without an
// emoji font). A skipped check that decided nothing it should have (inconclusive, no baseline,
// an input filtered out) is UNDECIDED, not SKIP.
func htmlStatus(c *gate.Check) string {
	switch c.EffectiveStatus() {
	case gate.StatusPassed:
		return "PASS"
	case gate.StatusFailed:
		return "FAIL"
	case gate.StatusSkipped:
		if isUndecided(c) {
			return "UNDECIDED"
		}
		return "SKIP"
	}
	return "ERROR"
}

// htmlClass is the CSS class of a check's row and pill: its status, or "undecided".
func htmlClass(c *gate.Check) string {
	if c.EffectiveStatus() == gate.StatusSkipped && isUndecided(c) {
		return "undecided"
	}
	return string(c.EffectiveStatus())
}

// isUndecided reports whether a check's outcome decided nothing a gate should have decided.
func isUndecided(c *gate.Check) bool {
	switch c.Outcome {
	case "inconclusive", "no_baseline", gate.OutcomePartial:
		return true
	}
	return false
}

func htmlCheckOf(r *gate.Run, c *gate.Check) htmlCheck {
	h := htmlCheck{
		Icon: htmlStatus(c), Class: htmlClass(c), Config: cleanText(c.Config), Name: cleanText(c.Name),
		Kind: cleanText(c.Kind), Message: Line(c, 1000), Explanation: fitMessage(explanation(r, c), 2000),
		Details: clip(cleanText(c.Details), htmlBodyBytes), Outcome: cleanText(outcomeText(c)),
		Next: fitMessage(NextStep(c), 400),
	}
	if h.Config == "" {
		h.Config = CrossConfig
	}
	if ratio(c) != nil {
		h.Delta = num.Pct(*ratio(c) - 1)
	}
	if ciLow(c) != nil && ciHigh(c) != nil {
		h.CI = fmt.Sprintf("[%s, %s]", num.Pct(*ciLow(c)-1), num.Pct(*ciHigh(c)-1))
	}
	if pValue(c) != nil {
		h.P = fmt.Sprintf("%.3g", *pValue(c))
	}
	if baseMedian(c) != nil && headMedian(c) != nil {
		h.Medians = fmt.Sprintf("%s → %s", num.Format(*baseMedian(c)), num.Format(*headMedian(c)))
	}
	if c.Duration > 0 {
		h.Duration = fmtDuration(c.Duration.Seconds())
	}
	h.Spark = sparklineOf(c.Trend)
	if c.EffectiveStatus() == gate.StatusError {
		h.What = errorLabel(c)
		if cfg := r.ConfigNamed(c.Config); cfg != nil && cfg.LogTail != "" {
			h.LogTail = clip(cleanText(cfg.LogTail), htmlBodyBytes)
		}
	}
	return h
}

// svgNum formats SVG coordinates compactly.
func svgNum(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }

var htmlTemplate = template.Must(template.New("report").Funcs(template.FuncMap{"n": svgNum}).Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{.Title}} — {{.Verdict}}</title>
<style>
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif;margin:0;color:#1b1b1b;background:#f6f7f9}
main{max-width:1100px;margin:0 auto;padding:20px}
h1{font-size:22px;margin:0 0 6px}h2{font-size:18px;margin:28px 0 10px}h3{font-size:15px;margin:18px 0 8px}
.badge{display:inline-block;padding:2px 10px;border-radius:4px;color:#fff;font-weight:600;margin-right:8px}
.badge.pass{background:#00845f}.badge.fail{background:#c0392b}.badge.warn{background:#b7791f}
.counts span{margin-right:14px}
.pill{display:inline-block;padding:0 6px;border-radius:3px;font-size:11px;font-weight:700;color:#fff;background:#777}
.pill.passed{background:#00845f}.pill.failed{background:#c0392b}.pill.error{background:#b7791f}.pill.skipped{background:#8a8a8a}.pill.undecided{background:#6d5cae}.muted{color:#666}
.tablewrap{max-width:100%;overflow-x:auto}
table{border-collapse:collapse;width:100%;background:#fff;margin:6px 0 12px;font-size:13px}
th,td{border:1px solid #dde1e6;padding:4px 8px;text-align:left;vertical-align:top;overflow-wrap:anywhere}
td code{white-space:normal;overflow-wrap:anywhere}
th{background:#eef1f4;font-weight:600}td.num{text-align:right;font-variant-numeric:tabular-nums;overflow-wrap:normal}
table.configs td:first-child{min-width:9em;max-width:24em}
tr.failed td{background:#fdecea}tr.error td{background:#fff4e5}tr.skipped td{color:#666}
.failure{background:#fff;border-left:4px solid #c0392b;padding:8px 12px;margin:8px 0}
.failure.error{border-left-color:#b7791f}.failure.undecided{border-left-color:#6d5cae}
.failure ul{margin:4px 0;padding-left:18px}.next{color:#333;margin:2px 0 4px}
tr.undecided td{background:#f3f0fb}
.expl{color:#333;margin-top:4px}.expl b{color:#000}
pre{background:#1e1e1e;color:#e6e6e6;padding:8px;overflow:auto;max-height:360px;font-size:12px;white-space:pre-wrap;word-break:break-all}
details summary{cursor:pointer;color:#0b5cad}
.chart{background:#fff;border:1px solid #dde1e6;padding:10px;margin:10px 0}
.chart svg{width:100%;height:auto;max-width:860px;display:block}
.chart .sub{font-size:11px;fill:#333}.chart .grp{font-size:12px;font-weight:600;fill:#000}
.chart .val{font-size:11px;fill:#222}.chart .tick{font-size:10px;fill:#666}
.legend span{display:inline-block;margin-right:14px;font-size:12px}
.legend i{display:inline-block;width:10px;height:10px;margin-right:4px;vertical-align:middle}
dl.meta{display:grid;grid-template-columns:max-content 1fr;gap:2px 12px;font-size:12px;margin:8px 0}
dl.meta dt{color:#666}dl.meta dd{margin:0;word-break:break-all}
</style>
</head>
<body><main>
<header id="verdict"><h1><span class="badge {{.VerdictClass}}">{{.Verdict}}</span>{{.Title}}</h1>
<div class="counts"><span><b>{{.Counts.Passed}}</b> passed</span><span><b>{{.Counts.Failed}}</b> failed</span><span><b>{{.Counts.Errors}}</b> {{if eq .Counts.Errors 1}}error{{else}}errors{{end}}</span><span><b>{{.Counts.Inconclusive}}</b> inconclusive</span><span><b>{{.Counts.NoBaseline}}</b> no baseline</span><span><b>{{.Counts.Skipped}}</b> skipped</span><span><b>{{.Counts.NotRun}}</b> not run</span><span class="muted">{{.Counts.Total}} checks</span></div></header>
{{if .Interrupted}}<p class="failure error" id="interrupted">The run was interrupted{{if .InterruptReason}} ({{.InterruptReason}}){{end}} before every check ran: these results are partial; {{.Counts.NotRun}} selected checks were not run.</p>{{end}}
{{if .Failures}}<section id="failures"><h2>Failures ({{len .Failures}})</h2>
{{range .Failures}}<div class="failure {{.Class}}"><div><span class="pill {{.Class}}">{{.Icon}}</span> <b>{{.Config}}</b> · <code>{{.Name}}</code>{{if .What}} ({{.What}}){{end}}: {{.Message}}</div>
{{if .Explanation}}<div class="expl"><b>Why:</b> {{.Explanation}}</div>{{end}}
{{if .Details}}<details><summary>details</summary><pre>{{.Details}}</pre></details>{{end}}
{{if .LogTail}}<details class="log"><summary>engine log tail</summary><pre>{{.LogTail}}</pre></details>{{end}}
</div>
{{end}}</section>{{end}}
{{if .Undecided}}<section id="undecided" class="failure undecided"><b>{{len .Undecided}} {{if eq (len .Undecided) 1}}check{{else}}checks{{end}} decided nothing</b> and count neither as passed nor failed (<code>--strict</code> fails them):<ul>{{range .Undecided}}<li><span class="pill undecided">UNDECIDED</span> <b>{{.Config}}</b> · <code>{{.Name}}</code> ({{.Outcome}}): {{.Message}}{{if .Next}}<div class="next"><b>Next step:</b> {{.Next}}</div>{{end}}</li>{{end}}</ul></section>{{end}}
<details><summary>run and testbed</summary><dl class="meta">{{range .Meta}}<dt>{{index . 0}}</dt><dd>{{index . 1}}</dd>{{end}}</dl></details>

{{if .Charts}}<h2>Charts</h2>
{{range .Charts}}<div class="chart" data-chart="{{.Title}}"><h3>{{.Title}}</h3>
<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {{n .Width}} {{n .Height}}" role="img" aria-label="{{.Title}}">
{{range .Lines}}<line x1="{{n .X1}}" y1="{{n .Y1}}" x2="{{n .X2}}" y2="{{n .Y2}}" stroke="{{.Stroke}}" stroke-width="{{n .Width}}"{{if .Dash}} stroke-dasharray="{{.Dash}}"{{end}}/>
{{end}}{{range .Rects}}<rect x="{{n .X}}" y="{{n .Y}}" width="{{n .W}}" height="{{n .H}}" fill="{{.Fill}}"><title>{{.Tip}}</title></rect>
{{end}}{{range .Dots}}<circle cx="{{n .X}}" cy="{{n .Y}}" r="{{n .R}}" fill="{{.Fill}}" fill-opacity="0.7"><title>{{.Tip}}</title></circle>
{{end}}{{range .Texts}}<text x="{{n .X}}" y="{{n .Y}}" text-anchor="{{.Anchor}}" class="{{.Class}}">{{.Text}}</text>
{{end}}</svg>
<div class="legend">{{range .Legend}}<span><i style="background:{{.Color}}"></i>{{.Name}}</span>{{end}}</div>
{{if .Note}}<div class="muted">{{.Note}}</div>{{end}}
</div>
{{end}}{{end}}

{{if .Configs}}<h2>Configs</h2>
<div class="tablewrap"><table class="configs"><tr><th>config</th><th>launches</th><th>allreduce</th><th>KV tokens</th><th>KV GiB</th>{{range .MemCols}}<th>{{.}}</th>{{end}}<th>output tok/s (median)</th><th>peak GPU MiB</th><th>throughput vs comparison (CI)</th><th>equivalence</th></tr>
{{range .Configs}}<tr{{if .LaunchError}} class="error"{{end}}><td><b>{{.Name}}</b>{{if .Args}}<br><code class="muted">{{.Args}}</code>{{end}}{{if .LaunchError}}<br><span class="pill error">LAUNCH FAILED</span> {{.LaunchError}}{{end}}</td><td class="num">{{.Launches}}</td><td>{{.Allreduce}}</td><td class="num">{{.KVTokens}}</td><td class="num">{{.KVGiB}}</td>{{range .Mem}}<td class="num">{{.}}</td>{{end}}<td class="num">{{.Throughput}}</td><td class="num">{{.Peak}}</td><td>{{range .VsComparison}}<div><span class="pill {{.Class}}">{{.Status}}</span> {{.Text}}</div>{{end}}</td><td>{{range .Equivalence}}<div><span class="pill {{.Class}}">{{.Status}}</span> {{.Text}}</div>{{end}}</td></tr>
{{end}}</table></div>{{end}}

<h2>Checks</h2>
{{range .Groups}}<h3>{{.Title}}</h3>
<div class="tablewrap"><table><tr><th></th><th>check</th><th>kind</th><th>verdict</th><th>base → head</th><th>Δ</th><th>CI</th><th>p</th><th>time</th></tr>
{{range .Checks}}<tr class="{{.Class}}"><td><span class="pill {{.Class}}">{{.Icon}}</span></td><td><code>{{.Name}}</code></td><td>{{.Kind}}</td><td>{{.Message}}{{if .Next}}<div class="next"><b>Next step:</b> {{.Next}}</div>{{end}}{{if .Explanation}}<div class="expl"><b>Why:</b> {{.Explanation}}</div>{{end}}{{if .Details}}<details><summary>details</summary><pre>{{.Details}}</pre></details>{{end}}</td><td class="num">{{.Medians}}{{with .Spark}}<br><svg xmlns="http://www.w3.org/2000/svg" width="80" height="18" viewBox="0 0 80 18" role="img" aria-label="history"><title>{{.Tip}}</title><polyline points="{{.Points}}" fill="none" stroke="#4c78a8" stroke-width="1.2"/><circle cx="{{n .LastX}}" cy="{{n .LastY}}" r="2.5" fill="#f28e2b"/></svg>{{end}}</td><td class="num">{{.Delta}}</td><td>{{.CI}}</td><td class="num">{{.P}}</td><td class="num">{{.Duration}}</td></tr>
{{end}}</table></div>
{{end}}
<p class="muted">Generated by reckon{{if .Generated}} at {{.Generated}}{{end}}. Lossless data: results.json; CI view: junit.xml.</p>
</main></body>
</html>
`))

// parens wraps s in parentheses, or returns "" for "".
func parens(s string) string {
	if s == "" {
		return ""
	}
	return "(" + s + ")"
}
