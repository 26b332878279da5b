package workload

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/reckon-ci/reckon/engine/client"
)

// replayServer answers every completion with a pre-rendered stream of n one-token chunks, without
// a network or a server goroutine, so that only reckon's own work is measured.
type replayServer struct{ body []byte }

func (s replayServer) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		_, _ = io.Copy(io.Discard, req.Body)
		req.Body.Close()
	}
	return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"text/event-stream"}},
		Body: io.NopCloser(bytes.NewReader(s.body)), Request: req}, nil
}

func replayBody(n int) []byte {
	var b bytes.Buffer
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "data: {\"id\":\"c\",\"object\":\"text_completion\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"text\":\" w%d\",\"logprobs\":null,\"finish_reason\":null,\"token_ids\":[%d]}]}\n\n", i, i)
	}
	fmt.Fprintf(&b, "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":64,\"completion_tokens\":%d,\"total_tokens\":%d}}\n\ndata: [DONE]\n\n", n, n+64)
	return b.Bytes()
}

// BenchmarkRunConcurrency64 measures the harness's cost per generated token (load generator,
// client, metrics) at concurrency 64, with responses replayed from memory.
func BenchmarkRunConcurrency64(b *testing.B) {
	const out = 128
	c := client.New("http://replay.invalid", client.Options{HTTPClient: &http.Client{Transport: replayServer{replayBody(out)}}})
	o := Options{Concurrency: 64, NumPrompts: 512, InputLen: 64, OutputLen: out, IgnoreEOS: true, Model: "m", SkipServerInfo: true, PromptMode: PromptTokenIDs}
	b.ResetTimer()
	start := time.Now()
	tokens := 0
	for i := 0; i < b.N; i++ {
		res, err := Run(context.Background(), c, o)
		if err != nil || res.Completed != o.NumPrompts {
			b.Fatalf("run: %v", err)
		}
		tokens += res.TotalOutputTokens
	}
	el := time.Since(start)
	b.ReportMetric(float64(tokens)/el.Seconds(), "tokens/s")
	b.ReportMetric(float64(el.Nanoseconds())/float64(tokens), "ns/token")
}
