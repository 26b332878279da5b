// sse.go holds the server-sent-events writer the streaming endpoints share, and the stop-string
// hold-back of streamed text.

package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
)

// sse is an event-stream answer: one `data:` event per value, flushed at once; safe for
// concurrent use.
type sse struct {
	w  http.ResponseWriter
	fl http.Flusher
	mu sync.Mutex
}

// startSSE answers with an event stream.
func startSSE(w http.ResponseWriter) *sse {
	fl, _ := w.(http.Flusher)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	return &sse{w: w, fl: fl}
}

// send writes v as one JSON event.
func (s *sse) send(v any) {
	b, _ := json.Marshal(v)
	s.raw(string(b))
}

// done ends the stream with the OpenAI sentinel.
func (s *sse) done() { s.raw("[DONE]") }

func (s *sse) raw(data string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fmt.Fprintf(s.w, "data: %s\n\n", data)
	if s.fl != nil {
		s.fl.Flush()
	}
}

// stopHold is how many trailing bytes of streamed text must be held back because they could
// be the start of a stop string.
func stopHold(stop []string) int {
	hold := 0
	for _, s := range stop {
		hold = max(hold, len(s)-1)
	}
	return hold
}
