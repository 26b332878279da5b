package history

import (
	"bytes"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestReportForAPerson: gated metrics first, bookkeeping folded, the change point listed at the
// top and linked to its chart, titles with spec/config/workload/testbed, dated ticks, no
// negative counts, a filter box.
func TestReportForAPerson(t *testing.T) {
	t0 := time.Date(2026, 11, 1, 2, 0, 0, 0, time.UTC)
	mk := func(metric string, f func(i int) float64) Series {
		s := Series{Key: SeriesKey{Testbed: "h200x8-1a2b", Spec: "nightly", Config: "nccl", Workload: "c8", Metric: metric}}
		for i := 0; i < 20; i++ {
			v := f(i)
			s.Points = append(s.Points, Point{RunID: int64(i + 1), StartedAt: t0.Add(time.Duration(i) * 24 * time.Hour), Commit: "c" + strings.Repeat("0", 11) + string(rune('a'+i)), Value: v, Samples: []float64{v}})
		}
		return s
	}
	series := []Series{
		mk("completed", func(int) float64 { return 200 }),
		mk("failed", func(int) float64 { return 0 }),
		mk("kv_cache_tokens", func(int) float64 { return 282497 }),
		mk("output_throughput", func(i int) float64 {
			if i >= 12 {
				return 500
			}
			return 1000
		}),
	}
	f := Finding{Series: series[3].Key, RunID: 13, Commit: series[3].Points[12].Commit, PrevCommit: series[3].Points[11].Commit, Regression: true}
	f.Index, f.Forward = 12, -0.5
	f.Before.N, f.Before.Mean, f.After.N, f.After.Mean = 12, 1000, 8, 500
	var b bytes.Buffer
	if err := WriteReport(&b, series, []Finding{f}, ReportOptions{}); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	gated := strings.Index(page, `data-title="output_throughput — nightly · nccl · c8 · h200x8-1a2b"`)
	kv := strings.Index(page, `data-title="kv_cache_tokens`)
	folded := strings.Index(page, `<details class="group">`)
	completed := strings.Index(page, `data-title="completed`)
	if gated < 0 || kv < gated || folded < kv || completed < folded {
		t.Errorf("order: gated %d, engine %d, folded %d, bookkeeping %d", gated, kv, folded, completed)
	}
	cps := strings.Index(page, `id="change-points"`)
	if cps < 0 || cps > gated || !strings.Contains(page, `<a href="#s-h200x8-1a2b-nightly-nccl-c8-output-throughput">output_throughput — nightly · nccl · c8 · h200x8-1a2b</a>`) ||
		!strings.Contains(page, `id="s-h200x8-1a2b-nightly-nccl-c8-output-throughput"`) || !strings.Contains(page, f.CommitRange()) {
		t.Errorf("the change point is not listed at the top with a link to its chart")
	}
	if !strings.Contains(page, ">1 Nov<") || strings.Contains(page, ">11-01<") {
		t.Errorf("x ticks are not dates like \"1 Nov\"")
	}
	if !strings.Contains(page, ">282.5k<") && !strings.Contains(page, ">282k<") && !regexp.MustCompile(`>28\d(\.\d)?k<`).MatchString(page) {
		t.Errorf("kv_cache_tokens ticks not compact (282497 -> 282.5k)")
	}
	for _, m := range regexp.MustCompile(`class="tick">(-[0-9.]+[kMG]?)<`).FindAllStringSubmatch(page, -1) {
		t.Errorf("negative tick %s", m[1])
	}
	if !strings.Contains(page, `<input id="filter" type="search"`) {
		t.Errorf("no filter box")
	}
}
