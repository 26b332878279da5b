package ci

import (
	"math"
	"testing"

	"github.com/reckon-ci/reckon/spec"
)

// design is what a shipped spec's statistical checks are: the parameters the affordable designs
// were measured at (docs/ci.md, "Verdicts a GPU CI can afford").
type design struct {
	against                   string
	test                      string
	minEffect, power, perTest float64
	launches, trials          int
}

// designOf reads the design of every statistical check of the spec at path and fails unless
// all of them share one (one workload, one test, one per-check alpha).
func designOf(t *testing.T, path string) design {
	t.Helper()
	s, err := spec.Load(path)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	checks := s.StatisticalChecks()
	if len(checks) == 0 {
		t.Fatalf("%s: no statistical check", path)
	}
	var d design
	for i, c := range checks {
		p := c.Stat()
		w, ok := s.Workload(p.Workload)
		if !ok || w == nil {
			t.Fatalf("%s: check %q: no workload %q", path, c.Name, p.Workload)
		}
		against := p.Against
		if against == spec.AgainstConfig {
			against = "config"
		}
		// alpha is family-wise (Holm over the spec's statistical checks): the first test of the
		// family runs at alpha / checks.
		got := design{against: against, test: p.Test, minEffect: p.MinEffect, power: p.Power,
			perTest: p.Alpha / float64(len(checks)), launches: w.LaunchCount(), trials: w.Trials}
		if i == 0 {
			d = got
			continue
		}
		if !sameDesign(d, got) {
			t.Fatalf("%s: check %q has design %+v, the first check %+v: one design per spec", path, c.Name, got, d)
		}
	}
	return d
}

func sameDesign(a, b design) bool {
	near := func(x, y float64) bool { return math.Abs(x-y) < 1e-9 }
	return a.against == b.against && a.test == b.test && near(a.minEffect, b.minEffect) && near(a.power, b.power) &&
		near(a.perTest, b.perTest) && a.launches == b.launches && a.trials == b.trials
}

// TestShippedDesignsAreTheMeasuredOnes: ci/engine/examples' nightly and pre-merge specs use the
// designs whose verdicts were measured end to end (fixtures/specs/affordable/, run by
// ci/measure/affordable-verdicts.sh), at the budget a GPU CI affords: one launch a night against
// the history with the detection test, and at most 3 launches per side in the pre-merge.
func TestShippedDesignsAreTheMeasuredOnes(t *testing.T) {
	for _, tc := range []struct {
		shipped, measured string
		against           string
		maxLaunches       int
	}{
		{"engine/examples/nightly.yaml", "../fixtures/specs/affordable/nightly.yaml", spec.AgainstHistory, 1},
		{"engine/examples/premerge.yaml", "../fixtures/specs/affordable/premerge.yaml", "config", 3},
	} {
		shipped, measured := designOf(t, tc.shipped), designOf(t, tc.measured)
		if !sameDesign(shipped, measured) {
			t.Errorf("%s: design %+v, but the measured design (%s) is %+v", tc.shipped, shipped, tc.measured, measured)
		}
		if shipped.against != tc.against || shipped.test != spec.TestDetect || shipped.launches > tc.maxLaunches {
			t.Errorf("%s: %+v: want against %s, test %s, at most %d launch(es) per side", tc.shipped, shipped, tc.against, spec.TestDetect, tc.maxLaunches)
		}
	}
}
