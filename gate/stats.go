package gate

import (
	"fmt"
	"github.com/reckon-ci/reckon/spec"
	"math"
	"strings"

	"gonum.org/v1/gonum/stat/distuv"

	"github.com/reckon-ci/reckon/internal/num"
	"github.com/reckon-ci/reckon/internal/statdefault"
)

// StatOutcome is the decision of a statistical comparison.
type StatOutcome string

// Statistical outcomes. Undecided is reported as "inconclusive"; StatError means the inputs
// could not be judged (no trials, non-positive values, a metric without a direction).
const (
	Regression  StatOutcome = "regression"
	Improvement StatOutcome = "improvement"
	NoChange    StatOutcome = "no_change"
	Undecided   StatOutcome = "inconclusive"
	StatError   StatOutcome = "error"
)

// Verdict is the check outcome of a statistical decision: a regression fails, an improvement or
// no change passes, an undecided comparison is inconclusive, anything else an error.
func (o StatOutcome) Verdict() Outcome {
	switch o {
	case Regression:
		return Fail
	case Improvement, NoChange:
		return Pass
	case Undecided:
		return Inconclusive
	}
	return Error
}

const defaultMethod = "t-test on log values (pooled for equal n, else Welch) + Mann-Whitney U guard"

// StatOptions configures Compare. Zero values take the documented defaults.
type StatOptions struct {
	// Alpha is the one-sided significance level of the regression test (default 0.01). In
	// two-sided mode each direction is tested at Alpha/2.
	Alpha float64
	// MinEffect is the smallest relative change of the median that counts as a regression or an
	// improvement, as a fraction (default 0.02 = 2%).
	MinEffect float64
	// NoChangeMargin is the equivalence margin of a "no change" verdict: the confidence interval
	// must exclude a change of this size in the bad direction (default 0.05 = 5%, and never less
	// than MinEffect). Between MinEffect and NoChangeMargin the comparison may be inconclusive.
	NoChangeMargin float64
	// RankAlpha is the level of the Mann-Whitney U guard: a regression also needs the one-sided
	// rank test at or below this level (default 0.05, which 3 vs 3 trials can just reach).
	RankAlpha float64
	// Confidence is the level of the reported confidence interval of the ratio (default 0.95).
	Confidence float64
	// MaxTrials bounds the "N more trials per side would decide" estimate (default 10).
	MaxTrials int
	// TwoSided tests both directions at Alpha/2 each (reckon compare). One-sided (the gate)
	// tests for a regression at Alpha; improvements are still reported, at Alpha.
	TwoSided bool
	// Detect makes the comparison a one-sided detection test (docs/statistics.md, "Detection
	// tests"): a regression as usual; otherwise no change when the test had Power to find a
	// change of MinEffect (the verdict states the smallest change it would find), else
	// inconclusive with the one design that would. The equivalence margin is not used.
	Detect bool
	// Power is the probability with which a design must find a change of MinEffect (default
	// statdefault.Power): the plan of an undecided verdict, and the sensitivity Detect needs.
	Power float64
	// Welch forces Welch's unequal-variance t-test even for equal sample sizes. By default the
	// pooled (Student) t-test is used when both sides have the same number of trials, where it is
	// robust to unequal variances and has more power, and Welch's test otherwise.
	Welch bool
}

// DefaultStatOptions returns the defaults used by the gate (alpha, min_effect and the rank
// guard's level from internal/statdefault, their one home).
func DefaultStatOptions() StatOptions {
	return StatOptions{Alpha: statdefault.Alpha, MinEffect: statdefault.MinEffect, NoChangeMargin: 0.05, RankAlpha: statdefault.RankAlpha, Confidence: 0.95, MaxTrials: 10, Power: statdefault.Power}
}

func (o StatOptions) withDefaults() StatOptions {
	d := DefaultStatOptions()
	if o.Alpha <= 0 {
		o.Alpha = d.Alpha
	}
	if o.MinEffect <= 0 {
		o.MinEffect = d.MinEffect
	}
	if o.NoChangeMargin <= 0 {
		o.NoChangeMargin = d.NoChangeMargin
	}
	if o.NoChangeMargin < o.MinEffect {
		o.NoChangeMargin = o.MinEffect
	}
	if o.RankAlpha <= 0 {
		o.RankAlpha = d.RankAlpha
	}
	if o.Confidence <= 0 || o.Confidence >= 1 {
		o.Confidence = d.Confidence
	}
	if o.MaxTrials <= 0 {
		o.MaxTrials = d.MaxTrials
	}
	if o.Power <= 0 || o.Power >= 1 {
		o.Power = d.Power
	}
	return o
}

// StatResult is the full record of one statistical comparison of head against base.
type StatResult struct {
	Metric    string    `json:"metric"`
	Direction Direction `json:"direction"`
	NBase     int       `json:"n_base"`
	NHead     int       `json:"n_head"`

	BaseMedian float64 `json:"base_median"`
	HeadMedian float64 `json:"head_median"`
	// Ratio is head median / base median; Change is Ratio-1.
	Ratio  float64 `json:"ratio"`
	Change float64 `json:"change"`
	// Worse is the relative change in the bad direction (positive = worse): Ratio-1 for
	// lower-is-better metrics, 1-Ratio for higher-is-better ones.
	Worse float64 `json:"worse"`
	// HLRatio is exp(Hodges-Lehmann shift of the log values); CILow/CIHigh bound the ratio with
	// coverage CIConfidence (Moses interval, distribution-free).
	HLRatio      float64 `json:"hl_ratio"`
	CILow        float64 `json:"ci_low"`
	CIHigh       float64 `json:"ci_high"`
	CIConfidence float64 `json:"ci_confidence"`

	// PWorse/PBetter: one-sided t-test p-values on log values for "head is worse/better".
	PWorse  float64 `json:"p_worse"`
	PBetter float64 `json:"p_better"`
	// RankPWorse/RankPBetter: one-sided Mann-Whitney U p-values.
	RankPWorse  float64 `json:"rank_p_worse"`
	RankPBetter float64 `json:"rank_p_better"`
	// AdjPWorse/AdjPBetter: after Holm-Bonferroni across the run's gated checks (equal to the
	// raw values until Holm is applied).
	AdjPWorse  float64 `json:"adj_p_worse"`
	AdjPBetter float64 `json:"adj_p_better"`
	// PValue is the p-value reported for the outcome: the adjusted p of the direction the
	// data lean towards (doubled in two-sided mode, capped at 1).
	PValue float64 `json:"p_value"`
	Holm   bool    `json:"holm,omitempty"`

	Alpha     float64 `json:"alpha"`
	MinEffect float64 `json:"min_effect"`
	Margin    float64 `json:"no_change_margin"`
	RankAlpha float64 `json:"rank_alpha"`
	TwoSided  bool    `json:"two_sided,omitempty"`
	Method    string  `json:"method"`
	// Detect marks a detection test (StatOptions.Detect); Power is the power its sensitivity
	// is stated at, and Detectable the smallest change in the bad direction (a fraction) it finds
	// with that power at its level (set on a detection test's non-regression outcomes).
	Detect bool `json:"detect,omitempty"`
	// Family is the size of the Holm-Bonferroni family the result was decided in (0 or 1:
	// alone); a detection test states its sensitivity at alpha/Family, the level its first
	// step may need.
	Family     int     `json:"family,omitempty"`
	Power      float64 `json:"power,omitempty"`
	Detectable float64 `json:"detectable,omitempty"`

	Outcome StatOutcome `json:"outcome"`
	// MoreTrials is, for an inconclusive outcome, how many more trials per side would likely
	// decide (observed spread and effect taken at face value); -1 means not within MaxTrials
	// per side.
	MoreTrials int    `json:"more_trials,omitempty"`
	MaxTrials  int    `json:"max_trials"`
	Reason     string `json:"reason"`

	// Launch is set when launches are the unit of replication (CompareLaunches): the launch
	// counts, each side's within- and between-launch noise, the between-launch variation the
	// test used and where it came from, and, for an inconclusive outcome, the design that would
	// decide. NBase and NHead then still count trials.
	Launch *LaunchStats `json:"launch,omitempty"`

	// internals for re-deciding after Holm and for the trial estimate
	logDiff  float64 // mean(log head) - mean(log base), sign-adjusted so positive = worse
	logSD    float64 // pooled standard deviation of the log values (launch unit: the SE of logDiff)
	worseHi  float64 // worst case of Worse within the confidence interval
	betterHi float64 // best case of -Worse within the confidence interval
}

// Compare judges head against base for metric m. Values must be positive (logs are taken).
// The decision rules are in docs/statistics.md: a regression needs the one-sided t-test on log
// values at Alpha (Holm-adjusted when Holm is applied later), the Mann-Whitney U guard at
// RankAlpha, and a median change of at least MinEffect in the bad direction.
func Compare(base, head []float64, m Metric, opts StatOptions) StatResult {
	o := opts.withDefaults()
	r := StatResult{
		Metric: m.Name, Direction: m.Direction, NBase: len(base), NHead: len(head),
		Alpha: o.Alpha, MinEffect: o.MinEffect, Margin: o.NoChangeMargin, RankAlpha: o.RankAlpha, TwoSided: o.TwoSided,
		MaxTrials: o.MaxTrials, Method: defaultMethod, Detect: o.Detect, Power: o.Power,
		PWorse: 1, PBetter: 1, RankPWorse: 1, RankPBetter: 1, AdjPWorse: 1, AdjPBetter: 1, PValue: 1,
		Ratio: math.NaN(), HLRatio: math.NaN(), CILow: math.NaN(), CIHigh: math.NaN(),
		BaseMedian: math.NaN(), HeadMedian: math.NaN(), Change: math.NaN(), Worse: math.NaN(),
	}
	if c, ok := constant(base, head); ok && m.Direction != DirectionUnknown {
		// Every trial on both sides reported the same value (e.g. failed = 0): nothing moved.
		r.BaseMedian, r.HeadMedian, r.Change, r.Worse = c, c, 0, 0
		r.Ratio, r.HLRatio, r.CILow, r.CIHigh, r.CIConfidence = 1, 1, 1, 1, 1
		r.Outcome, r.Reason = NoChange, fmt.Sprintf("every trial on both sides is %v", c)
		return r
	}
	if err := checkSamples("base", base); err != nil {
		r.Outcome, r.Reason = StatError, err.Error()
		return r
	}
	if err := checkSamples("head", head); err != nil {
		r.Outcome, r.Reason = StatError, err.Error()
		return r
	}
	if m.Direction != HigherIsBetter && m.Direction != LowerIsBetter {
		r.Outcome = StatError
		r.Reason = fmt.Sprintf("metric %q has no known direction (higher or lower is better); it cannot be gated", m.Name)
		return r
	}
	r.BaseMedian, r.HeadMedian = num.Median(base), num.Median(head)
	r.Ratio = r.HeadMedian / r.BaseMedian
	r.Change = r.Ratio - 1
	sign := 1.0 // log values times sign: larger = worse
	if m.Direction == HigherIsBetter {
		sign = -1
		r.Worse = 1 - r.Ratio
	} else {
		r.Worse = r.Ratio - 1
	}
	lb, lh := logs(base, 1), logs(head, 1)
	ci := MosesCI(lb, lh, o.Confidence)
	r.HLRatio, r.CILow, r.CIHigh, r.CIConfidence = math.Exp(ci.Estimate), math.Exp(ci.Low), math.Exp(ci.High), ci.Confidence
	if m.Direction == HigherIsBetter {
		r.worseHi, r.betterHi = 1-r.CILow, r.CIHigh-1
	} else {
		r.worseHi, r.betterHi = r.CIHigh-1, 1-r.CILow
	}
	xb, xh := logs(base, sign), logs(head, sign)
	mw := MannWhitney(xb, xh)
	r.RankPWorse, r.RankPBetter = mw.PGreater, mw.PLess
	r.PWorse, r.PBetter, r.logDiff, r.logSD = tTest(xb, xh, o.Welch)
	r.AdjPWorse, r.AdjPBetter = r.PWorse, r.PBetter
	if len(base) < 2 || len(head) < 2 {
		r.Outcome = Undecided
		r.Reason = fmt.Sprintf("need at least 2 trials per side to estimate the noise (have %d base, %d head)", len(base), len(head))
		r.MoreTrials = max(2-len(base), 2-len(head))
		return r
	}
	r.decide()
	return r
}

// constant reports whether every value of both samples is the same finite number.
func constant(a, b []float64) (float64, bool) {
	if len(a) == 0 || len(b) == 0 {
		return 0, false
	}
	c := a[0]
	if math.IsNaN(c) || math.IsInf(c, 0) {
		return 0, false
	}
	for _, xs := range [][]float64{a, b} {
		for _, x := range xs {
			if x != c {
				return 0, false
			}
		}
	}
	return c, true
}

// checkSamples rejects empty, non-finite and non-positive samples.
func checkSamples(side string, xs []float64) error {
	if len(xs) == 0 {
		return fmt.Errorf("%s has no trials", side)
	}
	for i, x := range xs {
		if math.IsNaN(x) || math.IsInf(x, 0) || x <= 0 {
			return fmt.Errorf("%s trial %d has value %v; expected a positive finite number", side, i+1, x)
		}
	}
	return nil
}

func logs(xs []float64, sign float64) []float64 {
	out := make([]float64, len(xs))
	for i, x := range xs {
		out[i] = sign * math.Log(x)
	}
	return out
}

// tTest runs a one-sided t-test of mean(y) > mean(x) and mean(y) < mean(x): pooled (Student)
// when the sample sizes are equal and welch is false, Welch otherwise. It also returns the mean
// difference and the pooled standard deviation.
func tTest(x, y []float64, welch bool) (pGreater, pLess, diff, sd float64) {
	mx, vx := meanVar(x)
	my, vy := meanVar(y)
	nx, ny := float64(len(x)), float64(len(y))
	diff = my - mx
	if len(x) < 2 || len(y) < 2 {
		return 1, 1, diff, 0
	}
	sd = math.Sqrt(((nx-1)*vx + (ny-1)*vy) / (nx + ny - 2))
	var se, df float64
	if welch || len(x) != len(y) {
		a, b := vx/nx, vy/ny
		se = math.Sqrt(a + b)
		if a+b > 0 {
			df = (a + b) * (a + b) / (a*a/(nx-1) + b*b/(ny-1))
		}
	} else {
		se = sd * math.Sqrt(1/nx+1/ny)
		df = nx + ny - 2
	}
	// Both sides noiseless (identical values): the difference is deterministic.
	if se == 0 || se < 1e-12*math.Max(math.Abs(mx), math.Abs(my)) {
		switch {
		case diff > 0:
			return 0, 1, diff, sd
		case diff < 0:
			return 1, 0, diff, sd
		default:
			return 1, 1, diff, sd
		}
	}
	t := diff / se
	dist := distuv.StudentsT{Mu: 0, Sigma: 1, Nu: df}
	return clamp01(dist.Survival(t)), clamp01(dist.CDF(t)), diff, sd
}

func meanVar(x []float64) (mean, variance float64) {
	if len(x) == 0 {
		return math.NaN(), math.NaN()
	}
	for _, v := range x {
		mean += v
	}
	mean /= float64(len(x))
	if len(x) < 2 {
		return mean, 0
	}
	for _, v := range x {
		variance += (v - mean) * (v - mean)
	}
	return mean, variance / float64(len(x)-1)
}

// decide sets Outcome, PValue, Reason and MoreTrials from the (possibly Holm-adjusted) p-values.
func (r *StatResult) decide() {
	alpha := r.Alpha
	if r.TwoSided {
		alpha /= 2
	}
	lean := r.AdjPWorse
	if r.AdjPBetter < lean {
		lean = r.AdjPBetter
	}
	if r.TwoSided {
		lean = math.Min(1, 2*lean)
	}
	r.PValue = lean
	r.MoreTrials = 0
	if r.Launch != nil {
		r.Launch.NeedLaunches, r.Launch.NeedTrials, r.Launch.Decide = 0, 0, ""
	}
	rankOK := func(p float64) bool { return p <= r.RankAlpha*(1+1e-9) }
	sigWorse := r.AdjPWorse <= alpha && rankOK(r.RankPWorse)
	sigBetter := r.AdjPBetter <= alpha && rankOK(r.RankPBetter)
	ci := fmt.Sprintf("%.3g%% CI %.3f–%.3f", 100*r.CIConfidence, r.CILow, r.CIHigh)
	detect := r.Detect && r.Launch != nil
	r.Detectable = 0
	switch {
	case sigWorse && r.Worse >= r.MinEffect, detect && sigWorse && r.Worse >= r.MinEffect/2:
		r.Outcome = Regression
		r.Reason = fmt.Sprintf("significant (p=%s ≤ %.2g, rank p=%s) and median %s beyond the %s minimum effect",
			fmtP(r.AdjPWorse), alpha, fmtP(r.RankPWorse), num.Pct(r.Change), num.Pct(r.MinEffect)[1:])
		if r.Worse < r.MinEffect {
			r.Reason = fmt.Sprintf("detected (p=%s ≤ %.2g, rank p=%s): median %s, beyond half the %s minimum effect",
				fmtP(r.AdjPWorse), alpha, fmtP(r.RankPWorse), num.Pct(r.Change), num.Pct(r.MinEffect)[1:])
		}
	case sigBetter && -r.Worse >= r.MinEffect:
		r.Outcome = Improvement
		r.Reason = fmt.Sprintf("significant (p=%s ≤ %.2g, rank p=%s) and median %s beyond the %s minimum effect",
			fmtP(r.AdjPBetter), alpha, fmtP(r.RankPBetter), num.Pct(r.Change), num.Pct(r.MinEffect)[1:])
	case detect:
		r.decideDetect(alpha, lean)
	case r.worseHi < r.Margin && (!r.TwoSided || r.betterHi < r.Margin):
		r.Outcome = NoChange
		side := "in the bad direction"
		if r.TwoSided {
			side = "either way"
		}
		if sigWorse || sigBetter {
			r.Reason = fmt.Sprintf("significant but under the %s minimum effect, and the %s excludes a %s change %s",
				num.Pct(r.MinEffect)[1:], ci, num.Pct(r.Margin)[1:], side)
		} else {
			r.Reason = fmt.Sprintf("not significant (p=%s), and the %s excludes a %s change %s", fmtP(lean), ci, num.Pct(r.Margin)[1:], side)
		}
	default:
		r.Outcome = Undecided
		if r.Launch != nil {
			r.launchMoreText(alpha)
			r.MoreTrials = 0
			if l := r.Launch; l.NeedLaunches < 0 {
				r.MoreTrials = -1
			} else if l.NeedLaunches == max(1, min(l.LaunchesBase, l.LaunchesHead)) {
				r.MoreTrials = l.NeedLaunches * max(0, l.NeedTrials-r.NHead/max(1, l.LaunchesHead))
			}
		} else {
			r.MoreTrials = r.moreTrials(alpha)
		}
		why := "not significant"
		switch {
		case sigWorse || sigBetter:
			why = "significant but the median change is under the minimum effect"
		case r.AdjPWorse <= alpha && !rankOK(r.RankPWorse):
			why = fmt.Sprintf("t-test significant but the rank test is not (rank p=%s > %g)", fmtP(r.RankPWorse), r.RankAlpha)
		}
		r.Reason = fmt.Sprintf("%s (p=%s), and the %s cannot exclude a %s change (the no-change margin)", why, fmtP(lean), ci, num.Pct(r.Margin)[1:])
	}
}

// decideDetect is decide for a detection test that found no regression: no change when the test
// had r.Power to find a change of MinEffect in the bad direction at level alpha, else
// inconclusive with the one design that would (launchMoreText). Either way Detectable states the
// smallest change the test finds with that power.
func (r *StatResult) decideDetect(alpha, lean float64) {
	ls := r.Launch
	level := alpha / float64(max(1, r.Family))
	q := distuv.UnitNormal.Quantile(1 - level)
	if !math.IsInf(ls.DF, 1) && ls.DF > 0 {
		q = distuv.StudentsT{Mu: 0, Sigma: 1, Nu: ls.DF}.Quantile(1 - level)
	}
	q += distuv.UnitNormal.Quantile(r.Power)
	r.Detectable = math.Expm1(q * ls.SE)
	if r.Detectable <= r.MinEffect {
		r.Outcome = NoChange
		r.Reason = fmt.Sprintf("no regression detected (p=%s > %.2g); a drop of %s or more would have been found with %.0f%% power (min_effect %s)",
			fmtP(r.AdjPWorse), alpha, num.Pct(r.Detectable)[1:], 100*r.Power, num.Pct(r.MinEffect)[1:])
		return
	}
	r.Outcome = Undecided
	r.Reason = fmt.Sprintf("no regression detected (p=%s), but the test finds only drops of %s or more with %.0f%% power, above min_effect %s",
		fmtP(lean), num.Pct(r.Detectable)[1:], 100*r.Power, num.Pct(r.MinEffect)[1:])
	r.launchMoreText(alpha)
	r.MoreTrials = 0
	if ls.NeedLaunches < 0 {
		r.MoreTrials = -1
	}
}

// moreTrials estimates how many more trials per side would decide, taking the observed mean
// difference and spread of the log values at face value (normal approximation): enough for the
// t-test to reach alpha when the effect is beyond MinEffect, or for the interval to exclude
// MinEffect when it is below.
func (r *StatResult) moreTrials(alpha float64) int {
	// Effective trials per side of an unbalanced comparison (a stored baseline of 10 against 5
	// head trials counts as 6.7 per side).
	n := int(math.Floor(2 / (1/float64(r.NBase) + 1/float64(r.NHead))))
	s := r.logSD
	if s == 0 || math.IsNaN(s) {
		return 1
	}
	thr := math.Log1p(r.MinEffect)
	margin := math.Log1p(r.Margin)
	d := r.logDiff
	zA := distuv.UnitNormal.Quantile(1 - alpha)
	zC := distuv.UnitNormal.Quantile(1 - (1-r.CIConfidence)/2)
	need := math.Inf(1)
	if math.Abs(d) >= thr { // effect big enough: needs significance
		need = 2 * s * s * zA * zA / (d * d)
	} else { // effect small: needs a tight enough interval
		gap := margin - math.Abs(d)
		need = 2 * s * s * zC * zC / (gap * gap)
	}
	more := int(math.Ceil(need)) - n
	if more < 1 {
		more = 1
	}
	if n+more > r.MaxTrials {
		return -1
	}
	return more
}

// MoreTrialsText renders MoreTrials for humans.
func (r *StatResult) MoreTrialsText() string {
	switch {
	case r.Outcome != Undecided:
		return ""
	case r.Launch != nil && r.Launch.Decide != "":
		return r.Launch.Decide
	case r.MoreTrials < 0:
		return fmt.Sprintf("more than %d trials per side would be needed to decide", r.MaxTrials)
	default:
		return fmt.Sprintf("about %d more trial(s) per side would decide", r.MoreTrials)
	}
}

// Summary is the one-line description of the comparison, e.g.
// "output_throughput -57% (ratio 0.43, 95% CI 0.41–0.45, p=0.004)".
func (r *StatResult) Summary() string {
	if r.Outcome == StatError {
		return fmt.Sprintf("%s: %s", r.Metric, r.Reason)
	}
	return fmt.Sprintf("%s %s (ratio %.3f, %.3g%% CI %.3f–%.3f, p=%s, n=%d/%d)", r.Metric, num.Pct(r.Change), r.Ratio,
		100*r.CIConfidence, r.CILow, r.CIHigh, fmtP(r.PValue), r.NBase, r.NHead)
}

// Verdict turns the comparison into a check verdict: a regression fails, an improvement or no
// change passes, an undecided comparison is inconclusive and an invalid input is an error.
// against names the base side in the message (e.g. "nccl" or "baseline") and is the verdict's
// Against.
func (r *StatResult) Verdict(check, config, against string) Verdict {
	v := Verdict{Name: check, Config: config, Against: against, Stat: r, Kind: string(spec.KindLatency)}
	if r.Direction == HigherIsBetter {
		v.Kind = string(spec.KindThroughput)
	}
	v.Metrics = map[string]float64{}
	for k, x := range map[string]float64{
		"base_median": r.BaseMedian, "head_median": r.HeadMedian, "ratio": r.Ratio,
		"ci_low": r.CILow, "ci_high": r.CIHigh, "p_value": r.PValue,
		"n_base": float64(r.NBase), "n_head": float64(r.NHead),
	} {
		if !math.IsNaN(x) && !math.IsInf(x, 0) { // JSON and JUnit properties cannot hold them
			v.Metrics[k] = x
		}
	}
	v.Outcome = r.Outcome.Verdict()
	switch r.Outcome {
	case Regression:
		v.Category = CategoryRegression
	case StatError:
		v.Category = CategoryMeasurement // too few or invalid trials to compare
	}
	vs := ""
	if against != "" {
		vs = " vs " + against
	}
	if r.Outcome == StatError {
		v.Message = fmt.Sprintf("%s: %s%s: %s", config, r.Metric, vs, r.Reason)
		return v
	}
	v.Message = fmt.Sprintf("%s: %s %s%s (ratio %.2f, %.3g%% CI %.2f–%.2f, p=%s): %s", config, r.Metric,
		num.Pct(r.Change), vs, r.Ratio, 100*r.CIConfidence, r.CILow, r.CIHigh, fmtP(r.PValue), strings.ReplaceAll(string(r.Outcome), "_", " "))
	var b strings.Builder
	if l := r.Launch; l != nil {
		put := func(k string, x float64) {
			if !math.IsNaN(x) && !math.IsInf(x, 0) {
				v.Metrics[k] = x
			}
		}
		put("launches_base", float64(l.LaunchesBase))
		put("launches_head", float64(l.LaunchesHead))
		put("within_launch_cv_base", l.Base.WithinCV)
		put("within_launch_cv_head", l.Head.WithinCV)
		put("between_launch_cv_base", l.Base.BetweenCV)
		put("between_launch_cv_head", l.Head.BetweenCV)
		put("between_launch_cv_used", l.BetweenCV)
		if n := r.PriorNote(); n != "" {
			v.Message += "; " + n
		}
		if r.Outcome == Undecided && l.Decide != "" {
			v.Message += "; " + l.Decide
		}
		b.WriteString(r.launchDetails())
	}
	fmt.Fprintf(&b, "metric %s (%s), %d base vs %d head trials\n", r.Metric, r.Direction, r.NBase, r.NHead)
	if r.Launch != nil {
		fmt.Fprintf(&b, "trial median %s -> %s; ratio of the geometric means of the launch means %.4f (%.1f%% CI %.4f–%.4f)\n",
			num.Format(r.BaseMedian), num.Format(r.HeadMedian), r.Ratio, 100*r.CIConfidence, r.CILow, r.CIHigh)
	} else {
		fmt.Fprintf(&b, "median %s -> %s (ratio %.4f, Hodges-Lehmann %.4f, %.1f%% CI %.4f–%.4f)\n",
			num.Format(r.BaseMedian), num.Format(r.HeadMedian), r.Ratio, r.HLRatio, 100*r.CIConfidence, r.CILow, r.CIHigh)
	}
	test, rank := "t-test on logs", "Mann-Whitney U"
	if r.Launch != nil {
		test, rank = "t-test on log launch means (Satterthwaite df)", "Mann-Whitney U on trials"
	}
	fmt.Fprintf(&b, "%s: p(worse)=%s p(better)=%s; %s: p(worse)=%s p(better)=%s", test,
		fmtP(r.PWorse), fmtP(r.PBetter), rank, fmtP(r.RankPWorse), fmtP(r.RankPBetter))
	if r.Holm {
		fmt.Fprintf(&b, "; Holm-adjusted p(worse)=%s", fmtP(r.AdjPWorse))
	}
	fmt.Fprintf(&b, "\n%s: %s", r.Outcome, r.Reason)
	if t := r.MoreTrialsText(); t != "" {
		fmt.Fprintf(&b, "; %s", t)
	}
	v.Details = b.String()
	return v
}

// fmtP formats a p-value.
func fmtP(p float64) string {
	switch {
	case p < 1e-4:
		return fmt.Sprintf("%.1e", p)
	case p < 0.01:
		return fmt.Sprintf("%.4f", p)
	default:
		return fmt.Sprintf("%.3f", p)
	}
}
