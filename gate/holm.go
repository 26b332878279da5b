package gate

import (
	"math"
	"sort"
)

// Holm applies the Holm-Bonferroni step-down correction across the statistical checks a run
// gates (not across every printed metric: that would only cost power) and re-decides each
// result at the family level alpha. Error results are left out of the family. The worse and
// better directions are adjusted separately. alpha <= 0 keeps each result's own level (as set by
// Compare from StatOptions.Alpha, e.g. SequentialPlan.Options' nominal level).
func Holm(results []*StatResult, alpha float64) {
	var fam []*StatResult
	for _, r := range results {
		if r != nil && r.Outcome != StatError && r.NBase >= 2 && r.NHead >= 2 {
			fam = append(fam, r)
		}
	}
	holmAdjust(fam, func(r *StatResult) float64 { return r.PWorse }, func(r *StatResult, p float64) { r.AdjPWorse = p })
	holmAdjust(fam, func(r *StatResult) float64 { return r.PBetter }, func(r *StatResult, p float64) { r.AdjPBetter = p })
	for _, r := range fam {
		r.Holm = len(fam) > 1
		r.Family = len(fam)
		if alpha > 0 {
			r.Alpha = alpha
		}
		r.decide()
	}
}

// holmAdjust computes Holm step-down adjusted p-values: p_(i) * (m-i+1), made monotone.
func holmAdjust(fam []*StatResult, get func(*StatResult) float64, set func(*StatResult, float64)) {
	m := len(fam)
	idx := make([]int, m)
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return get(fam[idx[a]]) < get(fam[idx[b]]) })
	running := 0.0
	for rank, i := range idx {
		adj := math.Min(1, get(fam[i])*float64(m-rank))
		running = math.Max(running, adj)
		set(fam[i], running)
	}
}
