package sched

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"

	"github.com/reckon-ci/reckon/refengine/interconnect"
	"github.com/reckon-ci/reckon/refengine/kvcache"
	"github.com/reckon-ci/reckon/refengine/model"
	"github.com/reckon-ci/reckon/refengine/tp"
)

func weights(t *testing.T) *model.Weights {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	p := filepath.Join(filepath.Dir(file), "..", "..", "fixtures", "models", "tiny.json")
	if _, err := os.Stat(p); err != nil {
		t.Fatal(err)
	}
	c, err := model.LoadConfig(p)
	if err != nil {
		t.Fatal(err)
	}
	return model.Generate(c)
}

// newSched builds a scheduler over a tp-2 group with a pool of pages×16 tokens and runs it.
func newSched(t *testing.T, cfg Config, pages int, spec bool) *Scheduler {
	t.Helper()
	w := weights(t)
	var d *model.Weights
	if spec {
		d = w.Draft()
		cfg.Spec = &SpecConfig{Algorithm: "EAGLE3", NumSteps: 3, TopK: 1, NumDraftTokens: 4}
	}
	g, err := tp.NewGroup(w, d, tp.Options{TP: 2, Custom: true, CustomMaxBytes: 1 << 20, Interconnect: interconnect.Default(interconnect.NVLink)})
	if err != nil {
		t.Fatal(err)
	}
	g.AttachKV(tp.Target, pages, 16)
	if spec {
		g.AttachKV(tp.Draft, pages, 16)
	}
	s := New(cfg, g, kvcache.NewAllocator(pages, 16))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = s.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return s
}

type outcome struct {
	tokens []int
	reason string
}

func run(t *testing.T, s *Scheduler, r *Request) outcome {
	t.Helper()
	if err := s.Submit(r); err != nil {
		t.Fatalf("submit: %v", err)
	}
	var o outcome
	for ev := range r.Events() {
		if ev.Generated {
			o.tokens = append(o.tokens, ev.Token)
		}
		if ev.Done {
			o.reason = ev.FinishReason
		}
	}
	return o
}

func req(i, n int) *Request {
	return &Request{ID: fmt.Sprint(i), Prompt: model.Encode(fmt.Sprintf("request number %d says hello", i)), MaxNew: n, IgnoreEOS: true}
}

// TestAdmissionControl: with a pool that holds only a few requests at once, the rest wait in the
// queue and all complete; the running set never exceeds the pool or --max-running-requests.
func TestAdmissionControl(t *testing.T) {
	// each request: ~28 prompt + 40 output tokens = 5 pages; pool of 12 pages holds 2 at a time
	s := newSched(t, Config{MaxRunning: 3, ChunkedPrefill: 64}, 12, false)
	var wg sync.WaitGroup
	var mu sync.Mutex
	maxRunning, sawQueue := 0, false
	stop, sampled := make(chan struct{}), make(chan struct{})
	go func() { // sample the counters while the load runs
		defer close(sampled)
		for {
			select {
			case <-stop:
				return
			default:
			}
			st := s.Stats()
			mu.Lock()
			maxRunning = max(maxRunning, st.Running)
			sawQueue = sawQueue || st.Queued > 0
			mu.Unlock()
			runtime.Gosched()
		}
	}()
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			if o := run(t, s, req(i, 40)); len(o.tokens) != 40 || o.reason != "length" {
				t.Errorf("request %d: %d tokens, %s", i, len(o.tokens), o.reason)
			}
		}(i)
	}
	wg.Wait()
	close(stop)
	<-sampled
	if maxRunning > 2 || !sawQueue {
		t.Errorf("max running %d (pool fits 2), queue seen %v", maxRunning, sawQueue)
	}
	if st := s.Stats(); st.UsedTokens != 0 || s.alloc.FreePages() != 12 || s.reserved != 0 {
		t.Errorf("after the load: used %d, free pages %d of 12, reserved %d", st.UsedTokens, s.alloc.FreePages(), s.reserved)
	}
}

func TestMaxRunningRequests(t *testing.T) {
	s := newSched(t, Config{MaxRunning: 1}, 256, false)
	var wg sync.WaitGroup
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func(i int) { defer wg.Done(); run(t, s, req(i, 8)) }(i)
	}
	wg.Wait()
	if st := s.Stats(); st.RequestsTotal != 4 || st.GenerationTokensTotal != 32 {
		t.Errorf("stats %+v", st)
	}
}

func TestInputTooLong(t *testing.T) {
	s := newSched(t, Config{ContextLen: 100}, 256, false)
	err := s.Submit(&Request{Prompt: make([]int, 100), MaxNew: 1})
	var tl *InputTooLongError
	if !errors.As(err, &tl) || tl.Error() != "Input length (100 tokens) exceeds the maximum allowed length (99 tokens). Use a shorter input or enable --allow-auto-truncate." {
		t.Errorf("got %v", err)
	}
	// pool smaller than the context
	s2 := newSched(t, Config{ContextLen: 4096}, 4, false)
	if err := s2.Submit(&Request{Prompt: make([]int, 64), MaxNew: 1}); !errors.As(err, &tl) || tl.Limit != 63 {
		t.Errorf("pool of 64 tokens: got %v", err)
	}
	if err := s2.Submit(&Request{Prompt: []int{1, 2, 9999}}); err == nil {
		t.Error("out-of-vocabulary token accepted")
	}
}

// TestChunkedPrefill: a long prompt is prefilled in chunks and gives the same tokens as one pass.
func TestChunkedPrefill(t *testing.T) {
	p := model.Encode("a long prompt that will not fit in one prefill chunk of sixteen tokens, so it takes several")
	small := newSched(t, Config{ChunkedPrefill: 16}, 64, false)
	big := newSched(t, Config{ChunkedPrefill: 4096}, 64, false)
	a := run(t, small, &Request{Prompt: p, MaxNew: 10, IgnoreEOS: true})
	b := run(t, big, &Request{Prompt: p, MaxNew: 10, IgnoreEOS: true})
	if fmt.Sprint(a.tokens) != fmt.Sprint(b.tokens) {
		t.Errorf("chunked %v != single pass %v", a.tokens, b.tokens)
	}
	want := int64((len(p) + 15) / 16)
	if st := small.Stats(); st.PrefillSteps != want {
		t.Errorf("prefill steps %d, want %d", st.PrefillSteps, want)
	}
}

func TestCancel(t *testing.T) {
	s := newSched(t, Config{}, 256, false)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r := req(1, 3000)
	r.Prompt = r.Prompt[:10]
	r.Ctx = ctx
	if err := s.Submit(r); err != nil {
		t.Fatal(err)
	}
	n := 0
	var reason string
	for ev := range r.Events() {
		if ev.Generated {
			n++
			if n == 5 {
				cancel()
			}
		}
		if ev.Done {
			reason = ev.FinishReason
		}
	}
	if reason != "abort" || n >= 3000 {
		t.Errorf("cancelled request: %d tokens, finish %q", n, reason)
	}
}

// TestSpeculativeMatchesPlain checks lossless greedy verification at the scheduler level, with
// EOS and stop strings in play (not ignore_eos).
func TestSpeculativeMatchesPlain(t *testing.T) {
	plain := newSched(t, Config{}, 512, false)
	spec := newSched(t, Config{}, 512, true)
	for i := 0; i < 16; i++ {
		mk := func() *Request {
			return &Request{Prompt: model.Encode(fmt.Sprintf("prompt %d: the quick brown fox", i)), MaxNew: 48, Stop: []string{"zz"}}
		}
		a, b := run(t, plain, mk()), run(t, spec, mk())
		if fmt.Sprint(a) != fmt.Sprint(b) {
			t.Errorf("prompt %d: speculative %v != plain %v", i, b, a)
		}
	}
	if al := spec.Stats().AvgAcceptLength(); !(al > 1 && al < 4) {
		t.Errorf("accept length %.2f", al)
	}
}
