package gate

import (
	"fmt"
	"math"
)

// Wilson is the 95% Wilson score interval of a rate of k events in n trials (0, 1 when n is 0).
// Unlike the normal approximation it stays inside [0, 1] and is informative at k = 0: 0 false
// alarms in 60 runs bound the rate by about 6%, not 0%.
func Wilson(k, n int) (lo, hi float64) {
	if n <= 0 {
		return 0, 1
	}
	const z = 1.959964
	p, nf := float64(k)/float64(n), float64(n)
	center := p + z*z/(2*nf)
	half := z * math.Sqrt(p*(1-p)/nf+z*z/(4*nf*nf))
	lo, hi = (center-half)/(1+z*z/nf), (center+half)/(1+z*z/nf)
	if k == 0 {
		lo = 0
	}
	if k == n {
		hi = 1
	}
	return math.Max(0, lo), math.Min(1, hi)
}

// RateWithInterval renders k of n with its 95% Wilson interval, e.g. "0/60 (0.0–6.0%)".
func RateWithInterval(k, n int) string {
	if n <= 0 {
		return "0/0"
	}
	lo, hi := Wilson(k, n)
	return fmt.Sprintf("%d/%d (%.1f–%.1f%%)", k, n, 100*lo, 100*hi)
}
