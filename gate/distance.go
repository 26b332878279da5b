package gate

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sort"

	"github.com/reckon-ci/reckon/wire"
)

// Distance statistics between two configs' teacher-forced scores of the same token sequences
// (docs/statistics.md, "Numerical equivalence"). Per position they compare the next-token
// distributions the two configs recorded (top-k, renormalised); they are built so that the deep
// tail, where float differences are largest and matter least, does not rule them.

// TailLogprob is the reference log-probability below which a top-k candidate is left out of the
// KL divergence (as llama.cpp's KL statistics do): differences at p < e^-16 are rounding in the
// tail, not a changed prediction.
const TailLogprob = -16.0

// trimLogprob is the reference log-probability (p = 1e-4) below which a forced token's |Δ
// logprob| is left out of the trimmed |Δ logprob| statistics.
var trimLogprob = math.Log(1e-4)

// Pass names of the teacher-forced scores.
const (
	passSequential = "one at a time"
	passBatched    = "under load"
)

// promptDist is one prompt's comparison of two configs' forced scores.
type promptDist struct {
	id        string
	positions int
	klSum     float64 // Σ KL over positions
	dp2Sum    float64 // Σ (Δp of the forced token)²
	top1Same  int     // positions whose most likely token agrees
	absLP     []float64
	// maxAbs is the largest |Δ logprob| of any value both recorded (forced token and shared
	// top-k candidates): the near-bitwise rule's statistic.
	maxAbs    float64
	maxAbsPos int
	differing int // positions with any recorded value different
	worstKL   float64
	worstPos  int // position (1-based in the forced sequence) of worstKL
	worstRef  wire.TokenLogprob
	worstCand wire.TokenLogprob
}

// pairDist compares config Cand with reference point Ref over one pass, prompt by prompt.
type pairDist struct {
	ref, cand string
	pass      string
	prompts   []promptDist
}

// forcedOf returns a prompt's scores of the given pass.
func forcedOf(p *wire.NumericsPrompt, pass string) []wire.TokenLogprob {
	if pass == passBatched {
		return p.ForcedBatched
	}
	return p.Forced
}

// hasPass reports whether every prompt of the probe has scores of the pass.
func hasPass(p *wire.NumericsProbe, pass string) bool {
	for i := range p.Prompts {
		if len(forcedOf(&p.Prompts[i], pass)) == 0 {
			return false
		}
	}
	return len(p.Prompts) > 0
}

// comparePair computes the distance of cand from ref over the pass. The probes must have been
// checked with checkForcedPair.
func comparePair(ref, cand *wire.NumericsProbe, pass string) pairDist {
	pd := pairDist{ref: nameOr(ref.Config, "reference"), cand: nameOr(cand.Config, "candidate"), pass: pass}
	byID := make(map[string]*wire.NumericsPrompt, len(cand.Prompts))
	for i := range cand.Prompts {
		byID[cand.Prompts[i].ID] = &cand.Prompts[i]
	}
	for i := range ref.Prompts {
		rp := &ref.Prompts[i]
		cp := byID[rp.ID]
		pd.prompts = append(pd.prompts, comparePrompt(rp.ID, forcedOf(rp, pass), forcedOf(cp, pass)))
	}
	return pd
}

func comparePrompt(id string, ref, cand []wire.TokenLogprob) promptDist {
	d := promptDist{id: id, worstPos: -1, maxAbsPos: -1}
	for j := range ref {
		r, c := ref[j], cand[j]
		d.positions++
		kl := klTopK(r, c)
		d.klSum += kl
		if kl > d.worstKL || d.worstPos < 0 {
			d.worstKL, d.worstPos, d.worstRef, d.worstCand = kl, j+1, r, c
		}
		dp := math.Exp(c.Logprob) - math.Exp(r.Logprob)
		d.dp2Sum += dp * dp
		if len(r.Top) > 0 && len(c.Top) > 0 && r.Top[0].Token == c.Top[0].Token {
			d.top1Same++
		}
		if r.Logprob >= trimLogprob {
			d.absLP = append(d.absLP, math.Abs(c.Logprob-r.Logprob))
		}
		m := maxAbsDiff(r, c)
		if m > 0 {
			d.differing++
		}
		if m > d.maxAbs || d.maxAbsPos < 0 {
			d.maxAbs, d.maxAbsPos = m, j+1
		}
	}
	return d
}

// klTopK is KL(ref || cand) between the two next-token distributions coarsened to the tokens
// both recorded in their top-k with a reference log-probability of at least TailLogprob, plus one
// lumped bin for everything else (1 minus their probabilities, on each side). Coarsening never
// increases KL, and the lumped bin keeps it finite and insensitive to which near-tied tokens
// happen to sit at the edge of each side's top-k; a candidate that moves mass away from the
// reference's likely tokens still pays for it through the lumped bin.
func klTopK(ref, cand wire.TokenLogprob) float64 {
	rtop, ctop := ref.Top, cand.Top
	if len(rtop) == 0 || len(ctop) == 0 {
		rtop = []wire.TokenCandidate{{Token: ref.Token, Logprob: ref.Logprob}}
		ctop = []wire.TokenCandidate{{Token: cand.Token, Logprob: cand.Logprob}}
	}
	candLP := make(map[int]float64, len(ctop))
	for _, t := range ctop {
		candLP[t.Token] = t.Logprob
	}
	kl, pSum, qSum := 0.0, 0.0, 0.0
	for _, t := range rtop {
		q, ok := candLP[t.Token]
		if !ok || t.Logprob < TailLogprob {
			continue
		}
		p, qq := math.Exp(t.Logprob), math.Exp(q)
		pSum += p
		qSum += qq
		kl += p * math.Log(p/qq)
	}
	pRest, qRest := 1-pSum, 1-qSum
	const tiny = 1e-12
	if pRest > tiny {
		kl += pRest * math.Log(pRest/max(qRest, tiny))
	}
	return max(kl, 0)
}

// maxAbsDiff is the largest |Δ logprob| over the forced token and the candidates both recorded.
func maxAbsDiff(ref, cand wire.TokenLogprob) float64 {
	m := math.Abs(ref.Logprob - cand.Logprob)
	if len(ref.Top) == 0 || len(cand.Top) == 0 {
		return m
	}
	c := make(map[int]float64, len(cand.Top))
	for _, t := range cand.Top {
		c[t.Token] = t.Logprob
	}
	for _, t := range ref.Top {
		if q, ok := c[t.Token]; ok {
			m = max(m, math.Abs(t.Logprob-q))
		} else {
			// A token in one top-k but not the other: the sets differ, so the values do.
			m = max(m, math.Abs(t.Logprob-cand.Top[len(cand.Top)-1].Logprob))
		}
	}
	return m
}

// distance is the KL distance √(2·mean KL) over the prompts in idx (all when idx is nil), pooled
// over their positions: first-order in the perturbation of the logits, so ratios of distances
// compare like ratios of allreduce errors.
func (pd pairDist) distance(idx []int) float64 {
	var kl float64
	var n int
	pd.each(idx, func(p *promptDist) { kl += p.klSum; n += p.positions })
	if n == 0 {
		return 0
	}
	return math.Sqrt(2 * kl / float64(n))
}

// rmsDP is the RMS change of the forced token's probability over the prompts in idx.
func (pd pairDist) rmsDP(idx []int) float64 {
	var s float64
	var n int
	pd.each(idx, func(p *promptDist) { s += p.dp2Sum; n += p.positions })
	if n == 0 {
		return 0
	}
	return math.Sqrt(s / float64(n))
}

func (pd pairDist) each(idx []int, fn func(*promptDist)) {
	if idx == nil {
		for i := range pd.prompts {
			fn(&pd.prompts[i])
		}
		return
	}
	for _, i := range idx {
		fn(&pd.prompts[i])
	}
}

func (pd pairDist) positions() int {
	n := 0
	for _, p := range pd.prompts {
		n += p.positions
	}
	return n
}

func (pd pairDist) top1Agreement() float64 {
	s, n := 0, 0
	for _, p := range pd.prompts {
		s += p.top1Same
		n += p.positions
	}
	if n == 0 {
		return 1
	}
	return float64(s) / float64(n)
}

// maxAbs is the largest |Δ logprob| of any recorded value, with where it is.
func (pd pairDist) maxAbs() (float64, string, int) {
	best, id, pos := 0.0, "", -1
	for _, p := range pd.prompts {
		if pos < 0 || p.maxAbs > best {
			best, id, pos = p.maxAbs, p.id, p.maxAbsPos
		}
	}
	return best, id, pos
}

func (pd pairDist) differing() int {
	n := 0
	for _, p := range pd.prompts {
		n += p.differing
	}
	return n
}

// absPercentiles are the median, 99th percentile and max of the trimmed forced-token |Δ logprob|.
func (pd pairDist) absPercentiles() (med, p99, mx float64, n int) {
	var all []float64
	for _, p := range pd.prompts {
		all = append(all, p.absLP...)
	}
	if len(all) == 0 {
		return 0, 0, 0, 0
	}
	sort.Float64s(all)
	q := func(f float64) float64 { return all[min(len(all)-1, int(math.Ceil(f*float64(len(all))))-1)] }
	return q(0.5), q(0.99), all[len(all)-1], len(all)
}

func (pd pairDist) meanAbs() float64 {
	var s float64
	var n int
	for _, p := range pd.prompts {
		for _, x := range p.absLP {
			s += x
			n++
		}
	}
	if n == 0 {
		return 0
	}
	return s / float64(n)
}

// worst is the prompt position with the largest KL contribution.
func (pd pairDist) worst() *promptDist {
	var w *promptDist
	for i := range pd.prompts {
		p := &pd.prompts[i]
		if p.worstPos >= 0 && (w == nil || p.worstKL > w.worstKL) {
			w = p
		}
	}
	return w
}

func (pd pairDist) describeWorst() string {
	w := pd.worst()
	if w == nil {
		return "no positions compared"
	}
	return fmt.Sprintf("worst prompt %q position %d: KL %.3g, %s logprob %.4f (top-1 %s) vs %s %.4f (top-1 %s)",
		w.id, w.worstPos, w.worstKL, pd.ref, w.worstRef.Logprob, topText(w.worstRef), pd.cand, w.worstCand.Logprob, topText(w.worstCand))
}

func topText(t wire.TokenLogprob) string {
	if len(t.Top) == 0 {
		return "?"
	}
	return tokText(t.Top[0].Token, t.Top[0].Text)
}

// BootstrapResamples is how many prompt resamples the ratio's confidence interval uses. The
// resampling is seeded, so a verdict is reproducible from its probe files.
const BootstrapResamples = 2000

// ratioCI returns num/den (each the max over its pairs' distances) and a 95% percentile
// bootstrap interval over prompts: each resample draws the prompts with replacement and
// recomputes every distance on the same draw (the pairs share their prompts).
func ratioCI(num pairDist, dens []pairDist) (ratio, lo, hi float64) {
	den := func(idx []int) float64 {
		d := 0.0
		for _, p := range dens {
			d = max(d, p.distance(idx))
		}
		return d
	}
	ratio = safeRatio(num.distance(nil), den(nil))
	n := len(num.prompts)
	rng := rand.New(rand.NewPCG(20261201, uint64(n)))
	rs := make([]float64, 0, BootstrapResamples)
	idx := make([]int, n)
	for b := 0; b < BootstrapResamples; b++ {
		for i := range idx {
			idx[i] = rng.IntN(n)
		}
		// A resample in which the trusted configs happen to agree exactly carries no scale.
		if d := den(idx); d > 0 {
			rs = append(rs, num.distance(idx)/d)
		}
	}
	if len(rs) == 0 {
		return ratio, ratio, ratio
	}
	sort.Float64s(rs)
	lo = rs[int(0.025*float64(len(rs)))]
	hi = rs[min(len(rs)-1, int(0.975*float64(len(rs))))]
	return ratio, lo, hi
}

func safeRatio(a, b float64) float64 {
	switch {
	case b > 0:
		return a / b
	case a == 0:
		return 1
	default:
		return math.Inf(1)
	}
}
