package workload

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/reckon-ci/reckon/engine/client"
	"github.com/reckon-ci/reckon/wire"
)

// fakeEngine streams max_tokens one-token chunks with token ids, then a usage event and [DONE].
// Prompts containing "FAIL" get HTTP 500; "HANG" waits for the client to give up.
type fakeEngine struct {
	inFlight, peak, requests atomic.Int64
	mu                       sync.Mutex
	bodies                   []wire.CompletionRequest
	gate                     chan struct{} // when set, each request waits for a token from it
}

func (f *fakeEngine) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/v1/models":
		io.WriteString(w, `{"object":"list","data":[{"id":"fake-model"}]}`)
		return
	case "/server_info":
		io.WriteString(w, `{"internal_states":[{"avg_spec_accept_length":2.5}]}`)
		return
	case "/v1/completions":
	default:
		http.NotFound(w, r)
		return
	}
	var req wire.CompletionRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), 400)
		return
	}
	f.requests.Add(1)
	n := f.inFlight.Add(1)
	defer f.inFlight.Add(-1)
	for {
		p := f.peak.Load()
		if n <= p || f.peak.CompareAndSwap(p, n) {
			break
		}
	}
	f.mu.Lock()
	f.bodies = append(f.bodies, req)
	f.mu.Unlock()
	if f.gate != nil {
		select {
		case <-f.gate:
		case <-r.Context().Done():
			return
		}
	}
	prompt := string(req.Prompt)
	if strings.Contains(prompt, "FAIL") {
		w.WriteHeader(500)
		io.WriteString(w, `{"error":{"message":"injected failure","type":"InternalServerError"}}`)
		return
	}
	if strings.Contains(prompt, "HANG") {
		<-r.Context().Done()
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	fl := w.(http.Flusher)
	max := 16
	if req.MaxTokens != nil {
		max = *req.MaxTokens
	}
	var b bytes.Buffer
	for i := 0; i < max; i++ {
		b.Reset()
		fmt.Fprintf(&b, "data: {\"choices\":[{\"index\":0,\"text\":\" t%d\",\"token_ids\":[%d],\"finish_reason\":null}]}\n\n", i, 100+i)
		w.Write(b.Bytes())
		fl.Flush()
	}
	fmt.Fprintf(w, "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":7,\"completion_tokens\":%d,\"total_tokens\":%d}}\n\ndata: [DONE]\n\n", max, max+7)
}

// scriptClock returns base+ticks[i] on its i-th call.
type scriptClock struct {
	mu    sync.Mutex
	ticks []time.Duration
	i     int
}

func (s *scriptClock) Now() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	d := s.ticks[min(s.i, len(s.ticks)-1)]
	s.i++
	return time.Unix(5000, 0).Add(d)
}

// TestRunScriptedStream runs two requests one at a time against a server streaming 3 tokens each,
// with a scripted clock, so that every recorded time and every metric is known in advance.
func TestRunScriptedStream(t *testing.T) {
	srv := httptest.NewServer(&fakeEngine{})
	defer srv.Close()
	clk := &scriptClock{ticks: []time.Duration{
		0,                                                         // benchmark start
		msd(10), msd(110), msd(130), msd(160), msd(161), msd(162), // request 1: send, 3 chunks, usage, [DONE]
		msd(200), msd(250), msd(290), msd(300), msd(301), msd(302), // request 2
		msd(1000), // benchmark end
	}}
	c := client.New(srv.URL, client.Options{Now: clk.Now})
	res, err := Run(context.Background(), c, Options{
		Concurrency: 1, NumPrompts: 2, InputLen: 4, OutputLen: 3, IgnoreEOS: true, Seed: 1, Model: "m", PromptMode: PromptTokenIDs,
		SkipServerInfo: true, Details: true, Goodput: map[string]float64{"ttft": 60},
	})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	near(t, "duration", res.Duration, 1)
	if res.Completed != 2 || res.TotalOutputTokens != 6 || res.TotalInputTokens != 14 {
		t.Fatalf("completed %d out %d in %d", res.Completed, res.TotalOutputTokens, res.TotalInputTokens)
	}
	near(t, "output_throughput", res.OutputThroughput, 6)
	near(t, "mean_ttft_ms", res.MeanTTFTMs, 75)       // 100 and 50
	near(t, "mean_tpot_ms", res.MeanTPOTMs, 25)       // (150-100)/2 and (100-50)/2
	near(t, "mean_itl_ms", res.MeanITLMs, 25)         // 20 30 40 10
	near(t, "p99_itl_ms", res.P99ITLMs, 39.7)         // linear between 30 and 40
	near(t, "mean_e2el_ms", res.MeanE2ELMs, 125)      // 150 and 100
	near(t, "request_goodput", res.RequestGoodput, 1) // only request 2 has TTFT <= 60
	if res.PeakInFlight != 1 {
		t.Errorf("peak in flight %d with concurrency 1", res.PeakInFlight)
	}
	if res.Details == nil || len(res.Details.ITLs) != 2 || res.Details.StartTimes[1] != 0.2 {
		t.Errorf("details = %+v", res.Details)
	}
	if _, ok := res.Metrics()["spec_accept_length"]; ok {
		t.Errorf("spec_accept_length reported though the server was not asked")
	}
	if res.Metadata.Model != "m" || res.Metadata.Tool != "reckon" || res.Metadata.Workload.IgnoreEOS == nil || !*res.Metadata.Workload.IgnoreEOS {
		t.Errorf("metadata = %+v", res.Metadata)
	}
}

func TestRunClosedLoopCapsConcurrencyAndExcludesWarmup(t *testing.T) {
	fe := &fakeEngine{gate: make(chan struct{})}
	srv := httptest.NewServer(fe)
	defer srv.Close()
	// Release requests one by one from here, so that the server sees how many wait at once.
	done := make(chan struct{})
	go func() {
		for {
			select {
			case fe.gate <- struct{}{}:
			case <-done:
				return
			}
		}
	}()
	defer close(done)
	var prog bytes.Buffer
	res, err := Run(context.Background(), client.New(srv.URL, client.Options{}), Options{
		Concurrency: 3, NumPrompts: 30, Warmup: 2, InputLen: 8, OutputLen: 4, IgnoreEOS: true, Seed: 3, Progress: &prog, PromptMode: PromptTokenIDs,
	})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if got := fe.requests.Load(); got != 32 {
		t.Errorf("server saw %d requests, want 30 + 2 warm-up", got)
	}
	if res.Completed != 30 || res.Metadata.Workload.NumPrompts != 30 {
		t.Errorf("completed %d (warm-up must be excluded)", res.Completed)
	}
	if p := fe.peak.Load(); p > 3 {
		t.Errorf("server saw %d concurrent requests with --concurrency 3", p)
	}
	if res.PeakInFlight > 3 || res.PeakInFlight < 1 {
		t.Errorf("peak_in_flight %d", res.PeakInFlight)
	}
	if res.SpecAcceptLength != 2.5 || res.Metadata.Model != "fake-model" {
		t.Errorf("spec accept %v model %q", res.SpecAcceptLength, res.Metadata.Model)
	}
	for _, b := range fe.bodies {
		if !b.Stream || !b.IgnoreEOS || b.Temperature == nil || *b.Temperature != 0 || b.Model != "fake-model" {
			t.Fatalf("request body %+v: want stream, ignore_eos, temperature 0, model", b)
		}
	}
	if !strings.Contains(prog.String(), "30/30 requests done") {
		t.Errorf("progress lines: %q", prog.String())
	}
}

func TestRunCountsFailuresAndTimeouts(t *testing.T) {
	srv := httptest.NewServer(&fakeEngine{})
	defer srv.Close()
	prompts := []Prompt{{Text: "fine"}, {Text: "please FAIL"}, {Text: "HANG forever"}, {Text: "also fine"}}
	res, err := Run(context.Background(), client.New(srv.URL, client.Options{}), Options{
		Prompts: prompts, OutputLen: 2, Concurrency: 4, RequestTimeout: 200 * time.Millisecond, Model: "m", SkipServerInfo: true,
	})
	if err != nil {
		t.Fatalf("Run must not fail on failed requests: %v", err)
	}
	if res.Completed != 2 || res.Failed != 2 {
		t.Errorf("completed %d failed %d, want 2 and 2", res.Completed, res.Failed)
	}
	if len(res.Warnings) == 0 || !strings.Contains(strings.Join(res.Warnings, ";"), "injected failure") {
		t.Errorf("warnings do not carry the first errors: %v", res.Warnings)
	}
}

func TestRunOpenLoopAndCancel(t *testing.T) {
	srv := httptest.NewServer(&fakeEngine{})
	defer srv.Close()
	c := client.New(srv.URL, client.Options{})
	res, err := Run(context.Background(), c, Options{RequestRate: 400, NumPrompts: 20, OutputLen: 2, InputLen: 4, Model: "m", SkipServerInfo: true})
	if err != nil || res.Completed != 20 || res.Metadata.Workload.RequestRate != 400 {
		t.Fatalf("open loop: %v %+v", err, res)
	}
	// A cancelled context ends the run with the partial result and the error.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Run(ctx, c, Options{RequestRate: 1, NumPrompts: 5, Model: "m"}); err == nil {
		t.Errorf("cancelled run returned no error")
	}
	if _, err := Run(context.Background(), c, Options{RangeRatio: 1.5}); err == nil || !strings.Contains(err.Error(), "range ratio") {
		t.Errorf("bad options accepted: %v", err)
	}
}
