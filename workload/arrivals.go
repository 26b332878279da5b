// arrivals.go holds the request arrival schedule: gamma-distributed gaps at the request rate
// (Poisson at burstiness 1).

package workload

import (
	"math"
	"math/rand/v2"
	"time"
)

// arrivalOffsets returns when each request is sent, from the benchmark start: all zero for an
// infinite rate, else cumulative gamma(shape=burstiness, scale=1/(rate·burstiness)) gaps,
// rescaled so that the last arrival is at n/rate as vLLM does.
func arrivalOffsets(n int, rate, burstiness float64, seed int64) []time.Duration {
	out := make([]time.Duration, n)
	if rate <= 0 || math.IsInf(rate, 1) || n == 0 {
		return out
	}
	if burstiness <= 0 {
		burstiness = 1
	}
	rng := rand.New(rand.NewPCG(uint64(seed), 0x2545f4914f6cdd1d))
	gaps := make([]float64, n)
	sum := 0.0
	for i := range gaps {
		gaps[i] = gammaSample(rng, burstiness) / (rate * burstiness)
		sum += gaps[i]
	}
	scale := 1.0
	if sum > 0 {
		scale = (float64(n) / rate) / sum
	}
	t := 0.0
	for i := range gaps {
		t += gaps[i] * scale
		out[i] = time.Duration(t * float64(time.Second))
	}
	return out
}

// gammaSample draws from Gamma(shape, 1) (Marsaglia and Tsang; boosted for shape < 1).
func gammaSample(rng *rand.Rand, shape float64) float64 {
	if shape < 1 {
		u := rng.Float64()
		for u == 0 {
			u = rng.Float64()
		}
		return gammaSample(rng, shape+1) * math.Pow(u, 1/shape)
	}
	d := shape - 1.0/3
	c := 1 / math.Sqrt(9*d)
	for {
		x := rng.NormFloat64()
		v := 1 + c*x
		if v <= 0 {
			continue
		}
		v = v * v * v
		u := rng.Float64()
		if u < 1-0.0331*x*x*x*x || math.Log(u) < 0.5*x*x+d*(1-v+math.Log(v)) {
			return d * v
		}
	}
}
