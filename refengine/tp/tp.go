// Package tp runs the reference engine's model tensor-parallel: one goroutine per rank, each
// holding only its shard of the weights and its own KV store, meeting twice per layer in an
// allreduce (collective.AllReduce) that sums their partial outputs. It also keeps the modelled
// communication time of those allreduces (interconnect.Model), which the scheduler adds to its
// steps.
package tp

import (
	"fmt"
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
	// Fused runs the allreduces of at most FusedMaxBytes bytes as FlashInfer's allreduce fusion
	// (a one-shot Lamport allreduce: every rank sums the ranks' inputs in rank order, as the
	// custom one-shot path does), before the custom path is considered; the engine turned it on
	// (SGLang's auto-enable for some MoE models on SM90/SM100). Faults never touch it.
	Fused         bool
	FusedMaxBytes int64
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
	// FaultAccumulateBF16 (bf16 only) makes the custom kernel add the ranks' bf16 inputs in bf16,
	// rounding after every addition, instead of upcasting them to a float32 accumulator: n-1
	// roundings per element instead of one.
	FaultAccumulateBF16 bool
	// FaultRankOrder makes every rank r of the custom kernel add the inputs in its own order (r,
	// r+1, ..., r-1) instead of the common order 0..n-1, so the ranks' results can differ in
	// the last bits and the ranks go on with different activations.
	FaultRankOrder bool
	// FaultMinBatch restricts every fault above to allreduces of at least this many tokens
	// (elements / row width; 0 = any size).
	FaultMinBatch int
	// Oracle, when set, makes the custom path a reference kernel: float32 accumulation in this
	// fixed rank order (collective.OrderForward or collective.OrderReverse), one rounding to the
	// dtype. It excludes every fault.
	Oracle *collective.SumOrder
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
	FusedCalls     int64         // of which ran as FlashInfer allreduce fusion (one-shot)
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
	// Fused: the call ran as FlashInfer allreduce fusion (Algorithm is then collective.OneShot).
	Fused    bool
	Ranks    int
	Bytes    int64 // message size per rank
	BF16     bool
	Start    time.Time     // when the call began
	Duration time.Duration // measured wall time of the call
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
	if opts.FaultAccumulateBF16 && !opts.BF16 {
		return nil, fmt.Errorf("tp: a bf16 accumulation fault needs bf16 data (float32 data accumulates in float32)")
	}
	if opts.Oracle != nil {
		if *opts.Oracle != collective.OrderForward && *opts.Oracle != collective.OrderReverse {
			return nil, fmt.Errorf("tp: oracle order %d: expected forward or reverse", *opts.Oracle)
		}
		if hasAllReduceFault(opts) {
			return nil, fmt.Errorf("tp: an oracle allreduce takes no faults (fault options %+v)", faultOpts(opts))
		}
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
