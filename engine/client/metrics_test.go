package client

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestSumSamples(t *testing.T) {
	text := []byte(`# HELP vllm:spec_decode_num_drafts Number of spec decoding drafts.
# TYPE vllm:spec_decode_num_drafts counter
vllm:spec_decode_num_drafts_total{engine="0",model_name="m"} 12.0
vllm:spec_decode_num_drafts_total{engine="1",model_name="odd } \" name"} 3 1700000000000
vllm:spec_decode_num_drafts_created{engine="0",model_name="m"} 1.7e9
vllm:spec_decode_num_accepted_tokens_total 5
vllm:spec_decode_num_draft_tokens_total{engine="0"} not-a-number
`)
	got := SumSamples(text, "vllm:spec_decode_num_drafts_total", "vllm:spec_decode_num_accepted_tokens_total", "vllm:spec_decode_num_draft_tokens_total", "absent_total")
	if got["vllm:spec_decode_num_drafts_total"] != 15 || got["vllm:spec_decode_num_accepted_tokens_total"] != 5 {
		t.Errorf("sums %v", got)
	}
	if _, ok := got["absent_total"]; ok {
		t.Errorf("an absent metric has a value: %v", got)
	}
	if _, ok := got["vllm:spec_decode_num_draft_tokens_total"]; ok {
		t.Errorf("an unparsable sample counted: %v", got)
	}
}

func TestMetrics(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/metrics":
			io.WriteString(w, "a_total 1\n")
		case "/big/metrics":
			io.WriteString(w, strings.Repeat("#", 2048))
		case "/slow/metrics":
			time.Sleep(500 * time.Millisecond)
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	c := New(srv.URL, Options{MetadataTimeout: 100 * time.Millisecond})
	if b, err := c.Metrics(context.Background()); err != nil || string(b) != "a_total 1\n" {
		t.Errorf("metrics %q, %v", b, err)
	}
	var ae *APIError
	if _, err := New(srv.URL+"/none", Options{}).Metrics(context.Background()); !errors.As(err, &ae) || ae.StatusCode != 404 {
		t.Errorf("404: %v", err)
	}
	if _, err := New(srv.URL+"/big", Options{MaxBodyBytes: 1024}).Metrics(context.Background()); !errors.Is(err, ErrLimit) {
		t.Errorf("oversized body: %v", err)
	}
	if _, err := New(srv.URL+"/slow", Options{MetadataTimeout: 50 * time.Millisecond}).Metrics(context.Background()); err == nil || !strings.Contains(err.Error(), "metadata timeout") {
		t.Errorf("slow server: %v", err)
	}
}
