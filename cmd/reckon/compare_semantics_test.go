package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/reckon-ci/reckon/wire"
)

// modelServer serves one model: /v1/models names it, a streamed completion sends max_tokens
// one-token chunks, an empty finish chunk, the usage event and [DONE] (as vLLM's server does).
type modelServer struct{ model string }

func (s modelServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/v1/models":
		fmt.Fprintf(w, `{"object":"list","data":[{"id":%q}]}`, s.model)
		return
	case "/v1/completions":
	default:
		http.NotFound(w, r)
		return
	}
	var req wire.CompletionRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.MaxTokens == nil {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	var ids []int
	_ = json.Unmarshal(req.Prompt, &ids)
	w.Header().Set("Content-Type", "text/event-stream")
	for i := 0; i < *req.MaxTokens; i++ {
		io.WriteString(w, "data: {\"choices\":[{\"index\":0,\"text\":\"x\",\"finish_reason\":null}]}\n\n")
	}
	io.WriteString(w, "data: {\"choices\":[{\"index\":0,\"text\":\"\",\"finish_reason\":\"length\"}]}\n\n")
	fmt.Fprintf(w, "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":%d,\"completion_tokens\":%d,\"total_tokens\":0}}\n\ndata: [DONE]\n\n", len(ids), *req.MaxTokens)
}

// benchResult runs reckon bench against a modelServer and returns the result file.
func benchResult(t *testing.T, model string, args ...string) string {
	t.Helper()
	srv := httptest.NewServer(modelServer{model})
	defer srv.Close()
	out := filepath.Join(t.TempDir(), "reckon.json")
	_, errs, code := execCmd(t, newBenchCmd(), append([]string{"--url", srv.URL, "--result", out, "--quiet"}, args...)...)
	if code != 0 {
		t.Fatalf("bench: exit %d: %s", code, errs)
	}
	return out
}

// TestCompareAcrossToolsShow is the "Show" of issue 27: a reckon result of the same workload as a
// real vLLM 0.25.1 result file (facebook/opt-125m, 8 prompts, concurrency 2, 32 tokens in, 16
// out) and as a real SGLang bench_serving line (random, --random-range-ratio 1, 1 token in,
// 512 out, all at once) compare without a workload warning; what a file does not record is
// named unknown, and the definitions that differ between the tools are named.
func TestCompareAcrossToolsShow(t *testing.T) {
	for _, c := range []struct {
		name, peer, model string
		bench             []string
		notes             []string
	}{
		{
			name: "reckon vs vLLM", peer: "../../fixtures/results/vllm-bench-serve-v0.25.1.json", model: "facebook/opt-125m",
			bench: []string{"--model", "facebook/opt-125m", "--max-concurrency", "2", "--dataset-name", "random", "--random-input-len", "32",
				"--random-output-len", "16", "--num-prompts", "8"},
			notes: []string{
				"head read with vllm bench serve, version <= 0.28: inferred: max_concurrent_requests 6 exceeds max_concurrency 2",
				"definitions differ: input token counting", "definitions differ: output token counting",
				"definitions differ: ITL chunking (*_itl_ms): base reckon: gaps between events that carry content; head vllm bench serve: gaps between every chunk with choices, an empty finish chunk included",
				"definitions differ: E2E end point (*_e2el_ms, *_tpot_ms): base reckon: the last content event; head vllm bench serve: the last chunk with choices",
				"definitions differ: peak concurrency (max_concurrent_requests): base reckon: exact peak of successful requests; head vllm bench serve: busiest whole second",
				"not recorded, so not checked: input_lens: base 32, head unknown; output_lens: base 16, head unknown; dataset: base random, head unknown; ignore_eos: base true, head unknown; temperature: base server default, head unknown",
			},
		},
		{
			name: "reckon vs SGLang", peer: "../../fixtures/results/sglang-bench-serving-few-keys.jsonl", model: "m",
			bench: []string{"--model", "m", "--input-len", "1", "--output-len", "512", "--num-prompts", "16"},
			notes: []string{
				"head read with sglang.bench_serving, version unknown",
				"definitions differ: input token counting (total_input_tokens, total_token_throughput): base reckon: the server's usage count; head sglang.bench_serving: the dataset's length",
				"definitions differ: ITL chunking (*_itl_ms): base reckon: gaps between events that carry content; head sglang.bench_serving: each chunk gap split evenly over its tokens",
				"definitions differ: E2E end point (*_e2el_ms, *_tpot_ms): base reckon: the last content event; head sglang.bench_serving: the last line read ([DONE] included)",
				"not recorded, so not checked: model: base m, head unknown; ignore_eos: base true, head unknown; temperature: base server default, head unknown",
			},
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			base := benchResult(t, c.model, c.bench...)
			_, errs, code := execCmd(t, newCompareCmd(), "--base", base, "--head", c.peer, "--strict")
			t.Logf("reckon compare --base reckon.json --head %s --strict\n%s", filepath.Base(c.peer), errs)
			if code == 2 {
				t.Fatalf("exit 2 (a workload difference under --strict, or bad input): %s", errs)
			}
			if strings.Contains(errs, "warning") {
				t.Errorf("a warning on the same workload:\n%s", errs)
			}
			for _, n := range c.notes {
				if !strings.Contains(errs, n) {
					t.Errorf("no %q in:\n%s", n, errs)
				}
			}
		})
	}
}

// TestCompareNamesRealDifferences: a reckon result at another length or with the range ratio
// SGLang's file would be misread as (1, i.e. L(1±1) in reckon's terms) is a workload difference.
func TestCompareNamesRealDifferences(t *testing.T) {
	base := benchResult(t, "m", "--model", "m", "--input-len", "1", "--output-len", "256", "--num-prompts", "4")
	_, errs, code := execCmd(t, newCompareCmd(), "--base", base, "--head", "../../fixtures/results/sglang-bench-serving-few-keys.jsonl", "--strict")
	if code != 2 || !strings.Contains(errs, "output_lens: base 256, head 512") {
		t.Errorf("exit %d: %s", code, errs)
	}
	_, errs, code = execCmd(t, newCompareCmd(), "--base", base, "--head", "../../fixtures/results/sglang-bench-serving-offline.jsonl")
	if code == 2 || !strings.Contains(errs, "input_lens: base 1, head 1..1024|1..4096") || !strings.Contains(errs, "dataset: base random, head random|sharegpt") {
		t.Errorf("exit %d: %s", code, errs)
	}
}
