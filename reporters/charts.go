package reporters

import (
	"fmt"
	"github.com/reckon-ci/reckon/spec"
	"math"
	"strings"

	"github.com/reckon-ci/reckon/gate"
	"github.com/reckon-ci/reckon/internal/metric"
	"github.com/reckon-ci/reckon/internal/num"
)

// svgChart is a chart laid out in Go and drawn by the HTML template as inline SVG; every text in
// it is escaped by html/template.
type svgChart struct {
	Title, Note   string
	Width, Height float64
	Rects         []svgRect
	Lines         []svgLine
	Texts         []svgText
	Dots          []svgDot
	Legend        []legendItem
}

type svgRect struct {
	X, Y, W, H float64
	Fill       string
	Tip        string
}

type svgLine struct {
	X1, Y1, X2, Y2 float64
	Stroke         string
	Width          float64
	Dash           string
}

type svgText struct {
	X, Y   float64
	Text   string
	Anchor string // start, middle, end
	Class  string
}

type svgDot struct {
	X, Y, R float64
	Fill    string
	Tip     string
}

type legendItem struct {
	Name, Color string
}

// Palette (colour-blind friendly, Okabe–Ito).
const (
	colBase    = "#9e9e9e"
	colPass    = "#009e73"
	colFail    = "#d55e00"
	colNeutral = "#0072b2"
	colWeights = "#0072b2"
	colKV      = "#009e73"
	colGraph   = "#e69f00"
	colFree    = "#d9d9d9"
	colP50     = "#56b4e9"
	colP90     = "#0072b2"
	colP99     = "#cc79a7"
)

var extraColours = []string{"#d55e00", "#cc79a7", "#f0e442", "#56b4e9", "#8c564b", "#7f7f7f"}

// hseg is one segment of a horizontal bar.
type hseg struct {
	Value float64
	Color string
	Name  string
}

// hbar is one horizontal bar: stacked segments, an optional whisker (low, high), dots (single
// observations) and a text after the bar.
type hbar struct {
	Label    string
	Segments []hseg
	Whisker  *[2]float64
	Dots     []float64
	Text     string
}

// hgroup is a labelled group of bars.
type hgroup struct {
	Label string
	Bars  []hbar
}

// Layout of horizontal bar charts, in SVG user units.
const (
	chartLabelW = 190.0
	chartPlotW  = 520.0
	chartTextW  = 150.0
	chartBarH   = 14.0
	chartBarGap = 4.0
	chartGroupG = 14.0
	chartGroupH = 16.0
	chartTop    = 12.0
	chartAxisH  = 30.0
)

// hbarChart lays out groups of horizontal bars on one linear axis starting at zero.
func hbarChart(title, unit string, groups []hgroup, legend []legendItem) svgChart {
	ch := svgChart{Title: title, Legend: legend, Width: chartLabelW + chartPlotW + chartTextW}
	maxV := hbarMax(groups)
	step, top, ticks := axisTicks(maxV)
	xOf := func(v float64) float64 {
		if !finite(v) || v < 0 {
			v = 0
		}
		return chartLabelW + chartPlotW*math.Min(v, top)/top
	}
	y := chartTop
	for gi, g := range groups {
		if gi > 0 {
			y += chartGroupG
		}
		if g.Label != "" {
			// The group's label on its own line above its bars.
			ch.Texts = append(ch.Texts, svgText{X: 4, Y: y + 11, Text: clipRunes(g.Label, 60), Anchor: "start", Class: "grp"})
			y += chartGroupH
		}
		for _, b := range g.Bars {
			ch.drawHBar(b, g.Label, unit, y, xOf)
			y += chartBarH + chartBarGap
		}
	}
	axisY := y + 2
	ch.Lines = append(ch.Lines, svgLine{X1: chartLabelW, Y1: chartTop - 4, X2: chartLabelW, Y2: axisY, Stroke: "#555", Width: 1})
	for i := 0; i <= ticks; i++ {
		v := float64(i) * step
		x := xOf(v)
		ch.Lines = append(ch.Lines, svgLine{X1: x, Y1: chartTop - 4, X2: x, Y2: axisY, Stroke: "#e0e0e0", Width: 1, Dash: "2,2"})
		ch.Texts = append(ch.Texts, svgText{X: x, Y: axisY + 14, Text: num.Format(v), Anchor: "middle", Class: "tick"})
	}
	ch.Texts = append(ch.Texts, svgText{X: chartLabelW + chartPlotW/2, Y: axisY + 28, Text: unit, Anchor: "middle", Class: "tick"})
	ch.Height = axisY + chartAxisH
	return ch
}

// hbarMax is the largest value the bars of groups reach (a bar's positive segments stacked, its
// whisker's top, its dots), or 1 when none is positive.
func hbarMax(groups []hgroup) float64 {
	maxV := 0.0
	for _, g := range groups {
		for _, b := range g.Bars {
			sum := 0.0
			for _, s := range b.Segments {
				if finite(s.Value) && s.Value > 0 {
					sum += s.Value
				}
			}
			maxV = math.Max(maxV, sum)
			if b.Whisker != nil && finite(b.Whisker[1]) {
				maxV = math.Max(maxV, b.Whisker[1])
			}
			for _, d := range b.Dots {
				if finite(d) {
					maxV = math.Max(maxV, d)
				}
			}
		}
	}
	if maxV <= 0 {
		maxV = 1
	}
	return maxV
}

// drawHBar draws bar b of the group labelled group at height y, xOf mapping values to x: its
// stacked segments, its whisker, its dots, its label and its value text.
func (ch *svgChart) drawHBar(b hbar, group, unit string, y float64, xOf func(float64) float64) {
	x := chartLabelW
	for _, s := range b.Segments {
		if !finite(s.Value) || s.Value <= 0 {
			continue
		}
		w := xOf(s.Value) - chartLabelW
		tip := fmt.Sprintf("%s %s: %s %s", group, s.Name, num.Format(s.Value), unit)
		ch.Rects = append(ch.Rects, svgRect{X: x, Y: y, W: w, H: chartBarH, Fill: s.Color, Tip: strings.TrimSpace(tip)})
		x += w
	}
	mid := y + chartBarH/2
	if b.Whisker != nil && finite(b.Whisker[0]) && finite(b.Whisker[1]) {
		x1, x2 := xOf(b.Whisker[0]), xOf(b.Whisker[1])
		ch.Lines = append(ch.Lines,
			svgLine{X1: x1, Y1: mid, X2: x2, Y2: mid, Stroke: "#222", Width: 1.5},
			svgLine{X1: x1, Y1: y + 2, X2: x1, Y2: y + chartBarH - 2, Stroke: "#222", Width: 1.5},
			svgLine{X1: x2, Y1: y + 2, X2: x2, Y2: y + chartBarH - 2, Stroke: "#222", Width: 1.5})
		x = math.Max(x, x2)
	}
	for _, d := range b.Dots {
		if finite(d) {
			ch.Dots = append(ch.Dots, svgDot{X: xOf(d), Y: mid, R: 2.5, Fill: "#222", Tip: num.Format(d) + " " + unit})
		}
	}
	if b.Label != "" {
		ch.Texts = append(ch.Texts, svgText{X: chartLabelW - 6, Y: mid + 4, Text: clipRunes(b.Label, 30), Anchor: "end", Class: "sub"})
	}
	if b.Text != "" {
		ch.Texts = append(ch.Texts, svgText{X: math.Min(x+6, chartLabelW+chartPlotW+4), Y: mid + 4, Text: b.Text, Anchor: "start", Class: "val"})
	}
}

// maxAxisTicks bounds the ticks of a chart axis.
const maxAxisTicks = 12

// axisTicks returns the tick step, the axis end (a multiple of step) and the number of steps
// of a linear axis from zero that holds maxV. It always terminates with at most maxAxisTicks
// steps and a finite end: a value near math.MaxFloat64 (or a sum of values that overflows to
// +Inf) would otherwise round the end up to +Inf, and a tick loop stepping towards it would
// never end.
func axisTicks(maxV float64) (step, top float64, ticks int) {
	if !finite(maxV) || maxV > math.MaxFloat64/4 {
		maxV = math.MaxFloat64 / 4
	}
	if maxV <= 0 {
		maxV = 1
	}
	step = niceStep(maxV / 5)
	top = math.Ceil(maxV/step) * step
	n := math.Round(top / step)
	if !finite(top) || top <= 0 || !finite(n) || n < 1 || n > maxAxisTicks {
		step, top, n = maxV/5, maxV, 5
	}
	return step, top, int(n)
}

// niceStep rounds a raw tick step to 1, 2 or 5 times a power of ten.
func niceStep(raw float64) float64 {
	if raw <= 0 || !finite(raw) {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(raw)))
	switch f := raw / p; {
	case f <= 1:
		return p
	case f <= 2:
		return 2 * p
	case f <= 5:
		return 5 * p
	}
	return 10 * p
}

func clipRunes(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

// isThroughputCheck reports whether c is a statistical throughput comparison: a throughput
// check, or another comparison (not a latency check) of a metric that the registry
// (internal/metric) says is better higher.
func isThroughputCheck(c *gate.Check) bool {
	return c.Kind == string(spec.KindThroughput) || (c.Kind != string(spec.KindLatency) && metricDirection(c.Metric()) == metric.HigherIsBetter)
}

// isLatencyCheck reports whether c is a statistical latency comparison: a latency check, or a
// relative comparison of a metric that the registry says is better lower.
func isLatencyCheck(c *gate.Check) bool {
	return c.Kind == string(spec.KindLatency) || (c.Kind == string(spec.KindRelative) && metricDirection(c.Metric()) == metric.LowerIsBetter)
}

// metricDirection is the registry's direction of a metric (metric.NoDirection when unknown).
func metricDirection(name string) metric.Direction {
	m, _ := metric.Lookup(name)
	return m.Direction
}

// throughputVsBaselineChart charts the statistical throughput checks (see statChart).
func throughputVsBaselineChart(r *gate.Run, checks []gate.Check) *svgChart {
	return statChart("Throughput vs baseline / comparison config", checks, isThroughputCheck)
}

// latencyVsBaselineChart charts the statistical latency checks (see statChart).
func latencyVsBaselineChart(r *gate.Run, checks []gate.Check) *svgChart {
	return statChart("Latency vs baseline / comparison config", checks, isLatencyCheck)
}

// statChart: every selected statistical check with both medians, the comparison bar (grey) and
// this config's bar with the CI of the ratio as a whisker.
func statChart(title string, checks []gate.Check, keep func(*gate.Check) bool) *svgChart {
	var groups []hgroup
	units := map[string]bool{}
	for i := range checks {
		c := &checks[i]
		if baseMedian(c) == nil || headMedian(c) == nil || !keep(c) {
			continue
		}
		base, head := *baseMedian(c), *headMedian(c)
		against := "baseline"
		if c.Against != "" {
			against = c.Against
		}
		col := colNeutral
		switch c.EffectiveStatus() {
		case gate.StatusFailed:
			col = colFail
		case gate.StatusPassed:
			col = colPass
		}
		hb := hbar{Label: c.Config, Segments: []hseg{{Value: head, Color: col, Name: c.Config}}, Text: num.Format(head)}
		if ratio(c) != nil {
			hb.Text += " (" + num.Pct(*ratio(c)-1) + ")"
		}
		if ciLow(c) != nil && ciHigh(c) != nil && finite(base) {
			hb.Whisker = &[2]float64{base * *ciLow(c), base * *ciHigh(c)}
		}
		groups = append(groups, hgroup{
			Label: c.Config + " · " + c.Metric(),
			Bars: []hbar{
				{Label: against, Segments: []hseg{{Value: base, Color: colBase, Name: against}}, Text: num.Format(base)},
				hb,
			},
		})
		units[metricUnit(c.Metric())] = true
	}
	if len(groups) == 0 {
		return nil
	}
	unit := "value"
	if len(units) == 1 {
		for u := range units {
			unit = u
		}
	}
	ch := hbarChart(title, unit, groups,
		[]legendItem{{"comparison (median)", colBase}, {"passed", colPass}, {"failed", colFail}, {"other", colNeutral}})
	ch.Note = "Whiskers: confidence interval of head/base, drawn on the comparison's median."
	return &ch
}

// throughputPerConfigChart: per config, the median output throughput as the verdicts compute it
// (throughputMedian: of the launch means with several launches), with the trials as dots and
// their range as a whisker; one group per workload when there are several.
func throughputPerConfigChart(r *gate.Run) *svgChart {
	const key = "output_throughput"
	wls := runWorkloads(r)
	var groups []hgroup
	for _, w := range wls {
		g := hgroup{}
		if len(wls) > 1 {
			g.Label = "workload " + w
		}
		for i := range r.Configs {
			c := &r.Configs[i]
			m, n, vs, ok := throughputMedian(c, w, key)
			if !ok {
				continue
			}
			lo, hi := vs[0], vs[0]
			for _, v := range vs {
				lo, hi = math.Min(lo, v), math.Max(hi, v)
			}
			g.Bars = append(g.Bars, hbar{Label: c.Name, Segments: []hseg{{Value: m, Color: colNeutral, Name: "median"}},
				Whisker: &[2]float64{lo, hi}, Dots: vs, Text: fmt.Sprintf("%s (%s)", num.Format(m), n)})
		}
		if len(g.Bars) > 0 {
			groups = append(groups, g)
		}
	}
	if len(groups) == 0 {
		return nil
	}
	ch := hbarChart("Output throughput per config", "tok/s", groups, []legendItem{{"median (of launch means with several launches)", colNeutral}})
	ch.Note = "Dots: single trials; whiskers: their range."
	return &ch
}

// memoryPlanChart: per config, the memory plan as a stacked bar (weights, KV cache, CUDA graphs,
// every other component, free memory).
func memoryPlanChart(r *gate.Run) *svgChart {
	engines := make([]map[string]any, 0, len(r.Configs))
	for i := range r.Configs {
		engines = append(engines, r.Configs[i].Engine)
	}
	keys := memoryKeys(engines...)
	order := []string{keyWeights, keyKVGiB}
	colours := map[string]string{keyWeights: colWeights, keyKVGiB: colKV, keyGraph: colGraph, keyAvailable: colFree}
	ei := 0
	for _, k := range keys {
		if k == keyWeights || k == keyAvailable {
			continue
		}
		order = append(order, k)
		if colours[k] == "" {
			colours[k] = extraColours[ei%len(extraColours)]
			ei++
		}
	}
	order = append(order, keyAvailable)
	var bars []hbar
	used := map[string]bool{}
	for i := range r.Configs {
		c := &r.Configs[i]
		var segs []hseg
		total := 0.0
		for _, k := range order {
			if v, ok := mapNum(c.Engine, k); ok && v > 0 {
				segs = append(segs, hseg{Value: v, Color: colours[k], Name: memLabel(k)})
				used[k] = true
				total += v
			}
		}
		if len(segs) == 0 {
			continue
		}
		bars = append(bars, hbar{Label: c.Name, Segments: segs, Text: fmt.Sprintf("%.2f GiB", total)})
	}
	if len(bars) == 0 {
		return nil
	}
	var legend []legendItem
	for _, k := range order {
		if used[k] {
			legend = append(legend, legendItem{memLabel(k), colours[k]})
		}
	}
	ch := hbarChart("Memory plan per config (per GPU)", "GiB", []hgroup{{Bars: bars}}, legend)
	ch.Note = "From the engine's own report (logs and endpoints), not from the flags it was given."
	return &ch
}

// latencyCharts: for TTFT, TPOT and ITL, per config the p50, p90 and p99 (median over trials).
func latencyCharts(r *gate.Run) []svgChart {
	var out []svgChart
	for _, m := range []struct{ key, title string }{{"ttft", "TTFT"}, {"tpot", "TPOT"}, {"itl", "ITL"}} {
		var groups []hgroup
		wls := runWorkloads(r)
		for i, w := 0, 0; i < len(r.Configs) && w < max(len(wls), 1); {
			c := &r.Configs[i]
			label := c.Name
			var only map[string]bool
			if len(wls) > 1 {
				label += " · " + wls[w]
				only = map[string]bool{wls[w]: true}
			}
			// Next (config, workload) pair: workloads vary fastest.
			if w++; w >= len(wls) {
				w, i = 0, i+1
			}
			var bars []hbar
			for _, p := range []struct {
				keys  []string
				name  string
				color string
			}{
				{[]string{"median_" + m.key + "_ms", "p50_" + m.key + "_ms"}, "p50", colP50},
				{[]string{"p90_" + m.key + "_ms"}, "p90", colP90},
				{[]string{"p99_" + m.key + "_ms"}, "p99", colP99},
			} {
				for _, k := range p.keys {
					if v, ok := median(trialValues(c, only, k)); ok {
						bars = append(bars, hbar{Label: p.name, Segments: []hseg{{Value: v, Color: p.color, Name: p.name}}, Text: num.Format(v) + " ms"})
						break
					}
				}
			}
			if len(bars) > 0 {
				groups = append(groups, hgroup{Label: label, Bars: bars})
			}
		}
		if len(groups) == 0 {
			continue
		}
		ch := hbarChart(m.title+" percentiles per config", "ms", groups, []legendItem{{"p50", colP50}, {"p90", colP90}, {"p99", colP99}})
		ch.Note = "Median over trials of each trial's percentile."
		out = append(out, ch)
	}
	return out
}

// metricUnit is a metric's unit from the registry (internal/metric); a metric without one is
// its own unit, so that a chart never puts two unlike metrics on one labelled axis.
func metricUnit(k string) string {
	if m, ok := metric.Lookup(k); ok && m.Unit != "" {
		return m.Unit
	}
	return k
}
