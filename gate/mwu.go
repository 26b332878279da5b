package gate

import (
	"math"
	"sort"
	"sync"

	"gonum.org/v1/gonum/stat/distuv"

	"github.com/reckon-ci/reckon/internal/num"
)

// Mann-Whitney U test and the Hodges-Lehmann / Moses confidence interval for a shift.
//
// U counts the pairs (x_i, y_j) with y_j > x_i, ties counting one half. Under the null
// hypothesis (both samples from one continuous distribution) every assignment of the pooled
// ranks to the two samples is equally likely. The exact null distribution is used when it can
// be computed cheaply: without ties from the Gaussian binomial coefficients, with ties by
// enumerating the assignments of mid-ranks. Otherwise the normal approximation with tie
// correction and continuity correction is used.

const (
	// maxExactTotal bounds C(m+n, m) for the tie-free exact distribution (float64 stays exact
	// on integers well beyond it).
	maxExactTotal = 1e15
	// maxEnumerate bounds the number of rank assignments enumerated when there are ties (up to 8
	// vs 8; beyond it the normal approximation with tie correction is accurate).
	maxEnumerate = 13000
)

// MWUResult is the outcome of a Mann-Whitney U test of y against x.
type MWUResult struct {
	U        float64 // pairs with y > x (ties count 1/2)
	PGreater float64 // P(U >= observed): evidence that y tends to be larger than x
	PLess    float64 // P(U <= observed): evidence that y tends to be smaller than x
	Exact    bool    // exact null distribution (otherwise the normal approximation)
}

// MannWhitney runs the Mann-Whitney U test of y against x and returns both one-sided p-values.
// A two-sided p-value is min(1, 2*min(PGreater, PLess)).
func MannWhitney(x, y []float64) MWUResult {
	m, n := len(x), len(y)
	if m == 0 || n == 0 {
		return MWUResult{PGreater: 1, PLess: 1}
	}
	var u float64
	for _, a := range x {
		for _, b := range y {
			switch {
			case b > a:
				u++
			case b == a:
				u += 0.5
			}
		}
	}
	ranks, ties := midRanks(x, y)
	if ties == 0 && binom(m+n, m) <= maxExactTotal {
		cdf := uNullCDF(m, n)
		k := int(math.Round(u))
		total := cdf[len(cdf)-1]
		pLess := cdf[k] / total
		pGreater := 1.0
		if k > 0 {
			pGreater = 1 - cdf[k-1]/total
		}
		return MWUResult{U: u, PGreater: clamp01(pGreater), PLess: clamp01(pLess), Exact: true}
	}
	if ties > 0 && binom(m+n, n) <= maxEnumerate {
		pg, pl := enumerateU(ranks, n, u)
		return MWUResult{U: u, PGreater: pg, PLess: pl, Exact: true}
	}
	N := float64(m + n)
	mean := float64(m*n) / 2
	tieSum := 0.0
	sorted := append(append([]float64{}, x...), y...)
	sort.Float64s(sorted)
	for i := 0; i < len(sorted); {
		j := i
		for j < len(sorted) && sorted[j] == sorted[i] {
			j++
		}
		t := float64(j - i)
		tieSum += t*t*t - t
		i = j
	}
	variance := float64(m*n) / 12 * ((N + 1) - tieSum/(N*(N-1)))
	if variance <= 0 {
		return MWUResult{U: u, PGreater: 1, PLess: 1}
	}
	sd := math.Sqrt(variance)
	std := distuv.UnitNormal
	return MWUResult{
		U:        u,
		PGreater: clamp01(std.Survival((u - mean - 0.5) / sd)),
		PLess:    clamp01(std.CDF((u - mean + 0.5) / sd)),
	}
}

// midRanks returns the mid-ranks of the pooled sample (x first, then y) and the number of
// tied groups.
func midRanks(x, y []float64) (ranks []float64, tieGroups int) {
	type item struct {
		v   float64
		idx int
	}
	all := make([]item, 0, len(x)+len(y))
	for i, v := range x {
		all = append(all, item{v, i})
	}
	for i, v := range y {
		all = append(all, item{v, len(x) + i})
	}
	sort.Slice(all, func(a, b int) bool { return all[a].v < all[b].v })
	ranks = make([]float64, len(all))
	for i := 0; i < len(all); {
		j := i
		for j < len(all) && all[j].v == all[i].v {
			j++
		}
		if j-i > 1 {
			tieGroups++
		}
		r := float64(i+j+1) / 2 // mean of ranks i+1..j
		for k := i; k < j; k++ {
			ranks[all[k].idx] = r
		}
		i = j
	}
	return ranks, tieGroups
}

// enumerateU computes the exact permutation p-values of U with ties by enumerating every way to
// choose which n of the pooled mid-ranks belong to y.
func enumerateU(ranks []float64, n int, uObs float64) (pGreater, pLess float64) {
	N := len(ranks)
	offset := float64(n*(n+1)) / 2
	const eps = 1e-9
	var ge, le, total float64
	var rec func(start, left int, sum float64)
	rec = func(start, left int, sum float64) {
		if left == 0 {
			u := sum - offset
			total++
			if u >= uObs-eps {
				ge++
			}
			if u <= uObs+eps {
				le++
			}
			return
		}
		for i := start; i <= N-left; i++ {
			rec(i+1, left-1, sum+ranks[i])
		}
	}
	rec(0, n, 0)
	return ge / total, le / total
}

var uNullCache sync.Map // [2]int{m,n} -> []float64 cumulative counts

// uNullCDF returns the cumulative counts of the tie-free null distribution of U for sample sizes
// m and n: cdf[u] = #{assignments with U <= u}; cdf[m*n] = C(m+n, m). The counts are the
// coefficients of the Gaussian binomial [m+n choose m]_q.
func uNullCDF(m, n int) []float64 {
	if m > n {
		m, n = n, m
	}
	key := [2]int{m, n}
	if v, ok := uNullCache.Load(key); ok {
		return v.([]float64)
	}
	deg := m * n
	c := make([]float64, deg+m+n+2)
	c[0] = 1
	cur := 0
	for i := 1; i <= m; i++ {
		s := n + i
		for k := cur + s; k >= s; k-- { // multiply by (1 - q^(n+i))
			c[k] -= c[k-s]
		}
		for k := i; k <= cur+s; k++ { // divide by (1 - q^i)
			c[k] += c[k-i]
		}
		cur = i * n
	}
	cdf := make([]float64, deg+1)
	acc := 0.0
	for u := 0; u <= deg; u++ {
		acc += math.Round(c[u])
		cdf[u] = acc
	}
	uNullCache.Store(key, cdf)
	return cdf
}

// uLowerTail returns P(U <= u) under the tie-free null distribution (normal approximation for
// large samples).
func uLowerTail(m, n, u int) float64 {
	if u < 0 {
		return 0
	}
	if binom(m+n, m) <= maxExactTotal {
		cdf := uNullCDF(m, n)
		if u >= len(cdf) {
			return 1
		}
		return cdf[u] / cdf[len(cdf)-1]
	}
	mean := float64(m*n) / 2
	sd := math.Sqrt(float64(m*n*(m+n+1)) / 12)
	return distuv.UnitNormal.CDF((float64(u) + 0.5 - mean) / sd)
}

// ShiftCI is a distribution-free confidence interval for the shift between two samples.
type ShiftCI struct {
	Estimate   float64 // Hodges-Lehmann estimate: median of all pairwise differences y_j - x_i
	Low, High  float64
	Confidence float64 // achieved coverage (discrete; >= the requested level when attainable)
}

// MosesCI returns the Hodges-Lehmann estimate of the shift of y relative to x with its Moses
// confidence interval: the k-th smallest and k-th largest pairwise differences, k chosen from
// the null distribution of U so that the coverage is at least conf. When the samples are too
// small for the requested level the widest interval (min, max of the differences) is returned
// with its achieved coverage.
func MosesCI(x, y []float64, conf float64) ShiftCI {
	m, n := len(x), len(y)
	if m == 0 || n == 0 {
		return ShiftCI{Estimate: math.NaN(), Low: math.NaN(), High: math.NaN()}
	}
	d := make([]float64, 0, m*n)
	for _, a := range x {
		for _, b := range y {
			d = append(d, b-a)
		}
	}
	sort.Float64s(d)
	est := num.MedianSorted(d)
	half := (1 - conf) / 2
	// Largest k >= 1 with P(U <= k-1) <= half.
	k := 0
	for k < len(d)/2 && uLowerTail(m, n, k) <= half {
		k++
	}
	if k == 0 {
		return ShiftCI{Estimate: est, Low: d[0], High: d[len(d)-1], Confidence: 1 - 2*uLowerTail(m, n, 0)}
	}
	return ShiftCI{Estimate: est, Low: d[k-1], High: d[len(d)-k], Confidence: 1 - 2*uLowerTail(m, n, k-1)}
}

// binom returns C(n, k) as a float64.
func binom(n, k int) float64 {
	if k < 0 || k > n {
		return 0
	}
	if k > n-k {
		k = n - k
	}
	r := 1.0
	for i := 1; i <= k; i++ {
		r = r * float64(n-k+i) / float64(i)
	}
	return math.Round(r)
}

func clamp01(p float64) float64 { return math.Max(0, math.Min(1, p)) }
