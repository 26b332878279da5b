package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/reckon-ci/reckon/wire"
)

// syncBuffer is a goroutine-safe log sink.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func modelPath(t testing.TB) string {
	_, file, _, _ := runtime.Caller(0)
	p := filepath.Join(filepath.Dir(file), "..", "..", "fixtures", "models", "tiny.json")
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("model fixture: %v", err)
	}
	return p
}

// testServer is an in-process engine serving HTTP on a free port.
type testServer struct {
	e    *Engine
	url  string
	log  *syncBuffer
	stop func() error
	// exited is closed when Serve has returned on its own; exitErr is then its result.
	exited  chan struct{}
	exitErr error
}

// start builds an engine from args (plus the model path) and serves it; with wait it polls
// /health until 200.
func start(t testing.TB, env map[string]string, wait bool, args ...string) *testServer {
	t.Helper()
	args = append([]string{"--model-path", modelPath(t), "--port", "0"}, args...)
	if _, isTest := t.(*testing.T); isTest && !slices.Contains(args, "--device-memory") {
		// tests run many engines in one process: a small modelled device keeps the KV pools
		// (really allocated) small; benchmarks and tests of the defaults use the default size
		args = append([]string{"--device-memory", "64MiB"}, args...)
	}
	opts, err := ParseFlags(args, io.Discard)
	if err != nil {
		t.Fatalf("flags %v: %v", args, err)
	}
	ts := serve(t, opts, env)
	if wait {
		ts.waitReady(t)
	}
	return ts
}

// serve builds an engine from parsed options and serves it on a free port until the test ends.
func serve(t testing.TB, opts *Options, env map[string]string) *testServer {
	t.Helper()
	lb := &syncBuffer{}
	e, err := Build(opts, NewLogger(lb, opts.TPSize), func(k string) string { return env[k] })
	if err != nil {
		t.Fatalf("build: %v\n%s", err, lb.String())
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ts := &testServer{e: e, url: "http://" + ln.Addr().String(), log: lb, exited: make(chan struct{})}
	go func() {
		ts.exitErr = e.Serve(ctx, ln)
		close(ts.exited)
	}()
	var once sync.Once
	ts.stop = func() error {
		cancel()
		<-ts.exited
		once.Do(func() {
			// give the engine's KV pool back before the next engine is built
			ts.e = nil
			debug.FreeOSMemory()
		})
		return ts.exitErr
	}
	t.Cleanup(func() { _ = ts.stop() })
	return ts
}

func (ts *testServer) waitReady(t testing.TB) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := http.Get(ts.url + "/health")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
		}
		// readiness poll: wait for the next scheduler step rather than a fixed sleep
		runtime.Gosched()
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("engine not ready within 30 s; log:\n%s", ts.log.String())
}

func (ts *testServer) post(t testing.TB, path string, body any) (int, []byte) {
	t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case string:
		rd = strings.NewReader(b)
	default:
		data, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(data)
	}
	resp, err := http.Post(ts.url+path, "application/json", rd)
	if err != nil {
		t.Fatalf("POST %s: %v", path, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, data
}

func (ts *testServer) get(t testing.TB, path string) (int, []byte) {
	t.Helper()
	resp, err := http.Get(ts.url + path)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, data
}

// complete sends a completion request and decodes the answer. It may run on any goroutine: a
// failure is reported with t.Errorf and gives an empty one-choice answer.
func (ts *testServer) complete(t testing.TB, req map[string]any) wire.CompletionResponse {
	t.Helper()
	empty := wire.CompletionResponse{Choices: []wire.CompletionChoice{{}}, Usage: &wire.Usage{}}
	body, err := json.Marshal(req)
	if err != nil {
		t.Errorf("marshal %v: %v", req, err)
		return empty
	}
	resp, err := http.Post(ts.url+"/v1/completions", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Errorf("completion %v: %v", req, err)
		return empty
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	var out wire.CompletionResponse
	if resp.StatusCode != 200 {
		t.Errorf("completion %v: HTTP %d: %s", req, resp.StatusCode, data)
		return empty
	}
	if err := json.Unmarshal(data, &out); err != nil || len(out.Choices) == 0 || out.Usage == nil {
		t.Errorf("decode %s: %v", data, err)
		return empty
	}
	return out
}

// load runs n requests at the given concurrency and returns output tokens per second.
func (ts *testServer) load(t testing.TB, concurrency, n, promptLen, outLen int) float64 {
	t.Helper()
	var wg sync.WaitGroup
	var mu sync.Mutex
	total := 0
	jobs := make(chan int)
	startT := time.Now()
	for w := 0; w < concurrency; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				prompt := strings.Repeat(fmt.Sprintf("req %d: lorem ipsum dolor sit amet ", i), promptLen/30+1)[:promptLen]
				out := ts.complete(t, map[string]any{"prompt": prompt, "max_tokens": outLen, "temperature": 0, "ignore_eos": true})
				mu.Lock()
				total += out.Usage.CompletionTokens
				mu.Unlock()
			}
		}()
	}
	for i := 0; i < n; i++ {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	return float64(total) / time.Since(startT).Seconds()
}
