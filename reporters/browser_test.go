package reporters

// The reports in a real browser: headless Chromium (Debian's chromium), driven over the DevTools
// protocol with chromedp, loads report.html of a green, a red, a pre-merge A/B and an interrupted
// run, the history page with a change point, and the terminal report (its ANSI colours rendered),
// at 1280x900. It checks that no script threw or logged an error, that the verdict and the first
// failure lie within the first 900 px, that the page does not scroll sideways at 1280 px, that every chart's SVG drew something, and (history) that
// the change point's link reaches its chart and the filter box filters. Screenshots go to
// out/screenshots/ (RECKON_SCREENSHOTS overrides; RECKON_UPDATE_SCREENSHOTS=1 writes docs/img/,
// which docs/reports.md shows). Without a browser the test skips, saying why, unless
// RECKON_REQUIRE_BROWSER=1 (.ci/run sets it after installing chromium).

import (
	"bytes"
	"context"
	"crypto/sha1"
	"fmt"
	"github.com/reckon-ci/reckon/spec"
	"html"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/reckon-ci/reckon/gate"
	"github.com/reckon-ci/reckon/history"
)

// findBrowser returns a Chromium or Chrome executable: $RECKON_CHROME, else the first of the
// usual names on PATH.
func findBrowser() (string, bool) {
	if p := os.Getenv("RECKON_CHROME"); p != "" {
		return p, true
	}
	for _, n := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome"} {
		if p, err := exec.LookPath(n); err == nil {
			return p, true
		}
	}
	return "", false
}

func screenshotDir(t *testing.T) string {
	dir := os.Getenv("RECKON_SCREENSHOTS")
	if os.Getenv("RECKON_UPDATE_SCREENSHOTS") == "1" {
		dir = filepath.Join("..", "docs", "img")
	}
	if dir == "" {
		dir = filepath.Join("..", "out", "screenshots")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// pageProblems collects what the page's scripts threw or logged as errors.
type pageProblems struct{ errs []string }

func TestReportsInABrowser(t *testing.T) {
	bin, ok := findBrowser()
	if !ok {
		if os.Getenv("RECKON_REQUIRE_BROWSER") == "1" {
			t.Fatal("RECKON_REQUIRE_BROWSER=1 but no chromium, chromium-browser or google-chrome on PATH (and RECKON_CHROME unset)")
		}
		t.Skip("no headless browser here (chromium, chromium-browser, google-chrome; or set RECKON_CHROME): the reports are not checked in a browser. apt-get install chromium, or RECKON_REQUIRE_BROWSER=1 to make this a failure")
	}
	start := time.Now()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(bin), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.WindowSize(1280, 900), chromedp.Flag("hide-scrollbars", true), chromedp.Flag("force-device-scale-factor", "1"))
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelA()
	bctx, cancelB := chromedp.NewContext(actx)
	defer cancelB()
	ctx, cancel := context.WithTimeout(bctx, 2*time.Minute)
	defer cancel()
	if err := chromedp.Run(ctx); err != nil {
		t.Fatalf("start %s: %v", bin, err)
	}
	dir := t.TempDir()
	shots := screenshotDir(t)

	pages := []struct {
		name, file string
		run        *gate.Run
	}{
		{"red", "report-red.png", sampleRun()},
		{"green", "report-green.png", greenRun()},
		{"ab", "report-ab.png", abRun()},
		{"interrupted", "report-interrupted.png", interruptedRun()},
	}
	for _, pg := range pages {
		t.Run(pg.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := WriteHTML(&b, pg.run); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(dir, pg.name+".html")
			if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
			tctx, cancel := chromedp.NewContext(ctx)
			defer cancel()
			probs := watch(tctx)
			var verdictBottom, failBottom, pageWidth float64
			var charts []chartDrawn
			var png []byte
			err := chromedp.Run(tctx,
				chromedp.EmulateViewport(1280, 900),
				chromedp.Navigate("file://"+path),
				chromedp.WaitReady("body"),
				chromedp.Evaluate(`document.getElementById("verdict").getBoundingClientRect().bottom`, &verdictBottom),
				chromedp.Evaluate(`(function(){var f=document.querySelector("#failures .failure, #interrupted");return f?f.getBoundingClientRect().bottom:0})()`, &failBottom),
				chromedp.Evaluate(chartsJS, &charts),
				chromedp.Evaluate(`document.documentElement.scrollWidth`, &pageWidth),
				chromedp.CaptureScreenshot(&png),
			)
			if err != nil {
				t.Fatal(err)
			}
			probs.check(t)
			if verdictBottom <= 0 || verdictBottom > 900 {
				t.Errorf("verdict ends at %.0f px: not within the first 900 px", verdictBottom)
			}
			if pageWidth > 1280 {
				t.Errorf("the page is %.0f px wide: it scrolls sideways at 1280 px", pageWidth)
			}
			if !pg.run.Green() && (failBottom <= 0 || failBottom > 900) {
				t.Errorf("first failure ends at %.0f px: not within the first 900 px", failBottom)
			}
			checkCharts(t, charts)
			if len(charts) == 0 && len(pg.run.Configs) > 0 {
				t.Errorf("no chart drawn")
			}
			writeShot(t, shots, pg.file, png)
		})
	}

	t.Run("history", func(t *testing.T) {
		var b bytes.Buffer
		ser, fs := historySample()
		if err := history.WriteReport(&b, ser, fs, history.ReportOptions{Title: "reckon history: nightly"}); err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, "history.html")
		if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		tctx, cancel := chromedp.NewContext(ctx)
		defer cancel()
		probs := watch(tctx)
		var charts []chartDrawn
		var png []byte
		var cpTop, visibleAfterFilter, total float64
		err := chromedp.Run(tctx,
			chromedp.EmulateViewport(1280, 900),
			chromedp.Navigate("file://"+path),
			chromedp.WaitReady("body"),
			chromedp.Evaluate(chartsJS, &charts),
			chromedp.CaptureScreenshot(&png),
			// The change point's link reaches its chart.
			chromedp.Click(`#change-points + ul a`, chromedp.ByQuery),
			chromedp.Sleep(100*time.Millisecond),
			chromedp.Evaluate(`(function(){var id=document.querySelector("#change-points + ul a").getAttribute("href").slice(1);return document.getElementById(id).getBoundingClientRect().top})()`, &cpTop),
			// The filter box filters.
			chromedp.SendKeys(`#filter`, "kv_cache", chromedp.ByID),
			chromedp.Evaluate(`Array.from(document.querySelectorAll(".chart")).filter(function(c){return c.offsetParent!==null}).length`, &visibleAfterFilter),
			chromedp.Evaluate(`document.querySelectorAll(".chart").length`, &total),
		)
		if err != nil {
			t.Fatal(err)
		}
		probs.check(t)
		checkCharts(t, charts)
		if len(charts) < 4 {
			t.Errorf("history page drew %d charts, want every series'", len(charts))
		}
		if cpTop < -1 || cpTop > 300 {
			t.Errorf("after following the change point's link its chart is at %.0f px, not at the top", cpTop)
		}
		if visibleAfterFilter < 1 || visibleAfterFilter >= total {
			t.Errorf("filter \"kv_cache\": %.0f of %.0f charts visible", visibleAfterFilter, total)
		}
		writeShot(t, shots, "history.png", png)
	})

	t.Run("terminal", func(t *testing.T) {
		var b bytes.Buffer
		if err := WriteTerminal(&b, sampleRun(), TerminalOptions{Color: true}); err != nil {
			t.Fatal(err)
		}
		b.WriteString("reports: out (junit.xml, results.json, summary.md, report.html); 7m13s to verdict\n")
		b.WriteString(ansiRed + ansiBold + "FAIL" + ansiReset + ": " + sampleRun().Count().String() + "\n")
		page := `<!DOCTYPE html><html><head><meta charset="utf-8"><style>body{margin:0;background:#1e1e1e}pre{margin:0;padding:14px 18px;color:#d4d4d4;font:13px/1.4 "DejaVu Sans Mono",monospace;white-space:pre-wrap}</style></head><body><pre id="term">` +
			"$ make gate\n" + ansiHTML(b.String()) + `</pre></body></html>`
		path := filepath.Join(dir, "terminal.html")
		if err := os.WriteFile(path, []byte(page), 0o644); err != nil {
			t.Fatal(err)
		}
		tctx, cancel := chromedp.NewContext(ctx)
		defer cancel()
		var png []byte
		err := chromedp.Run(tctx,
			chromedp.EmulateViewport(1280, 560),
			chromedp.Navigate("file://"+path),
			chromedp.WaitReady("#term"),
			chromedp.Screenshot("#term", &png, chromedp.ByID),
		)
		if err != nil {
			t.Fatal(err)
		}
		writeShot(t, shots, "terminal.png", png)
	})
	t.Logf("browser checks took %s (%s)", time.Since(start).Round(time.Millisecond), bin)
}

// chartDrawn is what the page says of one chart: its title, how many shapes its SVG holds and
// the size of what it drew.
type chartDrawn struct {
	Title  string  `json:"title"`
	Shapes float64 `json:"shapes"`
	W      float64 `json:"w"`
	H      float64 `json:"h"`
}

const chartsJS = `Array.from(document.querySelectorAll(".chart")).map(function(c){
  var svg=c.querySelector("svg"),bb={width:0,height:0};
  if(svg){var d=c.closest("details");if(d){d.open=true;}try{bb=svg.getBBox();}catch(e){}}
  return {title:c.getAttribute("data-chart")||c.getAttribute("data-title")||"",
    shapes:svg?svg.querySelectorAll("rect,line,circle,polyline,path").length:0,w:bb.width,h:bb.height};
})`

func checkCharts(t *testing.T, charts []chartDrawn) {
	t.Helper()
	for _, c := range charts {
		if c.Shapes == 0 || c.W < 50 || c.H < 20 || math.IsNaN(c.W) {
			t.Errorf("chart %q did not draw: %v shapes, %.0fx%.0f", c.Title, c.Shapes, c.W, c.H)
		}
	}
}

// watch records uncaught exceptions and console errors of a tab.
func watch(ctx context.Context) *pageProblems {
	p := &pageProblems{}
	chromedp.ListenTarget(ctx, func(ev any) {
		switch e := ev.(type) {
		case *runtime.EventExceptionThrown:
			p.errs = append(p.errs, "exception: "+e.ExceptionDetails.Text+describe(e.ExceptionDetails.Exception))
		case *runtime.EventConsoleAPICalled:
			if e.Type == runtime.APITypeError || e.Type == runtime.APITypeAssert {
				var parts []string
				for _, a := range e.Args {
					parts = append(parts, string(a.Value))
				}
				p.errs = append(p.errs, "console.error: "+strings.Join(parts, " "))
			}
		}
	})
	return p
}

func describe(o *runtime.RemoteObject) string {
	if o == nil {
		return ""
	}
	return " " + o.Description
}

func (p *pageProblems) check(t *testing.T) {
	t.Helper()
	for _, e := range p.errs {
		t.Errorf("script error: %s", e)
	}
}

func writeShot(t *testing.T, dir, name string, png []byte) {
	t.Helper()
	if len(png) < 1000 {
		t.Errorf("%s: screenshot of %d bytes", name, len(png))
		return
	}
	if err := os.WriteFile(filepath.Join(dir, name), png, 0o644); err != nil {
		t.Errorf("screenshot %s: %v", name, err)
	}
}

// ansiHTML renders the terminal report's few ANSI styles as HTML spans (for the screenshot).
func ansiHTML(s string) string {
	styles := map[string]string{ansiBold: "font-weight:bold", ansiDim: "opacity:.65", ansiRed: "color:#f14c4c", ansiGreen: "color:#23d18b", ansiYellow: "color:#f5f543"}
	var b strings.Builder
	open := 0
	for len(s) > 0 {
		i := strings.Index(s, "\x1b[")
		if i < 0 {
			b.WriteString(html.EscapeString(s))
			break
		}
		b.WriteString(html.EscapeString(s[:i]))
		s = s[i:]
		j := strings.IndexByte(s, 'm')
		if j < 0 {
			break
		}
		code := s[:j+1]
		s = s[j+1:]
		if code == ansiReset {
			b.WriteString(strings.Repeat("</span>", open))
			open = 0
			continue
		}
		// Combined codes (bold+red) arrive as consecutive sequences.
		b.WriteString(`<span style="` + styles[code] + `">`)
		open++
	}
	b.WriteString(strings.Repeat("</span>", open))
	return b.String()
}

// greenRun is a passing run: the red sample's nccl config and its passing checks.
func greenRun() *gate.Run {
	r := sampleRun()
	r.SpecName = "default"
	r.Configs = r.Configs[:1]
	var keep []gate.Check
	for _, c := range r.Checks {
		if c.Config == "nccl" || c.Config == "" {
			keep = append(keep, c)
		}
	}
	r.Checks = keep
	return r
}

// abRun is a pre-merge A/B: main and pr, three launches each, the launch means the unit; pr is
// slower, and a latency check is still undecided.
func abRun() *gate.Run {
	start := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	mk := func(name string, means []float64) gate.Config {
		c := gate.Config{Name: name, Launches: 3, Args: []string{"--tp-size", "2"},
			Engine: map[string]any{"kv_cache_tokens": 290400.0, "kv_cache_gib": 0.14, "weights_gib": 0.05, "cuda_graph_gib": 0.02, "available_gpu_mem_gib": 0.04, "allreduce": "custom", "custom_allreduce_gib": 0.01}}
		for l, m := range means {
			for i := 0; i < 3; i++ {
				f := 1 + 0.01*float64(i-1)
				c.Trials = append(c.Trials, gate.Trial{Workload: "decode", Index: l*3 + i, Launch: l + 1, Metrics: map[string]float64{
					"output_throughput": m * f, "median_ttft_ms": 180 / f, "p90_ttft_ms": 260 / f, "p99_ttft_ms": 300 / f,
					"median_tpot_ms": 9 / f, "p90_tpot_ms": 11 / f, "p99_tpot_ms": 13 / f, "median_itl_ms": 9 / f, "p90_itl_ms": 12 / f, "p99_itl_ms": 15 / f}})
			}
		}
		return c
	}
	main, pr := mk("main", []float64{1210, 1268, 1190}), mk("pr", []float64{506.9, 478, 515})
	launchMetrics := map[string]float64{"launches_head": 3, "launches_base": 3}
	return &gate.Run{
		Schema: gate.ResultsSchema, SpecName: "premerge-ab", Engine: "sglang", TestbedKey: "h200x2-nvlink-1a2b3c4d",
		GitCommit: "4f1c2e9a7b3d", StartedAt: start, FinishedAt: start.Add(14 * time.Minute),
		LaunchOrder: []gate.LaunchRecord{{Config: "main", Launch: 1, Of: 3}, {Config: "pr", Launch: 1, Of: 3}, {Config: "pr", Launch: 2, Of: 3},
			{Config: "main", Launch: 2, Of: 3}, {Config: "main", Launch: 3, Of: 3}, {Config: "pr", Launch: 3, Of: 3}},
		Configs: []gate.Config{main, pr},
		Checks: []gate.Check{
			{Verdict: gate.Verdict{Name: "health", Kind: gate.KindHealth, Config: "main", Outcome: gate.Pass, Message: "main: started"}, Status: gate.StatusPassed},
			{Verdict: gate.Verdict{Name: "health", Kind: gate.KindHealth, Config: "pr", Outcome: gate.Pass, Message: "pr: started"}, Status: gate.StatusPassed},
			{Verdict: gate.Verdict{Name: "pr output_throughput vs main", Kind: string(spec.KindThroughput), Config: "pr", Outcome: gate.Fail, Metrics: launchMetrics,
				Message: "pr: output_throughput -58% vs main (ratio 0.42, 95% CI 0.39–0.45, p=0.002): regression [unit: launch, 3 vs 3 launches of 3 trials]",
				Stat:    &gate.StatResult{Metric: "output_throughput", NBase: 3, NHead: 3, BaseMedian: 1210, HeadMedian: 506.9, Ratio: 506.9 / 1210, CILow: 0.39, CIHigh: 0.45, PValue: 0.002, Outcome: gate.Regression}, Against: "main"},
				Status: gate.StatusFailed},
			{Verdict: gate.Verdict{Name: "pr p99_ttft_ms vs main", Kind: string(spec.KindLatency), Config: "pr", Outcome: "inconclusive", Metrics: launchMetrics,
				Message: "pr: p99_ttft_ms +3.1% vs main (ratio 1.03, 95% CI 0.97–1.10, p=0.21): inconclusive",
				Stat:    &gate.StatResult{Metric: "p99_ttft_ms", NBase: 3, NHead: 3, BaseMedian: 300, HeadMedian: 309.3, Ratio: 1.031, CILow: 0.97, CIHigh: 1.10, PValue: 0.21, Outcome: gate.Undecided, MoreTrials: 4, MaxTrials: 30}, Against: "main"},
				Status: gate.StatusSkipped},
		},
	}
}

// interruptedRun is the red sample stopped by --timeout: the statistical checks never ran.
func interruptedRun() *gate.Run {
	r := sampleRun()
	r.Interrupted, r.InterruptReason = true, "--timeout 20m elapsed"
	for i := range r.Checks {
		if r.Checks[i].Stat != nil {
			r.Checks[i] = gate.Check{Verdict: gate.Verdict{Name: r.Checks[i].Name, Kind: r.Checks[i].Kind, Config: r.Checks[i].Config, Outcome: gate.OutcomeNotRun,
				Message: "not run: the run was interrupted (--timeout 20m elapsed)"}, Status: gate.StatusSkipped}
		}
	}
	return r
}

// historySample is 30 nights of one spec: output throughput falls 18% at night 21 (a change point,
// regression), the KV cache and the bookkeeping series stay flat.
func historySample() ([]history.Series, []history.Finding) {
	t0 := time.Date(2026, 11, 1, 2, 0, 0, 0, time.UTC)
	commit := func(i int) string { return fmt.Sprintf("%x", sha1.Sum([]byte(fmt.Sprint("night", i)))) }
	mk := func(cfg, metric string, f func(i int) float64) history.Series {
		s := history.Series{Key: history.SeriesKey{Testbed: "h200x8-nvlink-7e1f", Spec: "nightly", Config: cfg, Workload: "decode-c16", Metric: metric}}
		for i := 0; i < 30; i++ {
			v := f(i)
			s.Points = append(s.Points, history.Point{RunID: int64(100 + i), StartedAt: t0.Add(time.Duration(i) * 24 * time.Hour), Commit: commit(i),
				Value: v, Samples: []float64{v * 0.99, v, v * 1.012}})
		}
		return s
	}
	wobble := func(i int) float64 { return 1 + 0.01*math.Sin(float64(i)*1.7) }
	ser := []history.Series{
		mk("nccl", "completed", func(int) float64 { return 64 }),
		mk("nccl", "failed", func(int) float64 { return 0 }),
		mk("nccl", "kv_cache_tokens", func(int) float64 { return 282497 }),
		mk("custom-ar", "output_throughput", func(i int) float64 {
			if i >= 21 {
				return 1040 * wobble(i)
			}
			return 1268 * wobble(i)
		}),
		mk("nccl", "output_throughput", func(i int) float64 { return 1180 * wobble(i+3) }),
		mk("custom-ar", "p99_ttft_ms", func(i int) float64 { return 310 * wobble(i+5) }),
	}
	f := history.Finding{Series: ser[3].Key, RunID: 121, Time: ser[3].Points[21].StartedAt, Commit: commit(21), PrevCommit: commit(20),
		PrevTime: ser[3].Points[20].StartedAt, Regression: true, Direction: "higher_is_better"}
	f.Index, f.Forward, f.PValue = 21, -0.18, 1e-9
	f.Before.N, f.Before.Mean, f.Before.Std = 21, 1268, 9
	f.After.N, f.After.Mean, f.After.Std = 9, 1040, 8
	return ser, []history.Finding{f}
}
