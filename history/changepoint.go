package history

import (
	"math"
	"sort"

	"gonum.org/v1/gonum/stat/distuv"
)

// Defaults of Options, those of Apache Otava (formerly Hunter): p <= 0.001, a window of 50
// points, no magnitude floor. Unlike Otava, the level is length-aware (Options.level).
const (
	DefaultPValue  = 0.001
	DefaultWindow  = 50
	DefaultMinSize = 3
	// RecentRuns is the most points the newest segment may hold and still be tested at PValue
	// rather than at the length-aware level (Options.level).
	RecentRuns = 10
)

// Options tune change-point detection.
type Options struct {
	// PValue is the significance a change point must reach in the final (merge) pass: as is for
	// the newest RecentRuns runs and in series of at most Window points, divided by n/Window in
	// longer ones (Bonferroni over windows).
	PValue float64
	// Magnitude is the smallest |forward change| (after/before - 1) a change point may have.
	Magnitude float64
	// Window is the length of the sliding windows of the first pass (step Window/2).
	Window int
	// MinSize is the fewest points a segment may have on each side of a change point.
	MinSize int
	// rule picks the merge pass's level; only the tests choose another than the default, to show
	// what the length-aware level buys.
	rule levelRule
}

// levelRule is how the merge pass sets a change point's level (Options.level).
type levelRule int

const (
	// lengthAware: PValue for the newest segment, PValue × Window/n for the rest (the default).
	lengthAware levelRule = iota
	// uniformLevel: PValue for every change point, as Apache Otava does.
	uniformLevel
	// noRecent: PValue × Window/n for every change point, the newest segment included.
	noRecent
)

func (o Options) withDefaults() Options {
	if o.PValue <= 0 {
		o.PValue = DefaultPValue
	}
	if o.Window <= 0 {
		o.Window = DefaultWindow
	}
	if o.MinSize < 2 {
		o.MinSize = DefaultMinSize
	}
	if o.Window < 2*o.MinSize {
		o.Window = 2 * o.MinSize
	}
	return o
}

// weakP is the first pass's relaxed level: ten times PValue while that stays below 0.05.
func (o Options) weakP() float64 {
	if o.PValue*10 < 0.05 {
		return o.PValue * 10
	}
	return o.PValue
}

// Segment summarises the points on one side of a change point.
type Segment struct {
	N    int     `json:"n"`
	Mean float64 `json:"mean"`
	Std  float64 `json:"std"`
}

// ChangePoint splits a series where its level moved: points [.., Index) before, [Index, ..)
// after, each side bounded by the neighbouring change points.
type ChangePoint struct {
	Index  int     `json:"index"`
	Before Segment `json:"before"`
	After  Segment `json:"after"`
	// Forward is after.mean/before.mean - 1 (e.g. -0.061 for a 6.1% drop).
	Forward float64 `json:"forward_change"`
	// PValue is the two-sided Student t-test (pooled variance) of the two segments.
	PValue float64 `json:"p_value"`
	// Level is the p-value the change point had to reach: Options.PValue when its newer side is
	// the newest RecentRuns runs or fewer, else PValue × Window/n (n the series' length, when
	// longer than Window).
	Level float64 `json:"level"`
	// Energy is the E-divisive statistic of the split within its first-pass window.
	Energy float64 `json:"energy"`
}

// Detect finds the change points of xs (in order) with E-divisive means and a Student t-test
// significance, in two passes after Otava/Hunter (docs/history.md gives the derivation):
//
//  1. Over sliding windows (length Window, step Window/2) each segment is split at the point that
//     maximises the energy statistic Q = m·n/(m+n)·(2/(mn)·Σ|x−y| − Σ|x−x'|/C(m,2) − Σ|y−y'|/C(n,2)),
//     kept when Student's t-test of the two sides reaches the relaxed level (10 × PValue), and both
//     sides are split again recursively ("weak" change points).
//  2. The candidates are merged: each is re-tested against the whole segments between its
//     neighbours, and the weakest that fails its level or Magnitude is dropped, until all pass.
//     The level is PValue for a change point whose newer side is the newest RecentRuns runs or
//     fewer, and PValue × Window/n for the others in a series of n > Window points, so that a
//     long stationary series does not split more often the longer it grows.
//
// It is deterministic (no permutations). NaN values are not allowed (callers drop them).
func Detect(xs []float64, o Options) []ChangePoint {
	o = o.withDefaults()
	n := len(xs)
	if n < 2*o.MinSize {
		return nil
	}
	ps := newPrefix(xs)
	cands := map[int]float64{}
	step := o.Window / 2
	for start := 0; ; start += step {
		end := start + o.Window
		if end > n {
			end = n
			start = max(0, end-o.Window)
		}
		splitRec(xs, ps, start, end, o, cands)
		if end == n {
			break
		}
	}
	idx := make([]int, 0, len(cands))
	for i := range cands {
		idx = append(idx, i)
	}
	sort.Ints(idx)
	// Merge: drop the weakest failing candidate until every one passes.
	for len(idx) > 0 {
		worst, worstP, worstTie := -1, -1.0, -1.0
		for k := range idx {
			lo, hi := bounds(idx, k, n)
			p, fwd := ps.test(lo, idx[k], hi, o.MinSize)
			lv := o.level(idx[k], hi, n)
			fails := p > lv || math.Abs(fwd) < o.Magnitude
			if !fails {
				continue
			}
			// The weakest is the farthest above its own level.
			p /= lv
			// Ties (typically p = 1 for two candidates a point apart): drop the one that is the
			// weaker when its too-close neighbours are ignored.
			tie := ps.looseP(idx, k, n, o.MinSize)
			if p > worstP || (p == worstP && tie > worstTie) {
				worst, worstP, worstTie = k, p, tie
			}
		}
		if worst < 0 {
			break
		}
		idx = append(idx[:worst], idx[worst+1:]...)
	}
	out := make([]ChangePoint, len(idx))
	for k, i := range idx {
		lo, hi := bounds(idx, k, n)
		p, fwd := ps.test(lo, i, hi, o.MinSize)
		out[k] = ChangePoint{Index: i, Before: ps.segment(lo, i), After: ps.segment(i, hi), Forward: fwd, PValue: p, Level: o.level(i, hi, n), Energy: cands[i]}
	}
	return out
}

// level is the p-value the merge pass holds a change point at index at to, its newer segment ending
// at hi, in a series of n points:
//   - the newest segment (hi == n) of at most RecentRuns points: PValue. A night's analysis asks
//     this once, of the runs since the last change point, so a step is reported within a few nights;
//   - every other change point: PValue × Window/n once the series is longer than a window
//     (Bonferroni over its n/Window windows), so the false change points of a whole series stay
//     bounded as it grows instead of growing with its length.
func (o Options) level(at, hi, n int) float64 {
	switch {
	case o.rule == uniformLevel:
		return o.PValue
	case o.rule == lengthAware && hi == n && n-at <= RecentRuns:
		return o.PValue
	}
	return o.PValue * float64(o.Window) / float64(max(o.Window, n))
}

func bounds(idx []int, k, n int) (lo, hi int) {
	lo, hi = 0, n
	if k > 0 {
		lo = idx[k-1]
	}
	if k+1 < len(idx) {
		hi = idx[k+1]
	}
	return lo, hi
}

// looseP is the p-value of candidate k against the nearest neighbours at least minSize away.
func (ps *prefix) looseP(idx []int, k, n, minSize int) float64 {
	lo, hi := 0, n
	for j := k - 1; j >= 0; j-- {
		if idx[k]-idx[j] >= minSize {
			lo = idx[j]
			break
		}
	}
	for j := k + 1; j < len(idx); j++ {
		if idx[j]-idx[k] >= minSize {
			hi = idx[j]
			break
		}
	}
	p, _ := ps.test(lo, idx[k], hi, minSize)
	return p
}

// splitRec finds the best energy split of xs[a:b], keeps it when significant at the relaxed
// level, and recurses into both sides.
func splitRec(xs []float64, ps *prefix, a, b int, o Options, cands map[int]float64) {
	if b-a < 2*o.MinSize {
		return
	}
	tau, q := bestSplit(xs[a:b], o.MinSize)
	if tau < 0 {
		return
	}
	tau += a
	p, _ := ps.test(a, tau, b, o.MinSize)
	if p > o.weakP() {
		return
	}
	if q > cands[tau] {
		cands[tau] = q
	}
	splitRec(xs, ps, a, tau, o, cands)
	splitRec(xs, ps, tau, b, o, cands)
}

// bestSplit returns the split tau (minSize <= tau <= n-minSize) of x that maximises the
// energy statistic, and its value, in O(n²).
func bestSplit(x []float64, minSize int) (int, float64) {
	n := len(x)
	// colLeft[t] = Σ_{i<t} |x_i − x_t|; rowRight[t] = Σ_{j>t} |x_t − x_j|.
	colLeft := make([]float64, n)
	rowRight := make([]float64, n)
	for i := 0; i < n; i++ {
		for j := i + 1; j < n; j++ {
			d := math.Abs(x[i] - x[j])
			colLeft[j] += d
			rowRight[i] += d
		}
	}
	// With split t (left = [0,t), right = [t,n)): W_L = within-left sum, W_R = within-right,
	// C = cross sum. Start at t = 0: W_L = 0, C = 0, W_R = total.
	var wl, cross, wr float64
	for i := 0; i < n; i++ {
		wr += rowRight[i]
	}
	best, bestQ := -1, math.Inf(-1)
	for t := 0; t < n; t++ {
		if t >= minSize && n-t >= minSize {
			m, k := float64(t), float64(n-t)
			e := 2*cross/(m*k) - wl/(m*(m-1)/2) - wr/(k*(k-1)/2)
			q := m * k / (m + k) * e
			if q > bestQ {
				best, bestQ = t, q
			}
		}
		// Move x_t from the right to the left.
		wl += colLeft[t]
		wr -= rowRight[t]
		cross += rowRight[t] - colLeft[t]
	}
	return best, bestQ
}

// prefix holds prefix sums of a series (shifted by its first value for precision).
type prefix struct {
	shift   float64
	s1, s2  []float64
	n       int
	origins []float64
}

func newPrefix(xs []float64) *prefix {
	p := &prefix{n: len(xs), s1: make([]float64, len(xs)+1), s2: make([]float64, len(xs)+1), origins: xs}
	if len(xs) > 0 {
		p.shift = xs[0]
	}
	for i, x := range xs {
		d := x - p.shift
		p.s1[i+1] = p.s1[i] + d
		p.s2[i+1] = p.s2[i] + d*d
	}
	return p
}

// moments returns the count, mean and sample variance of xs[a:b].
func (p *prefix) moments(a, b int) (n int, mean, variance float64) {
	n = b - a
	if n <= 0 {
		return 0, math.NaN(), math.NaN()
	}
	s1 := p.s1[b] - p.s1[a]
	s2 := p.s2[b] - p.s2[a]
	m := s1 / float64(n)
	mean = m + p.shift
	if n < 2 {
		return n, mean, 0
	}
	variance = (s2 - float64(n)*m*m) / float64(n-1)
	if variance < 0 {
		variance = 0
	}
	return n, mean, variance
}

func (p *prefix) segment(a, b int) Segment {
	n, m, v := p.moments(a, b)
	return Segment{N: n, Mean: m, Std: math.Sqrt(v)}
}

// test is Student's two-sided t-test of xs[lo:at] against xs[at:hi], and the forward change. A
// side with fewer than minSize points gives p = 1.
func (p *prefix) test(lo, at, hi, minSize int) (pv, forward float64) {
	n1, m1, v1 := p.moments(lo, at)
	n2, m2, v2 := p.moments(at, hi)
	if n1 < minSize || n2 < minSize {
		return 1, 0
	}
	if m1 != 0 {
		forward = m2/m1 - 1
	}
	return studentP(float64(n1), m1, v1, float64(n2), m2, v2), forward
}

// studentP is the two-sided p-value of Student's two-sample t-test (pooled variance) from
// summary statistics. Pooling matters for change points: a short segment whose few points
// happen to agree has a tiny variance of its own, and Welch's test would call any difference
// from it significant.
func studentP(n1, m1, v1, n2, m2, v2 float64) float64 {
	df := n1 + n2 - 2
	pooled := ((n1-1)*v1 + (n2-1)*v2) / df
	se2 := pooled * (1/n1 + 1/n2)
	scale := math.Max(math.Abs(m1), math.Abs(m2))
	if se2 <= 1e-24*scale*scale || se2 == 0 {
		// Both sides constant (engine-report values often are): any difference is a change.
		if math.Abs(m1-m2) <= 1e-12*math.Max(scale, 1) {
			return 1
		}
		return 0
	}
	t := (m2 - m1) / math.Sqrt(se2)
	st := distuv.StudentsT{Mu: 0, Sigma: 1, Nu: df}
	return 2 * st.CDF(-math.Abs(t))
}
