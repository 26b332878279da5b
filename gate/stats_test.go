package gate

import (
	"context"
	"encoding/json"
	"github.com/reckon-ci/reckon/spec"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func near(a, b, tol float64) bool { return math.Abs(a-b) <= tol }

func TestMannWhitneyHandValues(t *testing.T) {
	// Complete separation, 3 vs 3: one arrangement of C(6,3) = 20.
	r := MannWhitney([]float64{1, 2, 3}, []float64{4, 5, 6})
	if r.U != 9 || !near(r.PGreater, 1.0/20, 1e-12) || r.PLess != 1 || !r.Exact {
		t.Errorf("3v3 separation: %+v", r)
	}
	// 5 vs 5: minimum one-sided p is 1/252.
	r = MannWhitney([]float64{1, 2, 3, 4, 5}, []float64{6, 7, 8, 9, 10})
	if !near(r.PGreater, 1.0/252, 1e-12) {
		t.Errorf("5v5 separation: %+v", r)
	}
	// x = {1,3,5,7}, y = {2,4,6,8,10}: U = 14 of 20; P(U >= 14) = P(U <= 6) = 26/126 (partitions of
	// u <= 6 into at most 4 parts of at most 5).
	r = MannWhitney([]float64{1, 3, 5, 7}, []float64{2, 4, 6, 8, 10})
	if r.U != 14 || !near(r.PGreater, 26.0/126, 1e-12) {
		t.Errorf("4v5: U=%v p=%v, want 14 and %v", r.U, r.PGreater, 26.0/126)
	}
	// Ties: x = {1,2,2}, y = {2,3,3}. Enumerating the 20 assignments of mid-ranks
	// {1,3,3,3,5.5,5.5}: U = R_y - 6; observed R_y = 3+5.5+5.5 = 14, U = 8. Assignments with
	// R_y >= 14: {3,5.5,5.5} x3 (three 3s) + {5.5,5.5,1}? (12, no) -> 3 of 20.
	r = MannWhitney([]float64{1, 2, 2}, []float64{2, 3, 3})
	if r.U != 8 || !near(r.PGreater, 3.0/20, 1e-12) || !r.Exact {
		t.Errorf("ties: %+v, want U=8 p=0.15", r)
	}
}

func TestMannWhitneyExactMatchesEnumeration(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	for _, sz := range [][2]int{{2, 3}, {4, 4}, {5, 7}, {6, 6}, {3, 9}} {
		x, y := make([]float64, sz[0]), make([]float64, sz[1])
		for i := range x {
			x[i] = rng.Float64()
		}
		for i := range y {
			y[i] = rng.Float64() + 0.2
		}
		got := MannWhitney(x, y)
		ranks, _ := midRanks(x, y)
		pg, pl := enumerateU(ranks, len(y), got.U)
		if !near(got.PGreater, pg, 1e-12) || !near(got.PLess, pl, 1e-12) {
			t.Errorf("%v: DP %v/%v vs enumeration %v/%v", sz, got.PGreater, got.PLess, pg, pl)
		}
	}
}

func TestMannWhitneyNormalApproximation(t *testing.T) {
	// The normal approximation (with tie and continuity correction) must be close to the exact
	// distribution at 25 vs 25.
	rng := rand.New(rand.NewPCG(3, 3))
	x, y := make([]float64, 25), make([]float64, 25)
	for i := range x {
		x[i], y[i] = rng.NormFloat64(), rng.NormFloat64()+0.5
	}
	exact := MannWhitney(x, y)
	if !exact.Exact {
		t.Fatal("25 v 25 should be exact")
	}
	x = append(x, 100) // force the approximation with a tie: enumeration is too large at 26 v 26
	y = append(y, 100)
	approx := MannWhitney(x, y)
	if approx.Exact {
		t.Fatal("26 v 26 with a tie should use the normal approximation")
	}
	if !near(exact.PGreater, approx.PGreater, 0.02) {
		t.Errorf("approx %v far from exact %v", approx.PGreater, exact.PGreater)
	}
}

func TestMosesCI(t *testing.T) {
	x := []float64{1, 2, 3, 4, 5}
	y := []float64{11, 12, 13, 14, 15}
	ci := MosesCI(x, y, 0.95)
	// 25 differences 6..14; k = 3 since P(U <= 2) = 4/252 <= 0.025 < P(U <= 3) = 7/252.
	if ci.Estimate != 10 || ci.Low != 7 || ci.High != 13 || !near(ci.Confidence, 1-8.0/252, 1e-12) {
		t.Errorf("got %+v", ci)
	}
	// 3 vs 3 cannot reach 95%: widest interval at 90%.
	ci = MosesCI([]float64{1, 2, 3}, []float64{4, 5, 6}, 0.95)
	if ci.Low != 1 || ci.High != 5 || !near(ci.Confidence, 0.9, 1e-12) {
		t.Errorf("3v3: %+v", ci)
	}
}

func TestTTestHandValue(t *testing.T) {
	// Pooled: diff 2, s^2 2.5, se 1, t = 2, df 8; P(T_8 > 2) = 0.040250.
	pg, pl, diff, sd := tTest([]float64{1, 2, 3, 4, 5}, []float64{3, 4, 5, 6, 7}, false)
	if !near(pg, 0.040250, 1e-5) || !near(pl, 1-0.040250, 1e-5) || diff != 2 || !near(sd, math.Sqrt(2.5), 1e-12) {
		t.Errorf("pooled: %v %v %v %v", pg, pl, diff, sd)
	}
	// Welch with unequal variances: x var 2.5 (n 5), y = {10, 20, 30} var 100 (n 3): se^2 = 0.5 +
	// 33.33, t = (20-3)/5.8166 = 2.9226, df = 33.83^2/(0.25/4 + 1111.1/2) = 2.0598 -> p ≈ 0.049.
	pg, _, _, _ = tTest([]float64{1, 2, 3, 4, 5}, []float64{10, 20, 30}, false)
	if !near(pg, 0.0493, 0.002) {
		t.Errorf("welch p = %v, want about 0.049", pg)
	}
}

func throughput() Metric { m, _ := MetricFor("output_throughput"); return m }
func ttft() Metric       { m, _ := MetricFor("median_ttft_ms"); return m }

func TestMetricDirections(t *testing.T) {
	for name, want := range map[string]Direction{
		"output_throughput": HigherIsBetter, "total_token_throughput": HigherIsBetter, "request_throughput": HigherIsBetter,
		"mean_ttft_ms": LowerIsBetter, "median_tpot_ms": LowerIsBetter, "p99_itl_ms": LowerIsBetter, "p99.9_e2el_ms": LowerIsBetter,
		"mean_e2e_latency_ms": LowerIsBetter, "std_ttft_ms": LowerIsBetter, "request_goodput": HigherIsBetter,
	} {
		m, ok := MetricFor(name)
		if !ok || m.Direction != want {
			t.Errorf("%s: %v %v, want %v", name, m.Direction, ok, want)
		}
	}
	if _, ok := MetricFor("model_id"); ok {
		t.Error("model_id has no direction")
	}
}

func TestCompareOutcomes(t *testing.T) {
	base := []float64{100, 101, 99, 100.5, 99.5}
	scale := func(xs []float64, k float64) []float64 {
		out := make([]float64, len(xs))
		for i, x := range xs {
			out[i] = x * k
		}
		return out
	}
	opts := DefaultStatOptions()

	r := Compare(base, scale([]float64{100.3, 99.2, 100.9, 99.8, 100.1}, 0.9), throughput(), opts)
	if r.Outcome != Regression || !near(r.Ratio, 0.9, 0.01) || r.PValue > 0.01 {
		t.Fatalf("10%% drop: %s %s", r.Outcome, r.Reason)
	}
	v := r.Verdict("throughput vs nccl", "custom-ar", "nccl")
	if v.Outcome != Fail || !strings.Contains(v.Message, "custom-ar: output_throughput -9.9% vs nccl (ratio 0.90") || v.Kind != string(spec.KindThroughput) {
		t.Errorf("verdict: %s %q", v.Outcome, v.Message)
	}
	if r.CILow > r.Ratio || r.CIHigh < 0.88 || r.CIHigh > 0.92 {
		t.Errorf("CI %v–%v around %v", r.CILow, r.CIHigh, r.Ratio)
	}

	r = Compare(base, scale([]float64{100.3, 99.2, 100.9, 99.8, 100.1}, 1.1), throughput(), opts)
	if r.Outcome != Improvement {
		t.Errorf("10%% gain: %s %s", r.Outcome, r.Reason)
	}
	r = Compare(base, []float64{100.3, 99.2, 100.9, 99.8, 100.1}, throughput(), opts)
	if r.Outcome != NoChange || r.Verdict("c", "x", "").Outcome != Pass {
		t.Errorf("same: %s %s", r.Outcome, r.Reason)
	}
	// Latency: higher is worse.
	r = Compare([]float64{50, 51, 49, 50.5, 49.5}, []float64{60, 61, 59, 60.2, 59.9}, ttft(), opts)
	if r.Outcome != Regression || r.Worse < 0.19 {
		t.Errorf("ttft +20%%: %s %v", r.Outcome, r.Worse)
	}
	// Significant but under the minimum effect: 1% with 0.1% noise.
	tight := []float64{100, 100.1, 99.9, 100.05, 99.95}
	r = Compare(tight, scale(tight, 0.99), throughput(), opts)
	if r.Outcome != NoChange || !strings.Contains(r.Reason, "under the 2") {
		t.Errorf("1%% drop: %s %s", r.Outcome, r.Reason)
	}
	// Very noisy: cannot decide with 5 trials.
	noisyB := []float64{100, 88, 112, 95, 106}
	noisyH := []float64{97, 84, 110, 90, 101}
	r = Compare(noisyB, noisyH, throughput(), opts)
	if r.Outcome != Undecided || r.Verdict("c", "x", "").Outcome != Inconclusive || r.MoreTrialsText() == "" {
		t.Errorf("noisy: %s %s %q", r.Outcome, r.Reason, r.MoreTrialsText())
	}
	// Bad input.
	if r := Compare(base, []float64{100, 0, 99}, throughput(), opts); r.Outcome != StatError || !strings.Contains(r.Reason, "head trial 2") {
		t.Errorf("zero: %s %s", r.Outcome, r.Reason)
	}
	if r := Compare([]float64{0, 0, 0}, []float64{0, 0, 0}, Metric{Name: "failed", Direction: LowerIsBetter}, opts); r.Outcome != NoChange {
		t.Errorf("constant zero: %s %s", r.Outcome, r.Reason)
	}
	if r := Compare([]float64{0, 0, 0}, []float64{0, 1, 0}, Metric{Name: "failed", Direction: LowerIsBetter}, opts); r.Outcome != StatError {
		t.Errorf("zeros with a change: %s %s", r.Outcome, r.Reason)
	}
	if r := Compare(base, base, Metric{Name: "weird"}, opts); r.Outcome != StatError {
		t.Errorf("unknown direction: %s", r.Outcome)
	}
	if r := Compare([]float64{1}, []float64{2}, throughput(), opts); r.Outcome != Undecided || r.MoreTrials != 1 {
		t.Errorf("one trial: %s %d", r.Outcome, r.MoreTrials)
	}
}

func TestCompareRankGuardBlocksSplitShift(t *testing.T) {
	// Five head trials collapsed and three are better than every base trial: the mean of the
	// logs moved a lot (t-test p ~ 0.002) but the ranks barely did (U = 40 of 64). The rank guard
	// keeps this from being called a regression on the t-test alone.
	base := []float64{100, 100.2, 99.8, 100.1, 99.9, 100, 100.05, 99.95}
	head := []float64{80, 80.1, 79.9, 80.2, 79.8, 100.3, 100.4, 100.25}
	r := Compare(base, head, throughput(), DefaultStatOptions())
	if r.PWorse > 0.01 || r.RankPWorse < 0.1 {
		t.Fatalf("setup: t p %v, rank p %v", r.PWorse, r.RankPWorse)
	}
	if r.Outcome == Regression || !strings.Contains(r.Reason, "rank test is not") {
		t.Errorf("got %s: %s", r.Outcome, r.Reason)
	}
	// The same collapse on all eight trials is a regression.
	r = Compare(base, []float64{80, 80.1, 79.9, 80.2, 79.8, 80.3, 80.4, 80.25}, throughput(), DefaultStatOptions())
	if r.Outcome != Regression {
		t.Errorf("full collapse: %s %s", r.Outcome, r.Reason)
	}
}

func TestHolm(t *testing.T) {
	mk := func(p float64) *StatResult { return &StatResult{PWorse: p, PBetter: 1} }
	rs := []*StatResult{mk(0.01), mk(0.04), mk(0.03), mk(0.005)}
	holmAdjust(rs, func(r *StatResult) float64 { return r.PWorse }, func(r *StatResult, p float64) { r.AdjPWorse = p })
	want := []float64{0.03, 0.06, 0.06, 0.02}
	for i, r := range rs {
		if !near(r.AdjPWorse, want[i], 1e-12) {
			t.Errorf("adjusted[%d] = %v, want %v", i, r.AdjPWorse, want[i])
		}
	}
	// A borderline regression alone is a regression; among three gated checks it is not.
	base := []float64{100, 101, 99, 100.5, 99.5}
	head := []float64{97, 98, 96, 97.5, 96.5}
	r := Compare(base, head, throughput(), DefaultStatOptions())
	r.PWorse = 0.006 // pretend borderline
	alone := r
	Holm([]*StatResult{&alone}, 0.01)
	if alone.Outcome != Regression {
		t.Fatalf("alone: %s", alone.Outcome)
	}
	nul1 := Compare(base, base, throughput(), DefaultStatOptions())
	nul2 := nul1
	fam := r
	Holm([]*StatResult{&fam, &nul1, &nul2}, 0.01)
	if fam.Outcome == Regression || !near(fam.AdjPWorse, 0.018, 1e-12) || !fam.Holm {
		t.Errorf("family: %s adj %v", fam.Outcome, fam.AdjPWorse)
	}
}

func TestSequentialPlan(t *testing.T) {
	p := DefaultSequentialPlan()
	a := p.NominalAlpha()
	if a <= p.Alpha/2 || a >= p.Alpha {
		t.Fatalf("nominal alpha %v outside (alpha/2, alpha)", a)
	}
	if a != p.NominalAlpha() {
		t.Fatal("nominal alpha not deterministic")
	}
	noisyB := []float64{100, 97, 103, 98.5, 101.5}
	noisyH := []float64{98, 95, 101, 96.5, 99}
	d, err := p.Decide(noisyB, noisyH, throughput(), DefaultStatOptions())
	if err != nil || !d.NeedMore || d.NextN != 10 || d.Result.MoreTrials != 5 {
		t.Fatalf("first look: %+v %v (%s)", d.NeedMore, err, d.Result.Reason)
	}
	d, _ = p.Decide(append(noisyB, 99, 102, 98, 100.5, 99.5), append(noisyH, 95, 97, 94, 96, 95.5), throughput(), DefaultStatOptions())
	if d.NeedMore || d.Result.Outcome != Regression {
		t.Errorf("second look: %v %s %s", d.NeedMore, d.Result.Outcome, d.Result.Reason)
	}
	// Between looks the plan asks for more without testing, even on a clear regression.
	d, _ = p.Decide(noisyB, []float64{80, 81, 79, 80.5, 80.2, 80.1}, throughput(), DefaultStatOptions())
	if !d.NeedMore || d.NextN != 10 || d.Result.Outcome != Undecided {
		t.Errorf("between looks: %+v %s", d.NeedMore, d.Result.Outcome)
	}
	// A stored baseline of 10 and 5 head trials: head grows to the next look.
	stored := []float64{100, 94, 106, 97, 103, 99, 95, 105, 101, 98}
	d, _ = p.Decide(stored, []float64{97, 92, 103, 95, 100}, throughput(), DefaultStatOptions())
	if !d.NeedMore || d.NextN != 10 || d.Result.MoreTrials != 5 {
		t.Errorf("stored baseline: %+v %s %s", d.NeedMore, d.Result.Outcome, d.Result.Reason)
	}
	if o := p.Options(DefaultStatOptions()); o.Alpha != a || o.MaxTrials != 10 {
		t.Errorf("options %+v", o)
	}
	if err := (SequentialPlan{Looks: []int{5, 5}, Alpha: 0.01}).Validate(); err == nil {
		t.Error("non-increasing looks accepted")
	}
}

func TestCalibrationSmall(t *testing.T) {
	plan := DefaultSequentialPlan()
	cfg := CalibrationConfig{CVs: []float64{0.02}, Effects: []float64{0.05}, Ns: []int{5}, Reps: 400, Seed: 42,
		Opts: DefaultStatOptions(), Sequential: &plan}
	rows, err := Calibrate(context.Background(), cfg)
	if err != nil || len(rows) != 2 {
		t.Fatalf("%v %d", err, len(rows))
	}
	fixed, seq := rows[0], rows[1]
	// Loose bounds (400 reps): the design aims are <= 1% false alarms, >= 80% and >= 95% detection.
	if fixed.FalseAlarm > 0.03 || seq.FalseAlarm > 0.03 {
		t.Errorf("false alarms %v / %v", fixed.FalseAlarm, seq.FalseAlarm)
	}
	if fixed.Detect[0.05] < 0.7 || seq.Detect[0.05] < 0.9 {
		t.Errorf("detection %v / %v", fixed.Detect[0.05], seq.Detect[0.05])
	}
	md := CalibrationMarkdown(rows, cfg.Effects)
	if !strings.Contains(md, "| CV 2% | 5 |") || !strings.Contains(md, "sequential 5, 10 per side") {
		t.Errorf("markdown:\n%s", md)
	}
}

// TestCalibrationMeasuredSamples resamples the output throughput of 20 trials of the reference
// engine measured on an idle 16-core machine (testdata/trials/README.md).
func TestCalibrationMeasuredSamples(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "trials", "refengine-tp2-nccl", "*.json"))
	if err != nil || len(files) != 20 {
		t.Fatalf("%v %d", err, len(files))
	}
	var samples []float64
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var r struct {
			OutputThroughput float64 `json:"output_throughput"`
		}
		if err := json.Unmarshal(data, &r); err != nil || r.OutputThroughput <= 0 {
			t.Fatalf("%s: %v %v", f, err, r.OutputThroughput)
		}
		samples = append(samples, r.OutputThroughput)
	}
	cfg := CalibrationConfig{Effects: []float64{0.10}, Ns: []int{10}, Reps: 300, NullReps: 1000, Seed: 3, Opts: DefaultStatOptions(),
		Samples: samples, SamplesLabel: "refengine"}
	rows, err := Calibrate(context.Background(), cfg)
	if err != nil || len(rows) != 1 {
		t.Fatalf("%v %d", err, len(rows))
	}
	if cv := SampleCV(samples); cv < 0.01 || cv > 0.1 {
		t.Errorf("measured CV %v", cv)
	}
	if rows[0].FalseAlarm > 0.03 || rows[0].Detect[0.10] < 0.9 {
		t.Errorf("measured noise: false alarms %v, detect 10%% %v", rows[0].FalseAlarm, rows[0].Detect[0.10])
	}
	if _, err := Calibrate(context.Background(), CalibrationConfig{Reps: 10, Ns: []int{5}}); err == nil {
		t.Error("no noise accepted")
	}
}

func BenchmarkCalibration(b *testing.B) {
	cfg := DefaultCalibrationConfig()
	for i := 0; i < b.N; i++ {
		rows, err := Calibrate(context.Background(), cfg)
		if err != nil {
			b.Fatal(err)
		}
		if i == 0 {
			b.Logf("\n%s", CalibrationMarkdown(rows, cfg.Effects))
			for _, r := range rows {
				if r.Noise == "CV 2%" {
					if r.N == 5 && r.Mode == "fixed" {
						b.ReportMetric(100*r.Detect[0.05], "detect5%@cv2n5_%")
					}
					if r.Mode != "fixed" {
						b.ReportMetric(100*r.Detect[0.05], "detect5%@cv2seq_%")
						b.ReportMetric(100*r.FalseAlarm, "falsealarm@cv2seq_%")
					}
				}
			}
		}
	}
}

func BenchmarkCompare5v5(b *testing.B) {
	base := []float64{100, 101, 99, 100.5, 99.5}
	head := []float64{97, 98, 96, 97.5, 96.5}
	m := throughput()
	for i := 0; i < b.N; i++ {
		Compare(base, head, m, DefaultStatOptions())
	}
}

// BenchmarkTestPower measures, at CV 2% and a true 5% regression, the detection rate of each
// candidate significance test at alpha 0.01 (the table in docs/statistics.md), and of the gate
// when alpha is divided by 30 (Holm across every printed metric).
func BenchmarkTestPower(b *testing.B) {
	m := throughput()
	for i := 0; i < b.N; i++ {
		rng := rand.New(rand.NewPCG(9, 9))
		sigma := math.Sqrt(math.Log1p(0.02 * 0.02))
		const reps = 4000
		for _, n := range []int{3, 5, 10} {
			var mwu, pooled, welch, gateN, gate30 int
			for k := 0; k < reps; k++ {
				base, head := make([]float64, n), make([]float64, n)
				for j := range base {
					base[j] = math.Exp(sigma * rng.NormFloat64())
					head[j] = 0.95 * math.Exp(sigma*rng.NormFloat64())
				}
				o := DefaultStatOptions()
				r := Compare(base, head, m, o)
				if r.RankPWorse <= 0.01 {
					mwu++
				}
				if r.PWorse <= 0.01 {
					pooled++
				}
				if r.Outcome == Regression {
					gateN++
				}
				o.Welch = true
				if Compare(base, head, m, o).PWorse <= 0.01 {
					welch++
				}
				o.Welch, o.Alpha = false, 0.01/30
				if Compare(base, head, m, o).Outcome == Regression {
					gate30++
				}
			}
			if i == 0 {
				b.Logf("n=%d: MWU alone %.1f%%, pooled t %.1f%%, Welch t %.1f%%, gate %.1f%%, gate at alpha/30 %.1f%%", n,
					100*frac(mwu, reps), 100*frac(pooled, reps), 100*frac(welch, reps), 100*frac(gateN, reps), 100*frac(gate30, reps))
			}
		}
	}
}

func TestStatResultJSON(t *testing.T) {
	r := Compare(nil, []float64{1}, throughput(), DefaultStatOptions())
	v := r.Verdict("c", "x", "")
	data, err := json.Marshal(v)
	if err != nil || !strings.Contains(string(data), `"ratio":"NaN"`) || !strings.Contains(string(data), `"outcome":"error"`) {
		t.Fatalf("%v %s", err, data)
	}
	var back Verdict
	if err := json.Unmarshal(data, &back); err != nil || back.Stat == nil || !math.IsNaN(back.Stat.Ratio) || back.Stat.Outcome != StatError || back.Stat.Reason != r.Reason {
		t.Fatalf("non-finite result not read back: %v %+v", err, back.Stat)
	}
	if err := json.Unmarshal([]byte(`{"ratio": null, "ci_low": "-Inf"}`), &back.Stat); err != nil || !math.IsNaN(back.Stat.Ratio) || !math.IsInf(back.Stat.CILow, -1) {
		t.Fatalf("null and -Inf: %v %+v", err, back.Stat)
	}
	r = Compare([]float64{100, 101, 99}, []float64{90, 91, 89}, throughput(), DefaultStatOptions())
	data, err = json.Marshal(&r)
	if err != nil || !strings.Contains(string(data), `"metric":"output_throughput"`) {
		t.Fatalf("%v %s", err, data)
	}
}

func TestPolicyStatus(t *testing.T) {
	for _, c := range []struct {
		o    Outcome
		p    Policy
		st   Status
		flag string
	}{
		{Pass, Policy{Strict: true}, StatusPassed, ""},
		{Fail, Policy{}, StatusFailed, ""},
		{Error, Policy{}, StatusError, ""},
		{NoBaseline, Policy{}, StatusSkipped, ""},
		{NoBaseline, Policy{Strict: true}, StatusFailed, "--strict"},
		{NoBaseline, Policy{Strict: true, RequireBaseline: true}, StatusFailed, "--require-baseline"},
		{Inconclusive, Policy{RequireBaseline: true}, StatusSkipped, ""},
		{Inconclusive, Policy{Strict: true}, StatusFailed, "--strict"},
		{Skip, Policy{Strict: true}, StatusFailed, "--strict"},
		{"not_run", Policy{}, StatusError, ""},
	} {
		if st, flag := c.p.Status(c.o); st != c.st || flag != c.flag {
			t.Errorf("%+v.Status(%s) = %s %q, want %s %q", c.p, c.o, st, flag, c.st, c.flag)
		}
	}
	for o, want := range map[StatOutcome]Outcome{Regression: Fail, Improvement: Pass, NoChange: Pass, Undecided: Inconclusive, StatError: Error} {
		if got := o.Verdict(); got != want {
			t.Errorf("%s.Verdict() = %s, want %s", o, got, want)
		}
	}
}
