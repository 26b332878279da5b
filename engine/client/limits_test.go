package client_test

// The hostile-server matrix of the client: every misbehaving server ends a call in bounded time
// with an error that says what went wrong, and memory stays bounded.

import (
	"context"
	"errors"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/reckon-ci/reckon/engine/client"
	"github.com/reckon-ci/reckon/engine/client/hostile"
	"github.com/reckon-ci/reckon/wire"
)

func TestHostileServers(t *testing.T) {
	maxTok := 32
	temp := 0.0
	req := wire.CompletionRequest{Prompt: client.PromptText("hi"), MaxTokens: &maxTok, Temperature: &temp}
	for _, tc := range []struct {
		kind string
		call string // metadata or stream
		want string // fragment of the error
		is   error
	}{
		{"never-metadata", "metadata", "metadata timeout of 300ms", nil},
		{"never-completions", "stream", "context deadline exceeded", context.DeadlineExceeded},
		{"endless-stream", "stream", "generated tokens of the stream exceeds the limit of 48 tokens = max_tokens 32 + margin 16", client.ErrLimit},
		{"huge-line", "stream", "server-sent event exceeds the limit of 1 MiB", client.ErrLimit},
		{"invalid-chunks", "stream", "malformed response", client.ErrMalformed},
		{"close-mid-stream", "stream", "unexpected EOF", nil},
		{"html-500", "stream", "HTTP 500: <html>", nil},
	} {
		t.Run(tc.kind, func(t *testing.T) {
			srv := httptest.NewServer(hostile.Handler(tc.kind))
			defer srv.Close()
			c := client.New(srv.URL, client.Options{Model: "m", Timeout: 2 * time.Second, MetadataTimeout: 300 * time.Millisecond, MaxEventBytes: 1 << 20})
			start := time.Now()
			var err error
			if tc.call == "metadata" {
				_, err = c.ServerInfo(context.Background())
			} else {
				_, err = c.Stream(context.Background(), req, nil)
			}
			took := time.Since(start)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to contain %q", err, tc.want)
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Errorf("errors.Is(%v, %v) = false", err, tc.is)
			}
			if took > 3*time.Second {
				t.Errorf("took %s, want the call bounded by its timeouts (2s)", took)
			}
		})
	}
}

// TestStreamCutBoundsMemory: 8 concurrent endless streams and huge lines cost little memory.
func TestStreamCutBoundsMemory(t *testing.T) {
	for _, kind := range []string{"endless-stream", "huge-line"} {
		srv := httptest.NewServer(hostile.Handler(kind))
		c := client.New(srv.URL, client.Options{Model: "m", Timeout: 10 * time.Second})
		maxTok := 256
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		errs := make(chan error, 8)
		for range 8 {
			go func() {
				_, err := c.Stream(context.Background(), wire.CompletionRequest{Prompt: client.PromptText("x"), MaxTokens: &maxTok}, nil)
				errs <- err
			}()
		}
		for range 8 {
			if err := <-errs; !errors.Is(err, client.ErrLimit) {
				t.Errorf("%s: err = %v, want a limit error", kind, err)
			}
		}
		runtime.ReadMemStats(&after)
		srv.Close()
		// TotalAlloc is cumulative: the 4 MiB event cap times 8 streams, with slack for growth.
		if got := after.TotalAlloc - before.TotalAlloc; got > 200<<20 {
			t.Errorf("%s: 8 streams allocated %d MiB, want < 200 MiB", kind, got>>20)
		}
	}
}

// BenchmarkHostileStreams measures what 8 concurrent streams against the endless-stream and
// huge-line servers cost (B/op is for the 8 together): the memory figures of
// docs/reliability.md, measured in `make bench`.
func BenchmarkHostileStreams(b *testing.B) {
	for _, kind := range []string{"endless-stream", "huge-line"} {
		b.Run(kind, func(b *testing.B) {
			srv := httptest.NewServer(hostile.Handler(kind))
			defer srv.Close()
			c := client.New(srv.URL, client.Options{Model: "m", Timeout: 10 * time.Second})
			maxTok := 256
			b.ReportAllocs()
			for range b.N {
				errs := make(chan error, 8)
				for range 8 {
					go func() {
						_, err := c.Stream(context.Background(), wire.CompletionRequest{Prompt: client.PromptText("x"), MaxTokens: &maxTok}, nil)
						errs <- err
					}()
				}
				for range 8 {
					if err := <-errs; !errors.Is(err, client.ErrLimit) {
						b.Fatalf("err = %v, want a limit error", err)
					}
				}
			}
		})
	}
}
