package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/reckon-ci/reckon/wire"
	"github.com/reckon-ci/reckon/workload"
)

// idServer streams max_tokens chunks and counts a token-id prompt's ids as its usage; it keeps
// every request body.
type idServer struct {
	mu     sync.Mutex
	bodies []wire.CompletionRequest
}

func (s *idServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/v1/models" {
		io.WriteString(w, `{"object":"list","data":[{"id":"m"}]}`)
		return
	}
	var req wire.CompletionRequest
	_ = json.NewDecoder(r.Body).Decode(&req)
	var ids []int
	_ = json.Unmarshal(req.Prompt, &ids)
	s.mu.Lock()
	s.bodies = append(s.bodies, req)
	s.mu.Unlock()
	w.Header().Set("Content-Type", "text/event-stream")
	for i := 0; i < *req.MaxTokens; i++ {
		io.WriteString(w, "data: {\"choices\":[{\"index\":0,\"text\":\"x\",\"finish_reason\":null}]}\n\n")
	}
	fmt.Fprintf(w, "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":%d,\"completion_tokens\":%d,\"total_tokens\":0}}\n\ndata: [DONE]\n\n", len(ids), *req.MaxTokens)
}

// TestBenchAcceptsVLLMFlags runs reckon bench with vllm bench serve's own flag names and checks
// that each took vLLM's meaning.
func TestBenchAcceptsVLLMFlags(t *testing.T) {
	s := &idServer{}
	srv := httptest.NewServer(s)
	defer srv.Close()
	dir := t.TempDir()
	_, errs, code := execCmd(t, newBenchCmd(), "--base-url", srv.URL, "--max-concurrency", "3", "--dataset-name", "random",
		"--random-input-len", "50", "--random-output-len", "5", "--random-range-ratio", "0.1", "--random-prefix-len", "8",
		"--num-prompts", "12", "--num-warmups", "2", "--save-result", "--result-dir", dir, "--result-filename", "v.json",
		"--percentile-metrics", "ttft,tpot,itl,e2el", "--metric-percentiles", "90,99", "--metadata", "gpu=h100", "tp=2",
		"--ignore-eos", "--top-p", "0.9", "--disable-tqdm")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	b, err := os.ReadFile(filepath.Join(dir, "v.json"))
	if err != nil {
		t.Fatal(err)
	}
	var res struct {
		Completed int `json:"completed"`
		Metadata  struct {
			Labels   map[string]string `json:"labels"`
			Workload struct {
				MaxConcurrency int      `json:"max_concurrency"`
				InputLen       int      `json:"input_len"`
				OutputLen      int      `json:"output_len"`
				PrefixLen      int      `json:"prefix_len"`
				RangeRatio     float64  `json:"range_ratio"`
				Warmup         int      `json:"warmup"`
				IgnoreEOS      bool     `json:"ignore_eos"`
				TopP           *float64 `json:"top_p"`
				PromptMode     string   `json:"prompt_mode"`
			} `json:"workload"`
		} `json:"metadata"`
		Details struct {
			InputLens []int `json:"input_lens"`
		} `json:"details"`
	}
	if err := json.Unmarshal(b, &res); err != nil {
		t.Fatal(err)
	}
	w := res.Metadata.Workload
	if res.Completed != 12 || w.MaxConcurrency != 3 || w.InputLen != 50 || w.OutputLen != 5 || w.PrefixLen != 8 || w.RangeRatio != 0.1 ||
		w.Warmup != 2 || !w.IgnoreEOS || w.TopP == nil || *w.TopP != 0.9 || w.PromptMode != "token_ids" {
		t.Errorf("result %s", b)
	}
	if res.Metadata.Labels["gpu"] != "h100" || res.Metadata.Labels["tp"] != "2" {
		t.Errorf("--metadata gpu=h100 tp=2 gave labels %v", res.Metadata.Labels)
	}
	for _, n := range res.Details.InputLens {
		if n < 8+45 || n > 8+55 {
			t.Errorf("input length %d, want 8 + 50 ± 10%%", n)
		}
	}
}

// TestBenchFollowsCurrentVLLM: as current vllm bench serve (serve.py main_async), synthetic
// (random) prompts send ignore_eos, dataset prompts only with --ignore-eos, and no temperature is
// sent unless --temperature; the result records exactly that.
func TestBenchFollowsCurrentVLLM(t *testing.T) {
	ds := filepath.Join(t.TempDir(), "p.jsonl")
	if err := os.WriteFile(ds, []byte("{\"prompt\": \"hello\", \"output_len\": 2}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name      string
		args      []string
		ignoreEOS bool
		temp      *float64
	}{
		{"random", []string{"--input-len", "4", "--output-len", "2"}, true, nil},
		{"random --no-ignore-eos", []string{"--input-len", "4", "--output-len", "2", "--no-ignore-eos"}, false, nil},
		{"dataset", []string{"--dataset", ds}, false, nil},
		{"dataset --ignore-eos --temperature 0", []string{"--dataset", ds, "--ignore-eos", "--temperature", "0"}, true, new(float64)},
	} {
		s := &idServer{}
		srv := httptest.NewServer(s)
		out := filepath.Join(t.TempDir(), "r.json")
		args := append([]string{"--url", srv.URL, "--num-prompts", "2", "--result", out, "--quiet"}, c.args...)
		_, errs, code := execCmd(t, newBenchCmd(), args...)
		srv.Close()
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", c.name, code, errs)
		}
		for _, b := range s.bodies {
			if b.MaxTokens == nil || *b.MaxTokens != 2 {
				continue // /server_info, the prompt-mode probe
			}
			if b.IgnoreEOS != c.ignoreEOS || (b.Temperature == nil) != (c.temp == nil) {
				t.Errorf("%s: sent ignore_eos %v temperature %v", c.name, b.IgnoreEOS, b.Temperature)
			}
		}
		r, err := workload.ImportFile(out)
		if err != nil {
			t.Fatal(err)
		}
		w := r.Metadata.Workload
		if w.IgnoreEOS == nil || *w.IgnoreEOS != c.ignoreEOS || (w.Temperature == nil) != (c.temp == nil) || w.TemperatureServerDefault != (c.temp == nil) {
			t.Errorf("%s: recorded ignore_eos %v temperature %v server default %v", c.name, w.IgnoreEOS, w.Temperature, w.TemperatureServerDefault)
		}
		if r.Metadata.Semantics == nil || r.Metadata.Semantics.Tool != "reckon" || r.Metadata.Semantics.PeakConcurrency != workload.DefPeakExact {
			t.Errorf("%s: semantics %+v", c.name, r.Metadata.Semantics)
		}
	}
}

// TestBenchVLLMFlagErrors: a contradiction or an unsupported value names the flag.
func TestBenchVLLMFlagErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--concurrency", "2", "--max-concurrency", "4"}, "--concurrency and --max-concurrency are the same setting"},
		{[]string{"--dataset-name", "sharegpt"}, "--dataset-name sharegpt needs --dataset-path FILE"},
		{[]string{"--dataset-name", "sonnet"}, `--dataset-name "sonnet": expected random, sharegpt or custom`},
		{[]string{"--percentile-metrics", "ttft,queue"}, `--percentile-metrics: "queue"`},
		{[]string{"--metric-percentiles", "99.9"}, `--metric-percentiles: "99.9"`},
		{[]string{"--endpoint", "/v1/embeddings"}, `--endpoint "/v1/embeddings"`},
		{[]string{"--ignore-eos", "--no-ignore-eos"}, "contradict each other"},
	} {
		args := append([]string{"--url", "http://127.0.0.1:1", "--result", filepath.Join(t.TempDir(), "r.json"), "--quiet"}, tc.args...)
		_, errs, code := execCmd(t, newBenchCmd(), args...)
		if code != 2 || !strings.Contains(errs, tc.want) {
			t.Errorf("%v: exit %d, %q; want exit 2 with %q", tc.args, code, errs, tc.want)
		}
	}
}
