package client

import (
	"context"
	"errors"
	"net/http"
	"runtime"
	"strings"
	"testing"
)

// The body cap is a budget over every response held at once, not only per response: while one
// answer holds 600 KiB of a 1 MiB budget, a second 600 KiB answer is refused; once the first is
// done, the budget is whole again. (Scaled down: 4 concurrent 200 MiB answers took 1.74 GB.)
func TestBodyBudgetIsSharedAcrossResponses(t *testing.T) {
	old := inFlight
	inFlight = &bodyBudget{total: 1 << 20}
	defer func() { inFlight = old }()
	const part = 600 << 10
	body := strings.Repeat("a", part)
	release := make(chan struct{})
	slow := serve(t, func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(body))
		w.(http.Flusher).Flush()
		<-release // the rest of the answer comes later
		_, _ = w.Write([]byte("\n"))
	})
	fast := serve(t, func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(body))
	})
	done := make(chan error, 1)
	go func() {
		data, err := New(slow.URL, Options{}).Metrics(context.Background())
		if err == nil && len(data) != part+1 {
			err = errors.New("short body")
		}
		done <- err
	}()
	// Wait until the slow answer holds its first part (a readiness condition, not a delay).
	for inFlight.used.Load() < part {
		runtime.Gosched()
	}
	_, err := New(fast.URL, Options{}).Metrics(context.Background())
	var le *LimitError
	if !errors.As(err, &le) || !strings.Contains(err.Error(), "response bodies held at once by all requests exceeds the limit of 1 MiB") || !strings.Contains(err.Error(), "client.MaxInFlightBodyBytes") {
		t.Errorf("second answer while the first holds 600 KiB: %v", err)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatalf("first answer: %v", err)
	}
	if n := inFlight.used.Load(); n != 0 {
		t.Errorf("%d bytes still counted after every answer was read", n)
	}
	if _, err := New(fast.URL, Options{}).Metrics(context.Background()); err != nil {
		t.Errorf("the budget was not given back: %v", err)
	}
}

// One answer over the total budget but within its own MaxBodyBytes is capped by that only.
func TestBodyBudgetDoesNotCapALoneResponse(t *testing.T) {
	old := inFlight
	inFlight = &bodyBudget{total: 1 << 20}
	defer func() { inFlight = old }()
	big := strings.Repeat("b", 3<<20/2)
	srv := serve(t, func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(big)) })
	data, err := New(srv.URL, Options{MaxBodyBytes: 2 << 20}).Metrics(context.Background())
	if err != nil || len(data) != len(big) {
		t.Fatalf("%d bytes, %v", len(data), err)
	}
	if _, err := New(srv.URL, Options{MaxBodyBytes: 1 << 20}).Metrics(context.Background()); err == nil || !strings.Contains(err.Error(), "Options.MaxBodyBytes") {
		t.Errorf("over its own cap: %v", err)
	}
}
