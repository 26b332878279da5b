// Package tp runs the reference engine's model tensor-parallel: one goroutine per rank, each
// holding only its shard of the weights and its own KV store, meeting twice per layer in an
// allreduce (collective.AllReduce) that sums their partial outputs. It also keeps the modelled
// communication time of those allreduces (interconnect.Model), which the scheduler adds to its
// steps.
package tp

import (
	"fmt"
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/reckon-ci/reckon/refengine/collective"
	"github.com/reckon-ci/reckon/refengine/interconnect"
	"github.com/reckon-ci/reckon/refengine/kvcache"
	"github.com/reckon-ci/reckon/refengine/model"
)

// ModelID selects the target model or the speculative draft model.
type ModelID int

// The two models a group can run.
const (
	Target ModelID = iota
	Draft
)

// Options configure a Group.
type Options struct {
	TP int
	// BF16 rounds the partial outputs and the sums to bfloat16 at every allreduce boundary.
	BF16 bool
	// Custom enables the one-shot custom allreduce for tensors of at most CustomMaxBytes bytes;
	// larger tensors (and everything when Custom is false) use NCCL (NCCLAlgorithm).
	Custom         bool
	CustomMaxBytes int64
	// NCCLAlgorithm is the algorithm of the NCCL path: collective.Ring (also when empty) or
	// collective.Tree (NCCL_ALGO=Tree).
	NCCLAlgorithm collective.Algorithm
	Interconnect  interconnect.Model
	// Faults of the custom (one-shot) path; they never touch the NCCL path. All combine.
	//
	// FaultAllReduceError multiplies every element of a custom-allreduce result by 1±E, with a
	// pseudo-random sign per element (0 = off).
	FaultAllReduceError float64
	// FaultAllReduceScale multiplies every custom-allreduce result by 1+EPS (0 = off; EPS > -1).
	FaultAllReduceScale float64
	// FaultDropRank, for custom allreduces of more than FaultDropRankAbove bytes, leaves the last
	// rank's contribution out of the sum (every rank gets the same wrong sum).
	FaultDropRank      bool
	FaultDropRankAbove int64
	// FaultStale, for custom allreduces of more than FaultStaleAbove bytes, returns the previous
	// such call's result of the same element count instead of the fresh one (the first call of
	// each size is correct).
	FaultStale      bool
	FaultStaleAbove int64
	// FaultMinBatch restricts every fault above to allreduces of at least this many tokens
	// (elements / row width; 0 = any size).
	FaultMinBatch int
	// Deterministic makes the allreduce batch-invariant: each token's row is reduced on its own, so
	// its summation order does not depend on the other sequences in the batch.
	Deterministic bool
}

// SeqInput is one sequence's part of a forward batch.
type SeqInput struct {
	Tokens []int   // new tokens to process
	Start  int     // position of Tokens[0]
	Pages  []int32 // KV pages covering positions [0, Start+len(Tokens))
	// Logits: LogitsNone (e.g. a prefill chunk that is not the last), LogitsLast or LogitsAll.
	Logits LogitsMode
}

// LogitsMode says which positions of a sequence need logits.
type LogitsMode int

// Logits modes.
const (
	LogitsLast LogitsMode = iota
	LogitsAll
	LogitsNone
)

// Stats count what the group has done.
type Stats struct {
	AllReduces     int64         // allreduce calls
	CustomCalls    int64         // of which used the one-shot custom allreduce
	RingCalls      int64         // of which used NCCL's ring
	TreeCalls      int64         // of which used NCCL's tree
	MaxCustomBytes int64         // the largest custom-allreduce message, bytes per rank
	FaultedCalls   int64         // custom allreduces whose result a fault altered
	CommTime       time.Duration // total modelled communication time
	ForwardCalls   int64
	TokensForwards int64
}

// AllReduceRecord is one allreduce call as it really ran, for a profiler.
type AllReduceRecord struct {
	// Algorithm is what ran: collective.OneShot (the custom path), or NCCL's collective.Ring or
	// collective.Tree (also for a tensor the custom path handed to NCCL because it was too large).
	Algorithm collective.Algorithm
	Ranks     int
	Bytes     int64 // message size per rank
	BF16      bool
	Start     time.Time     // when the call began
	Duration  time.Duration // measured wall time of the call
}

// Group is a set of tensor-parallel ranks.
type Group struct {
	// hook receives every allreduce call while a profiler is on (nil otherwise: one atomic load
	// per call is all it costs).
	hook atomic.Pointer[func(AllReduceRecord)]

	opts  Options
	cfg   model.Config
	rope  *model.Rope
	ranks []*rank
	red   *reducer

	mu       sync.Mutex // guards commDebt and stats
	commDebt time.Duration
	stats    Stats
	faultCtr uint64
	// stale holds, per element count, the last fresh result of a custom allreduce that the stale
	// fault applies to (written only by reduce, which the reducer serialises).
	stale map[int][]float32
}

type rank struct {
	id     int
	shards [2]*model.Shard
	kv     [2]*kvcache.Store
	// workers is how many goroutines share this rank's matmuls and attention (more than one only
	// when there are more cores than ranks, e.g. tp 1 on two cores). Rows are split between
	// them; each row's arithmetic is unchanged, so results do not depend on the split.
	workers        int
	x, h, o, att   []float32
	qkv, gu, act   []float32
	lg             []float32
	sc             [][]float32 // per-worker attention scores
	tokSeq, tokPos []int       // per token of the batch: its sequence and position
}

// parallel runs fn over [0, n) split into contiguous ranges (multiples of align) among the
// rank's workers; fn gets the worker index and its range.
func (rk *rank) parallel(n, align int, fn func(w, lo, hi int)) {
	W := rk.workers
	if W <= 1 || n < 4*align {
		fn(0, 0, n)
		return
	}
	per := (n/W + align - 1) / align * align
	var wg sync.WaitGroup
	for w := 0; w < W; w++ {
		lo, hi := w*per, min((w+1)*per, n)
		if w == W-1 {
			hi = n
		}
		if lo >= hi {
			continue
		}
		wg.Add(1)
		go func(w, lo, hi int) {
			defer wg.Done()
			fn(w, lo, hi)
		}(w, lo, hi)
	}
	wg.Wait()
}

// matMul is model.MatMul with the rows split among the rank's workers.
func (rk *rank) matMul(out, x, w []float32, T, K, N int) {
	rk.parallel(T, 2, func(_, lo, hi int) {
		model.MatMul(out[lo*N:hi*N], x[lo*K:hi*K], w, hi-lo, K, N)
	})
}

// NewGroup shards target (and draft, when not nil) over opts.TP ranks. KV stores are attached
// later with AttachKV, once the memory plan has sized them.
func NewGroup(target, draft *model.Weights, opts Options) (*Group, error) {
	if err := target.Cfg.CheckTP(opts.TP); err != nil {
		return nil, err
	}
	switch opts.NCCLAlgorithm {
	case "":
		opts.NCCLAlgorithm = collective.Ring
	case collective.Ring, collective.Tree:
	default:
		return nil, fmt.Errorf("tp: NCCL algorithm %q: expected %q or %q", opts.NCCLAlgorithm, collective.Ring, collective.Tree)
	}
	if opts.FaultAllReduceError < 0 || !(opts.FaultAllReduceScale > -1) || opts.FaultDropRankAbove < 0 || opts.FaultStaleAbove < 0 || opts.FaultMinBatch < 0 {
		return nil, fmt.Errorf("tp: fault options %+v: expected error >= 0, scale > -1, sizes >= 0 and min batch >= 0", faultOpts(opts))
	}
	g := &Group{opts: opts, cfg: target.Cfg}
	g.rope = model.NewRope(target.Cfg.HeadDim(), target.Cfg.MaxPositions, target.Cfg.RopeTheta)
	workers := max(1, runtime.GOMAXPROCS(0)/opts.TP)
	for r := 0; r < opts.TP; r++ {
		rk := &rank{id: r, workers: workers, sc: make([][]float32, workers)}
		rk.shards[Target] = model.ShardFor(target, r, opts.TP)
		if draft != nil {
			rk.shards[Draft] = model.ShardFor(draft, r, opts.TP)
		}
		g.ranks = append(g.ranks, rk)
	}
	g.red = &reducer{g: g, n: opts.TP, bufs: make([][]float32, opts.TP)}
	g.red.cond = sync.NewCond(&g.red.mu)
	return g, nil
}

// Shard is rank r's shard of model m (nil when the group has no draft).
func (g *Group) Shard(m ModelID, r int) *model.Shard { return g.ranks[r].shards[m] }

// AttachKV allocates each rank's KV store for model m with the given number of pages.
func (g *Group) AttachKV(m ModelID, pages, pageSize int) {
	for _, rk := range g.ranks {
		s := rk.shards[m]
		rk.kv[m] = kvcache.NewStore(len(s.Layers), pages, pageSize, s.KVHeads, s.Cfg.HeadDim())
	}
}

// KVStore is rank r's KV store for model m.
func (g *Group) KVStore(m ModelID, r int) *kvcache.Store { return g.ranks[r].kv[m] }

// TakeCommTime returns the modelled communication time accumulated since the last call and resets it.
func (g *Group) TakeCommTime() time.Duration {
	g.mu.Lock()
	defer g.mu.Unlock()
	d := g.commDebt
	g.commDebt = 0
	return d
}

// Stats returns a snapshot of the counters.
func (g *Group) Stats() Stats {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.stats
}

// SetAllReduceHook makes fn receive one AllReduceRecord per allreduce call from now on (nil stops
// it). fn runs on the goroutine that ran the collective, while the ranks wait for it.
func (g *Group) SetAllReduceHook(fn func(AllReduceRecord)) {
	if fn == nil {
		g.hook.Store(nil)
		return
	}
	g.hook.Store(&fn)
}

// Options returns the group's options.
func (g *Group) Options() Options { return g.opts }

// Forward runs model m over the batch on all ranks and returns the logits of the requested
// positions, in batch order (for each sequence: none, its last token, or all its tokens), each a
// slice of Vocab float32. The KV stores must have been attached and the pages allocated.
func (g *Group) Forward(m ModelID, seqs []SeqInput) ([][]float32, error) {
	T, rows := 0, 0
	for i, s := range seqs {
		if len(s.Tokens) == 0 {
			return nil, fmt.Errorf("forward: sequence %d has no tokens", i)
		}
		end := s.Start + len(s.Tokens)
		if end > g.cfg.MaxPositions {
			return nil, fmt.Errorf("forward: sequence %d reaches position %d, beyond max_position_embeddings %d", i, end, g.cfg.MaxPositions)
		}
		if g.ranks[0].kv[m] == nil {
			return nil, fmt.Errorf("forward: no KV store attached for model %d", m)
		}
		if need := (end + g.ranks[0].kv[m].PageSize - 1) / g.ranks[0].kv[m].PageSize; len(s.Pages) < need {
			return nil, fmt.Errorf("forward: sequence %d has %d KV pages, needs %d", i, len(s.Pages), need)
		}
		for _, tok := range s.Tokens {
			if tok < 0 || tok >= g.cfg.Vocab {
				return nil, fmt.Errorf("forward: sequence %d: token id %d out of range [0, %d)", i, tok, g.cfg.Vocab)
			}
		}
		T += len(s.Tokens)
		switch s.Logits {
		case LogitsLast:
			rows++
		case LogitsAll:
			rows += len(s.Tokens)
		}
	}
	V := g.cfg.Vocab
	flat := make([]float32, rows*V)
	if len(g.ranks) == 1 {
		g.ranks[0].forward(g, m, seqs, T, rows, flat)
	} else {
		var wg sync.WaitGroup
		for _, rk := range g.ranks {
			wg.Add(1)
			go func(rk *rank) {
				defer wg.Done()
				rk.forward(g, m, seqs, T, rows, flat)
			}(rk)
		}
		wg.Wait()
	}
	out := make([][]float32, rows)
	for i := range out {
		out[i] = flat[i*V : (i+1)*V : (i+1)*V]
	}
	g.mu.Lock()
	g.stats.ForwardCalls++
	g.stats.TokensForwards += int64(T)
	g.mu.Unlock()
	return out, nil
}

func grow(b []float32, n int) []float32 {
	if cap(b) < n {
		return make([]float32, n)
	}
	return b[:n]
}

func (rk *rank) forward(g *Group, m ModelID, seqs []SeqInput, T, rows int, logits []float32) {
	s := rk.shards[m]
	kv := rk.kv[m]
	c := s.Cfg
	H, hd := c.Hidden, c.HeadDim()
	qN := s.QHeads * hd
	kvN := s.KVHeads * hd
	qkvN := qN + 2*kvN
	F := s.FFN
	rk.x = grow(rk.x, T*H)
	rk.h = grow(rk.h, T*H)
	rk.o = grow(rk.o, T*H)
	rk.qkv = grow(rk.qkv, T*qkvN)
	rk.att = grow(rk.att, T*qN)
	rk.gu = grow(rk.gu, T*2*F)
	rk.act = grow(rk.act, T*F)
	x, h, o := rk.x, rk.h, rk.o
	rk.tokSeq = rk.tokSeq[:0]
	rk.tokPos = rk.tokPos[:0]
	t := 0
	for si, sq := range seqs {
		for i, tok := range sq.Tokens {
			copy(x[t*H:(t+1)*H], s.Embed[tok*H:(tok+1)*H])
			rk.tokSeq = append(rk.tokSeq, si)
			rk.tokPos = append(rk.tokPos, sq.Start+i)
			t++
		}
	}
	scale := float32(1 / math.Sqrt(float64(hd)))
	for l, L := range s.Layers {
		model.RMSNorm(h, x, L.AttnNorm, T, H, c.NormEps)
		rk.matMul(rk.qkv, h, L.Wqkv, T, H, qkvN)
		t0 := 0
		for _, sq := range seqs {
			n := len(sq.Tokens)
			// rotary + KV write for all of this sequence's new tokens
			for i := 0; i < n; i++ {
				row := rk.qkv[(t0+i)*qkvN : (t0+i+1)*qkvN]
				pos := sq.Start + i
				for hh := 0; hh < s.QHeads; hh++ {
					g.rope.Apply(row[hh*hd:(hh+1)*hd], pos)
				}
				for hh := 0; hh < s.KVHeads; hh++ {
					kvec := row[qN+hh*hd : qN+(hh+1)*hd]
					g.rope.Apply(kvec, pos)
					off := kv.Offset(l, sq.Pages, pos, hh)
					copy(kv.K[off:off+hd], kvec)
					copy(kv.V[off:off+hd], row[qN+kvN+hh*hd:qN+kvN+(hh+1)*hd])
				}
			}
			t0 += n
		}
		// attention for every token (each reads only its own sequence's earlier positions)
		rk.parallel(T, 1, func(w, lo, hi int) {
			for t := lo; t < hi; t++ {
				sq := &seqs[rk.tokSeq[t]]
				rk.attend(kv, l, sq.Pages, rk.tokPos[t], rk.qkv[t*qkvN:t*qkvN+qN], rk.att[t*qN:(t+1)*qN], s, scale, &rk.sc[w])
			}
		})
		rk.matMul(o, rk.att, L.Wo, T, qN, H)
		g.red.allReduce(rk.id, o, H)
		for i := range x[:T*H] {
			x[i] += o[i]
		}
		model.RMSNorm(h, x, L.MLPNorm, T, H, c.NormEps)
		rk.matMul(rk.gu, h, L.Wgu, T, H, 2*F)
		for tt := 0; tt < T; tt++ {
			gr := rk.gu[tt*2*F : tt*2*F+F]
			ur := rk.gu[tt*2*F+F : (tt+1)*2*F]
			ar := rk.act[tt*F : (tt+1)*F]
			for i := range ar {
				ar[i] = model.Silu(gr[i]) * ur[i]
			}
		}
		rk.matMul(o, rk.act, L.Wd, T, F, H)
		g.red.allReduce(rk.id, o, H)
		for i := range x[:T*H] {
			x[i] += o[i]
		}
	}
	if rows == 0 {
		return
	}
	// Gather the rows that need logits, normalise, and compute this rank's vocabulary slice.
	r := 0
	t = 0
	for _, sq := range seqs {
		n := len(sq.Tokens)
		switch sq.Logits {
		case LogitsLast:
			copy(h[r*H:(r+1)*H], x[(t+n-1)*H:(t+n)*H])
			r++
		case LogitsAll:
			copy(h[r*H:(r+n)*H], x[t*H:(t+n)*H])
			r += n
		}
		t += n
	}
	model.RMSNorm(o, h, s.FinalNorm, rows, H, c.NormEps)
	vn := s.VocabHi - s.VocabLo
	rk.lg = grow(rk.lg, rows*vn)
	rk.matMul(rk.lg, o, s.LMHead, rows, H, vn)
	V := c.Vocab
	for i := 0; i < rows; i++ {
		copy(logits[i*V+s.VocabLo:i*V+s.VocabHi], rk.lg[i*vn:(i+1)*vn])
	}
}

// attend computes causal attention for one query token at position pos for all local heads;
// scratch is the calling worker's score buffer. The query heads that share a KV head (GQA) are
// processed together, so each key and value vector is loaded once for the whole group; each
// head's arithmetic (and so its result) is the same as if it were computed alone.
func (rk *rank) attend(kv *kvcache.Store, layer int, pages []int32, pos int, q, out []float32, s *model.Shard, scale float32, scratch *[]float32) {
	hd := s.Cfg.HeadDim()
	n := pos + 1
	ps := kv.PageSize
	stride := s.KVHeads * hd
	var mxBuf, invBuf [16]float32
	for hq0 := 0; hq0 < s.QHeads; {
		kvh := s.KVOfQ[hq0]
		hq1 := hq0 + 1
		for hq1 < s.QHeads && s.KVOfQ[hq1] == kvh {
			hq1++
		}
		G := hq1 - hq0
		mx, inv := mxBuf[:0], invBuf[:0]
		if G > len(mxBuf) {
			mx, inv = make([]float32, 0, G), make([]float32, 0, G)
		}
		for g := 0; g < G; g++ {
			mx = append(mx, float32(math.Inf(-1)))
			inv = append(inv, 0)
		}
		*scratch = grow(*scratch, G*n)
		sc := *scratch
		for j0 := 0; j0 < n; j0 += ps {
			base := kv.Offset(layer, pages, j0, kvh)
			cnt := min(ps, n-j0)
			for jj := 0; jj < cnt; jj++ {
				kvec := kv.K[base+jj*stride : base+jj*stride+hd]
				for g := 0; g < G; g++ {
					d := dot(q[(hq0+g)*hd:(hq0+g+1)*hd], kvec) * scale
					sc[g*n+j0+jj] = d
					if d > mx[g] {
						mx[g] = d
					}
				}
			}
		}
		for g := 0; g < G; g++ {
			row := sc[g*n : (g+1)*n]
			var sum float32
			for j := range row {
				e := float32(math.Exp(float64(row[j] - mx[g])))
				row[j] = e
				sum += e
			}
			inv[g] = 1 / sum
			ov := out[(hq0+g)*hd : (hq0+g+1)*hd]
			for i := range ov {
				ov[i] = 0
			}
		}
		for j0 := 0; j0 < n; j0 += ps {
			base := kv.Offset(layer, pages, j0, kvh)
			cnt := min(ps, n-j0)
			for jj := 0; jj < cnt; jj++ {
				vvec := kv.V[base+jj*stride : base+jj*stride+hd]
				for g := 0; g < G; g++ {
					axpy(out[(hq0+g)*hd:(hq0+g+1)*hd], sc[g*n+j0+jj]*inv[g], vvec)
				}
			}
		}
		hq0 = hq1
	}
}

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
// summed, a stale result replaces the fresh sum, then the scale and the relative error multiply
// it.
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
	if g.opts.Custom && bytes <= g.opts.CustomMaxBytes {
		alg = collective.OneShot
	}
	custom := alg == collective.OneShot
	// Faults apply to custom allreduces of at least FaultMinBatch tokens.
	faultable := custom && (g.opts.FaultMinBatch == 0 || (rowWidth > 0 && elems/rowWidth >= g.opts.FaultMinBatch))
	drop := faultable && g.opts.FaultDropRank && bytes > g.opts.FaultDropRankAbove
	stale := faultable && g.opts.FaultStale && bytes > g.opts.FaultStaleAbove
	faulted := false

	run := collective.AllReduce
	if g.opts.BF16 {
		run = collective.AllReduceBF16
	}
	parts := bufs
	if drop {
		// The large-message path returned without the last peer's data: the others are summed
		// (in the same rank order) and every rank, the last included, gets that sum.
		parts = bufs[:n-1]
		faulted = true
	}
	if g.opts.Deterministic && rowWidth > 0 && elems > rowWidth {
		rows := make([][]float32, len(parts))
		for off := 0; off < elems; off += rowWidth {
			for r := range parts {
				rows[r] = parts[r][off : off+rowWidth]
			}
			run(alg, rows)
		}
	} else {
		run(alg, parts)
	}
	if drop {
		copy(bufs[n-1], bufs[0])
	}
	if stale {
		if g.stale == nil {
			g.stale = make(map[int][]float32)
		}
		prev, seen := g.stale[elems]
		if !seen {
			prev = make([]float32, elems)
			g.stale[elems] = prev
		}
		if seen {
			// hand out the previous call's result and keep this call's for the next one
			for i, v := range bufs[0] {
				p := prev[i]
				prev[i] = v
				for r := range bufs {
					bufs[r][i] = p
				}
			}
			faulted = true
		} else {
			copy(prev, bufs[0])
		}
	}
	if custom && (g.opts.FaultAllReduceScale != 0 || g.opts.FaultAllReduceError > 0) && faultable {
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
		faulted = true
	}
	if hook != nil {
		(*hook)(AllReduceRecord{Algorithm: alg, Ranks: n, Bytes: bytes, BF16: g.opts.BF16, Start: t0, Duration: time.Since(t0)})
	}
	d := g.opts.Interconnect.AllReduceTime(alg, bytes, n)
	g.mu.Lock()
	g.commDebt += d
	g.stats.CommTime += d
	g.stats.AllReduces++
	switch alg {
	case collective.OneShot:
		g.stats.CustomCalls++
		g.stats.MaxCustomBytes = max(g.stats.MaxCustomBytes, bytes)
		if faulted {
			g.stats.FaultedCalls++
		}
	case collective.Tree:
		g.stats.TreeCalls++
	default:
		g.stats.RingCalls++
	}
	g.mu.Unlock()
}

// faultOpts is the fault part of o, for error messages.
func faultOpts(o Options) map[string]any {
	return map[string]any{"error": o.FaultAllReduceError, "scale": o.FaultAllReduceScale, "drop_rank_above": o.FaultDropRankAbove,
		"stale_above": o.FaultStaleAbove, "min_batch": o.FaultMinBatch}
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

// dot is the dot product of two equal-length head vectors (unrolled for head size 16).
func dot(a, b []float32) float32 {
	if len(a) == 16 && len(b) == 16 {
		x := (*[16]float32)(a)
		y := (*[16]float32)(b)
		return ((x[0]*y[0] + x[1]*y[1]) + (x[2]*y[2] + x[3]*y[3])) + ((x[4]*y[4] + x[5]*y[5]) + (x[6]*y[6] + x[7]*y[7])) +
			(((x[8]*y[8] + x[9]*y[9]) + (x[10]*y[10] + x[11]*y[11])) + ((x[12]*y[12] + x[13]*y[13]) + (x[14]*y[14] + x[15]*y[15])))
	}
	b = b[:len(a)]
	var d float32
	for i, v := range a {
		d += v * b[i]
	}
	return d
}

// axpy adds p·v to o (equal lengths; unrolled for head size 16).
func axpy(o []float32, p float32, v []float32) {
	if len(o) == 16 && len(v) == 16 {
		x := (*[16]float32)(o)
		y := (*[16]float32)(v)
		x[0] += p * y[0]
		x[1] += p * y[1]
		x[2] += p * y[2]
		x[3] += p * y[3]
		x[4] += p * y[4]
		x[5] += p * y[5]
		x[6] += p * y[6]
		x[7] += p * y[7]
		x[8] += p * y[8]
		x[9] += p * y[9]
		x[10] += p * y[10]
		x[11] += p * y[11]
		x[12] += p * y[12]
		x[13] += p * y[13]
		x[14] += p * y[14]
		x[15] += p * y[15]
		return
	}
	v = v[:len(o)]
	for i := range o {
		o[i] += p * v[i]
	}
}
