package history

import (
	"math"
	"math/rand/v2"
	"testing"
)

// noisy returns n points around level (per-point level from f) with relative noise cv.
func noisy(rng *rand.Rand, n int, cv float64, level func(i int) float64) []float64 {
	xs := make([]float64, n)
	for i := range xs {
		l := level(i)
		xs[i] = l * (1 + cv*rng.NormFloat64())
	}
	return xs
}

func TestDetectStep(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	xs := noisy(rng, 60, 0.02, func(i int) float64 {
		if i >= 40 {
			return 94
		}
		return 100
	})
	cps := Detect(xs, Options{})
	if len(cps) != 1 || cps[0].Index != 40 {
		t.Fatalf("change points %+v, want one at 40", cps)
	}
	if f := cps[0].Forward; math.Abs(f+0.06) > 0.015 {
		t.Errorf("forward change %.3f, want about -0.06", f)
	}
	if cps[0].PValue > DefaultPValue || cps[0].Before.N != 40 || cps[0].After.N != 20 {
		t.Errorf("change point %+v", cps[0])
	}
}

func TestDetectNoChange(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	xs := noisy(rng, 500, 0.05, func(int) float64 { return 100 })
	if cps := Detect(xs, Options{}); len(cps) > 1 {
		t.Fatalf("%d change points in a flat series: %+v", len(cps), cps)
	}
}

func TestDetectConstantSteps(t *testing.T) {
	xs := make([]float64, 30)
	for i := range xs {
		xs[i] = 290400
		if i >= 12 {
			xs[i] = 28256
		}
	}
	cps := Detect(xs, Options{})
	if len(cps) != 1 || cps[0].Index != 12 || cps[0].PValue != 0 {
		t.Fatalf("change points %+v, want one at 12 with p 0", cps)
	}
	if len(Detect(xs[:12], Options{})) != 0 {
		t.Fatal("a constant series has no change point")
	}
}

func TestDetectMagnitudeFloor(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	xs := noisy(rng, 80, 0.002, func(i int) float64 {
		if i >= 40 {
			return 99.5
		}
		return 100
	})
	if cps := Detect(xs, Options{}); len(cps) != 1 {
		t.Fatalf("want the 0.5%% change found without a floor, got %+v", cps)
	}
	if cps := Detect(xs, Options{Magnitude: 0.01}); len(cps) != 0 {
		t.Fatalf("a 0.5%% change under a 1%% floor: %+v", cps)
	}
}

// TestPublishedOtavaExample: the worked example of Apache Otava's docs (docs/CSV.md and
// docs/BASICS.md; data examples/csv/data/local_sample.csv, facts only): ten nightly runs
// aaa0..aaa9, where metric2 has one change point at aaa6 (-12.9%) and metric1 none.
func TestPublishedOtavaExample(t *testing.T) {
	metric1 := []float64{154023, 138455, 143112, 149190, 132098, 151344, 155145, 148889, 149466, 148209}
	metric2 := []float64{10.43, 10.23, 10.29, 10.91, 10.34, 10.69, 9.23, 9.11, 9.13, 9.03}
	if cps := Detect(metric1, Options{}); len(cps) != 0 {
		t.Errorf("metric1: %+v, want no change point", cps)
	}
	cps := Detect(metric2, Options{})
	if len(cps) != 1 || cps[0].Index != 6 {
		t.Fatalf("metric2: %+v, want one change point at aaa6", cps)
	}
	if got := math.Round(cps[0].Forward*1000) / 10; got != -12.9 {
		t.Errorf("metric2 forward change %.1f%%, want -12.9%% as published", got)
	}
	t.Logf("metric2: change at aaa6, %+.1f%%, p=%.2g", cps[0].Forward*100, cps[0].PValue)
}
