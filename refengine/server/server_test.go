package server

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/reckon-ci/reckon/refengine/model"
	"github.com/reckon-ci/reckon/wire"
)

var prompts = []string{
	"Hello, world", "The answer is", "Once upon a time", "func main() {", "SELECT * FROM",
	"In the beginning", "Dear Sir or Madam,", "#include <stdio.h>",
}

func greedyReq(p string, n int) map[string]any {
	return map[string]any{"prompt": p, "max_tokens": n, "temperature": 0, "ignore_eos": true}
}

func TestGreedyIsDeterministic(t *testing.T) {
	a := start(t, nil, true, "--tp-size", "2")
	b := start(t, nil, true, "--tp-size", "2")
	for _, p := range prompts[:4] {
		x := a.complete(t, greedyReq(p, 24)).Choices[0]
		y := a.complete(t, greedyReq(p, 24)).Choices[0]
		z := b.complete(t, greedyReq(p, 24)).Choices[0]
		if fmt.Sprint(x.TokenIDs) != fmt.Sprint(y.TokenIDs) || fmt.Sprint(x.TokenIDs) != fmt.Sprint(z.TokenIDs) {
			t.Errorf("%q: greedy outputs differ: %v / %v / %v", p, x.TokenIDs, y.TokenIDs, z.TokenIDs)
		}
		if len(x.TokenIDs) != 24 || x.Text != model.Decode(x.TokenIDs) {
			t.Errorf("%q: %d tokens, text %q vs token ids %v", p, len(x.TokenIDs), x.Text, x.TokenIDs)
		}
	}
}

// TestGreedyAcrossTPAndBatching reports how greedy output agrees across tp sizes and under
// concurrent batching (custom allreduce is batch-invariant; the sums differ across tp sizes only
// at rounding level, so the outputs agree except near ties).
func TestGreedyAcrossTPAndBatching(t *testing.T) {
	var base [][]int
	for _, tpn := range []string{"1", "2", "4", "8"} {
		ts := start(t, nil, true, "--tp-size", tpn)
		outs := make([][]int, len(prompts))
		var wg sync.WaitGroup
		for i, p := range prompts {
			wg.Add(1)
			go func(i int, p string) {
				defer wg.Done()
				outs[i] = ts.complete(t, greedyReq(p, 32)).Choices[0].TokenIDs
			}(i, p)
		}
		wg.Wait()
		// batched (concurrent) vs alone
		for i, p := range prompts[:2] {
			alone := ts.complete(t, greedyReq(p, 32)).Choices[0].TokenIDs
			if fmt.Sprint(alone) != fmt.Sprint(outs[i]) {
				t.Errorf("tp %s: %q differs batched vs alone (custom allreduce should be batch-invariant)", tpn, p)
			}
		}
		if base == nil {
			base = outs
			continue
		}
		same, total := 0, 0
		for i := range outs {
			for j := range outs[i] {
				total++
				if j < len(base[i]) && outs[i][j] == base[i][j] {
					same++
				} else {
					break
				}
			}
		}
		frac := float64(same) / float64(total)
		t.Logf("tp %s vs tp 1: greedy prefix agreement %.3f", tpn, frac)
		if frac < 0.5 {
			t.Errorf("tp %s vs tp 1: greedy prefix agreement %.3f is far below what rounding-level differences give", tpn, frac)
		}
	}
}

// TestSpeculativeIsLossless: EAGLE3 greedy output equals non-speculative greedy output on 64
// prompts; acceptance is high but below the maximum.
func TestSpeculativeIsLossless(t *testing.T) {
	plain := start(t, nil, true, "--tp-size", "2")
	spec := start(t, nil, true, "--tp-size", "2", "--speculative-algorithm", "EAGLE3", "--speculative-num-steps", "3", "--speculative-num-draft-tokens", "4", "--decode-log-interval", "5")
	var wg sync.WaitGroup
	var mu sync.Mutex
	mismatch := 0
	for i := 0; i < 64; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			p := fmt.Sprintf("%s #%d", prompts[i%len(prompts)], i)
			a := plain.complete(t, greedyReq(p, 40)).Choices[0].TokenIDs
			b := spec.complete(t, greedyReq(p, 40)).Choices[0].TokenIDs
			if fmt.Sprint(a) != fmt.Sprint(b) {
				mu.Lock()
				mismatch++
				mu.Unlock()
				t.Errorf("prompt %q: speculative %v != plain %v", p, b, a)
			}
		}(i)
	}
	wg.Wait()
	info := spec.e.ServerInfo()
	al, _ := info["avg_spec_accept_length"].(float64)
	t.Logf("64 prompts: %d mismatches; avg accept length %.3f (max %d)", mismatch, al, 4)
	if !(al > 1.5 && al < 4) {
		t.Errorf("avg accept length %.3f: want high (> 1.5) but below the maximum 4", al)
	}
	if !regexp.MustCompile(`Decode batch, .*accept len: [\d.]+, cuda graph`).MatchString(spec.log.String()) {
		t.Errorf("no Decode batch line with accept len in the log")
	}
	_, m := spec.get(t, "/metrics")
	if !regexp.MustCompile(`sglang:spec_accept_length\{[^}]*\} [1-9]`).Match(m) {
		t.Errorf("/metrics lacks a positive sglang:spec_accept_length:\n%s", m)
	}
	// draft weights, KV and graph reserve are in the plan
	p0, s0 := plain.e.Plans[0], spec.e.Plans[0]
	if !(s0.Weights > p0.Weights && s0.GraphReserve > p0.GraphReserve && s0.KVBytesPerToken > p0.KVBytesPerToken) {
		t.Errorf("speculative plan %+v does not add draft weights/graph/KV to plain %+v", s0.Input, p0.Input)
	}
}

func TestMalformedRequests(t *testing.T) {
	ts := start(t, nil, true, "--max-total-tokens", "512", "--context-length", "256")
	cases := []struct {
		name, path, body, want string
	}{
		{"invalid json", "/v1/completions", `{"prompt": "x",`, "invalid JSON"},
		{"no prompt", "/v1/completions", `{"max_tokens": 3}`, `"prompt" is required`},
		{"prompt object", "/v1/completions", `{"prompt": {"a": 1}}`, `"prompt" must be`},
		{"empty list", "/v1/completions", `{"prompt": []}`, "empty list"},
		{"bad token id", "/v1/completions", `{"prompt": [1, 2, 99999]}`, "out of range"},
		{"negative max_tokens", "/v1/completions", `{"prompt": "x", "max_tokens": -1}`, "max_tokens"},
		{"logprobs > 20", "/v1/completions", `{"prompt": "x", "logprobs": 21}`, "logprobs"},
		{"negative temperature", "/v1/completions", `{"prompt": "x", "temperature": -0.5}`, "temperature"},
		{"bad top_p", "/v1/completions", `{"prompt": "x", "top_p": 0}`, "top_p"},
		{"bad stop", "/v1/completions", `{"prompt": "x", "stop": 5}`, "stop"},
		{"wrong type", "/v1/completions", `{"prompt": "x", "max_tokens": "ten"}`, "invalid JSON"},
		{"too long", "/v1/completions", fmt.Sprintf(`{"prompt": %q}`, strings.Repeat("a", 300)), "Input length (300 tokens) exceeds the maximum allowed length (255 tokens)"},
		{"generate empty", "/generate", `{"sampling_params": {}}`, `"text" or "input_ids"`},
		{"generate bad ids", "/generate", `{"input_ids": [-1]}`, "out of range"},
		{"generate bad top", "/generate", `{"text": "x", "return_logprob": true, "top_logprobs_num": 50}`, "top_logprobs_num"},
	}
	for _, c := range cases {
		code, body := ts.post(t, c.path, c.body)
		var er wire.ErrorResponse
		if code != http.StatusBadRequest || json.Unmarshal(body, &er) != nil || !strings.Contains(er.Error.Message, c.want) || er.Error.Code != 400 {
			t.Errorf("%s: HTTP %d %s; want 400 with an error message containing %q", c.name, code, body, c.want)
		}
	}
	if code, _ := ts.get(t, "/no/such/route"); code != http.StatusNotFound {
		t.Errorf("unknown route: HTTP %d, want 404", code)
	}
	if code, body := ts.get(t, "/v1/completions"); code != http.StatusMethodNotAllowed || !strings.Contains(string(body), "method not allowed") {
		t.Errorf("GET /v1/completions: HTTP %d %s, want 405 with a JSON error", code, body)
	}
	// still serving
	if out := ts.complete(t, greedyReq("still alive?", 4)); len(out.Choices[0].TokenIDs) != 4 {
		t.Errorf("server not answering after malformed requests: %+v", out)
	}
	// max_tokens is clamped to the context
	out := ts.complete(t, greedyReq(strings.Repeat("b", 250), 100))
	if n := out.Usage.CompletionTokens; n != 6 || *out.Choices[0].FinishReason != "length" {
		t.Errorf("prompt 250 + max_tokens 100 with context 256: got %d tokens, finish %v; want 6, length", n, *out.Choices[0].FinishReason)
	}
}

func TestEchoLogprobsAndTokenPrompts(t *testing.T) {
	ts := start(t, nil, true, "--tp-size", "2")
	p := "Echo me"
	out := ts.complete(t, map[string]any{"prompt": p, "max_tokens": 5, "temperature": 0, "logprobs": 20, "echo": true, "ignore_eos": true})
	c := out.Choices[0]
	lp := c.Logprobs
	n := len(p) + 5
	if lp == nil || len(lp.Tokens) != n || len(lp.TokenLogprobs) != n || len(lp.TopLogprobs) != n || len(lp.TextOffset) != n {
		t.Fatalf("echo logprobs: want %d entries, got %+v", n, lp)
	}
	if lp.TokenLogprobs[0] != nil || !strings.HasPrefix(c.Text, p) {
		t.Errorf("echo: first prompt logprob %v (want null), text %q (want prefix %q)", lp.TokenLogprobs[0], c.Text, p)
	}
	for i := 1; i < n; i++ {
		v := *lp.TokenLogprobs[i]
		if v > 0 || math.IsNaN(v) || len(lp.TopLogprobs[i]) != 20 {
			t.Fatalf("position %d: logprob %v, %d alternatives", i, v, len(lp.TopLogprobs[i]))
		}
		if i >= len(p) { // generated, greedy: the chosen token is the top-1
			best := math.Inf(-1)
			for _, x := range lp.TopLogprobs[i] {
				best = math.Max(best, x)
			}
			if v != best {
				t.Errorf("generated position %d: greedy token logprob %v is not the top-1 %v", i, v, best)
			}
		}
	}
	// prompt as token ids gives the same continuation
	ids := model.Encode(p)
	out2 := ts.complete(t, map[string]any{"prompt": ids, "max_tokens": 5, "temperature": 0, "ignore_eos": true})
	if fmt.Sprint(out2.Choices[0].TokenIDs) != fmt.Sprint(c.TokenIDs) {
		t.Errorf("token-id prompt: %v, text prompt: %v", out2.Choices[0].TokenIDs, c.TokenIDs)
	}
	// batch of prompts
	out3 := ts.complete(t, map[string]any{"prompt": []string{"a", "b", "c"}, "max_tokens": 3, "temperature": 0})
	if len(out3.Choices) != 3 || out3.Choices[2].Index != 2 {
		t.Errorf("batch prompt: %+v", out3.Choices)
	}
}

func TestStopStringsAndSeededSampling(t *testing.T) {
	ts := start(t, nil, true)
	full := ts.complete(t, greedyReq("Stop here", 30)).Choices[0].Text
	stop := full[10:12]
	i := strings.Index(full, stop)
	out := ts.complete(t, map[string]any{"prompt": "Stop here", "max_tokens": 30, "temperature": 0, "stop": []string{stop}})
	c := out.Choices[0]
	if c.Text != full[:i] || *c.FinishReason != "stop" {
		t.Errorf("stop %q: text %q finish %s; want %q and stop", stop, c.Text, *c.FinishReason, full[:i])
	}
	seed := func(s int) string {
		return ts.complete(t, map[string]any{"prompt": "Sample", "max_tokens": 20, "temperature": 1.0, "seed": s, "ignore_eos": true}).Choices[0].Text
	}
	if a, b := seed(7), seed(7); a != b {
		t.Errorf("same seed, different samples: %q vs %q", a, b)
	}
	if a, b := seed(7), seed(8); a == b {
		t.Errorf("seeds 7 and 8 gave the same 20-token sample %q", a)
	}
}

func TestStreaming(t *testing.T) {
	ts := start(t, nil, true)
	want := ts.complete(t, greedyReq("Stream it", 20)).Choices[0]
	body, _ := json.Marshal(map[string]any{"prompt": "Stream it", "max_tokens": 20, "temperature": 0, "ignore_eos": true, "stream": true, "stream_options": map[string]any{"include_usage": true}})
	resp, err := http.Post(ts.url+"/v1/completions", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		t.Errorf("content type %q", ct)
	}
	var text strings.Builder
	var ids []int
	var usage *wire.Usage
	var finish string
	done := false
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "data: ") {
			continue
		}
		data := strings.TrimPrefix(line, "data: ")
		if data == "[DONE]" {
			done = true
			break
		}
		var ch wire.CompletionResponse
		if err := json.Unmarshal([]byte(data), &ch); err != nil {
			t.Fatalf("chunk %q: %v", data, err)
		}
		if ch.Usage != nil {
			usage = ch.Usage
		}
		for _, c := range ch.Choices {
			text.WriteString(c.Text)
			ids = append(ids, c.TokenIDs...)
			if c.FinishReason != nil {
				finish = *c.FinishReason
			}
		}
	}
	if !done || text.String() != want.Text || fmt.Sprint(ids) != fmt.Sprint(want.TokenIDs) || finish != "length" {
		t.Errorf("stream: done=%v text %q ids %v finish %q; want %q %v length", done, text.String(), ids, finish, want.Text, want.TokenIDs)
	}
	if usage == nil || usage.CompletionTokens != 20 || usage.PromptTokens != len("Stream it") {
		t.Errorf("usage chunk %+v", usage)
	}
}

func TestGenerateNative(t *testing.T) {
	ts := start(t, nil, true)
	want := ts.complete(t, greedyReq("Native", 8)).Choices[0]
	code, body := ts.post(t, "/generate", map[string]any{"text": "Native", "sampling_params": map[string]any{"max_new_tokens": 8, "temperature": 0, "ignore_eos": true}, "return_logprob": true, "top_logprobs_num": 3, "logprob_start_len": 0})
	var g wire.GenerateResponse
	if code != 200 || json.Unmarshal(body, &g) != nil {
		t.Fatalf("generate: HTTP %d %s", code, body)
	}
	if g.Text != want.Text || g.MetaInfo.CompletionTokens != 8 || len(g.MetaInfo.OutputTokenLogprobs) != 8 || len(g.MetaInfo.OutputTopLogprobs[0]) != 3 || len(g.MetaInfo.InputTokenLogprobs) != len("Native") {
		t.Errorf("generate: %s", body)
	}
	if g.MetaInfo.FinishReason["type"] != "length" {
		t.Errorf("finish reason %v", g.MetaInfo.FinishReason)
	}
}

// logNumbers extracts (rank-0) numbers from the start-up log with the patterns of sglang.md §4.
func logNumbers(t *testing.T, log string) (kvTokens int, kvGB, weightGB, availGB float64) {
	t.Helper()
	m := regexp.MustCompile(`KV Cache is allocated\.(?: dtype: ([\w.]+),)? #tokens: (\d+), K size: ([\d.]+) GB, V size: ([\d.]+) GB`).FindStringSubmatch(log)
	w := regexp.MustCompile(`Load weight end\.(?: elapsed=([\d.]+) s,)? type=(\w+),(?: dtype=([\w.]+),)? avail mem=([\d.]+) GB, mem usage=(-?[\d.]+) GB`).FindStringSubmatch(log)
	b := regexp.MustCompile(`max_total_num_tokens=(\d+),.* available_gpu_mem=([\d.]+) GB`).FindStringSubmatch(log)
	if m == nil || w == nil || b == nil {
		t.Fatalf("start-up lines missing from log:\n%s", log)
	}
	kvTokens, _ = strconv.Atoi(m[2])
	k, _ := strconv.ParseFloat(m[3], 64)
	v, _ := strconv.ParseFloat(m[4], 64)
	weightGB, _ = strconv.ParseFloat(w[5], 64)
	if tok, _ := strconv.Atoi(b[1]); tok != kvTokens {
		t.Errorf("max_total_num_tokens=%d but KV line says %d", tok, kvTokens)
	}
	availGB, _ = strconv.ParseFloat(b[2], 64)
	return kvTokens, k + v, weightGB, availGB
}

// TestLogsMatchServerInfo: the numbers in the SGLang-format log lines equal /get_server_info's.
func TestLogsMatchServerInfo(t *testing.T) {
	for _, args := range [][]string{{"--tp-size", "4"}, {"--tp-size", "4", "--speculative-algorithm", "EAGLE3"}} {
		t.Run(strings.Join(args, " "), func(t *testing.T) { logsMatchServerInfo(t, args) })
	}
}

func logsMatchServerInfo(t *testing.T, args []string) {
	ts := start(t, nil, true, args...)
	tokens, kv, weight, _ := logNumbers(t, ts.log.String())
	_, body := ts.get(t, "/get_server_info")
	var info wire.ServerInfo
	if err := json.Unmarshal(body, &info); err != nil {
		t.Fatal(err)
	}
	mu := info.MemoryUsage
	if mu == nil || info.MaxTotalNumTokens != tokens || mu.TokenCapacity != tokens || math.Abs(mu.KVCache-kv) > 2e-4 || math.Abs(mu.Weight-weight) > 2e-4 {
		t.Errorf("log: tokens %d kv %.4f weight %.4f; server info %s", tokens, kv, weight, body)
	}
	if ts.e.ServerInfo()["refengine"].(map[string]any)["allreduce_backend"] != "custom" || len(info.InternalStates) != 1 || info.AllReduceBackend != "" {
		t.Errorf("allreduce backend (only in the refengine object): %s", body)
	}
	for r := 0; r < 4; r++ {
		if !strings.Contains(ts.log.String(), fmt.Sprintf(" TP%d] KV Cache is allocated", r)) {
			t.Errorf("no KV line for TP%d", r)
		}
	}
	if !strings.Contains(ts.log.String(), "The server is fired up and ready to roll!") {
		t.Error("no ready line")
	}
	// the remaining patterns of sglang.md §4 (prefix, graph capture, decode stats)
	for _, re := range []string{
		`(?m)^\[\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2} TP3\] `,
		`Capture (target|draft) (decode|verify|extend|prefill) (?:CUDA|NPU|CPU|XPU) graph end\. elapsed=([\d.]+) s(?:, mem usage=(-?[\d.]+) GB)?(?:, avail mem=([\d.]+) GB)?`,
		`Uvicorn running on http://127\.0\.0\.1:\d+ \(Press CTRL\+C to quit\)`,
	} {
		if !regexp.MustCompile(re).MatchString(ts.log.String()) {
			t.Errorf("log does not match %s", re)
		}
	}
	var wg sync.WaitGroup
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func(i int) { defer wg.Done(); ts.complete(t, greedyReq(fmt.Sprint("decode lines ", i), 50)) }(i)
	}
	wg.Wait()
	dec := regexp.MustCompile(`Decode batch[.,](?: \[\d+\])? #running-req: (\d+), #token: (\d+), token usage: ([\d.]+), (?:accept len: ([\d.]+), )?cuda graph: (True|False), gen throughput \(token/s\): ([\d.]+), #queue-req: (\d+)`)
	if !dec.MatchString(ts.log.String()) {
		t.Errorf("no Decode batch line in the expected format:\n%s", ts.log.String())
	}
}

// TestAllReduceSelection covers SGLang's v1 selection rules (0.4; personas_test.go has v2) and
// the memory each choice costs.
func TestAllReduceSelection(t *testing.T) {
	force := map[string]string{ForceCustomAREnv: "1"}
	cases := []struct {
		name    string
		env     map[string]string
		args    []string
		backend string
		warn    bool
	}{
		{"nvlink tp4", nil, []string{"--tp-size", "4"}, "custom", false},
		{"nvlink tp4 disabled", nil, []string{"--tp-size", "4", "--disable-custom-all-reduce"}, "nccl", false},
		{"pcie tp2", nil, []string{"--tp-size", "2", "--topology", "pcie"}, "custom", false},
		{"pcie tp8 refused", nil, []string{"--tp-size", "8", "--topology", "pcie", "--device-memory", "192MiB"}, "nccl", true},
		{"pcie tp8 forced", force, []string{"--tp-size", "8", "--topology", "pcie", "--device-memory", "192MiB"}, "custom", false},
	}
	tokens := map[string]int{}
	for _, c := range cases {
		ts := start(t, c.env, false, append([]string{"--engine-version", "0.4"}, c.args...)...)
		if ts.e.Backend != c.backend {
			t.Errorf("%s: backend %s, want %s", c.name, ts.e.Backend, c.backend)
		}
		hasWarn := strings.Contains(ts.log.String(), "Custom allreduce is disabled because it's not supported on more than two PCIe-only GPUs. To silence this warning, specify disable_custom_all_reduce=True explicitly.")
		if hasWarn != c.warn {
			t.Errorf("%s: SGLang's PCIe warning present=%v, want %v", c.name, hasWarn, c.warn)
		}
		if strings.Contains(ts.log.String(), "Allreduce backend") {
			t.Errorf("%s: a private 'Allreduce backend' line", c.name)
		}
		tokens[c.name] = ts.e.Alloc.CapacityTokens()
		// KV shrinks by exactly the custom-allreduce buffers (to a page)
		p := ts.e.Plans[0]
		if c.backend == "custom" && p.CustomAR == 0 || c.backend == "nccl" && p.CustomAR != 0 {
			t.Errorf("%s: custom allreduce buffers %d", c.name, p.CustomAR)
		}
		_ = ts.stop()
	}
	on, off := start(t, nil, false, "--tp-size", "4"), start(t, nil, false, "--tp-size", "4", "--disable-custom-all-reduce")
	a, b := on.e.Plans[0], off.e.Plans[0]
	if b.KVBudget-a.KVBudget != a.CustomAR {
		t.Errorf("KV budget nccl %d - custom %d != custom buffers %d", b.KVBudget, a.KVBudget, a.CustomAR)
	}
	lost := tokens["pcie tp8 refused"] - tokens["pcie tp8 forced"]
	frac := float64(lost) / float64(tokens["pcie tp8 refused"])
	t.Logf("tp8 PCIe: KV tokens nccl %d, forced custom %d (-%.0f%%)", tokens["pcie tp8 refused"], tokens["pcie tp8 forced"], 100*frac)
	if frac < 0.8 {
		t.Errorf("forced custom on PCIe lost only %.0f%% of the KV cache; its prefill-sized workspace should take most of it", 100*frac)
	}
	if s := start(t, force, false, "--tp-size", "8", "--topology", "pcie", "--device-memory", "192MiB"); s.e.ServerInfo()["refengine"].(map[string]any)["custom_allreduce_forced"] != true ||
		strings.Contains(s.log.String(), "IPC workspace sized") {
		t.Error("forced custom: not reported in the refengine object (or reported in a log line no release prints)")
	}
	// on a small device the forced workspace does not fit: a clear start-up error
	opts, _ := ParseFlags([]string{"--model-path", modelPath(t), "--tp-size", "8", "--topology", "pcie", "--device-memory", "64MiB"}, io.Discard)
	if _, err := Build(opts, NewLogger(io.Discard, 8), func(k string) string { return force[k] }); err == nil || !strings.Contains(err.Error(), "Not enough memory") {
		t.Errorf("forced custom on a 64 MiB device: got %v, want Not enough memory", err)
	}
}

func TestGraphReserveGrowsWithMaxBS(t *testing.T) {
	a := start(t, nil, false, "--cuda-graph-max-bs", "16")
	b := start(t, nil, false, "--cuda-graph-max-bs", "128")
	pa, pb := a.e.Plans[0], b.e.Plans[0]
	if pb.GraphReserve <= pa.GraphReserve || pa.KVBudget-pb.KVBudget != pb.GraphReserve-pa.GraphReserve {
		t.Errorf("graph reserve %d -> %d, KV budget %d -> %d: KV must shrink by exactly the reserve's growth", pa.GraphReserve, pb.GraphReserve, pa.KVBudget, pb.KVBudget)
	}
}

func TestMetrics(t *testing.T) {
	ts := start(t, nil, true)
	ts.complete(t, greedyReq("metrics", 7))
	code, body := ts.get(t, "/metrics")
	if code != 200 {
		t.Fatalf("metrics: HTTP %d", code)
	}
	for _, name := range []string{"sglang:num_running_reqs", "sglang:num_queue_reqs", "sglang:token_usage", "sglang:generation_tokens_total", "sglang:spec_accept_length"} {
		if !bytes.Contains(body, []byte("# TYPE "+name)) {
			t.Errorf("metrics lack %s", name)
		}
	}
	m := regexp.MustCompile(`sglang:generation_tokens_total\{[^}]*\} (\d+)`).FindSubmatch(body)
	if m == nil || string(m[1]) < "8" && len(m[1]) == 1 {
		t.Errorf("generation_tokens_total: %s", m)
	}
	for _, path := range []string{"/health", "/health_generate", "/v1/models", "/flush_cache", "/get_model_info", "/server_info"} {
		if code, body := ts.get(t, path); code != 200 {
			t.Errorf("GET %s: HTTP %d %s", path, code, body)
		}
	}
}

// TestBF16 runs the engine with --dtype bfloat16: deterministic, close to float32 but not equal.
func TestBF16(t *testing.T) {
	f32 := start(t, nil, true, "--tp-size", "4")
	bf := start(t, nil, true, "--tp-size", "4", "--dtype", "bfloat16")
	p := "Rounding activations to bfloat16 at every allreduce boundary."
	a := echoLogprobs(t, f32, p)
	b := echoLogprobs(t, bf, p)
	c := echoLogprobs(t, bf, p)
	d := maxAbsDiff(a, b)
	t.Logf("bf16 vs float32: max |Δ prompt logprob| %.3g", d)
	if d == 0 || d > 0.5 {
		t.Errorf("bf16 vs float32 prompt logprobs differ by %.3g; want a small non-zero difference", d)
	}
	if maxAbsDiff(b, c) != 0 {
		t.Error("bf16 run is not deterministic")
	}
}

// TestSpeculativeLosslessBF16TP4 is the default gate's configuration: tp 4, bf16, custom allreduce.
func TestSpeculativeLosslessBF16TP4(t *testing.T) {
	args := []string{"--tp-size", "4", "--dtype", "bfloat16", "--random-seed", "1"}
	plain := start(t, nil, true, args...)
	spec := start(t, nil, true, append(args, "--speculative-algorithm", "EAGLE3")...)
	var wg sync.WaitGroup
	for i, p := range prompts {
		wg.Add(1)
		go func(i int, p string) {
			defer wg.Done()
			a := plain.complete(t, greedyReq(p, 24)).Choices[0].TokenIDs
			b := spec.complete(t, greedyReq(p, 24)).Choices[0].TokenIDs
			if fmt.Sprint(a) != fmt.Sprint(b) {
				t.Errorf("%q: speculative %v != plain %v", p, b, a)
			}
		}(i, p)
	}
	wg.Wait()
}
