package history

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"sort"
	"strings"
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
// run with -cpu 1), change points already loaded: each series has 10 blocks of 1,000 runs alternating by 8% (9
// level shifts).
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

// runs returns n runs of a series as `reckon history` stores them: each run is the median of
// trials trials, each trial level(i)·(1 + cv·N(0,1)) (stationary noise where level is constant).
func runs(rng *rand.Rand, n, trials int, cv float64, level func(i int) float64) []float64 {
	xs := make([]float64, n)
	tr := make([]float64, trials)
	for i := range xs {
		for j := range tr {
			tr[j] = level(i) * (1 + cv*rng.NormFloat64())
		}
		sort.Float64s(tr)
		if trials%2 == 1 {
			xs[i] = tr[trials/2]
		} else {
			xs[i] = (tr[trials/2-1] + tr[trials/2]) / 2
		}
	}
	return xs
}

// flat is a constant level of 100.
func flat(int) float64 { return 100 }

// noiseFalse analyses reps series of n runs of pure noise (3 trials a run, trial CV cv) and
// returns the change points per 1,000 runs, and the share of series with any (all are false).
func noiseFalse(seed uint64, reps, n int, cv float64, o Options) (per1000, anyShare float64) {
	rng := rand.New(rand.NewPCG(seed, uint64(n)))
	cps, with := 0, 0
	for r := 0; r < reps; r++ {
		k := len(Detect(runs(rng, n, 3, cv, flat), o))
		cps += k
		if k > 0 {
			with++
		}
	}
	return 1000 * float64(cps) / float64(reps*n), float64(with) / float64(reps)
}

// delays of a step: reps series of `before` runs of noise (3 trials a run, trial CV cv), then a
// step of `step` (-0.05: 5% lower). Each night t from the step on, the history up to t is
// analysed whole, as the nightly gate and `history analyze` do; the delay is t − step night for
// the first night whose analysis reports a change point within ±2 runs of the step. never
// (maxDelay+1) when none within maxDelay nights. Sorted.
type delays []int

const never = 1 << 20

func stepDelays(seed uint64, reps, before int, cv, step float64, o Options) delays {
	const tol, maxDelay = 2, 30
	rng := rand.New(rand.NewPCG(seed, uint64(before)+uint64(cv*1e4)))
	var ds delays
	for r := 0; r < reps; r++ {
		xs := runs(rng, before+maxDelay, 3, cv, func(i int) float64 {
			if i >= before {
				return 100 * (1 + step)
			}
			return 100
		})
		d := never
		for t := before; t < len(xs) && d == never; t++ {
			for _, cp := range Detect(xs[:t+1], o) {
				if cp.Index >= before-tol && cp.Index <= before+tol {
					d = t - before
					break
				}
			}
		}
		ds = append(ds, d)
	}
	sort.Ints(ds)
	return ds
}

// q is the p-quantile (nearest rank); never stays never.
func (ds delays) q(p float64) int { return ds[int(math.Ceil(p*float64(len(ds))))-1] }

// within is the share of delays of at most n nights.
func (ds delays) within(n int) float64 {
	k := 0
	for _, d := range ds {
		if d <= n {
			k++
		}
	}
	return float64(k) / float64(len(ds))
}

func fmtDelay(d int) string {
	if d == never {
		return ">30"
	}
	return fmt.Sprint(d)
}

// nightlyAlarms follows reps series of pure noise night by night: `history` runs of history,
// then `nights` more, each night analysed whole. It returns the false alarms per 1,000 nights:
// nights whose analysis reports a change point among the newest 25 runs when the night before's
// did not (each such episode shrinks `against: history`'s window while it lasts), and how many
// nights an episode lasts on average.
func nightlyAlarms(seed uint64, reps, history, nights int, cv float64, o Options) (per1000, meanNights float64) {
	const newest = 25
	rng := rand.New(rand.NewPCG(seed, uint64(history+nights)))
	alarms, alarmNights := 0, 0
	for r := 0; r < reps; r++ {
		xs := runs(rng, history+nights, 3, cv, flat)
		prev := false
		for t := history; t < len(xs); t++ {
			hit := false
			for _, cp := range Detect(xs[:t+1], o) {
				hit = hit || cp.Index > t-newest
			}
			if hit {
				alarmNights++
				if !prev {
					alarms++
				}
			}
			prev = hit
		}
	}
	if alarms > 0 {
		meanNights = float64(alarmNights) / float64(alarms)
	}
	return 1000 * float64(alarms) / float64(reps*nights), meanNights
}

// longSeriesMisses lists the targets of docs/history.md ("Long series") that o misses, with
// what it measured: on pure noise (3 trials a run, trial CV 3%), at most one false change point
// per 3,000-run series on average and in at most a fifth of the series (100 series), and at most
// 0.05 per 1,000 runs on a 100,000-run series; a 5% step found by the nightly analysis within 3
// runs: at trial CV 3% with median delay <= 2 and in >= 85% of 100 series, at CV 2% with p90 <= 2.
func longSeriesMisses(o Options) []string {
	var miss []string
	if f, share := noiseFalse(31, 100, 3000, 0.03, o); f > 1000.0/3000 || share > 0.2 {
		miss = append(miss, fmt.Sprintf("3,000 runs of noise: %.2f false change points per 1,000 runs, in %.0f%% of series", f, share*100))
	}
	if f, _ := noiseFalse(31, 1, 100000, 0.03, o); f > 0.05 {
		miss = append(miss, fmt.Sprintf("100,000 runs of noise: %.2f false change points per 1,000 runs", f))
	}
	if d := stepDelays(31, 100, 1000, 0.03, -0.05, o); d.q(0.5) > 2 || d.within(3) < 0.85 {
		miss = append(miss, fmt.Sprintf("5%% step at CV 3%%: delay median %s p90 %s, within 3 runs in %.0f%%", fmtDelay(d.q(0.5)), fmtDelay(d.q(0.9)), d.within(3)*100))
	}
	if d := stepDelays(31, 100, 1000, 0.02, -0.05, o); d.q(0.9) > 2 {
		miss = append(miss, fmt.Sprintf("5%% step at CV 2%%: delay median %s p90 %s", fmtDelay(d.q(0.5)), fmtDelay(d.q(0.9))))
	}
	return miss
}

// TestChangePointLongSeries holds the detector to the long-series targets (seeded, a few
// seconds), and shows that they tell: Otava's uniform level splits pure noise more often the
// longer it runs, and a length-aware level without the newest-segment exception reports a 5%
// step at CV 3% too late.
func TestChangePointLongSeries(t *testing.T) {
	if miss := longSeriesMisses(Options{}); len(miss) > 0 {
		t.Errorf("length-aware level misses: %v", miss)
	}
	for _, c := range []struct {
		name string
		rule levelRule
		want string
	}{{"uniform level", uniformLevel, "runs of noise"}, {"no newest-segment exception", noRecent, "step at CV 3%"}} {
		miss := longSeriesMisses(Options{rule: c.rule})
		if !strings.Contains(strings.Join(miss, "; "), c.want) {
			t.Errorf("%s: misses %v, want one about %q (the targets do not tell it apart)", c.name, miss, c.want)
		}
		t.Logf("%s (fault shown): %v", c.name, miss)
	}
}

// BenchmarkChangePointLongSeries prints the long-series table of docs/history.md (go test
// ./history -run '^$' -bench ChangePointLongSeries -benchtime 1x): false change points per
// 1,000 runs of pure noise (1,000 series of 3,000 runs, 3 of 100,000; 3 trials a run, trial CV
// 3%), false alarms of the nightly analysis per 1,000 nights, and the delay to report a 5% step
// (200 series, 1,000 runs before it), for reckon's length-aware level and Otava's uniform one.
func BenchmarkChangePointLongSeries(b *testing.B) {
	for _, r := range []struct {
		name string
		rule levelRule
	}{{"length-aware", lengthAware}, {"uniform", uniformLevel}} {
		o := Options{rule: r.rule}
		b.Run(r.name+"/noise3000x1000", func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				f, share := noiseFalse(41, 1000, 3000, 0.03, o)
				b.ReportMetric(f, "false_per_1000_runs")
				b.ReportMetric(share*100, "series_with_any_%")
			}
		})
		b.Run(r.name+"/noise100000x3", func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				f, share := noiseFalse(41, 3, 100000, 0.03, o)
				b.ReportMetric(f, "false_per_1000_runs")
				b.ReportMetric(share*100, "series_with_any_%")
			}
		})
		b.Run(r.name+"/noise-by-length", func(b *testing.B) {
			// The share of pure-noise series with any change point, by length: bounded
			// (length-aware) or growing (uniform).
			for i := 0; i < b.N; i++ {
				for _, c := range []struct{ reps, n int }{{500, 200}, {200, 1000}, {20, 10000}} {
					_, share := noiseFalse(43, c.reps, c.n, 0.03, o)
					b.ReportMetric(share*100, fmt.Sprintf("with_any_%%_at_%d_runs", c.n))
				}
			}
		})
		b.Run(r.name+"/nightly-noise", func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				f, d := nightlyAlarms(41, 8, 500, 1000, 0.03, o)
				b.ReportMetric(f, "false_alarms_per_1000_nights")
				b.ReportMetric(d, "nights_per_alarm")
			}
		})
		for _, cv := range []float64{0.03, 0.02} {
			b.Run(fmt.Sprintf("%s/step-5%%-cv%.0f%%", r.name, cv*100), func(b *testing.B) {
				for i := 0; i < b.N; i++ {
					d := stepDelays(41, 200, 1000, cv, -0.05, o)
					b.ReportMetric(float64(min(d.q(0.5), 31)), "delay_median_runs")
					b.ReportMetric(float64(min(d.q(0.9), 31)), "delay_p90_runs")
					b.ReportMetric(d.within(3)*100, "within_3_runs_%")
				}
			})
		}
	}
	b.Run("run-cv", func(b *testing.B) {
		// The CV of a run (the median of 3 trials) at trial CV 3% and 2%.
		for i := 0; i < b.N; i++ {
			for _, cv := range []float64{0.03, 0.02} {
				xs := runs(rand.New(rand.NewPCG(41, 0)), 100000, 3, cv, flat)
				var s, s2 float64
				for _, x := range xs {
					s += x
					s2 += x * x
				}
				m := s / float64(len(xs))
				b.ReportMetric(100*math.Sqrt(s2/float64(len(xs))-m*m)/m, fmt.Sprintf("run_cv_%%_at_trial_cv_%.0f%%", cv*100))
			}
		}
	})
}
