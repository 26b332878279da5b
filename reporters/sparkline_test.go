package reporters

import (
	"bytes"
	"github.com/reckon-ci/reckon/spec"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/reckon-ci/reckon/gate"
)

// A statistical check with a history trend gets a sparkline in report.html, tonight marked.
func TestHTMLSparkline(t *testing.T) {
	if sparklineOf([]float64{1}) != nil || sparklineOf([]float64{math.NaN(), 2}) != nil {
		t.Fatal("a sparkline needs two finite points")
	}
	s := sparklineOf([]float64{180, 182, 181, 166})
	if s == nil || s.LastX != 78 || !strings.HasPrefix(s.Points, "2.0,") || !strings.Contains(s.Tip, "4 runs") || !strings.Contains(s.Tip, "this run 166") {
		t.Fatalf("sparkline %+v", s)
	}
	r := &gate.Run{SpecName: "s", StartedAt: time.Unix(0, 0), Checks: []gate.Check{{Verdict: gate.Verdict{Name: "throughput nccl decode output_throughput vs history", Kind: string(spec.KindThroughput), Config: "nccl", Outcome: gate.Pass, Stat: &gate.StatResult{Metric: "output_throughput", Outcome: gate.NoChange}}, Trend: []float64{180, 182, 181, 166}}}}
	var b bytes.Buffer
	if err := WriteHTML(&b, r); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), `aria-label="history"><title>history: 4 runs, 166 .. 182, this run 166</title><polyline points="2.0,`) {
		t.Fatalf("report.html lacks the sparkline:\n%s", b.String())
	}
}
