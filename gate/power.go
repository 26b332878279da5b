package gate

import (
	"encoding/json"
	"fmt"
	"math"

	"gonum.org/v1/gonum/stat/distuv"

	"github.com/reckon-ci/reckon/internal/num"
	"github.com/reckon-ci/reckon/internal/statdefault"
)

// PlanPower is the default power at which a design is planned to detect a check's min_effect
// (StatOptions.Power overrides it; its one home is internal/statdefault).
const PlanPower = statdefault.Power

// MaxTrialsAdvised bounds the trials per launch a plan proposes.
const MaxTrialsAdvised = 100

// designVar is the variance of the log ratio of a symmetric design, k launches of n trials per
// side, with between-launch variance sb2 and within-launch variance sw2 (log scale).
func designVar(sb2, sw2 float64, k, n int) float64 { return 2 * (sb2 + sw2/float64(n)) / float64(k) }

// searchDesign finds the design nearest to k launches of n trials per side whose designVar is
// at most needVar: more trials per launch at k launches when the between-launch part leaves room
// (up to maxN), else more launches of n trials (up to MaxLaunchesAdvised). With strict the
// current design itself is not a candidate (it was just found wanting). ok is false when no
// design within the bounds does.
func searchDesign(sb2, sw2, needVar float64, k, n, maxN int, strict bool) (kk, nn int, ok bool) {
	first := 0
	if strict {
		first = 1
	}
	if 2*sb2/float64(k) < needVar {
		for nn := n + first; nn <= maxN; nn++ {
			if designVar(sb2, sw2, k, nn) <= needVar {
				return k, nn, true
			}
		}
	}
	for kk := k + 1; kk <= MaxLaunchesAdvised; kk++ {
		if designVar(sb2, sw2, kk, n) <= needVar {
			return kk, n, true
		}
	}
	return 0, 0, false
}

// DesignNeed is what a check needs on a testbed to decide its min_effect: the launches per side
// and trials per launch at which a true change of MinEffect is found at the check's alpha with
// PlanPower, and the interval of an unchanged run fits inside the no-change margin.
type DesignNeed struct {
	// Launches and Trials are the design per side (Launches 0: none up to MaxLaunchesAdvised
	// launches or MaxTrialsAdvised trials would do).
	Launches int `json:"launches"`
	Trials   int `json:"trials"`
	// Now is the current design; Enough is true when it already suffices.
	NowLaunches int  `json:"now_launches"`
	NowTrials   int  `json:"now_trials"`
	Enough      bool `json:"enough,omitempty"`
	// The noise it was planned for and where the between-launch part comes from.
	BetweenCV     float64 `json:"between_cv"`
	WithinCV      float64 `json:"within_cv"`
	BetweenSource string  `json:"between_source"`
	BetweenPrior  bool    `json:"between_prior,omitempty"`
	MinEffect     float64 `json:"min_effect"`
	Alpha         float64 `json:"alpha"`
	Power         float64 `json:"power"`
}

// NeedForMinEffect plans the design (launches x trials per side) that decides opts.MinEffect
// with the noise between (between-launch CV and its source) and withinCV (NaN or 0: none
// measured), starting from k launches of n trials per side. The variance model is the one the
// inconclusive verdict's "would decide" uses (launchMoreText): Var(log ratio) = 2(sigma_b^2 +
// sigma_w^2/n)/k, here with the normal quantiles of alpha and PlanPower at the min effect.
func NeedForMinEffect(between LaunchNoise, withinCV float64, k, n int, opts StatOptions) DesignNeed {
	o := opts.withDefaults()
	k, n = max(1, k), max(1, n)
	d := DesignNeed{NowLaunches: k, NowTrials: n, BetweenCV: between.CV, WithinCV: withinCV, BetweenSource: between.Source,
		BetweenPrior: between.Prior, MinEffect: o.MinEffect, Alpha: o.Alpha, Power: o.Power}
	sb2 := math.Log1p(between.CV * between.CV)
	sw2 := 0.0
	if !math.IsNaN(withinCV) {
		sw2 = withinCV * withinCV
	}
	zA := distuv.UnitNormal.Quantile(1 - o.Alpha)
	zP := distuv.UnitNormal.Quantile(o.Power)
	zC := distuv.UnitNormal.Quantile(1 - (1-o.Confidence)/2)
	eff := math.Log1p(math.Max(o.MinEffect, 1e-6))
	needVar := math.Pow(eff/(zA+zP), 2)
	if m := math.Pow(math.Log1p(o.NoChangeMargin)/zC, 2); m < needVar && !o.Detect {
		needVar = m
	}
	if designVar(sb2, sw2, k, n) <= needVar {
		d.Launches, d.Trials, d.Enough = k, n, true
		return d
	}
	if kk, nn, ok := searchDesign(sb2, sw2, needVar, k, n, MaxTrialsAdvised, true); ok {
		d.Launches, d.Trials = kk, nn
	}
	return d
}

// String renders the plan, e.g. "to decide min_effect 5% (95% power at alpha 0.01) with
// between-launch CV 2.0% (measured in the baseline's 5 launches) and within-launch CV 1.5%: 6
// launches per side of 3 trials (now 1 x 5)".
func (d DesignNeed) String() string {
	s := fmt.Sprintf("to decide min_effect %s (%.0f%% power at alpha %.2g) with between-launch CV %s (%s) and within-launch CV %s: ",
		num.Pct(d.MinEffect)[1:], 100*d.Power, d.Alpha, fmtCV(d.BetweenCV), d.BetweenSource, fmtCV(d.WithinCV))
	switch {
	case d.Enough:
		s += fmt.Sprintf("the current %d launch(es) per side of %d trials suffice", d.NowLaunches, d.NowTrials)
	case d.Launches == 0:
		s += fmt.Sprintf("no design up to %d launches per side of %d trials or %d trials per launch would do (a quieter testbed, longer trials, or a larger min_effect)",
			MaxLaunchesAdvised, d.NowTrials, MaxTrialsAdvised)
	default:
		s += fmt.Sprintf("%d launch(es) per side of %d trials (now %d x %d)", d.Launches, d.Trials, d.NowLaunches, d.NowTrials)
	}
	if d.BetweenPrior && !d.Enough {
		s += ", if the assumed between-launch CV holds"
	}
	return s
}

type designNeedJSON struct {
	Launches      int       `json:"launches"`
	Trials        int       `json:"trials"`
	NowLaunches   int       `json:"now_launches"`
	NowTrials     int       `json:"now_trials"`
	Enough        bool      `json:"enough,omitempty"`
	BetweenCV     jsonFloat `json:"between_cv"`
	WithinCV      jsonFloat `json:"within_cv"`
	BetweenSource string    `json:"between_source"`
	BetweenPrior  bool      `json:"between_prior,omitempty"`
	MinEffect     float64   `json:"min_effect"`
	Alpha         float64   `json:"alpha"`
	Power         float64   `json:"power"`
}

// MarshalJSON writes a CV that was not measured as "NaN".
func (d DesignNeed) MarshalJSON() ([]byte, error) {
	return json.Marshal(designNeedJSON{d.Launches, d.Trials, d.NowLaunches, d.NowTrials, d.Enough, jsonFloat(d.BetweenCV), jsonFloat(d.WithinCV),
		d.BetweenSource, d.BetweenPrior, d.MinEffect, d.Alpha, d.Power})
}

// UnmarshalJSON implements json.Unmarshaler.
func (d *DesignNeed) UnmarshalJSON(b []byte) error {
	var j designNeedJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*d = DesignNeed{j.Launches, j.Trials, j.NowLaunches, j.NowTrials, j.Enough, float64(j.BetweenCV), float64(j.WithinCV),
		j.BetweenSource, j.BetweenPrior, j.MinEffect, j.Alpha, j.Power}
	return nil
}
