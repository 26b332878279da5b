package reporters

import (
	"bytes"
	"github.com/reckon-ci/reckon/spec"
	"regexp"
	"strings"
	"testing"

	"github.com/reckon-ci/reckon/gate"
)

// externalRef finds anything in an HTML document that would load a resource from outside it.
var externalRef = regexp.MustCompile(`(?i)<script|<link|<iframe|<img|\ssrc\s*=|url\(|@import|\shref\s*=\s*"(https?:)?//`)

func externalRefs(html string) []string {
	// The SVG namespace is an identifier, not a resource.
	html = strings.ReplaceAll(html, `xmlns="http://www.w3.org/2000/svg"`, "")
	return externalRef.FindAllString(html, -1)
}

func htmlOf(t *testing.T, r *gate.Run) string {
	t.Helper()
	var b bytes.Buffer
	if err := WriteHTML(&b, r); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func TestHTMLIsSelfContainedAndEscaped(t *testing.T) {
	h := htmlOf(t, sampleRun())
	if refs := externalRefs(h); len(refs) > 0 {
		t.Errorf("HTML references outside resources or runs scripts: %v", refs)
	}
	if strings.Contains(h, "<script>alert") {
		t.Error("engine log text is not escaped")
	}
	if !strings.Contains(h, "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;") {
		t.Error("escaped engine log text missing")
	}
	if strings.ContainsAny(h, "\x00\x07\x1b") {
		t.Error("control characters in the HTML")
	}
	// The self-containment check itself catches outside references.
	for _, bad := range []string{`<link rel="stylesheet" href="https://cdn.example/x.css">`, `<img src="x.png">`, `<div style="background:url(http://x)">`, `<script src="a.js"></script>`} {
		if len(externalRefs(h+bad)) == 0 {
			t.Errorf("not caught: %s", bad)
		}
	}
}

func TestHTMLHasChartsAndFailures(t *testing.T) {
	h := htmlOf(t, sampleRun())
	if n := strings.Count(h, "<svg "); n != 6 {
		t.Errorf("%d charts, want 6 (throughput per config, vs comparison, memory plan, TTFT, TPOT, ITL)", n)
	}
	for _, want := range []string{
		"Output throughput per config", "Throughput vs baseline / comparison config", "Memory plan per config",
		"TTFT percentiles per config", "TPOT percentiles per config", "ITL percentiles per config",
		`<span class="badge fail">FAIL</span>`,
		"custom-ar: output throughput -57% vs nccl",
		"KV cache -91% (10.42 -&gt; 0.90 GiB",
		"custom AR buffers",
		"LAUNCH FAILED",
	} {
		if !strings.Contains(h, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	if strings.Index(h, "<h2>Failures</h2>") > strings.Index(h, "<h2>Charts</h2>") {
		t.Error("failures must come before the charts")
	}
	// The CI whisker of the regression: 0.41..0.45 of 89.5 drawn as a line.
	if !strings.Contains(h, "<line ") {
		t.Error("no whiskers or axes drawn")
	}
}

func TestHTMLGreenAndEmptyRuns(t *testing.T) {
	r := sampleRun()
	r.Checks = r.Checks[:2]
	r.Configs = r.Configs[:2]
	if h := htmlOf(t, r); !strings.Contains(h, `<span class="badge pass">PASS</span>`) || strings.Contains(h, "<h2>Failures</h2>") {
		t.Error("green run not shown as PASS")
	}
	empty := htmlOf(t, &gate.Run{SpecName: "nothing", Interrupted: true})
	if !strings.Contains(empty, "INTERRUPTED") || strings.Contains(empty, "<svg ") {
		t.Error("empty interrupted run")
	}
}

func TestChartScaleIsNice(t *testing.T) {
	for raw, want := range map[float64]float64{0.7: 1, 1.3: 2, 3: 5, 7: 10, 18: 20, 230: 500, 0: 1} {
		if got := niceStep(raw); got != want {
			t.Errorf("niceStep(%v) = %v, want %v", raw, got, want)
		}
	}
	ch := hbarChart("t", "u", []hgroup{{Bars: []hbar{{Label: "a", Segments: []hseg{{Value: 89.5}}, Whisker: &[2]float64{80, 95}}}}}, nil)
	var maxX float64
	for _, r := range ch.Rects {
		maxX = max(maxX, r.X+r.W)
	}
	if maxX > chartLabelW+chartPlotW+0.001 {
		t.Errorf("bar drawn past the plot: %v", maxX)
	}
}

func TestSeveralWorkloadsAreNotMixed(t *testing.T) {
	r := sampleRun()
	// A second, much faster workload on nccl only: mixing it in would move nccl's medians.
	for i := 0; i < 3; i++ {
		r.Configs[0].Trials = append(r.Configs[0].Trials, gate.Trial{Workload: "random-c64", Index: i, Metrics: map[string]float64{
			"output_throughput": 400, "median_tpot_ms": 5, "median_ttft_ms": 20, "p90_ttft_ms": 30, "p99_ttft_ms": 40}})
	}
	md := renderMarkdown(r, MaxMarkdownBytes)
	if !strings.Contains(md, "sharegpt-c16: 89.50 (n=5)<br>random-c64: 400 (n=3)") {
		t.Errorf("per-workload throughput missing from the config table:\n%s", md)
	}
	h := htmlOf(t, r)
	for _, want := range []string{"workload random-c64", "workload sharegpt-c16", "nccl · random-c64", "custom-ar · sharegpt-c16"} {
		if !strings.Contains(h, want) {
			t.Errorf("HTML lacks %q", want)
		}
	}
	// The explanation compares custom-ar with nccl on the workload both ran.
	if got := Explain(r, &r.Checks[3]); !strings.Contains(got, "median TPOT +134% (41 -> 96 ms)") {
		t.Errorf("explanation mixed workloads: %q", got)
	}
}

func TestLatencyChecksGetTheirOwnChart(t *testing.T) {
	r := sampleRun()
	r.Checks = append(r.Checks, gate.Check{Verdict: gate.Verdict{Name: "p99_tpot_ms vs baseline", Kind: string(spec.KindLatency), Config: "nccl", Message: "nccl: p99 TPOT +31% vs baseline", Stat: &gate.StatResult{Metric: "p99_tpot_ms", BaseMedian: 53, HeadMedian: 69.7, Ratio: 1.31, CILow: 1.2, CIHigh: 1.4}}, Status: gate.StatusFailed})
	h := htmlOf(t, r)
	if !strings.Contains(h, "Latency vs baseline / comparison config") {
		t.Error("no latency comparison chart")
	}
	if n := strings.Count(h, "<svg "); n != 7 {
		t.Errorf("%d charts, want 7", n)
	}
	// A latency check is not drawn in the throughput chart.
	tp := statChart("t", r.EffectiveChecks(), isThroughputCheck)
	for _, tx := range tp.Texts {
		if strings.Contains(tx.Text, "p99_tpot_ms") {
			t.Error("latency check in the throughput chart")
		}
	}
}
