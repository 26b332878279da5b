package history

import (
	"fmt"
	"html/template"
	"io"
	"math"
	"strconv"
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
	Title, Note   string
	Width, Height float64
	Dots          []trendDot
	Lines         []trendLine
	Texts         []trendText
	Path          string
	Findings      []string
	Regression    bool
}

// WriteReport writes a self-contained HTML page (inline SVG, no scripts) with one chart per
// series: the last LastN runs (each run's median, its trials as faint dots; the commit and date
// on hover), change points as dashed lines with their forward change, the newest run ("tonight")
// highlighted, and the change points listed under the chart.
func WriteReport(w io.Writer, series []Series, findings []Finding, o ReportOptions) error {
	if o.Title == "" {
		o.Title = "reckon history"
	}
	byKey := map[SeriesKey][]Finding{}
	for _, f := range findings {
		byKey[f.Series] = append(byKey[f.Series], f)
	}
	var charts []trendChart
	var lines []string
	for i := range series {
		c := trendSVG(&series[i], byKey[series[i].Key], o.LastN)
		charts = append(charts, c)
		for _, f := range byKey[series[i].Key] {
			lines = append(lines, f.Line())
		}
	}
	data := map[string]any{"Title": o.Title, "Charts": charts, "Lines": lines, "NSeries": len(series), "NFindings": len(findings)}
	if !o.Generated.IsZero() {
		data["Generated"] = o.Generated.UTC().Format(time.RFC3339)
	}
	return trendTemplate.Execute(w, data)
}

func trendSVG(s *Series, fs []Finding, lastN int) trendChart {
	const W, H, left, right, top, bottom = 860.0, 220.0, 64.0, 16.0, 14.0, 34.0
	pts := s.Points
	offset := 0
	if lastN > 0 && len(pts) > lastN {
		offset = len(pts) - lastN
		pts = pts[offset:]
	}
	c := trendChart{Title: fmt.Sprintf("%s · %s · %s · %s", s.Key.Config, s.Key.Workload, s.Key.Metric, s.Key.Testbed), Width: W, Height: H}
	if len(pts) == 0 {
		c.Note = "no runs"
		return c
	}
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, p := range pts {
		for _, v := range append([]float64{p.Value}, p.Samples...) {
			lo, hi = math.Min(lo, v), math.Max(hi, v)
		}
	}
	if hi-lo < 1e-9*math.Max(1, math.Abs(hi)) {
		lo, hi = lo-1, hi+1
	}
	pad := (hi - lo) * 0.08
	lo, hi = lo-pad, hi+pad
	x := func(i int) float64 {
		if len(pts) == 1 {
			return left + (W-left-right)/2
		}
		return left + float64(i)*(W-left-right)/float64(len(pts)-1)
	}
	y := func(v float64) float64 { return top + (hi-v)/(hi-lo)*(H-top-bottom) }
	// Axes and ticks.
	c.Lines = append(c.Lines, trendLine{X1: left, Y1: top, X2: left, Y2: H - bottom, W: 1, Stroke: "#999"},
		trendLine{X1: left, Y1: H - bottom, X2: W - right, Y2: H - bottom, W: 1, Stroke: "#999"})
	for k := 0; k <= 4; k++ {
		v := lo + (hi-lo)*float64(k)/4
		c.Lines = append(c.Lines, trendLine{X1: left, Y1: y(v), X2: W - right, Y2: y(v), W: 0.5, Stroke: "#e3e6ea"})
		c.Texts = append(c.Texts, trendText{X: left - 4, Y: y(v) + 3, Anchor: "end", Text: num.Format(v), Class: "tick"})
	}
	step := max(1, len(pts)/8)
	for i := 0; i < len(pts); i += step {
		c.Texts = append(c.Texts, trendText{X: x(i), Y: H - bottom + 14, Anchor: "middle", Text: pts[i].StartedAt.Format("01-02"), Class: "tick"})
	}
	// Change points.
	for _, f := range fs {
		i := f.Index - offset
		if i < 0 || i >= len(pts) {
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
		c.Texts = append(c.Texts, trendText{X: xc + 4, Y: top + 10, Anchor: "start", Text: fmt.Sprintf("%+.1f%% %s", f.Forward*100, f.CommitRange()), Class: "cp"})
		c.Findings = append(c.Findings, f.Line())
		// Segment means.
		c.Lines = append(c.Lines, trendLine{X1: x(max(0, i-f.Before.N)), Y1: y(f.Before.Mean), X2: x(i - 1), Y2: y(f.Before.Mean), W: 1, Stroke: "#888", Dash: "2 2"},
			trendLine{X1: x(i), Y1: y(f.After.Mean), X2: x(min(len(pts)-1, i+f.After.N-1)), Y2: y(f.After.Mean), W: 1, Stroke: "#888", Dash: "2 2"})
	}
	// The line through the medians, trial dots, median dots.
	for i, p := range pts {
		if i > 0 {
			c.Lines = append(c.Lines, trendLine{X1: x(i - 1), Y1: y(pts[i-1].Value), X2: x(i), Y2: y(p.Value), W: 1.2, Stroke: "#4c78a8"})
		}
		for _, v := range p.Samples {
			c.Dots = append(c.Dots, trendDot{X: x(i), Y: y(v), R: 1.6, Fill: "#9ab"})
		}
	}
	for i, p := range pts {
		tip := fmt.Sprintf("run %d · %s · commit %s · median %s of %d trial(s)", p.RunID, p.StartedAt.Format("2006-01-02 15:04"), short(p.Commit), num.Format(p.Value), len(p.Samples))
		d := trendDot{X: x(i), Y: y(p.Value), R: 3, Fill: "#4c78a8", Tip: tip}
		if i == len(pts)-1 {
			d.R, d.Fill, d.Tip = 5.5, "#f28e2b", "latest run (tonight): "+tip
		}
		c.Dots = append(c.Dots, d)
	}
	c.Note = fmt.Sprintf("%d of %d runs shown; latest %s (%s)", len(pts), len(s.Points), pts[len(pts)-1].StartedAt.Format("2006-01-02"), short(pts[len(pts)-1].Commit))
	return c
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
ul.cps{margin:6px 0 0;padding-left:18px;font-size:13px}
</style>
</head>
<body><main>
<h1>{{.Title}}</h1>
<p class="muted">{{.NSeries}} series, {{.NFindings}} change points (E-divisive means, t-test significance; see docs/history.md). Hover a point for its run and commit; the orange point is the latest run.</p>
{{if .Lines}}<h2>Change points</h2><ul class="cps">{{range .Lines}}<li><code>{{.}}</code></li>{{end}}</ul>{{end}}
<h2>Series</h2>
{{range .Charts}}<div class="chart{{if .Regression}} regression{{end}}"><h3>{{.Title}}</h3>
<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {{n .Width}} {{n .Height}}" role="img" aria-label="{{.Title}}">
{{range .Lines}}<line x1="{{n .X1}}" y1="{{n .Y1}}" x2="{{n .X2}}" y2="{{n .Y2}}" stroke="{{.Stroke}}" stroke-width="{{n .W}}"{{if .Dash}} stroke-dasharray="{{.Dash}}"{{end}}/>
{{end}}{{range .Dots}}<circle cx="{{n .X}}" cy="{{n .Y}}" r="{{n .R}}" fill="{{.Fill}}">{{if .Tip}}<title>{{.Tip}}</title>{{end}}</circle>
{{end}}{{range .Texts}}<text x="{{n .X}}" y="{{n .Y}}" text-anchor="{{.Anchor}}" class="{{.Class}}">{{.Text}}</text>
{{end}}</svg>
{{if .Findings}}<ul class="cps">{{range .Findings}}<li>{{.}}</li>{{end}}</ul>{{end}}
<div class="muted">{{.Note}}</div>
</div>
{{end}}
<p class="muted">Generated by reckon history report{{if .Generated}} at {{.Generated}}{{end}}.</p>
</main></body>
</html>
`))
