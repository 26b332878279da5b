package workload

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/reckon-ci/reckon/engine/client"
	"github.com/reckon-ci/reckon/wire"
)

// tokenServer answers streamed completions with usage counted as a tokenizer would: a token-id
// prompt counts its ids (or is refused with HTTP 400 when refuseIDs), a text prompt counts
// 1 BOS + 3 tokens per word. It remembers the prompts it saw.
type tokenServer struct {
	refuseIDs bool
	mu        sync.Mutex
	idPrompts [][]int
	texts     []string
}

func (s *tokenServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/v1/models" {
		io.WriteString(w, `{"object":"list","data":[{"id":"m"}]}`)
		return
	}
	var req wire.CompletionRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), 400)
		return
	}
	var ids []int
	var text string
	n := 0
	if json.Unmarshal(req.Prompt, &ids) == nil {
		if s.refuseIDs {
			w.WriteHeader(400)
			io.WriteString(w, `{"error":{"message":"prompt must be a string","type":"BadRequestError"}}`)
			return
		}
		n = len(ids)
	} else if json.Unmarshal(req.Prompt, &text) == nil {
		n = 1 + 3*len(strings.Fields(text))
	}
	s.mu.Lock()
	if ids != nil {
		s.idPrompts = append(s.idPrompts, ids)
	} else {
		s.texts = append(s.texts, text)
	}
	s.mu.Unlock()
	w.Header().Set("Content-Type", "text/event-stream")
	out := *req.MaxTokens
	for i := 0; i < out; i++ {
		fmt.Fprintf(w, "data: {\"choices\":[{\"index\":0,\"text\":\"x\",\"finish_reason\":null}]}\n\n")
	}
	fmt.Fprintf(w, "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":%d,\"completion_tokens\":%d,\"total_tokens\":%d}}\n\ndata: [DONE]\n\n", n, out, n+out)
}

// TestSyntheticPromptsAreExactTokenIDs: --input-len is tokens. Token-id prompts of exactly
// prefix + input tokens (spread by range_ratio), the prefix shared, the real lengths recorded
// per request, and the result says token ids were used.
func TestSyntheticPromptsAreExactTokenIDs(t *testing.T) {
	s := &tokenServer{}
	srv := httptest.NewServer(s)
	defer srv.Close()
	res, err := Run(context.Background(), client.New(srv.URL, client.Options{}), Options{
		Concurrency: 4, NumPrompts: 40, InputLen: 100, OutputLen: 4, RangeRatio: 0.2, PrefixLen: 16, Seed: 3, SkipServerInfo: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	if w := res.Metadata.Workload; w.PromptMode != PromptTokenIDs || w.InputLen != 100 || w.PrefixLen != 16 {
		t.Fatalf("workload metadata %+v: want prompt_mode token_ids, input_len 100, prefix_len 16", w)
	}
	if len(s.idPrompts) != 41 { // the probe and the 40 requests
		t.Fatalf("%d token-id prompts, want 41", len(s.idPrompts))
	}
	prefix := s.idPrompts[1][:16]
	for _, ids := range s.idPrompts[1:] {
		if n := len(ids) - 16; n < 80 || n > 120 {
			t.Errorf("prompt of %d tokens after the prefix, want 80..120 (100 ± 20%%)", n)
		}
		if fmt.Sprint(ids[:16]) != fmt.Sprint(prefix) {
			t.Errorf("prefix %v differs from %v", ids[:16], prefix)
		}
		for _, id := range ids {
			if id < SyntheticTokenLo || id >= SyntheticTokenHi {
				t.Fatalf("token id %d outside [%d, %d)", id, SyntheticTokenLo, SyntheticTokenHi)
			}
		}
	}
	if res.Details == nil || len(res.Details.InputLens) != 40 || len(res.Details.OutputLens) != 40 {
		t.Fatalf("details %+v: want 40 real input and output lengths", res.Details)
	}
	sum := 0
	for _, n := range res.Details.InputLens {
		sum += n
	}
	if sum != res.TotalInputTokens || res.Details.TTFTs != nil {
		t.Errorf("input_lens sum %d, total_input_tokens %d; ttfts %v (only with Details)", sum, res.TotalInputTokens, res.Details.TTFTs)
	}
}

// TestSyntheticPromptsFallBackToCalibratedText: a server that refuses token ids gets text whose
// word count is calibrated by its own usage counts, and the result says so.
func TestSyntheticPromptsFallBackToCalibratedText(t *testing.T) {
	s := &tokenServer{refuseIDs: true}
	srv := httptest.NewServer(s)
	defer srv.Close()
	res, err := Run(context.Background(), client.New(srv.URL, client.Options{}), Options{
		Concurrency: 2, NumPrompts: 10, InputLen: 128, OutputLen: 2, Seed: 1, SkipServerInfo: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	w := res.Metadata.Workload
	if w.PromptMode != PromptText || w.TextCalibration == nil || w.TextCalibration.PerWord != 3 || w.TextCalibration.Base != 1 {
		t.Fatalf("workload %+v (calibration %+v): want prompt_mode text with 3 tokens per word + 1", w, w.TextCalibration)
	}
	for _, n := range res.Details.InputLens {
		if n < 126 || n > 130 {
			t.Errorf("real input length %d, want 128 ± 2", n)
		}
	}
	if !strings.Contains(strings.Join(res.Warnings, "\n"), "refused token-id prompts") {
		t.Errorf("warnings %q do not say that token ids were refused", res.Warnings)
	}
}

// TestDatasetCycledAndOwnOutputLens: a dataset smaller than the requests is cycled with a
// warning, and without OutputLen each prompt keeps the dataset's own output length.
func TestDatasetCycledAndOwnOutputLens(t *testing.T) {
	s := &tokenServer{}
	srv := httptest.NewServer(s)
	defer srv.Close()
	res, err := Run(context.Background(), client.New(srv.URL, client.Options{}), Options{
		Concurrency: 2, NumPrompts: 12, Dataset: "../fixtures/datasets/sharegpt-mini.json", Seed: 1, SkipServerInfo: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	ds, err := LoadPrompts("../fixtures/datasets/sharegpt-mini.json")
	if err != nil {
		t.Fatal(err)
	}
	want := map[int]bool{}
	for _, p := range ds {
		want[p.OutputLen] = true
	}
	for _, n := range res.Details.OutputLens {
		if !want[n] {
			t.Errorf("output length %d is none of the dataset's %v", n, want)
		}
	}
	if res.Metadata.Workload.OutputLenSource != "dataset" {
		t.Errorf("output_len_source %q, want dataset", res.Metadata.Workload.OutputLenSource)
	}
	if len(ds) < 12 && !strings.Contains(strings.Join(res.Warnings, "\n"), "is cycled") {
		t.Errorf("warnings %q: a dataset of %d prompts for 12 requests must be reported as cycled", res.Warnings, len(ds))
	}
}
