package reporters

import (
	"bytes"
	"math"
	"testing"
	"time"
)

// A value near math.MaxFloat64 used to round the chart axis up to +Inf, and the tick loop
// stepping towards it never ended (report, gate and merge ate all memory).
func TestChartAxisIsBoundedForAbsurdValues(t *testing.T) {
	for _, v := range []float64{0, 1e-300, 5, 89.5, 1e15, 1.5e308, math.MaxFloat64, math.Inf(1), math.NaN()} {
		step, top, ticks := axisTicks(v)
		if ticks < 1 || ticks > maxAxisTicks || !finite(top) || !finite(step) || step <= 0 || top <= 0 {
			t.Errorf("axisTicks(%v) = step %v, top %v, %d ticks", v, step, top, ticks)
		}
	}
	// Bars whose sum overflows to +Inf, and whiskers and dots at the edge of float64.
	groups := []hgroup{{Label: "g", Bars: []hbar{{
		Segments: []hseg{{Name: "a", Value: 1.7e308}, {Name: "b", Value: 1.7e308}},
		Whisker:  &[2]float64{1e308, math.MaxFloat64}, Dots: []float64{math.MaxFloat64},
	}}}}
	done := make(chan svgChart, 1)
	go func() { done <- hbarChart("t", "tok/s", groups, nil) }()
	select {
	case ch := <-done:
		if n := len(ch.Lines); n > 3*maxAxisTicks+10 {
			t.Errorf("%d lines", n)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("hbarChart did not return: the tick loop does not end")
	}
}

// The whole report of a run holding an absurd trial value renders, in bounded time.
func TestHTMLOfARunWithAnAbsurdValue(t *testing.T) {
	r := sampleRun()
	r.Configs[0].Trials[0].Metrics["output_throughput"] = 1.7e308
	done := make(chan error, 1)
	go func() {
		var b bytes.Buffer
		done <- WriteHTML(&b, r)
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("WriteHTML did not return")
	}
}
