// reduce.go holds the group's allreduce: the reducer each rank calls, the custom and NCCL
// paths, and the allreduce faults.

package tp

import (
	"math"
	"sync"
	"time"

	"github.com/reckon-ci/reckon/refengine/collective"
)

// reducer is the meeting point of the ranks' allreduces: the last rank to arrive runs the
// collective over everyone's buffers, then releases them all.
type reducer struct {
	g       *Group
	mu      sync.Mutex
	cond    *sync.Cond
	n       int
	arrived int
	gen     uint64
	bufs    [][]float32
}

func (r *reducer) allReduce(rank int, buf []float32, rowWidth int) {
	if r.n == 1 {
		r.g.reduce([][]float32{buf}, rowWidth)
		return
	}
	r.mu.Lock()
	r.bufs[rank] = buf
	r.arrived++
	if r.arrived == r.n {
		r.g.reduce(r.bufs, rowWidth)
		r.arrived = 0
		r.gen++
		r.cond.Broadcast()
	} else {
		gen := r.gen
		for gen == r.gen {
			r.cond.Wait()
		}
	}
	r.mu.Unlock()
}

// reduce runs one allreduce over all ranks' buffers, choosing the algorithm as SGLang does: the
// custom one-shot when enabled and the tensor fits its buffer, else NCCL (ring or tree). The
// faults of Options apply to the custom path only, in this order: a dropped rank changes what is
// summed, the kernel faults (bf16 accumulation, per-rank order) change how it is summed, a stale
// result replaces the fresh sum, then the scale and the relative error multiply it. An oracle
// replaces the custom kernel by the reference one in its fixed order.
func (g *Group) reduce(bufs [][]float32, rowWidth int) {
	n := len(bufs)
	if n == 1 {
		if g.opts.BF16 {
			collective.RoundBF16(bufs[0])
		}
		return
	}
	hook := g.hook.Load()
	var t0 time.Time
	if hook != nil {
		t0 = time.Now()
	}
	elemBytes := int64(4)
	if g.opts.BF16 {
		elemBytes = 2
	}
	elems := len(bufs[0])
	bytes := int64(elems) * elemBytes
	alg := g.opts.NCCLAlgorithm
	fused := g.opts.Fused && bytes <= g.opts.FusedMaxBytes
	if fused || (g.opts.Custom && bytes <= g.opts.CustomMaxBytes) {
		alg = collective.OneShot
	}
	custom := alg == collective.OneShot && !fused
	// Faults apply to custom allreduces of at least FaultMinBatch tokens.
	faultable := custom && (g.opts.FaultMinBatch == 0 || (rowWidth > 0 && elems/rowWidth >= g.opts.FaultMinBatch))
	drop := faultable && g.opts.FaultDropRank && bytes > g.opts.FaultDropRankAbove
	stale := faultable && g.opts.FaultStale && bytes > g.opts.FaultStaleAbove
	faulted := false

	variant, useVariant := g.kernelVariant(custom, faultable, n)
	parts := bufs
	if drop {
		// The large-message path returned without the last peer's data: the others are summed
		// (in the same rank order) and every rank, the last included, gets that sum.
		parts = bufs[:n-1]
		faulted = true
	}
	if useVariant {
		collective.AllReduceOneShot(parts, g.opts.BF16, variant)
		if g.variantAltered(variant, parts, n) {
			faulted = true
		}
	} else {
		g.runAllReduce(alg, parts, elems, rowWidth)
	}
	if drop {
		copy(bufs[n-1], bufs[0])
	}
	if stale && g.staleFault(bufs, elems) {
		faulted = true
	}
	if custom && (g.opts.FaultAllReduceScale != 0 || g.opts.FaultAllReduceError > 0) && faultable {
		g.scaleFault(bufs)
		faulted = true
	}
	if hook != nil {
		(*hook)(AllReduceRecord{Algorithm: alg, Fused: fused, Ranks: n, Bytes: bytes, BF16: g.opts.BF16, Start: t0, Duration: time.Since(t0)})
	}
	g.account(alg, fused, bytes, n, faulted)
}

// kernelVariant is the custom kernel that a call of n ranks runs when it is not the engine's
// own one-shot: the oracle's fixed order, or the kernel the accumulation and rank-order faults
// describe (when the call is faultable).
func (g *Group) kernelVariant(custom, faultable bool, n int) (collective.OneShotVariant, bool) {
	if !custom {
		return collective.OneShotVariant{}, false
	}
	if g.opts.Oracle != nil {
		return collective.OneShotVariant{Order: *g.opts.Oracle}, true
	}
	if !faultable || !(g.opts.FaultAccumulateBF16 || g.opts.FaultRankOrder) {
		return collective.OneShotVariant{}, false
	}
	v := collective.OneShotVariant{AccumulateBF16: g.opts.FaultAccumulateBF16}
	if g.opts.FaultRankOrder {
		v.Order = collective.OrderPerRank
	}
	return v, true
}

// variantAltered reports whether a faulty kernel variant changed a call's result: a bf16
// accumulator rounds more than once from three ranks on (at two, one addition rounds once
// either way); a per-rank order counts where the ranks' results disagree.
func (g *Group) variantAltered(v collective.OneShotVariant, parts [][]float32, n int) bool {
	if g.opts.Oracle != nil {
		return false
	}
	if v.AccumulateBF16 && n > 2 {
		return true
	}
	if v.Order == collective.OrderPerRank {
		for r := 1; r < len(parts); r++ {
			for i, x := range parts[r] {
				if math.Float32bits(x) != math.Float32bits(parts[0][i]) {
					return true
				}
			}
		}
	}
	return false
}

// hasAllReduceFault reports whether any custom-allreduce fault of o is on.
func hasAllReduceFault(o Options) bool {
	return o.FaultAllReduceError != 0 || o.FaultAllReduceScale != 0 || o.FaultDropRank || o.FaultStale ||
		o.FaultAccumulateBF16 || o.FaultRankOrder || o.FaultMinBatch != 0
}

// runAllReduce sums parts (elems elements per rank) with alg, in the dtype; with Deterministic
// one row of rowWidth elements at a time, so that a row's sum does not depend on the batch.
func (g *Group) runAllReduce(alg collective.Algorithm, parts [][]float32, elems, rowWidth int) {
	run := collective.AllReduce
	if g.opts.BF16 {
		run = collective.AllReduceBF16
	}
	if g.opts.Deterministic && rowWidth > 0 && elems > rowWidth {
		rows := make([][]float32, len(parts))
		for off := 0; off < elems; off += rowWidth {
			for r := range parts {
				rows[r] = parts[r][off : off+rowWidth]
			}
			run(alg, rows)
		}
		return
	}
	run(alg, parts)
}

// staleFault applies the stale fault to a fresh sum in bufs: every rank gets the previous call's
// result of this size, and this call's is kept for the next. It reports whether it changed the
// result (not on the first call of a size, which only keeps its sum).
func (g *Group) staleFault(bufs [][]float32, elems int) bool {
	if g.stale == nil {
		g.stale = make(map[int][]float32)
	}
	prev, seen := g.stale[elems]
	if !seen {
		prev = make([]float32, elems)
		g.stale[elems] = prev
	}
	if !seen {
		copy(prev, bufs[0])
		return false
	}
	// hand out the previous call's result and keep this call's for the next one
	for i, v := range bufs[0] {
		p := prev[i]
		prev[i] = v
		for r := range bufs {
			bufs[r][i] = p
		}
	}
	return true
}

// scaleFault multiplies every element of the sum in bufs by 1 + FaultAllReduceScale and, with
// FaultAllReduceError, by 1 ± that error (a deterministic pseudo-random sign per element), then
// rounds to the dtype again.
func (g *Group) scaleFault(bufs [][]float32) {
	g.faultCtr++
	f := float32(1 + g.opts.FaultAllReduceScale)
	e := g.opts.FaultAllReduceError
	for i := range bufs[0] {
		m := f
		if e > 0 {
			// relative error of exactly E on every element, with a deterministic pseudo-random sign
			if hashUnit(g.faultCtr, uint64(i)) < 0 {
				m *= float32(1 - e)
			} else {
				m *= float32(1 + e)
			}
		}
		for r := range bufs {
			bufs[r][i] *= m
		}
	}
	if g.opts.BF16 {
		for r := range bufs {
			collective.RoundBF16(bufs[r])
		}
	}
}

// account adds one allreduce of bytes over n ranks by alg to the interconnect time owed and to
// the group's statistics.
func (g *Group) account(alg collective.Algorithm, fused bool, bytes int64, n int, faulted bool) {
	d := g.opts.Interconnect.AllReduceTime(alg, bytes, n)
	g.mu.Lock()
	g.commDebt += d
	g.stats.CommTime += d
	g.stats.AllReduces++
	switch {
	case fused:
		g.stats.FusedCalls++
	case alg == collective.OneShot:
		g.stats.CustomCalls++
		g.stats.MaxCustomBytes = max(g.stats.MaxCustomBytes, bytes)
		if faulted {
			g.stats.FaultedCalls++
		}
	case alg == collective.Tree:
		g.stats.TreeCalls++
	default:
		g.stats.RingCalls++
	}
	g.mu.Unlock()
}

// faultOpts is the fault part of o, for error messages.
func faultOpts(o Options) map[string]any {
	return map[string]any{"error": o.FaultAllReduceError, "scale": o.FaultAllReduceScale, "drop_rank_above": o.FaultDropRankAbove,
		"stale_above": o.FaultStaleAbove, "min_batch": o.FaultMinBatch, "accumulate_bf16": o.FaultAccumulateBF16, "rank_order": o.FaultRankOrder}
}

// hashUnit maps (a, b) to a deterministic value in [-1, 1).
func hashUnit(a, b uint64) float64 {
	z := a*0x9e3779b97f4a7c15 ^ b*0xbf58476d1ce4e5b9
	z ^= z >> 30
	z *= 0xbf58476d1ce4e5b9
	z ^= z >> 27
	z *= 0x94d049bb133111eb
	z ^= z >> 31
	return float64(z>>11)/float64(1<<52) - 1
}
