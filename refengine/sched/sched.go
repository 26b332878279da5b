package sched

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/reckon-ci/reckon/refengine/device"
	"github.com/reckon-ci/reckon/refengine/kvcache"
	"github.com/reckon-ci/reckon/refengine/tp"
)

// ErrClosed is returned by Submit once the scheduler has been closed (shutdown).
var ErrClosed = errors.New("the server is shutting down")

// Config configures a Scheduler.
type Config struct {
	MaxRunning      int // --max-running-requests
	ChunkedPrefill  int // tokens per prefill step
	ContextLen      int
	DecodeLogEvery  int // decode steps between "Decode batch" lines (0 = never)
	CUDAGraphMaxBS  int // batch sizes up to this run "in a graph" (reported only)
	DisableGraph    bool
	RandomSeed      int64
	Slowdown        float64 // --fault-slowdown: each step takes this many times longer (>=1)
	LeakBytesPerReq int64   // --fault-leak-mb-per-request, in bytes: KV pages lost per finished request
	KVBytesPerToken int64   // to convert leaked bytes into pages
	Spec            *SpecConfig
	Logf            func(format string, args ...any) // rank-0 log line printer
	// Device, when set, is the modelled device clock (--clock modelled): every step lasts the
	// longer of its real compute and the modelled time of its forwards on the modelled device
	// (Timer), paced by Pacer; the slowdown fault is then the Pacer's. Nil: the wall clock (each
	// step takes its real compute plus the modelled communication of the real allreduces, and the
	// slowdown fault stretches the compute).
	Device *DeviceClock
	// OnStep, when set, is called after every forward step (prefill or decode batch) on the
	// scheduler's goroutine (a profiler's num_steps counts these).
	OnStep func()
}

// DeviceClock is the modelled device clock of a scheduler.
type DeviceClock struct {
	Timer device.Timer
	Pacer *device.Pacer
	// OverrunLogEvery is the least wall time between two log lines about steps whose CPU
	// compute overran the modelled time (0: 10 s).
	OverrunLogEvery time.Duration
}

// SpecConfig configures speculative decoding (topk 1: a chain of draft tokens).
type SpecConfig struct {
	Algorithm      string
	NumSteps       int
	TopK           int
	NumDraftTokens int
}

// Scheduler batches requests over a tp.Group.
type Scheduler struct {
	cfg   Config
	group *tp.Group
	alloc *kvcache.Allocator

	mu       sync.Mutex
	cond     *sync.Cond
	waiting  []*seq
	closed   bool
	running  []*seq
	reserved int // pages reserved by admitted requests
	leaked   int // pages lost to the leak fault
	reqCount uint64
	// busySinceCheck: a step ran since the last idle self-check.
	busySinceCheck bool

	// statistics (guarded by mu)
	st Stats

	// decode-log window
	winStart  time.Time
	winTokens int
	winAccept [2]int // committed tokens, verify steps
	decSteps  int
	debt      time.Duration

	// modelled clock: the cost of the current step's forwards, the overruns already logged
	cost          device.StepCost
	loggedOverrun int64
	// readyAt is when the request that ended the last idle wait was queued (under mu).
	readyAt       time.Time
	lastOverrunAt time.Time
}

// Stats is a snapshot of the scheduler's counters.
type Stats struct {
	Running, Queued       int
	UsedTokens            int // token slots in use by running requests
	CapacityTokens        int
	LeakedTokens          int
	GenerationTokensTotal int64
	PromptTokensTotal     int64
	RequestsTotal         int64
	LastGenThroughput     float64
	SpecAccepted          int64 // committed tokens in verify steps
	SpecVerifies          int64 // verify steps (per sequence)
	// SpecDraftTokens counts the draft tokens proposed to verify steps, SpecDraftAccepted those
	// the target accepted, SpecAcceptedPerPos[i] the verify steps whose draft position i was
	// accepted (vLLM's spec-decode counters).
	SpecDraftTokens    int64
	SpecDraftAccepted  int64
	SpecAcceptedPerPos []int64
	DecodeSteps        int64
	PrefillSteps       int64
	// CommTime is the modelled communication time added to steps; FaultDelay the extra time the
	// slowdown fault added.
	CommTime   time.Duration
	FaultDelay time.Duration
	// DeviceCompute is the modelled device compute time of the steps (modelled clock only), and
	// Device the device clock's counters (steps, CPU overruns, modelled and real time).
	DeviceCompute time.Duration
	Device        device.PacerStats
}

// TokenUsage is the fraction of the KV pool in use.
func (s Stats) TokenUsage() float64 {
	if s.CapacityTokens == 0 {
		return 0
	}
	return float64(s.UsedTokens+s.LeakedTokens) / float64(s.CapacityTokens)
}

// AvgAcceptLength is the mean number of tokens committed per verify step (0 without speculation).
func (s Stats) AvgAcceptLength() float64 {
	if s.SpecVerifies == 0 {
		return 0
	}
	return float64(s.SpecAccepted) / float64(s.SpecVerifies)
}

type seq struct {
	req       *Request
	tokens    []int // prompt + generated
	promptLen int
	kvLen     int // positions present in the target KV
	draftLen  int // positions present in the draft KV
	pages     []int32
	reserve   int // pages reserved
	generated int
	rng       *rand.Rand
	text      []byte
	promptLP  []Position
	verifies  int
	drafted   int // draft tokens proposed to this request's verify steps
	accepted  int // of which the target accepted
	done      bool
}

// New creates a scheduler over group with a KV pool managed by alloc.
func New(cfg Config, group *tp.Group, alloc *kvcache.Allocator) *Scheduler {
	if cfg.MaxRunning <= 0 {
		cfg.MaxRunning = 256
	}
	if cfg.ChunkedPrefill <= 0 {
		cfg.ChunkedPrefill = 2048
	}
	if cfg.Slowdown < 1 {
		cfg.Slowdown = 1
	}
	if cfg.Logf == nil {
		cfg.Logf = func(string, ...any) {}
	}
	if cfg.Spec != nil {
		k := cfg.Spec.NumSteps
		if cfg.Spec.NumDraftTokens > 1 && cfg.Spec.NumDraftTokens-1 < k {
			k = cfg.Spec.NumDraftTokens - 1
		}
		if k < 1 {
			k = 1
		}
		cfg.Spec.NumSteps = k
	}
	s := &Scheduler{cfg: cfg, group: group, alloc: alloc}
	s.cond = sync.NewCond(&s.mu)
	s.st.CapacityTokens = alloc.CapacityTokens()
	return s
}

// Limit is the longest prompt+output a request may have: the context length or the KV pool,
// whichever is smaller (less the speculative lookahead).
func (s *Scheduler) Limit() int {
	lim := s.alloc.CapacityTokens() - s.lookahead()
	if s.cfg.ContextLen > 0 && s.cfg.ContextLen < lim {
		lim = s.cfg.ContextLen
	}
	return lim
}

func (s *Scheduler) lookahead() int {
	if s.cfg.Spec == nil {
		return 0
	}
	return s.cfg.Spec.NumSteps + 1
}

// Submit validates and queues a request. A prompt that can never fit is rejected at once with an
// *InputTooLongError; MaxNew is clamped so that prompt+output fits.
func (s *Scheduler) Submit(r *Request) error {
	if len(r.Prompt) == 0 {
		return errors.New("the prompt is empty")
	}
	for i, t := range r.Prompt {
		if t < 0 || t >= s.group.Shard(tp.Target, 0).Cfg.Vocab {
			return fmt.Errorf("prompt token %d (index %d) is out of range [0, %d)", t, i, s.group.Shard(tp.Target, 0).Cfg.Vocab)
		}
	}
	lim := s.Limit()
	if len(r.Prompt) >= lim {
		return &InputTooLongError{Tokens: len(r.Prompt), Limit: lim - 1}
	}
	if r.MaxNew < 0 {
		return fmt.Errorf("max_tokens must be non-negative, got %d", r.MaxNew)
	}
	if len(r.Prompt)+r.MaxNew > lim {
		r.MaxNew = lim - len(r.Prompt)
	}
	if r.Ctx == nil {
		r.Ctx = context.Background()
	}
	r.out = make(chan Event, r.MaxNew+3)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	s.reqCount++
	seed := uint64(s.cfg.RandomSeed)*0x9e3779b97f4a7c15 + s.reqCount
	if r.Seed != nil {
		seed = uint64(*r.Seed)
	}
	sq := &seq{req: r, tokens: append([]int(nil), r.Prompt...), promptLen: len(r.Prompt),
		rng: rand.New(rand.NewPCG(seed, 0x5eed))}
	sq.reserve = s.alloc.PagesFor(len(r.Prompt) + r.MaxNew + s.lookahead())
	if len(s.waiting) == 0 && len(s.running) == 0 {
		s.readyAt = time.Now() // the request that ends an idle wait (device clock: the step starts here)
	}
	s.waiting = append(s.waiting, sq)
	s.st.RequestsTotal++
	s.cond.Broadcast()
	return nil
}

// Stats returns a snapshot of the counters.
func (s *Scheduler) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.st
	st.SpecAcceptedPerPos = append([]int64(nil), s.st.SpecAcceptedPerPos...)
	st.Running = len(s.running)
	st.Queued = len(s.waiting)
	st.LeakedTokens = s.leaked * s.alloc.PageSize()
	if s.cfg.Device != nil {
		st.Device = s.cfg.Device.Pacer.Stats()
	}
	return st
}

// Close aborts every request and makes Run return.
func (s *Scheduler) Close() {
	s.mu.Lock()
	s.closed = true
	s.cond.Broadcast()
	s.mu.Unlock()
}

// Run executes steps until ctx is done or Close is called; then it aborts what is left.
func (s *Scheduler) Run(ctx context.Context) error {
	stop := context.AfterFunc(ctx, s.Close)
	defer stop()
	s.winStart = time.Now()
	for {
		s.mu.Lock()
		idle := false
		for !s.closed && len(s.waiting) == 0 && len(s.running) == 0 {
			if !idle {
				s.idleCheckLocked()
			}
			idle = true
			s.cond.Wait()
		}
		if idle { // the decode-log window measures busy time only
			s.winStart = time.Now()
			s.winTokens = 0
		}
		if s.closed {
			all := append(s.running, s.waiting...)
			s.running, s.waiting = nil, nil
			s.mu.Unlock()
			for _, q := range all {
				s.finish(q, "abort", nil)
			}
			return nil
		}
		s.admit()
		s.busySinceCheck = true
		ready := s.readyAt
		s.mu.Unlock()
		if err := s.step(ctx, !idle, ready); err != nil {
			return err
		}
		if s.cfg.OnStep != nil {
			s.cfg.OnStep()
		}
	}
}

// idleCheckLocked is SGLang's idle self-check: with no request in the system every KV slot must
// be free, else the pool leaks. It reports (once per idle period) and keeps serving.
func (s *Scheduler) idleCheckLocked() {
	avail := s.alloc.FreePages() * s.alloc.PageSize()
	if total := s.alloc.CapacityTokens(); avail != total && s.busySinceCheck {
		s.cfg.Logf("token_to_kv_pool_allocator memory leak detected! available_size=%d, protected_size=0, self.max_total_num_tokens=%d", avail, total)
	}
	s.busySinceCheck = false
}

// admit moves waiting requests into the running set while the running limit and the KV pool
// allow (pages are reserved for the whole request up front, so a running request never runs out).
// Called with mu held.
func (s *Scheduler) admit() {
	kept := s.waiting[:0]
	for i, q := range s.waiting {
		if q.req.Ctx.Err() != nil {
			s.finish(q, "abort", nil)
			continue
		}
		avail := s.alloc.TotalPages() - s.leaked - s.reserved
		if len(s.running) >= s.cfg.MaxRunning || q.reserve > avail {
			kept = append(kept, s.waiting[i:]...)
			break
		}
		s.reserved += q.reserve
		s.running = append(s.running, q)
	}
	for i := len(kept); i < len(s.waiting); i++ {
		s.waiting[i] = nil
	}
	s.waiting = kept
}
