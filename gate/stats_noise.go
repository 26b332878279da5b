package gate

import (
	"fmt"
	"math"

	"gonum.org/v1/gonum/stat/distuv"

	"github.com/reckon-ci/reckon/internal/num"
)

// NoiseAssessment says whether a recorded sample's noise lets the gate decide the checks on it
// (reckon baseline record): a head run of the same design (launches x trials) against it must
// be able to give an interval of the ratio narrower than the no-change margin, or every healthy
// run is inconclusive.
type NoiseAssessment struct {
	Noise NoiseEstimate `json:"noise"`
	// Launches and TrialsPerLaunch are the recorded design (assumed for the head run too).
	Launches        int `json:"launches"`
	TrialsPerLaunch int `json:"trials_per_launch"`
	// BetweenMeasured is false when the sample has one launch: the assessment then judges the
	// within-launch noise alone and Note says what the gate will assume.
	BetweenMeasured bool `json:"between_measured"`
	// HalfWidth is the half-width (relative) of the interval of the ratio a same-design
	// comparison would give; Margin the checks' no-change margin it must stay under.
	HalfWidth float64 `json:"half_width"`
	Margin    float64 `json:"margin"`
	// Detectable is the smallest regression such a comparison detects with 80% power at the
	// checks' alpha.
	Detectable float64 `json:"detectable"`
	MinEffect  float64 `json:"min_effect"`
	// OK is true when HalfWidth < Margin.
	OK bool `json:"ok"`
	// Need is the design that would do (e.g. "10 trials per launch" or "4 launches of 5
	// trials"), empty when OK.
	Need string `json:"need,omitempty"`
	// Note is an unmeasured between-launch variation's note ("" when measured).
	Note string `json:"note,omitempty"`
}

// AssessNoise judges launches (one inner slice per launch) of a recorded metric for checks with
// opts (MinEffect, NoChangeMargin, Alpha, Confidence; zero values take the defaults). prior is
// the between-launch CV the gate would assume for a one-launch sample.
func AssessNoise(launches [][]float64, opts StatOptions, prior LaunchNoise) NoiseAssessment {
	o := opts.withDefaults()
	e := EstimateNoise(launches)
	a := NoiseAssessment{Noise: e, Launches: e.Launches, Margin: o.NoChangeMargin, MinEffect: o.MinEffect}
	if e.Launches > 0 {
		a.TrialsPerLaunch = int(math.Round(float64(e.Trials) / float64(e.Launches)))
	}
	sw2 := 0.0
	if !math.IsNaN(e.WithinCV) {
		sw2 = e.WithinCV * e.WithinCV
	}
	sb2 := 0.0
	if e.BetweenDF > 0 && !math.IsNaN(e.BetweenCV) {
		a.BetweenMeasured = true
		sb2 = math.Log1p(e.BetweenCV * e.BetweenCV)
	} else {
		if prior == (LaunchNoise{}) {
			prior = PriorLaunchNoise(0, "")
		}
		a.Note = fmt.Sprintf("between-launch variation not measured (%d launch); the gate will assume a between-launch CV of %s (%s): record with launches >= %d to measure it",
			e.Launches, num.Pct(prior.CV)[1:], prior.Source, MinLaunchesToMeasure)
	}
	k, n := max(1, a.Launches), max(1, a.TrialsPerLaunch)
	zC := distuv.UnitNormal.Quantile(1 - (1-o.Confidence)/2)
	zA := distuv.UnitNormal.Quantile(1 - o.Alpha)
	z80 := distuv.UnitNormal.Quantile(0.8)
	se := func(k, n int) float64 { return math.Sqrt(2 * (sb2 + sw2/float64(n)) / float64(k)) }
	a.HalfWidth = math.Expm1(zC * se(k, n))
	a.Detectable = -math.Expm1(-(zA + z80) * se(k, n))
	a.OK = a.HalfWidth < a.Margin
	if a.OK {
		return a
	}
	fits := func(k, n int) bool { return math.Expm1(zC*se(k, n)) < a.Margin }
	for nn := n + 1; nn <= 100; nn++ {
		if fits(k, nn) {
			a.Need = fmt.Sprintf("%d trials per launch (now %d)", nn, n)
			return a
		}
	}
	for kk := k + 1; kk <= MaxLaunchesAdvised; kk++ {
		if fits(kk, n) {
			a.Need = fmt.Sprintf("%d launches of %d trials (now %d)", kk, n, k)
			return a
		}
	}
	a.Need = "a quieter testbed or longer trials (no design up to 100 trials or 10 launches would do)"
	return a
}

// String renders the assessment in one line.
func (a NoiseAssessment) String() string {
	s := fmt.Sprintf("%s; a run of the same design gives a ratio interval of ±%s (no-change margin %s) and detects regressions >= %s (min_effect %s)",
		a.Noise, num.Pct(a.HalfWidth)[1:], num.Pct(a.Margin)[1:], num.Pct(a.Detectable)[1:], num.Pct(a.MinEffect)[1:])
	if !a.OK {
		s += "; too noisy to decide: needs " + a.Need
	}
	return s
}
