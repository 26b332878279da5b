package client

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestProfileCalls(t *testing.T) {
	var got []string
	var body profileRequest
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = append(got, r.Method+" "+r.URL.Path)
		switch r.URL.Path {
		case "/start_profile":
			if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
				t.Errorf("start body: %v", err)
			}
			w.Write([]byte("Start profiling.\n")) // SGLang answers plain text
		case "/stop_profile":
			w.Write([]byte("Stop profiling. This will take some time.\n"))
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	c := New(srv.URL, Options{})
	ctx := context.Background()
	if err := c.StartProfile(ctx, "/tmp/traces"); err != nil {
		t.Fatal(err)
	}
	if err := c.StopProfile(ctx); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0] != "POST /start_profile" || got[1] != "POST /stop_profile" || body.OutputDir != "/tmp/traces" || len(body.Activities) != 2 {
		t.Errorf("requests %v, body %+v", got, body)
	}

	off := httptest.NewServer(http.NotFoundHandler()) // vLLM without a profiler directory
	defer off.Close()
	err := New(off.URL, Options{}).StartProfile(ctx, "")
	var ae *APIError
	if !errors.As(err, &ae) || ae.StatusCode != http.StatusNotFound {
		t.Errorf("a server without profiling: %v", err)
	}
}
