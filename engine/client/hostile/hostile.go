// Package hostile serves the misbehaving OpenAI-compatible servers that reckon's client, `reckon
// bench` and the gate must survive in bounded time and memory: one that never answers
// metadata, one that never answers completions, an endless stream, a huge SSE line, invalid
// chunks, a connection closed mid-stream and a 500 with an HTML body. It is used by tests (and
// by the measurements in docs/reliability.md); it never judges anything.
package hostile

import (
	"bytes"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// Kinds lists the servers Handler knows.
var Kinds = []string{"never-metadata", "never-completions", "endless-stream", "huge-line", "invalid-chunks", "close-mid-stream", "html-500"}

// HugeLineBytes is the length of the huge-line server's one data line.
const HugeLineBytes = 1 << 30

// Handler returns the server of kind (nil for an unknown kind). Hanging handlers return when
// the client goes away.
func Handler(kind string) http.Handler {
	known := false
	for _, k := range Kinds {
		known = known || k == kind
	}
	if !known {
		return nil
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		meta := r.URL.Path != "/v1/completions"
		switch {
		case kind == "never-metadata" && meta:
			hang(w, r)
		case meta:
			serveMeta(w, r)
		case kind == "never-completions":
			hang(w, r)
		case kind == "html-500":
			w.Header().Set("Content-Type", "text/html")
			w.WriteHeader(http.StatusInternalServerError)
			fmt.Fprint(w, "<html><head><title>500 Internal Server Error</title></head><body><h1>Internal Server Error</h1><p>upstream crashed</p></body></html>")
		default:
			stream(kind, w, r)
		}
	})
}

// hang sends the headers, then nothing, until the client gives up.
func hang(w http.ResponseWriter, r *http.Request) {
	w.WriteHeader(http.StatusOK)
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
	<-r.Context().Done()
}

func serveMeta(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	switch r.URL.Path {
	case "/v1/models":
		fmt.Fprint(w, `{"object":"list","data":[{"id":"hostile-model","object":"model"}]}`)
	case "/server_info", "/get_server_info":
		fmt.Fprint(w, `{"version":"0.0.0-hostile"}`)
	default:
		http.NotFound(w, r)
	}
}

const chunk = `data: {"id":"x","object":"text_completion","choices":[{"index":0,"text":"tok","finish_reason":null}]}` + "\n\n"

func stream(kind string, w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	fl, _ := w.(http.Flusher)
	flush := func() {
		if fl != nil {
			fl.Flush()
		}
	}
	switch kind {
	case "never-metadata":
		// Completions are served well: 8 tokens, usage, [DONE].
		for range 8 {
			fmt.Fprint(w, chunk)
		}
		fmt.Fprint(w, `data: {"choices":[],"usage":{"prompt_tokens":4,"completion_tokens":8,"total_tokens":12}}`+"\n\n")
		fmt.Fprint(w, "data: [DONE]\n\n")
	case "endless-stream":
		// Valid chunks, one token each, far past max_tokens, until the client hangs up.
		batch := []byte(strings.Repeat(chunk, 64))
		for r.Context().Err() == nil {
			if _, err := w.Write(batch); err != nil {
				return
			}
			flush()
		}
	case "huge-line":
		// One "data:" line of 1 GiB that never reaches its end before the client gives up.
		_, _ = w.Write([]byte(`data: {"choices":[{"index":0,"text":"`))
		piece := bytes.Repeat([]byte("x"), 1<<20)
		for sent := 0; sent < HugeLineBytes && r.Context().Err() == nil; sent += len(piece) {
			if _, err := w.Write(piece); err != nil {
				return
			}
		}
		_, _ = w.Write([]byte("\"}]}\n\n"))
	case "invalid-chunks":
		fmt.Fprint(w, chunk)
		fmt.Fprint(w, "data: {\"choices\":[{\"index\":0,\"text\":\"tok\"\n\n")
		flush()
		<-waitOrTimeout(r, 5*time.Second)
	case "close-mid-stream":
		fmt.Fprint(w, chunk+chunk)
		flush()
		hj, ok := w.(http.Hijacker)
		if !ok {
			return
		}
		conn, buf, err := hj.Hijack()
		if err != nil {
			return
		}
		_ = buf.Flush()
		_ = conn.Close()
	}
}

func waitOrTimeout(r *http.Request, d time.Duration) <-chan struct{} {
	ch := make(chan struct{})
	go func() {
		defer close(ch)
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-r.Context().Done():
		case <-t.C:
		}
	}()
	return ch
}
