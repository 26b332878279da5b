package client

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/reckon-ci/reckon/wire"
)

const benchTokens = 2000

// sseBody renders a stream of n one-token chunks (with token ids, as the reference engine and
// vLLM with return_token_ids send them), a usage event and [DONE].
func sseBody(n int) []byte {
	var b bytes.Buffer
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "data: {\"id\":\"cmpl-1\",\"object\":\"text_completion\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"text\":\" tok%d\",\"logprobs\":null,\"finish_reason\":null,\"token_ids\":[%d]}]}\n\n", i%1000, i%32000)
	}
	fmt.Fprintf(&b, "data: {\"id\":\"cmpl-1\",\"object\":\"text_completion\",\"created\":1,\"model\":\"m\",\"choices\":[],\"usage\":{\"prompt_tokens\":8,\"completion_tokens\":%d,\"total_tokens\":%d}}\n\ndata: [DONE]\n\n", n, n+8)
	return b.Bytes()
}

// replayTransport answers every request with the same pre-rendered stream, so that only the
// client's own work (HTTP response handling, SSE framing, JSON decoding, bookkeeping) is measured.
type replayTransport struct{ body []byte }

func (t replayTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		_, _ = io.Copy(io.Discard, req.Body)
		req.Body.Close()
	}
	return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"text/event-stream"}},
		Body: io.NopCloser(bytes.NewReader(t.body)), Request: req}, nil
}

// BenchmarkStreamIngestClientOnly: tokens/s one goroutine (one core) of the client ingests when
// the bytes are already there.
func BenchmarkStreamIngestClientOnly(b *testing.B) {
	c := New("http://bench.invalid", Options{HTTPClient: &http.Client{Transport: replayTransport{sseBody(benchTokens)}}})
	req := wire.CompletionRequest{Model: "m", Prompt: PromptText("hi")}
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	tokens := 0
	for i := 0; i < b.N; i++ {
		res, err := c.Stream(context.Background(), req, nil)
		if err != nil {
			b.Fatal(err)
		}
		tokens += res.OutputTokens
	}
	el := time.Since(start)
	b.ReportMetric(float64(tokens)/el.Seconds(), "tokens/s")
	b.ReportMetric(float64(el.Nanoseconds())/float64(tokens), "ns/token")
}

// BenchmarkStreamIngestLocalServer: tokens/s over loopback from an httptest server that writes
// its whole stream as fast as it can (server and client share the machine's cores).
func BenchmarkStreamIngestLocalServer(b *testing.B) {
	body := sseBody(benchTokens)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write(body)
	}))
	defer srv.Close()
	c := New(srv.URL, Options{})
	req := wire.CompletionRequest{Model: "m", Prompt: PromptText("hi")}
	b.ResetTimer()
	start := time.Now()
	tokens := 0
	for i := 0; i < b.N; i++ {
		res, err := c.Stream(context.Background(), req, nil)
		if err != nil {
			b.Fatal(err)
		}
		tokens += res.OutputTokens
	}
	b.ReportMetric(float64(tokens)/time.Since(start).Seconds(), "tokens/s")
}

// BenchmarkTTFTMeasurementError compares the client's arrival time of each chunk with the
// server-side time the chunk was flushed (carried in the chunk's text), on one clock: the error
// the client adds to TTFT and ITL (loopback transfer, framing and decoding).
func BenchmarkTTFTMeasurementError(b *testing.B) {
	const chunks = 32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		fl := w.(http.Flusher)
		for i := 0; i < chunks; i++ {
			// A small pause between chunks, as a real decode step would leave.
			time.Sleep(200 * time.Microsecond)
			fmt.Fprintf(w, "data: {\"choices\":[{\"index\":0,\"text\":\"%d\",\"token_ids\":[%d]}]}\n\n", time.Now().UnixNano(), i)
			fl.Flush()
		}
		io.WriteString(w, "data: [DONE]\n\n")
	}))
	defer srv.Close()
	c := New(srv.URL, Options{})
	req := wire.CompletionRequest{Model: "m", Prompt: PromptText("hi")}
	var firstSum, allSum, maxErr, n, nFirst atomic.Int64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		first := true
		_, err := c.Stream(context.Background(), req, func(k Chunk) {
			now := time.Now().UnixNano()
			sent, err := strconv.ParseInt(k.Text, 10, 64)
			if err != nil {
				return
			}
			d := now - sent
			allSum.Add(d)
			n.Add(1)
			if d > maxErr.Load() {
				maxErr.Store(d)
			}
			if first {
				firstSum.Add(d)
				nFirst.Add(1)
				first = false
			}
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	if n.Load() > 0 {
		b.ReportMetric(float64(firstSum.Load())/float64(nFirst.Load())/1e3, "ttft-err-us")
		b.ReportMetric(float64(allSum.Load())/float64(n.Load())/1e3, "chunk-err-us")
		b.ReportMetric(float64(maxErr.Load())/1e3, "max-err-us")
	}
}
