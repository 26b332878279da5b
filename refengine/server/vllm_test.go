package server

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"
)

func TestSplitDialect(t *testing.T) {
	for _, c := range []struct {
		args []string
		want Dialect
		rest []string
		err  string
	}{
		{[]string{"--tp-size", "2"}, DialectSGLang, []string{"--tp-size", "2"}, ""},
		{nil, DialectSGLang, nil, ""},
		{[]string{"vllm", "serve", "m.json", "-tp", "2"}, DialectVLLM, []string{"m.json", "-tp", "2"}, ""},
		{[]string{"--dialect", "vllm", "serve", "m.json"}, DialectVLLM, []string{"m.json"}, ""},
		{[]string{"--dialect=vllm", "m.json"}, DialectVLLM, []string{"m.json"}, ""},
		{[]string{"--dialect", "sglang", "--tp-size", "2"}, DialectSGLang, []string{"--tp-size", "2"}, ""},
		{[]string{"vllm", "bench"}, "", nil, "expected the serve subcommand"},
		{[]string{"--dialect", "trtllm"}, "", nil, `--dialect "trtllm": expected sglang or vllm`},
	} {
		d, rest, err := SplitDialect(c.args)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%q: error %v, want %q", c.args, err, c.err)
			}
			continue
		}
		if err != nil || d != c.want || !reflect.DeepEqual(rest, c.rest) {
			t.Errorf("%q: %s %q %v, want %s %q", c.args, d, rest, err, c.want, c.rest)
		}
	}
}

func TestVLLMFlags(t *testing.T) {
	o, err := ParseVLLMFlags([]string{"m.json", "-tp", "4", "--speculative-config", `{"method": "eagle3", "num_speculative_tokens": 3}`, "--disable-custom-all-reduce", "--trust-remote-code"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if o.Dialect != DialectVLLM || o.ModelPath != "m.json" || o.TPSize != 4 || o.Port != 8000 || o.MemFractionStatic != 0.9 || o.MaxRunning != 256 ||
		o.ChunkedPrefill != 2048 || o.CUDAGraphMaxBS != 512 || !o.DisableCustomAR || o.MaxLogprobs != 20 {
		t.Errorf("defaults and values: %+v", o)
	}
	if o.SpecAlgorithm != "EAGLE3" || o.SpecNumSteps != 3 || o.SpecNumDraftTokens != 4 || o.SpecEagleTopK != 1 {
		t.Errorf("speculative config: %+v", o)
	}
	want := "{'model_tag': 'm.json', 'model': 'm.json', 'tensor_parallel_size': 4, 'disable_custom_all_reduce': True, 'speculative_config': {'method': 'eagle3', 'num_speculative_tokens': 3}}"
	if got := formatNonDefaultArgs(o.NonDefaultArgs); got != want {
		t.Errorf("non-default args:\n got %s\nwant %s", got, want)
	}
	// Flags after the model, and --model instead of the positional argument.
	o, err = ParseVLLMFlags([]string{"--port", "0", "--model", "x.json", "--max-num-seqs", "8", "--enforce-eager"}, io.Discard)
	if err != nil || o.ModelPath != "x.json" || o.CUDAGraphMaxBS != 16 || !o.DisableCUDAGraph {
		t.Errorf("--model form: %+v %v", o, err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"m", "--tp-size", "2"}, "unrecognized arguments: --tp-size"},
		{[]string{"m", "--tensor-parallel-size", "3"}, "--tensor-parallel-size 3: expected 1, 2, 4 or 8"},
		{[]string{"m", "--gpu-memory-utilization", "1.5"}, "--gpu-memory-utilization 1.5: expected a fraction in (0, 1]"},
		{[]string{"m", "--dtype", "float16"}, `--dtype "float16": expected auto, float32 or bfloat16`},
		{[]string{"m", "n"}, "unrecognized arguments: n (expected one model_tag)"},
		{[]string{"m", "--speculative-config", `{"method": "nextn", "num_speculative_tokens": 3}`}, `method: Input should be eagle, eagle3, mtp, ngram, draft_model (got "nextn")`},
		{[]string{"m", "--speculative-config", `{"method": "eagle", "num_speculative_tokens": 3, "k": 1}`}, `unknown key "k"`},
		{[]string{"m", "--speculative-config", `{"method": "eagle"}`}, `"num_speculative_tokens" is required`},
		{[]string{"m", "--speculative-config", `eagle`}, "--speculative-config \"eagle\": not a JSON object"},
		{[]string{"m", "--max-num-batched-tokens", "0"}, "--max-num-batched-tokens 0: expected a positive number"},
		{[]string{"m", "--device-memory", "lots"}, "--device-memory"},
	} {
		_, err := ParseVLLMFlags(c.args, io.Discard)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %v, want it to contain %q", c.args, err, c.want)
		}
	}
}

// startVLLM is start (helpers_test.go) in the vLLM dialect.
func startVLLM(t *testing.T, env map[string]string, args ...string) *testServer {
	t.Helper()
	args = append([]string{modelPath(t), "--port", "0", "--device-memory", "64MiB"}, args...)
	opts, err := ParseVLLMFlags(args, io.Discard)
	if err != nil {
		t.Fatalf("flags %v: %v", args, err)
	}
	ts := serve(t, opts, env)
	ts.waitReady(t)
	return ts
}

// vllmAnswer is the part of vLLM's completion answer the tests read.
type vllmAnswer struct {
	Choices []struct {
		Text     string `json:"text"`
		Logprobs struct {
			Tokens        []string             `json:"tokens"`
			TokenLogprobs []*float64           `json:"token_logprobs"`
			TopLogprobs   []map[string]float64 `json:"top_logprobs"`
		} `json:"logprobs"`
		StopReason     any                         `json:"stop_reason"`
		TokenIDs       []int                       `json:"token_ids"`
		PromptTokenIDs []int                       `json:"prompt_token_ids"`
		PromptLogprobs []map[string]map[string]any `json:"prompt_logprobs"`
	} `json:"choices"`
	Usage map[string]any `json:"usage"`
}

// TestVLLMCompletionsShape: vLLM's answer shapes over the same engine core as the SGLang dialect:
// the same numbers, named and arranged as vLLM names and arranges them.
func TestVLLMCompletionsShape(t *testing.T) {
	vl := startVLLM(t, nil, "--tensor-parallel-size", "2", "--seed", "1")
	prompt := []int{72, 101, 108, 108, 111, 44, 32, 119}
	code, body := vl.post(t, "/v1/completions", map[string]any{"prompt": prompt, "max_tokens": 4, "temperature": 0, "logprobs": 2, "echo": true,
		"return_token_ids": true, "return_tokens_as_token_ids": true, "prompt_logprobs": 2})
	if code != 200 {
		t.Fatalf("HTTP %d: %s", code, body)
	}
	var a vllmAnswer
	if err := json.Unmarshal(body, &a); err != nil || len(a.Choices) != 1 {
		t.Fatalf("%v: %s", err, body)
	}
	ch := a.Choices[0]
	if !reflect.DeepEqual(ch.PromptTokenIDs, prompt) || len(ch.TokenIDs) != 4 {
		t.Errorf("token ids: prompt %v, generated %v", ch.PromptTokenIDs, ch.TokenIDs)
	}
	lp := ch.Logprobs
	if len(lp.Tokens) != len(prompt)+4 || lp.Tokens[0] != "token_id:72" || lp.TokenLogprobs[0] != nil || lp.TopLogprobs[0] != nil {
		t.Fatalf("echo logprobs: %s", body)
	}
	for i := 1; i < len(lp.Tokens); i++ {
		own := lp.Tokens[i]
		if _, ok := lp.TopLogprobs[i][own]; !ok || len(lp.TopLogprobs[i]) < 2 || len(lp.TopLogprobs[i]) > 3 {
			t.Errorf("position %d: top_logprobs %v must hold the top 2 and the token %s", i, lp.TopLogprobs[i], own)
		}
	}
	if len(ch.PromptLogprobs) != len(prompt) || ch.PromptLogprobs[0] != nil {
		t.Fatalf("prompt_logprobs: %s", body)
	}
	e := ch.PromptLogprobs[1]["101"]
	if e == nil || e["decoded_token"] != "token_id:101" || e["rank"].(float64) < 1 || e["logprob"].(float64) != *lp.TokenLogprobs[1] {
		t.Errorf("prompt_logprobs[1] = %v (echo logprob %v)", ch.PromptLogprobs[1], *lp.TokenLogprobs[1])
	}
	if _, ok := a.Usage["prompt_tokens_details"]; !ok {
		t.Errorf("usage lacks vLLM's prompt_tokens_details: %v", a.Usage)
	}

	// The SGLang dialect of the same engine scores the same prompt identically.
	sg := start(t, nil, true, "--tp-size", "2", "--random-seed", "1")
	ref := sg.complete(t, map[string]any{"prompt": prompt, "max_tokens": 4, "temperature": 0, "logprobs": 2, "echo": true})
	for i := 1; i < len(prompt)+4; i++ {
		if *ref.Choices[0].Logprobs.TokenLogprobs[i] != *lp.TokenLogprobs[i] {
			t.Fatalf("position %d: sglang dialect %v, vllm dialect %v", i, *ref.Choices[0].Logprobs.TokenLogprobs[i], *lp.TokenLogprobs[i])
		}
	}

	for _, c := range []struct {
		req  map[string]any
		want string
	}{
		{map[string]any{"prompt": "x", "logprobs": 21}, "Requested sample logprobs of 21, which is greater than max allowed: 20"},
		{map[string]any{"prompt": "x", "prompt_logprobs": 1, "stream": true}, "`prompt_logprobs` are not available when `stream=True`."},
		{map[string]any{"prompt": "x", "max_tokens": 5000}, "This model's maximum context length is 4096 tokens"},
		{map[string]any{"prompt": "x", "max_tokens": 0}, "max_tokens must be at least 1"},
	} {
		code, body := vl.post(t, "/v1/completions", c.req)
		if code != 400 || !strings.Contains(string(body), c.want) {
			t.Errorf("%v: HTTP %d %s, want 400 %q", c.req, code, body, c.want)
		}
	}
	for path, want := range map[string]string{"/generate": `{"detail":"Not Found"}`, "/server_info": `{"detail":"Not Found"}`, "/version": `{"version":"0.22.1"}`} {
		var code int
		var body []byte
		if path == "/generate" {
			code, body = vl.post(t, path, map[string]any{"text": "x"})
		} else {
			code, body = vl.get(t, path)
		}
		if strings.TrimSpace(string(body)) != want || (code != 200) != strings.Contains(want, "detail") {
			t.Errorf("%s: HTTP %d %s, want %s", path, code, body, want)
		}
	}
}

// TestVLLMStartupLines: the vLLM V1 lines of vllm.md §4, in vLLM's prefix format, from one start.
func TestVLLMStartupLines(t *testing.T) {
	ts := startVLLM(t, map[string]string{"VLLM_LOG_STATS_INTERVAL": "0.05"}, "--tensor-parallel-size", "2")
	ts.complete(t, map[string]any{"prompt": "stats line", "max_tokens": 8, "temperature": 0})
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(ts.log.String(), "Engine 000: Avg prompt") && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond) // polling the log for the next stats line
	}
	log := ts.log.String()
	for _, re := range []string{
		`(?m)^\(APIServer pid=\d+\) INFO \d\d-\d\d \d\d:\d\d:\d\d \[api_server\.py:\d+\] vLLM API server version 0\.22\.1$`,
		`non-default args: \{'model_tag': '[^']+', 'port': 0, 'model': '[^']+', 'tensor_parallel_size': 2\}`,
		`\(Worker_TP1 pid=\d+\) INFO [^\]]+\] Model loading took \d+\.\d{4} GiB and \d+\.\d+ seconds`,
		`\(Worker_TP0 pid=\d+\) INFO [^\]]+\] Available KV cache memory: \d+\.\d{4} GiB`,
		`\(EngineCore_DP0 pid=\d+\) INFO [^\]]+\] GPU KV cache size: \d{1,3}(,\d{3})* tokens`,
		`Maximum concurrency for 4,096 tokens per request: \d+\.\d\dx`,
		`Using \['CUSTOM', 'PYNCCL'\] all-reduce backends \(in dispatch order\) for group 'tp:0'`,
		`Registering \d+ cuda graph addresses`,
		`Graph capturing finished in \d+ secs, took \d+\.\d+ GiB`,
		`init engine \(profile, create kv cache, warmup model\) took \d+\.\d\d seconds`,
		`Starting vLLM server on http://127\.0\.0\.1:\d+`,
		`\(APIServer pid=\d+\) INFO:     Application startup complete\.`,
		`Engine 000: Avg prompt throughput: \d+\.\d tokens/s, Avg generation throughput: \d+\.\d tokens/s, Running: \d+ reqs, Waiting: \d+ reqs, GPU KV cache usage: \d+\.\d%, Prefix cache hit rate: 0\.0%`,
	} {
		if !regexp.MustCompile(re).MatchString(log) {
			t.Errorf("log does not match %s", re)
		}
	}
	for _, bad := range []string{"ServerArgs(", "max_total_num_tokens=", "KV Cache is allocated", "fired up and ready to roll", "sglang", "Decode batch"} {
		if strings.Contains(log, bad) {
			t.Errorf("the vLLM dialect's log carries SGLang's %q", bad)
		}
	}
	if t.Failed() {
		t.Log(log)
	}
}

// TestVLLMMainUsageErrors: a bad vLLM command line exits 2 with vLLM's usage line and a message
// naming the flag.
func TestVLLMMainUsageErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"vllm", "serve", "m.json", "--bogus"}, "vllm serve: error: unrecognized arguments: --bogus"},
		{[]string{"--dialect", "vllm", "m.json", "-tp", "5"}, "--tensor-parallel-size 5: expected 1, 2, 4 or 8"},
		{[]string{"vllm"}, "expected the serve subcommand"},
	} {
		var stderr strings.Builder
		if code := Main(context.Background(), c.args, io.Discard, &stderr); code != 2 || !strings.Contains(stderr.String(), c.want) {
			t.Errorf("%q: exit %d, stderr %q; want 2 and %q", c.args, code, stderr.String(), c.want)
		}
	}
}

// TestVLLMHelpListsOptions: `vllm serve --help` prints the options (they were once printed
// before they were defined, so the list came out empty).
func TestVLLMHelpListsOptions(t *testing.T) {
	var stderr strings.Builder
	_, err := ParseVLLMFlags([]string{"--help"}, &stderr)
	if !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("err = %v, want flag.ErrHelp", err)
	}
	for _, want := range []string{"tensor-parallel-size", "gpu-memory-utilization", "disable-custom-all-reduce"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("--help does not list --%s:\n%s", want, stderr.String())
		}
	}
}
