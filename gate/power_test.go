package gate

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"gonum.org/v1/gonum/stat/distuv"
)

// NeedForMinEffect picks the nearest design whose variance of the log ratio reaches the min
// effect at alpha with PlanPower: the cheapest launches per side when the between-launch part
// dominates, more trials per launch when only the within-launch part is in the way.
func TestNeedForMinEffect(t *testing.T) {
	opts := StatOptions{Alpha: 0.01, MinEffect: 0.05, NoChangeMargin: 0.05}
	zA, zP := distuv.UnitNormal.Quantile(0.99), distuv.UnitNormal.Quantile(PlanPower)
	need := math.Pow(math.Log1p(0.05)/(zA+zP), 2)
	smallest := func(sb, sw float64, n int) int {
		for k := 1; ; k++ {
			if 2*(math.Log1p(sb*sb)+sw*sw/float64(n))/float64(k) <= need {
				return k
			}
		}
	}
	// Between 2%, within 2%, 3 trials per launch: launches, by the formula.
	d := NeedForMinEffect(LaunchNoise{CV: 0.02, DF: 4, Source: "measured"}, 0.02, 1, 3, opts)
	if want := smallest(0.02, 0.02, 3); d.Launches != want || d.Trials != 3 || d.Enough {
		t.Errorf("2%%/2%%: %+v, want %d launches of 3", d, want)
	}
	if s := d.String(); !strings.Contains(s, "to decide min_effect 5.0% (95% power at alpha 0.01) with between-launch CV 2.0% (measured) and within-launch CV 2.0%") ||
		!strings.Contains(s, "launch(es) per side of 3 trials (now 1 x 3)") {
		t.Errorf("text: %s", s)
	}
	// Between 0.5%, within 5%, one launch: more trials per launch do it.
	d = NeedForMinEffect(LaunchNoise{CV: 0.005, Source: "measured"}, 0.05, 1, 3, opts)
	if d.Launches != 1 || d.Trials <= 3 || d.Trials > MaxTrialsAdvised {
		t.Errorf("within-dominated: %+v", d)
	}
	// Already enough; and nothing within bounds (between 5%).
	if d := NeedForMinEffect(LaunchNoise{CV: 0.005, Source: "m"}, 0.005, 10, 3, opts); !d.Enough || !strings.Contains(d.String(), "suffice") {
		t.Errorf("enough: %+v", d)
	}
	d = NeedForMinEffect(PriorLaunchNoise(0.05, ""), 0.05, 1, 3, opts)
	if d.Launches != 0 || !strings.Contains(d.String(), "no design up to 10 launches") {
		t.Errorf("too noisy: %+v %s", d, d)
	}
	// A NaN within CV (one trial per launch) survives JSON.
	d = NeedForMinEffect(LaunchNoise{CV: 0.01, Source: "m"}, math.NaN(), 3, 1, opts)
	b, err := json.Marshal(d)
	var back DesignNeed
	if err != nil || json.Unmarshal(b, &back) != nil || !math.IsNaN(back.WithinCV) || back.Launches != d.Launches {
		t.Errorf("JSON %s: %v, %+v", b, err, back)
	}
}

// An inconclusive launch-unit verdict says what the testbed needs to decide the min_effect,
// from the noise the comparison used.
func TestInconclusiveVerdictPlansMinEffect(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	base := [][]float64{launch(rng, 1000, 0.02, 3), launch(rng, 1020, 0.02, 3), launch(rng, 985, 0.02, 3)}
	head := [][]float64{launch(rng, 985, 0.02, 3), launch(rng, 1005, 0.02, 3), launch(rng, 960, 0.02, 3)}
	r := CompareLaunches(base, head, tput, StatOptions{MinEffect: 0.05}, LaunchNoise{})
	if r.Outcome != Undecided {
		t.Fatalf("premise: %s (%s)", r.Outcome, r.Reason)
	}
	p := r.Launch.Plan
	if p == nil || p.MinEffect != 0.05 || p.NowLaunches != 3 || p.NowTrials != 3 || !strings.HasPrefix(p.BetweenSource, "measured in the compared launches") {
		t.Fatalf("plan: %+v", p)
	}
	v := r.Verdict("throughput", "pr", "main")
	if !strings.Contains(v.Message, "to decide min_effect 5.0% (95% power at alpha") {
		t.Errorf("message: %s", v.Message)
	}
}
