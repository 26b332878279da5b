package gate

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"strings"

	"gonum.org/v1/gonum/stat/distuv"

	"github.com/reckon-ci/reckon/internal/num"
)

// Launches as the unit of replication (docs/statistics.md, "Launches as the unit"). A config's
// measurement is a two-level sample: launches of the engine (a random effect: memory layout,
// clocks, graph capture, neighbours) and trials within each launch. On the log scale
//
//	y_ij = mu + a_i + e_ij,   a_i ~ N(0, sigma_b^2),   e_ij ~ N(0, sigma_w^2),
//
// and the effect head/base is exp of the difference of the means of the launch means. Its
// variance has a between-launch part that only launches can measure; trials of one launch
// measure sigma_w alone.

// DefaultBetweenLaunchCV is the between-launch coefficient of variation the gate assumes when
// nothing it can read measures it (one launch per side, no multi-launch baseline, no history).
// It is the one home of the prior's default; a testbed states its own with
// LaunchNoise{CV: ..., Prior: true} (suites.Options.BetweenLaunchCV, reckon gate's
// $RECKON_BETWEEN_LAUNCH_CV).
const DefaultBetweenLaunchCV = 0.03

// MinLaunchesToMeasure is the fewest launches a baseline needs for its between-launch variation
// to count as measured (two launches give a variance with one degree of freedom; three is the
// least the docs and messages recommend).
const MinLaunchesToMeasure = 3

// LaunchNoise is what is known of a metric's between-launch variation from outside the two
// samples being compared.
type LaunchNoise struct {
	// CV is the between-launch coefficient of variation (the standard deviation of the launch
	// effect on the log scale), as a fraction.
	CV float64 `json:"cv"`
	// DF is the degrees of freedom of a measured CV (launches - 1); 0 for a prior.
	DF float64 `json:"df,omitempty"`
	// Prior marks an assumed value (treated as known, stated in every verdict that uses it).
	Prior bool `json:"prior,omitempty"`
	// Source says where the value comes from, e.g. "history: 12 runs since ..." or
	// "default prior".
	Source string `json:"source"`
}

// PriorLaunchNoise is the prior between-launch variation: cv, or DefaultBetweenLaunchCV when
// cv <= 0.
func PriorLaunchNoise(cv float64, source string) LaunchNoise {
	if cv <= 0 {
		cv, source = DefaultBetweenLaunchCV, "default prior"
	}
	if source == "" {
		source = "prior"
	}
	return LaunchNoise{CV: cv, Prior: true, Source: source}
}

// NoiseEstimate is the two components of a sample's variation, measured from its launches.
type NoiseEstimate struct {
	// Launches and Trials count the sample.
	Launches int `json:"launches"`
	Trials   int `json:"trials"`
	// WithinCV is the pooled standard deviation of log trial values around their launch's mean
	// (NaN with one trial per launch); WithinDF its degrees of freedom.
	WithinCV float64 `json:"within_cv"`
	WithinDF int     `json:"within_df"`
	// BetweenCV is the standard deviation of the launch effect (the spread of launch means
	// beyond what within-launch noise explains; ANOVA estimate truncated at 0), NaN with one
	// launch; BetweenDF is launches - 1.
	BetweenCV float64 `json:"between_cv"`
	BetweenDF int     `json:"between_df"`
}

// EstimateNoise measures the within- and between-launch variation of launches (each inner
// slice one launch's trial values, all positive) on the log scale.
func EstimateNoise(launches [][]float64) NoiseEstimate {
	g := logGroups(launches, 1)
	e := NoiseEstimate{WithinCV: math.NaN(), BetweenCV: math.NaN()}
	ms := groupStats(g)
	e.Launches, e.Trials = len(ms.means), ms.trials
	if ms.dfW > 0 {
		e.WithinCV, e.WithinDF = math.Sqrt(ms.msW), ms.dfW
	}
	if k := len(ms.means); k >= 2 {
		_, v := meanVar(ms.means)
		b := v
		if ms.dfW > 0 {
			b = v - ms.msW*ms.invN
		}
		e.BetweenCV, e.BetweenDF = math.Sqrt(math.Max(0, b)), k-1
	}
	return e
}

// String renders the estimate, e.g. "3 launches x 5 trials: within-launch CV 2.1%, between-launch CV 4.0%".
func (e NoiseEstimate) String() string {
	return fmt.Sprintf("%d launch(es), %d trials: within-launch CV %s, between-launch CV %s", e.Launches, e.Trials, fmtCV(e.WithinCV), fmtCV(e.BetweenCV))
}

func fmtCV(x float64) string {
	if math.IsNaN(x) {
		return "n/a"
	}
	return fmt.Sprintf("%.1f%%", 100*x)
}

// groupSummary holds the one-way ANOVA quantities of one side's log values.
type groupSummary struct {
	means  []float64 // per launch
	trials int
	ssW    float64
	dfW    int
	msW    float64
	invN   float64 // mean over launches of 1/n_i
}

func groupStats(g [][]float64) groupSummary {
	var s groupSummary
	for _, xs := range g {
		if len(xs) == 0 {
			continue
		}
		m, _ := meanVar(xs)
		for _, x := range xs {
			s.ssW += (x - m) * (x - m)
		}
		s.dfW += len(xs) - 1
		s.trials += len(xs)
		s.invN += 1 / float64(len(xs))
		s.means = append(s.means, m)
	}
	if len(s.means) > 0 {
		s.invN /= float64(len(s.means))
	}
	if s.dfW > 0 {
		s.msW = s.ssW / float64(s.dfW)
	}
	return s
}

func logGroups(launches [][]float64, sign float64) [][]float64 {
	out := make([][]float64, 0, len(launches))
	for _, l := range launches {
		if len(l) > 0 {
			out = append(out, logs(l, sign))
		}
	}
	return out
}

func flatten(g [][]float64) []float64 {
	var out []float64
	for _, xs := range g {
		out = append(out, xs...)
	}
	return out
}

const launchMethod = "launches as the unit: difference of mean log launch means, variance components (one-way random effects, ANOVA) with Satterthwaite df, + Mann-Whitney U guard on trials"

// LaunchStats is what a launch-unit comparison adds to a StatResult.
type LaunchStats struct {
	// LaunchesBase/LaunchesHead count each side's launches (NBase/NHead count trials).
	LaunchesBase int `json:"launches_base"`
	LaunchesHead int `json:"launches_head"`
	// Base and Head are each side's measured noise.
	Base NoiseEstimate `json:"base"`
	Head NoiseEstimate `json:"head"`
	// BetweenCV is the between-launch CV the comparison used; BetweenSource where it came from
	// ("measured in the compared launches", the history, a baseline, or a prior); BetweenPrior
	// is true when it was assumed, not measured.
	BetweenCV     float64 `json:"between_cv"`
	BetweenSource string  `json:"between_source"`
	BetweenPrior  bool    `json:"between_prior,omitempty"`
	// WithinCV is the pooled within-launch CV of both sides.
	WithinCV float64 `json:"within_cv"`
	// SE is the standard error of the log ratio, DF its Satterthwaite degrees of freedom
	// (+Inf when every component is known).
	SE float64 `json:"se"`
	DF float64 `json:"df"`
	// Decide says, for an inconclusive outcome, what design would likely decide (e.g. "3
	// launches per side of 5 trials"); NeedLaunches and NeedTrials are its numbers per side (0
	// when not computed, -1 when no design within the bounds would).
	Decide       string `json:"decide,omitempty"`
	NeedLaunches int    `json:"need_launches,omitempty"`
	NeedTrials   int    `json:"need_trials,omitempty"`
	// Plan is what this testbed needs to decide the check's min_effect (NeedForMinEffect), from
	// the noise the comparison used; set with Decide.
	Plan *DesignNeed `json:"plan,omitempty"`
}

// MaxLaunchesAdvised bounds the launches per side a "would decide" estimate proposes.
const MaxLaunchesAdvised = 10

// CompareLaunches judges head against base for metric m with launches as the unit: each side
// is its launches (inner slices: one launch's trial values, positive). The between-launch
// variance comes from the compared launches themselves when either side has two or more, and
// otherwise from ext (a multi-launch baseline of these configs, the history, or a prior; a
// zero ext means the default prior). The decision rules are Compare's (t-test at Alpha,
// Mann-Whitney guard on the trials at RankAlpha, MinEffect, the no-change margin), with the
// t-test on the launch model (docs/statistics.md).
func CompareLaunches(base, head [][]float64, m Metric, opts StatOptions, ext LaunchNoise) StatResult {
	o := opts.withDefaults()
	fb, fh := flatten(base), flatten(head)
	r := Compare(fb, fh, m, opts)
	if r.Outcome == StatError || r.NBase == 0 || r.NHead == 0 {
		return r
	}
	if ext == (LaunchNoise{}) {
		ext = PriorLaunchNoise(0, "")
	}
	ls := &LaunchStats{Base: EstimateNoise(base), Head: EstimateNoise(head)}
	ls.LaunchesBase, ls.LaunchesHead = ls.Base.Launches, ls.Head.Launches
	r.Launch = ls
	r.Method = launchMethod
	if _, ok := constant(fb, fh); ok {
		return r
	}
	sign := 1.0
	if m.Direction == HigherIsBetter {
		sign = -1
	}
	gb, gh := groupStats(logGroups(base, sign)), groupStats(logGroups(head, sign))
	mb, _ := meanVar(gb.means)
	mh, _ := meanVar(gh.means)
	d := mh - mb // positive = worse
	terms := launchVarianceTerms(gb, gh, ext, ls)
	se, df := satterthwaite(terms)
	ls.SE, ls.DF = se, df
	r.launchEffect(d, se, df, sign, m, o.Confidence)
	r.decide()
	return r
}

// varTerm is one term of a Satterthwaite combination: its coefficient, its mean square and its
// degrees of freedom (0: known, not estimated).
type varTerm struct{ a, ms, df float64 }

// launchVarianceTerms splits Var(d), the variance of the difference of mean log launch means,
// into its between-launch and within-launch terms: the between-launch component measured in the
// compared launches when either side has two or more, else taken from ext. It records the
// within- and between-launch CVs and the between-launch source in ls.
func launchVarianceTerms(gb, gh groupSummary, ext LaunchNoise, ls *LaunchStats) []varTerm {
	kb, kh := float64(len(gb.means)), float64(len(gh.means))
	dfW := gb.dfW + gh.dfW
	msW := 0.0
	if dfW > 0 {
		msW = (gb.ssW + gh.ssW) / float64(dfW)
	}
	ls.WithinCV = math.Sqrt(msW)
	if dfW == 0 {
		ls.WithinCV = math.NaN()
	}
	// Var(d) = cB sigma_b^2 + cW sigma_w^2.
	cB := 1/kb + 1/kh
	cW := gb.invN/kb + gh.invN/kh
	var terms []varTerm
	var sb2 float64
	dfB := 0
	for _, g := range []groupSummary{gb, gh} {
		dfB += max(0, len(g.means)-1)
	}
	if dfB > 0 {
		terms, sb2 = measuredBetweenTerms(gb, gh, dfB, dfW, msW, cB, cW, ext)
		ls.BetweenSource = fmt.Sprintf("measured in the compared launches (%d base, %d head)", len(gb.means), len(gh.means))
		if pooledExternal(ext) {
			ls.BetweenSource += fmt.Sprintf(" pooled with %s (df %.0f)", ext.Source, ext.DF)
		}
	} else {
		sb2 = math.Log1p(ext.CV * ext.CV)
		dfE := ext.DF
		if ext.Prior {
			dfE = 0
		}
		terms = append(terms, varTerm{cB, sb2, dfE})
		if dfW > 0 {
			terms = append(terms, varTerm{cW, msW, float64(dfW)})
		}
		ls.BetweenSource, ls.BetweenPrior = ext.Source, ext.Prior
	}
	ls.BetweenCV = math.Sqrt(math.Expm1(sb2))
	return terms
}

// measuredBetweenTerms is launchVarianceTerms for a between-launch component measured in the
// compared launches (dfB > 0): the terms of Var(d) and the estimate of sigma_b^2.
func measuredBetweenTerms(gb, gh groupSummary, dfB, dfW int, msW, cB, cW float64, ext LaunchNoise) ([]varTerm, float64) {
	// Measured: pool each multi-launch side's estimate, weighted by its df. With w_s =
	// (k_s-1)/dfB and h_s the side's mean of 1/n_i, sigma_b^2 = sum w_s var_s - (sum w_s h_s)
	// msW, so Var(d) = sum (cB w_s) var_s + (cW - cB sum w_s h_s) msW.
	// A measured external estimate (the testbed's history or a multi-launch baseline, with its
	// df) joins the pool as one more term: the variance of a launch mean it implies at this
	// comparison's trials per launch, sigma_b,ext^2 + h msW, weighted by its df.
	var terms []varTerm
	var pooled, hW float64
	total := float64(dfB)
	if pooledExternal(ext) {
		total += ext.DF
	}
	var hSides, nSides float64
	for _, g := range []groupSummary{gb, gh} {
		k := len(g.means)
		if k < 2 {
			continue
		}
		_, v := meanVar(g.means)
		w := float64(k-1) / total
		terms = append(terms, varTerm{cB * w, v, float64(k - 1)})
		pooled += w * v
		hW += w * g.invN
		hSides += g.invN
		nSides++
	}
	if pooledExternal(ext) {
		h := hSides / nSides
		w := ext.DF / total
		v := math.Log1p(ext.CV*ext.CV) + h*msW
		terms = append(terms, varTerm{cB * w, v, ext.DF})
		pooled += w * v
		hW += w * h
	}
	switch {
	case dfW == 0:
		// One trial per launch: the launch means hold all the noise (cW = cB).
		return terms, pooled
	case pooled-hW*msW <= 0:
		// Launch means agree as well as the trials predict: the between-launch component
		// is estimated as 0 and the within-launch noise alone remains.
		return []varTerm{{cW, msW, float64(dfW)}}, 0
	default:
		return append(terms, varTerm{cW - cB*hW, msW, float64(dfW)}), pooled - hW*msW
	}
}

// pooledExternal reports whether ext is a measured between-launch estimate (not a prior) that
// joins a comparison's own measurement (measuredBetweenTerms).
func pooledExternal(ext LaunchNoise) bool {
	return !ext.Prior && ext.DF > 0 && ext.CV >= 0 && !math.IsNaN(ext.CV)
}

// satterthwaite combines the terms into a standard error and its Welch-Satterthwaite degrees of
// freedom (+Inf when every term is known).
func satterthwaite(terms []varTerm) (se, df float64) {
	var se2, den float64
	for _, t := range terms {
		se2 += t.a * t.ms
		if t.df > 0 {
			den += (t.a * t.ms) * (t.a * t.ms) / t.df
		}
	}
	df = math.Inf(1)
	if den > 0 {
		df = se2 * se2 / den
	}
	if se2 < 0 {
		se2 = 0
	}
	return math.Sqrt(se2), df
}

// launchEffect sets r's effect, one-sided p-values and confidence interval from the difference d
// of mean log launch means (positive = worse), its standard error se and degrees of freedom df.
func (r *StatResult) launchEffect(d, se, df, sign float64, m Metric, confidence float64) {
	// The effect: exp of the difference of mean log launch means, head over base.
	logRatio := d * sign
	r.Ratio = math.Exp(logRatio)
	r.HLRatio = r.Ratio
	r.Change = r.Ratio - 1
	if m.Direction == HigherIsBetter {
		r.Worse = 1 - r.Ratio
	} else {
		r.Worse = r.Ratio - 1
	}
	r.logDiff, r.logSD = d, se
	if se == 0 || se < 1e-12 {
		switch {
		case d > 0:
			r.PWorse, r.PBetter = 0, 1
		case d < 0:
			r.PWorse, r.PBetter = 1, 0
		default:
			r.PWorse, r.PBetter = 1, 1
		}
		r.CILow, r.CIHigh = r.Ratio, r.Ratio
	} else {
		t := d / se
		var q float64
		if math.IsInf(df, 1) {
			r.PWorse, r.PBetter = clamp01(distuv.UnitNormal.Survival(t)), clamp01(distuv.UnitNormal.CDF(t))
			q = distuv.UnitNormal.Quantile(1 - (1-confidence)/2)
		} else {
			dist := distuv.StudentsT{Mu: 0, Sigma: 1, Nu: df}
			r.PWorse, r.PBetter = clamp01(dist.Survival(t)), clamp01(dist.CDF(t))
			q = dist.Quantile(1 - (1-confidence)/2)
		}
		r.CILow, r.CIHigh = math.Exp(logRatio-q*se), math.Exp(logRatio+q*se)
	}
	r.CIConfidence = confidence
	if m.Direction == HigherIsBetter {
		r.worseHi, r.betterHi = 1-r.CILow, r.CIHigh-1
	} else {
		r.worseHi, r.betterHi = r.CIHigh-1, 1-r.CILow
	}
	r.AdjPWorse, r.AdjPBetter = r.PWorse, r.PBetter
}

// launchMoreText is decide's "what would decide" for a launch-unit comparison: the design per
// side (launches of trials) at which the interval or the test would likely decide, taking the
// observed effect and the variance components at face value. It sets NeedLaunches/NeedTrials.
func (r *StatResult) launchMoreText(alpha float64) string {
	ls := r.Launch
	// The one next step: the design this testbed needs to decide the check's min_effect at its
	// power, from the noise the comparison used (measured in its launches, a baseline's, the
	// history's, or the prior). The observed effect is not taken at face value: an undecided
	// comparison's estimate is what is in doubt.
	ls.Plan = nil
	ls.NeedLaunches, ls.NeedTrials = -1, -1
	k := max(1, min(ls.LaunchesBase, ls.LaunchesHead))
	n := max(1, int(math.Round(float64(r.NHead)/float64(max(1, ls.LaunchesHead)))))
	between := LaunchNoise{CV: ls.BetweenCV, Source: ls.BetweenSource, Prior: ls.BetweenPrior}
	p := NeedForMinEffect(between, ls.WithinCV, k, n, StatOptions{Alpha: alpha, MinEffect: r.MinEffect, NoChangeMargin: r.Margin,
		Confidence: r.CIConfidence, Power: r.Power, Detect: r.Detect})
	ls.Plan = &p
	if p.Launches > 0 {
		ls.NeedLaunches, ls.NeedTrials = p.Launches, p.Trials
	}
	if p.Enough {
		// The design suffices for min_effect, the observed change sits between: the same design
		// again (a second run) decides most such cases.
		ls.NeedLaunches, ls.NeedTrials = k, n
	}
	ls.Decide = p.String()
	return ls.Decide
}

// launchDetails is the launch model's part of a verdict's details.
func (r *StatResult) launchDetails() string {
	ls := r.Launch
	var b strings.Builder
	fmt.Fprintf(&b, "unit: launch; %d base vs %d head launches (%d vs %d trials)\n", ls.LaunchesBase, ls.LaunchesHead, r.NBase, r.NHead)
	fmt.Fprintf(&b, "noise: base %s; head %s\n", ls.Base, ls.Head)
	fmt.Fprintf(&b, "between-launch CV used %s (%s), within-launch CV %s; SE of the log ratio %.4f, df %s\n",
		fmtCV(ls.BetweenCV), ls.BetweenSource, fmtCV(ls.WithinCV), ls.SE, fmtDF(ls.DF))
	return b.String()
}

// PriorNote is the sentence a verdict that assumed the between-launch variation carries, e.g.
// "between-launch CV assumed 3% (default prior): record a baseline with launches >= 3 to
// measure it" ("" when it was measured).
func (r *StatResult) PriorNote() string {
	if r.Launch == nil || !r.Launch.BetweenPrior {
		return ""
	}
	return fmt.Sprintf("between-launch CV assumed %s (%s; a baseline of launches >= %d or the history would measure it)",
		strings.TrimSuffix(strings.TrimSuffix(fmt.Sprintf("%.1f", 100*r.Launch.BetweenCV), "0"), ".")+"%", r.Launch.BetweenSource, MinLaunchesToMeasure)
}

func fmtDF(df float64) string {
	if math.IsInf(df, 1) || df > 1000 {
		return "known (variance not estimated)"
	}
	return fmt.Sprintf("%.0f", df)
}

// jsonFloat is a float64 that encodes NaN and ±Inf as the strings "NaN", "+Inf" and "-Inf"
// (encoding/json cannot hold them), and reads them back.
type jsonFloat float64

// MarshalJSON implements json.Marshaler.
func (f jsonFloat) MarshalJSON() ([]byte, error) {
	x := float64(f)
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return num.AppendJSON(nil, x), nil
	}
	return json.Marshal(x)
}

// UnmarshalJSON implements json.Unmarshaler.
func (f *jsonFloat) UnmarshalJSON(b []byte) error {
	var s string
	if json.Unmarshal(b, &s) == nil {
		x, err := num.ParseNonFinite(s)
		*f = jsonFloat(x)
		return err
	}
	if string(b) == "null" {
		*f = jsonFloat(math.NaN())
		return nil
	}
	var x float64
	err := json.Unmarshal(b, &x)
	*f = jsonFloat(x)
	return err
}

type noiseJSON struct {
	Launches  int       `json:"launches"`
	Trials    int       `json:"trials"`
	WithinCV  jsonFloat `json:"within_cv"`
	WithinDF  int       `json:"within_df"`
	BetweenCV jsonFloat `json:"between_cv"`
	BetweenDF int       `json:"between_df"`
}

// MarshalJSON writes a CV that could not be measured as "NaN".
func (e NoiseEstimate) MarshalJSON() ([]byte, error) {
	return json.Marshal(noiseJSON{e.Launches, e.Trials, jsonFloat(e.WithinCV), e.WithinDF, jsonFloat(e.BetweenCV), e.BetweenDF})
}

// UnmarshalJSON implements json.Unmarshaler.
func (e *NoiseEstimate) UnmarshalJSON(b []byte) error {
	var j noiseJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*e = NoiseEstimate{j.Launches, j.Trials, float64(j.WithinCV), j.WithinDF, float64(j.BetweenCV), j.BetweenDF}
	return nil
}

type launchStatsJSON struct {
	LaunchesBase  int           `json:"launches_base"`
	LaunchesHead  int           `json:"launches_head"`
	Base          NoiseEstimate `json:"base"`
	Head          NoiseEstimate `json:"head"`
	BetweenCV     jsonFloat     `json:"between_cv"`
	BetweenSource string        `json:"between_source"`
	BetweenPrior  bool          `json:"between_prior,omitempty"`
	WithinCV      jsonFloat     `json:"within_cv"`
	SE            jsonFloat     `json:"se"`
	DF            jsonFloat     `json:"df"`
	Decide        string        `json:"decide,omitempty"`
	NeedLaunches  int           `json:"need_launches,omitempty"`
	NeedTrials    int           `json:"need_trials,omitempty"`
	Plan          *DesignNeed   `json:"plan,omitempty"`
}

// MarshalJSON writes non-finite numbers (an unmeasured CV, the infinite df of a known
// variance) as strings.
func (l LaunchStats) MarshalJSON() ([]byte, error) {
	return json.Marshal(launchStatsJSON{l.LaunchesBase, l.LaunchesHead, l.Base, l.Head, jsonFloat(l.BetweenCV), l.BetweenSource,
		l.BetweenPrior, jsonFloat(l.WithinCV), jsonFloat(l.SE), jsonFloat(l.DF), l.Decide, l.NeedLaunches, l.NeedTrials, l.Plan})
}

// UnmarshalJSON implements json.Unmarshaler.
func (l *LaunchStats) UnmarshalJSON(b []byte) error {
	var j launchStatsJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*l = LaunchStats{j.LaunchesBase, j.LaunchesHead, j.Base, j.Head, float64(j.BetweenCV), j.BetweenSource, j.BetweenPrior,
		float64(j.WithinCV), float64(j.SE), float64(j.DF), j.Decide, j.NeedLaunches, j.NeedTrials, j.Plan}
	return nil
}

// BetweenLaunchEnv is the environment variable in which a testbed (its CI runner) states its
// between-launch CV prior, e.g. "5%" or "0.05".
const BetweenLaunchEnv = "RECKON_BETWEEN_LAUNCH_CV"

// TestbedPrior returns the between-launch prior of this testbed: cv when positive (a caller's
// setting), else $RECKON_BETWEEN_LAUNCH_CV when set, else DefaultBetweenLaunchCV.
func TestbedPrior(cv float64) (LaunchNoise, error) {
	if cv > 0 {
		return PriorLaunchNoise(cv, "stated for this testbed"), nil
	}
	s := strings.TrimSpace(os.Getenv(BetweenLaunchEnv))
	if s == "" {
		return PriorLaunchNoise(0, ""), nil
	}
	x, err := ParseBetweenLaunchCV("$"+BetweenLaunchEnv, s)
	if err != nil {
		return PriorLaunchNoise(0, ""), err
	}
	return PriorLaunchNoise(x, "$"+BetweenLaunchEnv+" of this testbed"), nil
}

// PoolNoise combines measured between-launch estimates (each with its df) into one, weighting
// the variances by df; ok is false when none has a df.
func PoolNoise(source string, es ...NoiseEstimate) (LaunchNoise, bool) {
	var v, df float64
	for _, e := range es {
		if e.BetweenDF <= 0 || math.IsNaN(e.BetweenCV) {
			continue
		}
		v += float64(e.BetweenDF) * math.Log1p(e.BetweenCV*e.BetweenCV)
		df += float64(e.BetweenDF)
	}
	if df == 0 {
		return LaunchNoise{}, false
	}
	return LaunchNoise{CV: math.Sqrt(math.Expm1(v / df)), DF: df, Source: source}, true
}
