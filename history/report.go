package history

import (
	"fmt"
	"html/template"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/reckon-ci/reckon/internal/num"
)

// ReportOptions shape the trend page.
type ReportOptions struct {
	// LastN is how many of each series' newest runs are drawn (all when 0).
	LastN int
	// Title heads the page.
	Title string
	// Generated is shown at the bottom (zero: not shown).
	Generated time.Time
	// Gated reports whether a series is judged by one of the spec's checks; those come first.
	// Nil: the metrics a gate usually judges (throughput and latency) count as gated.
	Gated func(SeriesKey) bool
}

type trendDot struct {
	X, Y, R float64
	Fill    string
	Tip     string
}

type trendLine struct {
	X1, Y1, X2, Y2, W float64
	Stroke, Dash      string
}

type trendText struct {
	X, Y         float64
	Anchor, Text string
	Class        string
}

type trendChart struct {
	// ID is the chart's anchor (the change-point list links to it).
	ID            string
	Title, Note   string
	Subtitle      string
	Width, Height float64
	Dots          []trendDot
	Lines         []trendLine
	Texts         []trendText
	Path          string
	Findings      []string
	Regression    bool
}

// trendGroup is a section of the page: the gated metrics, the engine report, the bookkeeping
// (folded away).
type trendGroup struct {
	Title  string
	Folded bool
	Charts []trendChart
}

// trendCP is one change point in the list at the top, linked to its chart.
type trendCP struct {
	ID, Title, Range, Line string
	Regression             bool
}

// Ranks of series on the page (seriesRank).
const (
	rankGated = iota
	rankEngine
	rankBookkeeping
)

// bookkeeping metrics describe the benchmark run rather than the engine's performance.
var bookkeeping = map[string]bool{
	"completed": true, "concurrency": true, "duration": true, "failed": true, "max_concurrency": true,
	"num_prompts": true, "total_input_tokens": true, "total_output_tokens": true, "request_rate": true,
	"burstiness": true, "errors": true, "num_failed": true, "trials": true,
}

// seriesRank places a series: gated metrics (o.Gated, or throughput and latency without it),
// then the engine report's KV cache and memory, then bookkeeping.
func seriesRank(k SeriesKey, o ReportOptions) int {
	m := k.Metric
	switch {
	case bookkeeping[m]:
		return rankBookkeeping
	case o.Gated != nil && o.Gated(k):
		return rankGated
	case o.Gated == nil && (strings.Contains(m, "throughput") || strings.Contains(m, "ttft") || strings.Contains(m, "tpot") ||
		strings.Contains(m, "itl") || strings.Contains(m, "e2el") || strings.Contains(m, "goodput")):
		return rankGated
	case strings.HasPrefix(m, "kv_") || strings.HasSuffix(m, "_gib") || strings.Contains(m, "mem") || strings.Contains(m, "cuda_graph") ||
		strings.Contains(m, "running_requests") || strings.Contains(m, "accept"):
		return rankEngine
	}
	if o.Gated != nil {
		return rankEngine
	}
	return rankBookkeeping
}

// metricOrder puts the most looked-at metrics of a rank first.
func metricOrder(m string) int {
	for i, p := range []string{"output_throughput", "total_token_throughput", "request_throughput", "ttft", "tpot", "itl", "e2el", "kv_cache_tokens", "kv_cache_gib"} {
		if strings.Contains(m, p) {
			return i
		}
	}
	return 100
}

// seriesTitle names a series fully: metric, then spec, config, workload and testbed.
func seriesTitle(k SeriesKey) string {
	parts := []string{k.Spec, k.Config}
	if k.Workload != "" {
		parts = append(parts, k.Workload)
	}
	parts = append(parts, k.Testbed)
	return k.Metric + " — " + strings.Join(parts, " · ")
}

// chartID is a stable anchor of a series.
func chartID(k SeriesKey) string {
	var b strings.Builder
	b.WriteString("s-")
	for _, r := range strings.ToLower(k.String()) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
		} else {
			b.WriteByte('-')
		}
	}
	return b.String()
}

// WriteReport writes a self-contained HTML page (inline SVG and CSS, one small inline script for
// the filter box) with one chart per series, each titled with its metric, spec, config,
// workload and testbed: the gated metrics first, then the engine report's KV cache and memory,
// then the bookkeeping series folded away. The change points are listed at the top, each linked
// to its chart with its commit range. A chart draws the last LastN runs (each run's median, its
// trials as faint dots; the commit and date on hover) on a dated axis with readable ticks and
// units (counts and sizes never below zero), change points as dashed lines with their forward
// change, and the newest run highlighted.
func WriteReport(w io.Writer, series []Series, findings []Finding, o ReportOptions) error {
	if o.Title == "" {
		o.Title = "reckon history"
	}
	byKey := map[SeriesKey][]Finding{}
	for _, f := range findings {
		byKey[f.Series] = append(byKey[f.Series], f)
	}
	order := make([]int, len(series))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool {
		ka, kb := series[order[a]].Key, series[order[b]].Key
		ra, rb := seriesRank(ka, o), seriesRank(kb, o)
		if ra != rb {
			return ra < rb
		}
		// Within a rank: series with a change point first, then by spec, config, metric.
		ca, cb := len(byKey[ka]) > 0, len(byKey[kb]) > 0
		if ca != cb {
			return ca
		}
		if ka.Spec != kb.Spec {
			return ka.Spec < kb.Spec
		}
		if ka.Config != kb.Config {
			return ka.Config < kb.Config
		}
		if oa, ob := metricOrder(ka.Metric), metricOrder(kb.Metric); oa != ob {
			return oa < ob
		}
		return ka.String() < kb.String()
	})
	groups := []trendGroup{
		{Title: "Gated metrics"},
		{Title: "Engine report: KV cache and memory"},
		{Title: "Bookkeeping (run sizes, counts, durations)", Folded: true},
	}
	var cps []trendCP
	for _, i := range order {
		s := &series[i]
		c := trendSVG(s, byKey[s.Key], o.LastN)
		r := seriesRank(s.Key, o)
		if len(byKey[s.Key]) > 0 && r == rankBookkeeping {
			r = rankEngine // a change point is never folded away
		}
		groups[r].Charts = append(groups[r].Charts, c)
		for _, f := range byKey[s.Key] {
			cps = append(cps, trendCP{ID: c.ID, Title: seriesTitle(s.Key), Range: f.CommitRange(), Line: f.Line(), Regression: f.Regression})
		}
	}
	sort.SliceStable(cps, func(a, b int) bool { return cps[a].Regression && !cps[b].Regression })
	var shown []trendGroup
	for _, g := range groups {
		if len(g.Charts) > 0 {
			shown = append(shown, g)
		}
	}
	data := map[string]any{"Title": o.Title, "Groups": shown, "CPs": cps, "NSeries": len(series), "NFindings": len(findings)}
	if !o.Generated.IsZero() {
		data["Generated"] = o.Generated.UTC().Format(time.RFC3339)
	}
	return trendTemplate.Execute(w, data)
}

// isCount reports whether a metric can never be negative (every metric reckon stores: counts,
// sizes, rates and times), so its axis starts at zero or above.
func isCount(metric string) bool {
	return !strings.Contains(metric, "change") && !strings.Contains(metric, "delta")
}

// metricUnit is the unit of a stored metric, from its name ("" when unknown).
func metricUnit(m string) string {
	switch {
	case strings.HasSuffix(m, "_ms"):
		return "ms"
	case strings.HasSuffix(m, "_gib"):
		return "GiB"
	case strings.HasSuffix(m, "_mib"):
		return "MiB"
	case strings.HasSuffix(m, "_seconds"), m == "duration":
		return "s"
	case m == "request_throughput":
		return "req/s"
	case strings.Contains(m, "throughput"):
		return "tok/s"
	case strings.Contains(m, "tokens"):
		return "tokens"
	}
	return ""
}

// niceStep rounds a raw tick step to 1, 2 or 5 times a power of ten.
func niceStep(raw float64) float64 {
	if raw <= 0 || math.IsNaN(raw) || math.IsInf(raw, 0) {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5, 10} {
		if raw <= m*p {
			return m * p
		}
	}
	return 10 * p
}

// tickLabel formats an axis value compactly: 282497.2 -> "282.5k", 0.25 -> "0.25".
func tickLabel(v, step float64) string {
	a := math.Abs(v)
	switch {
	case a >= 1e9:
		return trimZeros(strconv.FormatFloat(v/1e9, 'f', decimals(step/1e9), 64)) + "G"
	case a >= 1e6:
		return trimZeros(strconv.FormatFloat(v/1e6, 'f', decimals(step/1e6), 64)) + "M"
	case a >= 1e4:
		return trimZeros(strconv.FormatFloat(v/1e3, 'f', decimals(step/1e3), 64)) + "k"
	}
	return trimZeros(strconv.FormatFloat(v, 'f', decimals(step), 64))
}

// decimals is how many decimals a tick step needs.
func decimals(step float64) int {
	if step <= 0 || step >= 1 {
		return 0
	}
	return min(6, int(math.Ceil(-math.Log10(step)-1e-9)))
}

func trimZeros(s string) string {
	if strings.Contains(s, ".") {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	if s == "-0" {
		return "0"
	}
	return s
}

// dateLabel formats a run's time for the x axis: the day when the runs span days, else the time
// (with the day on the first tick).
func dateLabel(t, first, last time.Time, firstTick bool) string {
	if last.Sub(first) >= 36*time.Hour {
		if first.Year() != last.Year() {
			return t.Format("2 Jan 2006")
		}
		return t.Format("2 Jan")
	}
	if firstTick {
		return t.Format("2 Jan 15:04")
	}
	return t.Format("15:04")
}

func trendSVG(s *Series, fs []Finding, lastN int) trendChart {
	pts := s.Points
	offset := 0
	if lastN > 0 && len(pts) > lastN {
		offset = len(pts) - lastN
		pts = pts[offset:]
	}
	unit := metricUnit(s.Key.Metric)
	c := trendChart{ID: chartID(s.Key), Title: seriesTitle(s.Key), Width: trendW, Height: trendH}
	if unit != "" {
		c.Subtitle = unit
	}
	if len(pts) == 0 {
		c.Note = "no runs"
		return c
	}
	lo, hi, step := trendRange(pts, isCount(s.Key.Metric))
	pl := trendPlot{n: len(pts), lo: lo, hi: hi}
	c.axes(pl, pts, step, unit)
	c.changePoints(pl, fs, offset)
	c.points(pl, pts, unit)
	first, last := pts[0].StartedAt, pts[len(pts)-1].StartedAt
	c.Note = fmt.Sprintf("%d of %d runs shown, %s to %s; latest commit %s", len(pts), len(s.Points), first.Format("2006-01-02 15:04"), last.Format("2006-01-02 15:04"), short(pts[len(pts)-1].Commit))
	return c
}

// The trend chart's size and margins, in SVG units.
const trendW, trendH, trendLeft, trendRight, trendTop, trendBottom = 860.0, 220.0, 64.0, 16.0, 14.0, 34.0

// trendRange is the y range of a chart of pts (medians and trials) and its tick step: padded,
// widened when flat, rounded out to whole steps, and not below 0 for a count (nonNegMetric).
func trendRange(pts []Point, nonNegMetric bool) (lo, hi, step float64) {
	lo, hi = math.Inf(1), math.Inf(-1)
	for _, p := range pts {
		for _, v := range append([]float64{p.Value}, p.Samples...) {
			lo, hi = math.Min(lo, v), math.Max(hi, v)
		}
	}
	nonNeg := nonNegMetric && lo >= 0
	if hi-lo < 1e-9*math.Max(1, math.Abs(hi)) {
		d := math.Max(math.Abs(hi)*0.05, 1)
		lo, hi = lo-d, hi+d
	}
	pad := (hi - lo) * 0.08
	lo, hi = lo-pad, hi+pad
	if nonNeg && lo < 0 {
		lo = 0 // counts, sizes and rates are never negative
	}
	step = niceStep((hi - lo) / 4)
	lo, hi = math.Floor(lo/step)*step, math.Ceil(hi/step)*step
	if nonNeg && lo < 0 {
		lo = 0
	}
	return lo, hi, step
}

// trendPlot maps a chart's n runs and its y range [lo, hi] to SVG coordinates.
type trendPlot struct {
	n      int
	lo, hi float64
}

// x is the horizontal position of run i (the middle when there is only one).
func (pl trendPlot) x(i int) float64 {
	if pl.n == 1 {
		return trendLeft + (trendW-trendLeft-trendRight)/2
	}
	return trendLeft + float64(i)*(trendW-trendLeft-trendRight)/float64(pl.n-1)
}

// y is the vertical position of value v.
func (pl trendPlot) y(v float64) float64 {
	return trendTop + (pl.hi-v)/(pl.hi-pl.lo)*(trendH-trendTop-trendBottom)
}

// axes draws the axes, the horizontal grid with its tick labels every step, the unit and the
// date labels of (at most about seven of) the runs pts.
func (c *trendChart) axes(pl trendPlot, pts []Point, step float64, unit string) {
	const W, H, left, right, top, bottom = trendW, trendH, trendLeft, trendRight, trendTop, trendBottom
	c.Lines = append(c.Lines, trendLine{X1: left, Y1: top, X2: left, Y2: H - bottom, W: 1, Stroke: "#999"},
		trendLine{X1: left, Y1: H - bottom, X2: W - right, Y2: H - bottom, W: 1, Stroke: "#999"})
	for v, k := pl.lo, 0; v <= pl.hi+step*1e-6 && k < 12; v, k = v+step, k+1 {
		c.Lines = append(c.Lines, trendLine{X1: left, Y1: pl.y(v), X2: W - right, Y2: pl.y(v), W: 0.5, Stroke: "#e3e6ea"})
		c.Texts = append(c.Texts, trendText{X: left - 4, Y: pl.y(v) + 3, Anchor: "end", Text: tickLabel(v, step), Class: "tick"})
	}
	if unit != "" {
		c.Texts = append(c.Texts, trendText{X: 4, Y: top - 2, Anchor: "start", Text: unit, Class: "tick"})
	}
	first, last := pts[0].StartedAt, pts[len(pts)-1].StartedAt
	xstep := max(1, (len(pts)+6)/7)
	for i := 0; i < len(pts); i += xstep {
		c.Texts = append(c.Texts, trendText{X: pl.x(i), Y: H - bottom + 14, Anchor: "middle", Text: dateLabel(pts[i].StartedAt, first, last, i == 0), Class: "tick"})
	}
}

// changePoints draws each finding among the shown runs (the first shown being run offset of the
// series): a dashed line before its run, its label, and the means of the segments either side.
func (c *trendChart) changePoints(pl trendPlot, fs []Finding, offset int) {
	const W, H, top, bottom = trendW, trendH, trendTop, trendBottom
	x, y := pl.x, pl.y
	for _, f := range fs {
		i := f.Index - offset
		if i < 0 || i >= pl.n {
			continue
		}
		xc := (x(i-1) + x(i)) / 2
		if i == 0 {
			xc = x(0)
		}
		col := "#0b5cad"
		if f.Regression {
			col = "#c0392b"
			c.Regression = true
		}
		c.Lines = append(c.Lines, trendLine{X1: xc, Y1: top, X2: xc, Y2: H - bottom, W: 1.5, Stroke: col, Dash: "5 3"})
		anchor, tx := "start", xc+4
		if xc > W*0.6 {
			anchor, tx = "end", xc-4
		}
		c.Texts = append(c.Texts, trendText{X: tx, Y: top + 10, Anchor: anchor, Text: fmt.Sprintf("%+.1f%% %s", f.Forward*100, f.CommitRange()), Class: "cp"})
		c.Findings = append(c.Findings, f.Line())
		// Segment means.
		c.Lines = append(c.Lines, trendLine{X1: x(max(0, i-f.Before.N)), Y1: y(f.Before.Mean), X2: x(i - 1), Y2: y(f.Before.Mean), W: 1, Stroke: "#888", Dash: "2 2"},
			trendLine{X1: x(i), Y1: y(f.After.Mean), X2: x(min(pl.n-1, i+f.After.N-1)), Y2: y(f.After.Mean), W: 1, Stroke: "#888", Dash: "2 2"})
	}
}

// points draws the line through the medians of pts, the trial dots, and the median dots with
// their tooltips (the latest run highlighted).
func (c *trendChart) points(pl trendPlot, pts []Point, unit string) {
	x, y := pl.x, pl.y
	for i, p := range pts {
		if i > 0 {
			c.Lines = append(c.Lines, trendLine{X1: x(i - 1), Y1: y(pts[i-1].Value), X2: x(i), Y2: y(p.Value), W: 1.2, Stroke: "#4c78a8"})
		}
		for _, v := range p.Samples {
			c.Dots = append(c.Dots, trendDot{X: x(i), Y: y(v), R: 1.6, Fill: "#9ab"})
		}
	}
	for i, p := range pts {
		tip := fmt.Sprintf("run %d · %s · commit %s · median %s %s of %d trial(s)", p.RunID, p.StartedAt.Format("2006-01-02 15:04"), short(p.Commit), num.Format(p.Value), unit, len(p.Samples))
		d := trendDot{X: x(i), Y: y(p.Value), R: 3, Fill: "#4c78a8", Tip: tip}
		if i == len(pts)-1 {
			d.R, d.Fill, d.Tip = 5.5, "#f28e2b", "latest run (tonight): "+tip
		}
		c.Dots = append(c.Dots, d)
	}
}

var trendTemplate = template.Must(template.New("trend").Funcs(template.FuncMap{"n": func(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }}).Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{.Title}}</title>
<style>
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif;margin:0;color:#1b1b1b;background:#f6f7f9}
main{max-width:1100px;margin:0 auto;padding:20px}
h1{font-size:22px;margin:0 0 6px}h2{font-size:18px;margin:28px 0 10px}h3{font-size:15px;margin:0 0 8px}
.muted{color:#666}code{font-size:12px}
.chart{background:#fff;border:1px solid #dde1e6;padding:10px;margin:10px 0}
.chart.regression{border-left:4px solid #c0392b}
.chart svg{width:100%;height:auto;max-width:860px;display:block}
.chart .tick{font-size:10px;fill:#666}.chart .cp{font-size:11px;fill:#000;font-weight:600}
ul.cps{margin:6px 0 0;padding-left:18px;font-size:13px}ul.cps li{margin:3px 0}ul.cps li.regression a{color:#c0392b;font-weight:600}
details.group summary h2{display:inline}input#filter{font:inherit;padding:2px 6px}
</style>
</head>
<body><main>
<h1>{{.Title}}</h1>
<p class="muted">{{.NSeries}} series, {{.NFindings}} change points (E-divisive means, t-test significance; see docs/history.md). Hover a point for its run and commit; the orange point is the latest run.</p>
<p><label>Filter <input id="filter" type="search" placeholder="metric, config, workload, testbed…" size="40"></label> <span id="shown" class="muted"></span></p>
{{if .CPs}}<h2 id="change-points">Change points ({{len .CPs}})</h2><ul class="cps">{{range .CPs}}<li{{if .Regression}} class="regression"{{end}}><a href="#{{.ID}}">{{.Title}}</a> · <code>{{.Range}}</code>{{if .Regression}} · <b>regression</b>{{end}}<br><span class="muted">{{.Line}}</span></li>{{end}}</ul>{{else}}<p class="muted">No change points.</p>{{end}}
{{range .Groups}}{{if .Folded}}<details class="group"><summary><h2>{{.Title}} ({{len .Charts}})</h2></summary>{{else}}<section class="group"><h2>{{.Title}} ({{len .Charts}})</h2>{{end}}
{{range .Charts}}<div class="chart{{if .Regression}} regression{{end}}" id="{{.ID}}" data-title="{{.Title}}"><h3>{{.Title}}{{if .Subtitle}} <span class="muted">({{.Subtitle}})</span>{{end}}</h3>
<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {{n .Width}} {{n .Height}}" role="img" aria-label="{{.Title}}">
{{range .Lines}}<line x1="{{n .X1}}" y1="{{n .Y1}}" x2="{{n .X2}}" y2="{{n .Y2}}" stroke="{{.Stroke}}" stroke-width="{{n .W}}"{{if .Dash}} stroke-dasharray="{{.Dash}}"{{end}}/>
{{end}}{{range .Dots}}<circle cx="{{n .X}}" cy="{{n .Y}}" r="{{n .R}}" fill="{{.Fill}}">{{if .Tip}}<title>{{.Tip}}</title>{{end}}</circle>
{{end}}{{range .Texts}}<text x="{{n .X}}" y="{{n .Y}}" text-anchor="{{.Anchor}}" class="{{.Class}}">{{.Text}}</text>
{{end}}</svg>
{{if .Findings}}<ul class="cps">{{range .Findings}}<li>{{.}}</li>{{end}}</ul>{{end}}
<div class="muted">{{.Note}}</div>
</div>
{{end}}{{if .Folded}}</details>{{else}}</section>{{end}}
{{end}}
<p class="muted">Generated by reckon history report{{if .Generated}} at {{.Generated}}{{end}}.</p>
<script>
(function(){
  var box=document.getElementById("filter"),shown=document.getElementById("shown");
  var charts=document.querySelectorAll(".chart");
  function apply(){
    var words=box.value.toLowerCase().split(/\s+/).filter(Boolean),n=0;
    charts.forEach(function(c){
      var t=(c.getAttribute("data-title")||"").toLowerCase();
      var ok=words.every(function(w){return t.indexOf(w)>=0;});
      c.style.display=ok?"":"none";if(ok){n++;}
    });
    document.querySelectorAll("details.group").forEach(function(d){if(words.length){d.open=true;}});
    shown.textContent=words.length?n+" of "+charts.length+" charts":"";
  }
  box.addEventListener("input",apply);
  if(location.hash){var el=document.getElementById(location.hash.slice(1));if(el&&el.closest("details")){el.closest("details").open=true;}}
})();
</script>
</main></body>
</html>
`))
