package history

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"sort"
	"testing"
	"time"
)

// accuracy is the change-point detector's record on synthetic nightly series.
type accuracy struct {
	cv, shift float64
	// detected: fraction of series whose shift was found within ±tol nights (whole series).
	detected float64
	// medianDelay, p90Delay: nights after the shift until a nightly analysis (of the history up
	// to that night) first reports it within ±tol; -1 when never within maxDelay.
	medianDelay, p90Delay int
	// falsePer1000: change points farther than tol from the shift, per 1,000 nights.
	falsePer1000 float64
}

// evalShift runs reps series of 2·half nights, a level shift of shift at night half, noise cv.
func evalShift(seed uint64, reps, half int, cv, shift float64, o Options) accuracy {
	const tol, maxDelay = 2, 40
	rng := rand.New(rand.NewPCG(seed, uint64(cv*1e4)+uint64(shift*1e6)))
	a := accuracy{cv: cv, shift: shift}
	var delays []int
	found, falses, nights := 0, 0, 0
	for r := 0; r < reps; r++ {
		xs := noisy(rng, 2*half, cv, func(i int) float64 {
			if i >= half {
				return 100 * (1 + shift)
			}
			return 100
		})
		nights += len(xs)
		hit := false
		for _, cp := range Detect(xs, o) {
			if cp.Index >= half-tol && cp.Index <= half+tol {
				hit = true
			} else {
				falses++
			}
		}
		if hit {
			found++
		}
		delay := -1
		for t := half; t < half+maxDelay && t < len(xs); t++ {
			// The analysis of night t sees nights 0..t (the newest window's worth and more).
			lo := max(0, t+1-4*o.withDefaults().Window)
			for _, cp := range Detect(xs[lo:t+1], o) {
				if i := cp.Index + lo; i >= half-tol && i <= half+tol {
					delay = t - half
					break
				}
			}
			if delay >= 0 {
				break
			}
		}
		if delay < 0 {
			delay = 1 << 20 // never, sorts last
		}
		delays = append(delays, delay)
	}
	sort.Ints(delays)
	q := func(p float64) int {
		d := delays[int(p*float64(len(delays)-1))]
		if d == 1<<20 {
			return -1
		}
		return d
	}
	a.detected = float64(found) / float64(reps)
	a.medianDelay, a.p90Delay = q(0.5), q(0.9)
	a.falsePer1000 = 1000 * float64(falses) / float64(nights)
	return a
}

// falseRate counts change points in flat series: per 1,000 nights.
func falseRate(seed uint64, reps, n int, cv float64, o Options) float64 {
	rng := rand.New(rand.NewPCG(seed, uint64(cv*1e4)))
	cps := 0
	for r := 0; r < reps; r++ {
		cps += len(Detect(noisy(rng, n, cv, func(int) float64 { return 100 }), o))
	}
	return 1000 * float64(cps) / float64(reps*n)
}

// TestChangePointAccuracy holds the detector to its documented accuracy on a small sample (the
// full table is BenchmarkChangePointAccuracy's): shifts of 2.5x the noise are found, quickly,
// and flat series rarely split.
func TestChangePointAccuracy(t *testing.T) {
	o := Options{}
	for _, c := range []struct{ cv, shift float64 }{{0.02, 0.05}, {0.05, 0.10}} {
		a := evalShift(1, 40, 60, c.cv, -c.shift, o)
		if a.detected < 0.95 || a.medianDelay < 0 || a.medianDelay > 8 || a.falsePer1000 > 5 {
			t.Errorf("CV %.0f%% shift -%.0f%%: detected %.0f%%, delay median %d p90 %d, false %.2f/1000", c.cv*100, c.shift*100, a.detected*100, a.medianDelay, a.p90Delay, a.falsePer1000)
		}
	}
	if f := falseRate(2, 10, 1000, 0.02, o); f > 3 {
		t.Errorf("flat series: %.2f false change points per 1000 nights", f)
	}
}

// BenchmarkChangePointAccuracy prints the accuracy table of docs/history.md: detection rate,
// detection delay (nights after the shift until the nightly analysis reports it) and false change
// points per 1,000 nights, at CV 2% and 5% (`make bench` or go test -bench ChangePointAccuracy).
func BenchmarkChangePointAccuracy(b *testing.B) {
	o := Options{}
	for _, cv := range []float64{0.02, 0.05} {
		for _, shift := range []float64{0.02, 0.03, 0.05, 0.10, 0.20} {
			b.Run(fmt.Sprintf("cv%.0f%%/shift-%.0f%%", cv*100, shift*100), func(b *testing.B) {
				var a accuracy
				for i := 0; i < b.N; i++ {
					a = evalShift(7, 200, 100, cv, -shift, o)
				}
				b.ReportMetric(a.detected*100, "detected_%")
				b.ReportMetric(float64(a.medianDelay), "delay_median_nights")
				b.ReportMetric(float64(a.p90Delay), "delay_p90_nights")
				b.ReportMetric(a.falsePer1000, "false_per_1000_nights")
			})
		}
		b.Run(fmt.Sprintf("cv%.0f%%/flat", cv*100), func(b *testing.B) {
			var f float64
			for i := 0; i < b.N; i++ {
				f = falseRate(11, 100, 1000, cv, o)
			}
			b.ReportMetric(f, "false_per_1000_nights")
		})
	}
}

// BenchmarkAnalyze10000x50 is the speed of analysis over 10,000 runs x 50 series (one core:
// run with -cpu 1), change points already loaded: each series has 10 level shifts.
func BenchmarkAnalyze10000x50(b *testing.B) {
	rng := rand.New(rand.NewPCG(3, 3))
	series := make([]Series, 50)
	for s := range series {
		xs := noisy(rng, 10000, 0.03, func(i int) float64 { return 100 * (1 + 0.08*float64((i/1000)%2)) })
		pts := make([]Point, len(xs))
		for i, x := range xs {
			pts[i] = Point{RunID: int64(i + 1), Value: x, Samples: []float64{x}}
		}
		series[s] = Series{Key: SeriesKey{Metric: fmt.Sprintf("m%d", s)}, Points: pts}
	}
	b.ResetTimer()
	n := 0
	for i := 0; i < b.N; i++ {
		n = 0
		for s := range series {
			n += len(AnalyzeSeries(&series[s], Options{}))
		}
	}
	b.ReportMetric(float64(n)/50, "change_points/series")
}

// BenchmarkAnalyzeStore10000x50 is `reckon history analyze` end to end on SQLite: read 10,000
// runs x 50 series (one trial each) from the store, then find every change point. Seeding the
// store is not timed.
func BenchmarkAnalyzeStore10000x50(b *testing.B) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(b.TempDir(), "h.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	rng := rand.New(rand.NewPCG(5, 5))
	seedStart := time.Now()
	for i := 0; i < 10000; i++ {
		m := map[string]float64{}
		for k := 0; k < 50; k++ {
			m[fmt.Sprintf("m%02d", k)] = 100 * (1 + 0.08*float64((i/1000)%2)) * (1 + 0.03*rng.NormFloat64())
		}
		r := &Rows{Run: RunRow{StartedAt: time.Unix(int64(i)*86400, 0), TestbedKey: "t", SpecName: "s", GitCommit: fmt.Sprintf("c%d", i)},
			Configs: []ConfigRow{{Name: "nccl"}}, Trials: []TrialRow{{Config: "nccl", Workload: "w", Metrics: m}}}
		if _, _, err := s.Append(ctx, r); err != nil {
			b.Fatal(err)
		}
	}
	perAppend := time.Since(seedStart).Seconds() / 10000 * 1000
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		ser, fs, err := s.Analyze(ctx, Filter{}, Options{})
		if err != nil || len(ser) != 50 {
			b.Fatal(err, len(ser))
		}
		b.ReportMetric(float64(len(fs))/50, "change_points/series")
	}
	b.ReportMetric(perAppend, "ms/append")
}
