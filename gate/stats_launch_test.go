package gate

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// launch returns n trial values around mean with relative spread cv (deterministic).
func launch(rng *rand.Rand, mean, cv float64, n int) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = mean * math.Exp(cv*rng.NormFloat64())
	}
	return out
}

var tput = Metric{Name: "output_throughput", Direction: HigherIsBetter}

// A launch that landed 7% slow (its trials agreeing within 1%) against a baseline recorded
// with 3 launches whose means spread 3%: five pseudo-replicated trials called it a regression;
// with launches as the unit it is not.
func TestLaunchOutlierIsNoLongerAFalseAlarm(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	base := [][]float64{launch(rng, 1000, 0.01, 5), launch(rng, 1040, 0.01, 5), launch(rng, 975, 0.01, 5)}
	head := [][]float64{launch(rng, 940, 0.01, 5)}
	old := Compare(flatten(base), flatten(head), tput, StatOptions{})
	if old.Outcome != Regression {
		t.Fatalf("trials as the unit: %s (%s); the test's premise is a false alarm", old.Outcome, old.Reason)
	}
	r := CompareLaunches(base, head, tput, StatOptions{}, LaunchNoise{})
	if r.Outcome == Regression {
		t.Fatalf("launches as the unit: %s (%s)", r.Outcome, r.Reason)
	}
	if r.Launch == nil || r.Launch.BetweenPrior || !strings.Contains(r.Launch.BetweenSource, "measured in the compared launches (3 base, 1 head)") {
		t.Errorf("between-launch source: %+v", r.Launch)
	}
	if r.Launch.Base.BetweenCV < 0.02 || r.Launch.Base.BetweenCV > 0.05 || r.Launch.Head.Launches != 1 {
		t.Errorf("noise: %+v", r.Launch)
	}
	v := r.Verdict("throughput", "pr", "baseline")
	if !strings.Contains(v.Message, "to decide min_effect 2.0% (95% power at alpha 0.01)") || strings.Count(v.Message, "decide") != 1 || !strings.Contains(v.Details, "unit: launch; 3 base vs 1 head launches (15 vs 5 trials)") {
		t.Errorf("verdict:\n%s\n%s", v.Message, v.Details)
	}
	for _, k := range []string{"within_launch_cv_head", "within_launch_cv_base", "between_launch_cv_base", "between_launch_cv_used"} {
		if _, ok := v.Metrics[k]; !ok {
			t.Errorf("metrics lack %s: %v", k, v.Metrics)
		}
	}
}

// A real 10% slowdown, 3 launches of 5 trials per side (launch spread 2%, trials 1%), is red.
func TestTenPercentSlowdownOverThreeLaunchesIsRed(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var base, head [][]float64
	for i, off := range []float64{1, 1.02, 0.98} {
		base = append(base, launch(rng, 1000*off, 0.01, 5))
		head = append(head, launch(rng, 900*[]float64{0.99, 1.02, 1}[i], 0.01, 5))
	}
	r := CompareLaunches(base, head, tput, StatOptions{}, LaunchNoise{})
	if r.Outcome != Regression {
		t.Fatalf("%s: %s", r.Outcome, r.Reason)
	}
	if math.Abs(r.Ratio-0.9) > 0.03 || r.CILow > 0.9 || r.CIHigh < 0.9 || r.PriorNote() != "" {
		t.Errorf("ratio %.3f CI %.3f-%.3f, prior note %q", r.Ratio, r.CILow, r.CIHigh, r.PriorNote())
	}
	// Holm keeps it red in a family of three.
	ok := CompareLaunches(base, base, tput, StatOptions{}, LaunchNoise{})
	Holm([]*StatResult{&r, &ok, &ok}, 0)
	if r.Outcome != Regression {
		t.Errorf("after Holm: %s", r.Reason)
	}
}

// With one launch per side nothing measures the between-launch variation: the prior is used
// and said, and a 3% change that five trials per side would call a regression is not.
func TestPriorIsStatedWithoutABetweenLaunchEstimate(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	base := [][]float64{launch(rng, 1000, 0.01, 5)}
	head := [][]float64{launch(rng, 970, 0.01, 5)}
	r := CompareLaunches(base, head, tput, StatOptions{}, LaunchNoise{})
	if r.Outcome == Regression || !r.Launch.BetweenPrior || r.Launch.BetweenCV != DefaultBetweenLaunchCV || !math.IsInf(r.Launch.DF, 1) && r.Launch.DF < 8 {
		t.Fatalf("%s: %+v", r.Outcome, r.Launch)
	}
	want := "between-launch CV assumed 3% (default prior; a baseline of launches >= 3 or the history would measure it)"
	if r.PriorNote() != want {
		t.Errorf("prior note %q, want %q", r.PriorNote(), want)
	}
	v := r.Verdict("throughput", "pr", "main")
	if !strings.Contains(v.Message, want) || !strings.HasSuffix(v.Message, ", if the assumed between-launch CV holds") || strings.Count(v.Message, "decide") != 1 {
		t.Errorf("message: %s", v.Message)
	}
	// A stated testbed prior and a measured estimate from elsewhere are named as such.
	r = CompareLaunches(base, head, tput, StatOptions{}, PriorLaunchNoise(0.01, "stated for this testbed"))
	if !strings.Contains(r.PriorNote(), "assumed 1% (stated for this testbed;") {
		t.Errorf("stated prior: %q", r.PriorNote())
	}
	r = CompareLaunches(base, head, tput, StatOptions{}, LaunchNoise{CV: 0.005, DF: 9, Source: "measured by the history of pr"})
	if r.PriorNote() != "" || r.Launch.BetweenSource != "measured by the history of pr" || math.IsInf(r.Launch.DF, 1) {
		t.Errorf("measured ext: %+v", r.Launch)
	}
	// A 40% collapse is red even under the prior.
	head = [][]float64{launch(rng, 600, 0.01, 5)}
	if r := CompareLaunches(base, head, tput, StatOptions{}, LaunchNoise{}); r.Outcome != Regression {
		t.Errorf("40%% slower: %s: %s", r.Outcome, r.Reason)
	}
}

// The balanced case reduces to the t-test on launch means; launch means that agree better than
// the trials predict leave the within-launch noise alone.
func TestCompareLaunchesVarianceComponents(t *testing.T) {
	base := [][]float64{{100, 102}, {110, 112}, {90, 92}}
	head := [][]float64{{95, 97}, {105, 107}, {85, 87}}
	r := CompareLaunches(base, head, tput, StatOptions{}, LaunchNoise{})
	lm := func(g [][]float64) []float64 {
		var out []float64
		for _, l := range g {
			out = append(out, -(math.Log(l[0])+math.Log(l[1]))/2)
		}
		return out
	}
	pw, _, _, _ := tTest(lm(base), lm(head), true)
	if math.Abs(r.PWorse-pw) > 1e-9 || math.Abs(r.Launch.DF-4) > 0.05 {
		t.Errorf("p %v want %v (Welch t-test on log launch means), df %v want about 4", r.PWorse, pw, r.Launch.DF)
	}
	e := EstimateNoise(base)
	if e.Launches != 3 || e.Trials != 6 || e.WithinDF != 3 || e.BetweenDF != 2 || math.Abs(e.BetweenCV-0.099) > 0.005 {
		t.Errorf("noise %+v", e)
	}
	same := [][]float64{{100, 110}, {101, 109}, {99, 111}}
	if e := EstimateNoise(same); e.BetweenCV != 0 {
		t.Errorf("between of agreeing launches: %v", e.BetweenCV)
	}
	// JSON keeps an unmeasured CV and an infinite df.
	r = CompareLaunches([][]float64{{100}}, [][]float64{{103}}, tput, StatOptions{}, LaunchNoise{})
	data, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var back StatResult
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	if back.Launch == nil || !math.IsNaN(back.Launch.Base.BetweenCV) || !math.IsInf(back.Launch.DF, 1) || !math.IsNaN(back.Launch.WithinCV) || back.Launch.SE != r.Launch.SE {
		t.Errorf("round trip: %s -> %+v", data, back.Launch)
	}
}

func TestAssessNoise(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	quiet := AssessNoise([][]float64{launch(rng, 1000, 0.01, 5)}, StatOptions{}, LaunchNoise{})
	if !quiet.OK || quiet.BetweenMeasured || !strings.Contains(quiet.Note, "record with launches >= 3") {
		t.Errorf("quiet: %+v", quiet)
	}
	loud := AssessNoise([][]float64{launch(rng, 1000, 0.35, 5)}, StatOptions{}, LaunchNoise{})
	if loud.OK || loud.Need == "" || !strings.Contains(loud.String(), "too noisy to decide") {
		t.Errorf("35%% CV: %+v", loud)
	}
	spread := AssessNoise([][]float64{launch(rng, 1000, 0.01, 3), launch(rng, 1300, 0.01, 3), launch(rng, 800, 0.01, 3)}, StatOptions{}, LaunchNoise{})
	if spread.OK || !spread.BetweenMeasured {
		t.Errorf("launches spread 25%%: %+v", spread)
	}
}
