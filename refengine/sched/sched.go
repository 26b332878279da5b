package sched

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/reckon-ci/reckon/refengine/device"
	"github.com/reckon-ci/reckon/refengine/kvcache"
	"github.com/reckon-ci/reckon/refengine/model"
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
		s.mu.Unlock()
		if err := s.step(ctx, !idle); err != nil {
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

// step runs one prefill or decode batch. contiguous says it follows the previous step without an
// idle wait (the device clock then starts it at the previous step's modelled end).
func (s *Scheduler) step(ctx context.Context, contiguous bool) error {
	start := time.Now()
	var dstep device.Step
	if s.cfg.Device != nil {
		dstep = s.cfg.Device.Pacer.Begin(contiguous)
		s.cost = device.StepCost{}
	}
	// drop cancelled requests
	live := s.running[:0]
	for _, q := range s.running {
		if q.req.Ctx.Err() != nil {
			s.release(q)
			s.finish(q, "abort", nil)
			continue
		}
		live = append(live, q)
	}
	s.mu.Lock()
	s.running = live
	s.mu.Unlock()
	if len(live) == 0 {
		return nil
	}
	var err error
	if s.needsPrefill() {
		err = s.prefill()
	} else {
		err = s.decode()
	}
	if err != nil {
		return err
	}
	if s.cfg.Device != nil {
		s.paceDevice(ctx, dstep)
	} else {
		s.pace(ctx, time.Since(start))
	}
	s.mu.Lock()
	kept := s.running[:0]
	for _, q := range s.running {
		if !q.done {
			kept = append(kept, q)
		}
	}
	s.running = kept
	used := 0
	for _, q := range kept {
		used += len(q.tokens)
	}
	s.st.UsedTokens = used
	s.mu.Unlock()
	return nil
}

// pace adds the modelled communication time and the slowdown fault to the step: it sleeps once
// the accumulated debt is worth a sleep, so the average step time is right.
func (s *Scheduler) pace(ctx context.Context, compute time.Duration) {
	comm := s.group.TakeCommTime()
	var extra time.Duration
	if s.cfg.Slowdown > 1 {
		extra = time.Duration(float64(compute) * (s.cfg.Slowdown - 1))
	}
	s.debt += comm + extra
	s.mu.Lock()
	s.st.CommTime += comm
	s.st.FaultDelay += extra
	s.mu.Unlock()
	if s.debt < 500*time.Microsecond {
		return
	}
	t0 := time.Now()
	tm := time.NewTimer(s.debt)
	select {
	case <-tm.C:
	case <-ctx.Done():
		tm.Stop()
	}
	s.debt -= time.Since(t0)
}

// paceDevice ends a step on the modelled device clock: the real allreduces' communication time
// (the real model's) is dropped, the modelled model's is in s.cost; the step lasts the longer of
// its real compute and its modelled time (slowdown and noise applied).
func (s *Scheduler) paceDevice(ctx context.Context, st device.Step) {
	s.group.TakeCommTime()
	dc := s.cfg.Device
	r := dc.Pacer.End(ctx, st, s.cost.Total())
	s.mu.Lock()
	s.st.CommTime += s.cost.Comm
	s.st.DeviceCompute += s.cost.Compute
	if s.cfg.Slowdown > 1 {
		s.st.FaultDelay += time.Duration(float64(s.cost.Total()) * (s.cfg.Slowdown - 1))
	}
	s.mu.Unlock()
	if !r.Overrun {
		return
	}
	every := dc.OverrunLogEvery
	if every <= 0 {
		every = 10 * time.Second
	}
	ps := dc.Pacer.Stats()
	if now := time.Now(); ps.Overruns > s.loggedOverrun && (s.loggedOverrun == 0 || now.Sub(s.lastOverrunAt) >= every) {
		s.cfg.Logf("Device clock: CPU compute overran the modelled step time in %d of %d steps (this step: real %.2f ms, modelled %.2f ms); throughput now depends on this machine's load",
			ps.Overruns, ps.Steps, float64(r.Real)/1e6, float64(r.Target)/1e6)
		s.loggedOverrun = ps.Overruns
		s.lastOverrunAt = now
	}
}

// forward runs model m over batch on the group and, on the modelled clock, adds the modelled
// model's cost of the same work to the step.
func (s *Scheduler) forward(m tp.ModelID, batch []tp.SeqInput) ([][]float32, error) {
	out, err := s.group.Forward(m, batch)
	if err != nil || s.cfg.Device == nil {
		return out, err
	}
	s.cost = s.cost.Add(s.cfg.Device.Timer.Forward(WorkOf(m, batch)))
	return out, nil
}

// WorkOf describes a forward of model m over batch for the device clock.
func WorkOf(m tp.ModelID, batch []tp.SeqInput) device.Work {
	w := device.Work{Draft: m == tp.Draft}
	for _, b := range batch {
		n := len(b.Tokens)
		ctx := int64(b.Start + n)
		w.Tokens += n
		w.ContextTokens += ctx
		w.AttnPairs += int64(n) * ctx
		switch b.Logits {
		case tp.LogitsLast:
			w.LogitRows++
		case tp.LogitsAll:
			w.LogitRows += n
		}
	}
	return w
}

func (s *Scheduler) needsPrefill() bool {
	for _, q := range s.running {
		if q.kvLen < q.promptLen {
			return true
		}
	}
	return false
}

func (s *Scheduler) grow(q *seq, n int) error {
	p, err := s.alloc.Grow(q.pages, n)
	if err != nil {
		return fmt.Errorf("request %s: %w", q.req.ID, err)
	}
	q.pages = p
	return nil
}

func (s *Scheduler) release(q *seq) {
	s.alloc.Release(q.pages)
	q.pages = nil
	s.mu.Lock()
	s.reserved -= q.reserve
	// Keep the published usage in step with the pool: a request's last token reaches its client
	// before the step ends and recomputes the counters.
	s.st.UsedTokens = max(0, s.st.UsedTokens-len(q.tokens))
	s.mu.Unlock()
	q.reserve = 0
}

func (s *Scheduler) prefill() error {
	budget := s.cfg.ChunkedPrefill
	var batch []tp.SeqInput
	var members []*seq
	newSeqs, newTokens := 0, 0
	for _, q := range s.running {
		if q.kvLen >= q.promptLen || budget == 0 {
			continue
		}
		n := min(q.promptLen-q.kvLen, budget)
		budget -= n
		if err := s.grow(q, q.kvLen+n+s.lookahead()); err != nil {
			return err
		}
		mode := tp.LogitsNone
		if q.req.PromptLogprobs {
			mode = tp.LogitsAll
		} else if q.kvLen+n == q.promptLen {
			mode = tp.LogitsLast
		}
		if q.kvLen == 0 {
			newSeqs++
		}
		newTokens += n
		batch = append(batch, tp.SeqInput{Tokens: q.tokens[q.kvLen : q.kvLen+n], Start: q.kvLen, Pages: q.pages, Logits: mode})
		members = append(members, q)
	}
	logits, err := s.forward(tp.Target, batch)
	if err != nil {
		return err
	}
	if s.cfg.Spec != nil {
		db := make([]tp.SeqInput, len(batch))
		for i, b := range batch {
			b.Logits = tp.LogitsNone
			db[i] = b
		}
		if _, err := s.forward(tp.Draft, db); err != nil {
			return err
		}
	}
	row := 0
	for i, q := range members {
		b := batch[i]
		n := len(b.Tokens)
		var last []float32
		switch b.Logits {
		case tp.LogitsAll:
			for j := 0; j < n; j++ {
				pos := b.Start + j
				if pos+1 < q.promptLen {
					lp := logprobsOf(logits[row+j], q.tokens[pos+1], q.req.TopLogprobs)
					q.promptLP = append(q.promptLP, lp)
				}
			}
			last = logits[row+n-1]
			row += n
		case tp.LogitsLast:
			last = logits[row]
			row++
		}
		q.kvLen += n
		q.draftLen = q.kvLen
		if q.kvLen == q.promptLen {
			if q.req.PromptLogprobs {
				q.req.out <- Event{Prompt: q.promptLP}
			}
			if q.req.MaxNew == 0 {
				s.complete(q, "length")
				continue
			}
			tok := s.sample(q, last)
			s.commit(q, tok, last)
		}
	}
	s.mu.Lock()
	s.st.PrefillSteps++
	s.st.PromptTokensTotal += int64(newTokens)
	usage := float64(s.usedTokensLocked()) / float64(max(1, s.alloc.CapacityTokens()))
	running, queued := len(s.running), len(s.waiting)
	s.mu.Unlock()
	s.cfg.Logf("Prefill batch, #new-seq: %d, #new-token: %d, #cached-token: 0, token usage: %.2f, #running-req: %d, #queue-req: %d, ",
		newSeqs, newTokens, usage, running-newSeqs, queued)
	return nil
}

func (s *Scheduler) usedTokensLocked() int {
	n := s.leaked * s.alloc.PageSize()
	for _, q := range s.running {
		n += len(q.tokens)
	}
	return n
}

// decode runs one decode step (or one draft+verify round) for every running request.
func (s *Scheduler) decode() error {
	var members []*seq
	for _, q := range s.running {
		if !q.done {
			members = append(members, q)
		}
	}
	if len(members) == 0 {
		return nil
	}
	committed := 0
	plain := members
	if s.cfg.Spec != nil {
		var spec []*seq
		plain = nil
		for _, q := range members {
			if q.req.NoSpec {
				plain = append(plain, q)
			} else {
				spec = append(spec, q)
			}
		}
		if len(spec) > 0 {
			c, err := s.specDecode(spec)
			if err != nil {
				return err
			}
			committed = c
		}
	}
	if len(plain) > 0 {
		members := plain
		batch := make([]tp.SeqInput, len(members))
		for i, q := range members {
			if err := s.grow(q, len(q.tokens)); err != nil {
				return err
			}
			batch[i] = tp.SeqInput{Tokens: q.tokens[q.kvLen:], Start: q.kvLen, Pages: q.pages, Logits: tp.LogitsLast}
		}
		logits, err := s.forward(tp.Target, batch)
		if err != nil {
			return err
		}
		for i, q := range members {
			q.kvLen = len(q.tokens)
			tok := s.sample(q, logits[i])
			s.commit(q, tok, logits[i])
			committed++
		}
	}
	s.winTokens += committed
	s.decSteps++
	s.mu.Lock()
	s.st.DecodeSteps++
	s.mu.Unlock()
	if s.cfg.DecodeLogEvery > 0 && s.decSteps%s.cfg.DecodeLogEvery == 0 {
		s.logDecode(len(members))
	}
	return nil
}

func (s *Scheduler) logDecode(bs int) {
	el := time.Since(s.winStart).Seconds()
	thr := 0.0
	if el > 0 {
		thr = float64(s.winTokens) / el
	}
	s.mu.Lock()
	s.st.LastGenThroughput = thr
	used := s.usedTokensLocked()
	queued := len(s.waiting)
	running := len(s.running)
	s.mu.Unlock()
	capTok := max(1, s.alloc.CapacityTokens())
	accept := ""
	if s.cfg.Spec != nil {
		al := 0.0
		if s.winAccept[1] > 0 {
			al = float64(s.winAccept[0]) / float64(s.winAccept[1])
		}
		accept = fmt.Sprintf("accept len: %.2f, ", al)
	}
	graph := "True"
	if s.cfg.DisableGraph || bs > s.cfg.CUDAGraphMaxBS {
		graph = "False"
	}
	s.cfg.Logf("Decode batch, #running-req: %d, #token: %d, token usage: %.2f, %scuda graph: %s, gen throughput (token/s): %.2f, #queue-req: %d, ",
		running, used, float64(used)/float64(capTok), accept, graph, thr, queued)
	s.winStart = time.Now()
	s.winTokens = 0
	s.winAccept = [2]int{}
}

// specDecode runs one draft-then-verify round for members and returns the tokens committed.
func (s *Scheduler) specDecode(members []*seq) (int, error) {
	k := s.cfg.Spec.NumSteps
	drafts := make([][]int, len(members))
	if s.cfg.Device != nil {
		s.cost = s.cost.Add(s.cfg.Device.Timer.SpecRound())
	}
	for _, q := range members {
		if err := s.grow(q, len(q.tokens)+k); err != nil {
			return 0, err
		}
	}
	// Draft: catch up on committed tokens not yet in the draft KV, then extend greedily.
	for step := 0; step < k; step++ {
		batch := make([]tp.SeqInput, len(members))
		for i, q := range members {
			if step == 0 {
				batch[i] = tp.SeqInput{Tokens: q.tokens[q.draftLen:], Start: q.draftLen, Pages: q.pages}
			} else {
				batch[i] = tp.SeqInput{Tokens: drafts[i][step-1 : step], Start: len(q.tokens) + step - 1, Pages: q.pages}
			}
		}
		logits, err := s.forward(tp.Draft, batch)
		if err != nil {
			return 0, err
		}
		for i := range members {
			drafts[i] = append(drafts[i], argmax(logits[i]))
		}
	}
	// Verify: the target scores the last committed token(s) and all draft tokens in one pass.
	batch := make([]tp.SeqInput, len(members))
	for i, q := range members {
		in := append(append([]int(nil), q.tokens[q.kvLen:]...), drafts[i]...)
		batch[i] = tp.SeqInput{Tokens: in, Start: q.kvLen, Pages: q.pages, Logits: tp.LogitsAll}
	}
	logits, err := s.forward(tp.Target, batch)
	if err != nil {
		return 0, err
	}
	committed := 0
	row := 0
	for i, q := range members {
		n := len(batch[i].Tokens)
		rows := logits[row+n-(k+1) : row+n]
		row += n
		L := len(q.tokens)
		accepted, matched := 0, 0
		for j := 0; j <= k && !q.done; j++ {
			tok := s.sample(q, rows[j])
			s.commit(q, tok, rows[j])
			accepted++
			if j == k || tok != drafts[i][j] {
				break
			}
			matched++ // draft token j was the target's own choice
		}
		// target KV holds the committed tokens except the newest; the draft KV holds the
		// positions it processed whose tokens were accepted.
		q.kvLen = len(q.tokens) - 1
		q.draftLen = min(L+accepted-1, L+k-1)
		if q.draftLen > len(q.tokens)-1 {
			q.draftLen = len(q.tokens) - 1
		}
		q.verifies++
		q.drafted += k
		q.accepted += matched
		committed += accepted
		s.winAccept[0] += accepted
		s.winAccept[1]++
		s.mu.Lock()
		s.st.SpecAccepted += int64(accepted)
		s.st.SpecVerifies++
		s.st.SpecDraftTokens += int64(k)
		s.st.SpecDraftAccepted += int64(matched)
		if len(s.st.SpecAcceptedPerPos) < k {
			s.st.SpecAcceptedPerPos = append(s.st.SpecAcceptedPerPos, make([]int64, k-len(s.st.SpecAcceptedPerPos))...)
		}
		for j := 0; j < matched; j++ {
			s.st.SpecAcceptedPerPos[j]++
		}
		s.mu.Unlock()
	}
	return committed, nil
}

// sample picks the next token: argmax at temperature 0, else a draw (with top-p) from the
// request's own random stream.
func (s *Scheduler) sample(q *seq, logits []float32) int {
	t := q.req.Temperature
	if q.generated < q.req.MinNew && !q.req.IgnoreEOS {
		// suppress EOS before min_tokens
		l := append([]float32(nil), logits...)
		l[model.EOS] = float32(math.Inf(-1))
		logits = l
	}
	if t <= 0 {
		return argmax(logits)
	}
	mx := float64(logits[argmax(logits)])
	p := make([]float64, len(logits))
	var sum float64
	for i, v := range logits {
		p[i] = math.Exp((float64(v) - mx) / t)
		sum += p[i]
	}
	idx := make([]int, len(p))
	for i := range idx {
		idx[i] = i
	}
	if tp := q.req.TopP; tp > 0 && tp < 1 {
		sort.SliceStable(idx, func(a, b int) bool { return p[idx[a]] > p[idx[b]] })
		var c float64
		for n, i := range idx {
			c += p[i] / sum
			if c >= tp {
				idx = idx[:n+1]
				break
			}
		}
		sum = 0
		for _, i := range idx {
			sum += p[i]
		}
	}
	u := q.rng.Float64() * sum
	for _, i := range idx {
		u -= p[i]
		if u < 0 {
			return i
		}
	}
	return idx[len(idx)-1]
}

func argmax(x []float32) int {
	b := 0
	for i, v := range x {
		if v > x[b] {
			b = i
		}
	}
	return b
}

// logprobsOf is the log-softmax of logits at token, with the top-k alternatives.
func logprobsOf(logits []float32, token, topk int) Position {
	mx := float64(logits[argmax(logits)])
	var sum float64
	for _, v := range logits {
		sum += math.Exp(float64(v) - mx)
	}
	lse := mx + math.Log(sum)
	p := Position{Token: token, Logprob: float64(logits[token]) - lse, Rank: 1}
	for _, v := range logits {
		if v > logits[token] {
			p.Rank++
		}
	}
	if topk > 0 {
		idx := make([]int, len(logits))
		for i := range idx {
			idx[i] = i
		}
		sort.SliceStable(idx, func(a, b int) bool { return logits[idx[a]] > logits[idx[b]] })
		for _, i := range idx[:min(topk, len(idx))] {
			p.Top = append(p.Top, TokenLogprob{Token: i, Logprob: float64(logits[i]) - lse})
		}
	}
	return p
}

// commit appends a generated token, sends it, and finishes the request on EOS, a stop string or
// the length limit.
func (s *Scheduler) commit(q *seq, tok int, logits []float32) {
	q.tokens = append(q.tokens, tok)
	q.generated++
	ev := Event{Token: tok, Generated: true}
	if q.req.Logprobs {
		lp := logprobsOf(logits, tok, q.req.TopLogprobs)
		ev.Pos = &lp
	}
	q.req.out <- ev
	s.mu.Lock()
	s.st.GenerationTokensTotal++
	s.mu.Unlock()
	if tok == model.EOS && !q.req.IgnoreEOS {
		s.complete(q, "stop")
		return
	}
	if b := model.TokenBytes(tok); b > 0 {
		q.text = append(q.text, byte(tok))
		for _, st := range q.req.Stop {
			if st == "" {
				continue
			}
			from := max(0, len(q.text)-len(st)-1)
			if i := strings.Index(string(q.text[from:]), st); i >= 0 {
				s.completeStop(q, "stop", st, from+i)
				return
			}
		}
	}
	if q.generated >= q.req.MaxNew {
		s.complete(q, "length")
	}
}

func (s *Scheduler) complete(q *seq, reason string) { s.completeStop(q, reason, "", -1) }

// completeStop ends a running request: its pages go back to the pool (less what the leak fault
// keeps) and the final event is sent.
func (s *Scheduler) completeStop(q *seq, reason, stop string, at int) {
	if q.done {
		return
	}
	q.done = true
	if s.cfg.LeakBytesPerReq > 0 {
		s.leak(q)
	}
	s.release(q)
	s.send(q, Event{Done: true, FinishReason: reason, MatchedStop: stop, StopAt: at})
}

// leak keeps pages of a finished request out of the pool for good (--fault-leak-mb-per-request):
// first the request's own pages, then free pages that no admitted request has reserved.
func (s *Scheduler) leak(q *seq) {
	perPage := s.cfg.KVBytesPerToken * int64(s.alloc.PageSize())
	want := int((s.cfg.LeakBytesPerReq + perPage - 1) / perPage)
	n := min(want, len(q.pages))
	q.pages = q.pages[:len(q.pages)-n]
	s.mu.Lock()
	defer s.mu.Unlock()
	s.leaked += n
	if rest := want - n; rest > 0 {
		allocated := 0
		for _, r := range s.running {
			allocated += len(r.pages)
		}
		spare := s.alloc.FreePages() - (s.reserved - allocated)
		if k := min(rest, spare); k > 0 {
			if _, err := s.alloc.Grow(nil, k*s.alloc.PageSize()); err == nil {
				s.leaked += k
			}
		}
	}
}

// finish ends a request that is not (or no longer) holding KV pages, e.g. on abort.
func (s *Scheduler) finish(q *seq, reason string, err error) {
	if q.done {
		return
	}
	q.done = true
	s.send(q, Event{Done: true, FinishReason: reason, Err: err})
}

func (s *Scheduler) send(q *seq, ev Event) {
	ev.PromptTokens = q.promptLen
	ev.CompletionTokens = q.generated
	ev.SpecVerifies = q.verifies
	ev.SpecDraftTokens = q.drafted
	ev.SpecAcceptedDrafts = q.accepted
	q.req.out <- ev
	close(q.req.out)
}
