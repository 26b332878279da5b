package server

import (
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"
)

// TestPersonaVersions: --version prints each persona's reported version, the endpoints report it,
// SGLang 0.3 has only /get_server_info, and an unknown release is a usage error listing them.
func TestPersonaVersions(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--version"}, "0.0.0.dev1+grefengine"},
		{[]string{"--engine-version", "0.3", "--version"}, "0.3.6"},
		{[]string{"--version", "--engine-version=0.4"}, "0.4.10"},
		{[]string{"--engine-version", "latest", "--version"}, "0.0.0.dev1+grefengine"},
		{[]string{"vllm", "--version"}, "0.22.1"},
		{[]string{"vllm", "--engine-version", "0.10", "--version"}, "0.10.2"},
		{[]string{"vllm", "--engine-version", "0.12", "--version"}, "0.12.0"},
		{[]string{"vllm", "--engine-version", "latest", "--version"}, "0.22.1"},
	} {
		var out, errb strings.Builder
		if code := Main(context.Background(), c.args, &out, &errb); code != 0 || out.String() != c.want+"\n" {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want 0 and %q", c.args, code, out.String(), errb.String(), c.want)
		}
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--engine-version", "0.5", "--version"}, `--engine-version "0.5": unknown sglang release; expected one of 0.3, 0.4, latest`},
		{[]string{"--engine-version", "0.11", "--port", "0"}, `expected one of 0.3, 0.4, latest`},
		{[]string{"vllm", "--engine-version", "0.11", "serve", "m.json"}, `--engine-version "0.11": unknown vllm release; expected one of 0.10, 0.12, 0.22, latest`},
	} {
		var errb strings.Builder
		if code := Main(context.Background(), c.args, io.Discard, &errb); code != 2 || !strings.Contains(errb.String(), c.want) {
			t.Errorf("%q: exit %d, stderr %q; want 2 and %q", c.args, code, errb.String(), c.want)
		}
	}
	for _, c := range []struct {
		persona, version string
		oldOnly          bool
	}{{"0.3", "0.3.6", true}, {"0.4", "0.4.10", false}, {"latest", "0.0.0.dev1+grefengine", false}} {
		ts := start(t, nil, true, "--engine-version", c.persona)
		if v := ts.info(t)["version"]; v != c.version {
			t.Errorf("%s: /get_server_info version %v, want %s", c.persona, v, c.version)
		}
		for _, path := range []string{"/server_info", "/model_info"} {
			if code, _ := ts.get(t, path); (code == 404) != c.oldOnly {
				t.Errorf("%s: GET %s = %d (only the old names exist: %v)", c.persona, path, code, c.oldOnly)
			}
		}
		if ref, _ := ts.info(t)["persona"].(string); ref != c.persona {
			t.Errorf("%s: refengine.persona %q", c.persona, ref)
		}
		_ = ts.stop()
	}
	for _, c := range []struct{ persona, version string }{{"0.10", "0.10.2"}, {"0.12", "0.12.0"}, {"0.22", "0.22.1"}} {
		ts := startVLLM(t, nil, "--engine-version", c.persona)
		if _, body := ts.get(t, "/version"); strings.TrimSpace(string(body)) != `{"version":"`+c.version+`"}` {
			t.Errorf("vllm %s: /version %s", c.persona, body)
		}
		if !strings.Contains(ts.log.String(), "vLLM API server version "+c.version+"\n") {
			t.Errorf("vllm %s: no version line", c.persona)
		}
		_ = ts.stop()
	}
}

// arCase is one start of the allreduce-rule table.
type arCase struct {
	name    string
	env     map[string]string
	args    []string
	backend string
	present []string // regexps the log must match
	absent  []string // substrings the log must not contain
}

// TestPersonaAllReduceRules: the custom-allreduce rule and its log lines of every persona at
// NVLink tp4, PCIe tp2 and PCIe tp4.
func TestPersonaAllReduceRules(t *testing.T) {
	v1Warn := "Custom allreduce is disabled because it's not supported on more than two PCIe-only GPUs. To silence this warning, specify disable_custom_all_reduce=True explicitly."
	v2Warn := "CustomAllReduceV2 is disabled because it's not supported on more than two PCIe-only GPUs. To silence this warning, specify disable_custom_all_reduce=True explicitly."
	everyRank := func(msg string) []string {
		var out []string
		for r := 0; r < 4; r++ {
			out = append(out, fmt.Sprintf(`TP%d\] %s`, r, regexp.QuoteMeta(msg)))
		}
		return out
	}
	nvl4 := []string{"--tp-size", "4"}
	pcie2 := []string{"--tp-size", "2", "--topology", "pcie"}
	pcie4 := []string{"--tp-size", "4", "--topology", "pcie"}
	v1Off := map[string]string{CustomARV2Env: "0"}
	sglang := []arCase{
		{"0.3 nvlink tp4", nil, append([]string{"--engine-version", "0.3"}, nvl4...), "custom", []string{`TP0\] Registering \d+ cuda graph addresses`}, []string{"is disabled"}},
		{"0.4 nvlink tp4", nil, append([]string{"--engine-version", "0.4"}, nvl4...), "custom", []string{`TP0\] Registering \d+ cuda graph addresses`}, []string{"is disabled", "TP1] Registering"}},
		{"0.4 nvlink tp4 eager", nil, append([]string{"--engine-version", "0.4", "--disable-cuda-graph"}, nvl4...), "custom", nil, []string{"Registering"}},
		{"0.4 pcie tp2", nil, append([]string{"--engine-version", "0.4"}, pcie2...), "custom", []string{`Registering \d+ cuda graph addresses`}, []string{"is disabled"}},
		{"0.4 pcie tp4", nil, append([]string{"--engine-version", "0.4"}, pcie4...), "nccl", everyRank(v1Warn), []string{"Registering", "V2"}},
		{"latest nvlink tp4", nil, nvl4, "custom", nil, []string{"Registering", "is disabled", "all-reduce"}},
		{"latest pcie tp2", nil, pcie2, "nccl", nil, []string{"Registering", "is disabled", "all-reduce"}},
		{"latest pcie tp4", nil, pcie4, "nccl", everyRank(v2Warn), []string{"Registering", "Custom allreduce is disabled"}},
		{"latest v1 nvlink tp4", v1Off, nvl4, "custom", []string{`TP0\] Registering \d+ cuda graph addresses`}, nil},
		{"latest v1 pcie tp2", v1Off, pcie2, "custom", []string{`TP0\] Registering \d+ cuda graph addresses`}, []string{"is disabled"}},
		{"latest v1 pcie tp4", map[string]string{CustomARV2Env: "false"}, pcie4, "nccl", everyRank(v1Warn), []string{"V2"}},
	}
	check := func(c arCase, ts *testServer) {
		t.Helper()
		log := ts.log.String()
		if ts.e.Backend != c.backend {
			t.Errorf("%s: backend %s, want %s", c.name, ts.e.Backend, c.backend)
		}
		if got := ts.e.ServerInfo()["refengine"].(map[string]any)["allreduce_backend"]; got != c.backend {
			t.Errorf("%s: refengine.allreduce_backend %v", c.name, got)
		}
		for _, re := range c.present {
			if !regexp.MustCompile(re).MatchString(log) {
				t.Errorf("%s: log does not match %s", c.name, re)
			}
		}
		for _, s := range append(c.absent, "Allreduce backend", "Memory plan per rank") {
			if strings.Contains(log, s) {
				t.Errorf("%s: log contains %q", c.name, s)
			}
		}
		if t.Failed() {
			t.Log(log)
		}
	}
	for _, c := range sglang {
		ts := start(t, c.env, false, c.args...)
		check(c, ts)
		_ = ts.stop()
	}
	workerWarn := func(r int) string {
		return fmt.Sprintf(`\(Worker_TP%d pid=\d+\) WARNING [^\]]+\] %s`, r, regexp.QuoteMeta(v1Warn))
	}
	usingLine := func(b string) string {
		return `(?m)^\(Worker pid=\d+\) INFO [^\]]+\] Using ` + regexp.QuoteMeta(b) + ` all-reduce backends \(in dispatch order\) for group 'tp:0'$`
	}
	vllm := []arCase{
		{"vllm 0.10 nvlink tp4", nil, []string{"--engine-version", "0.10", "-tp", "4"}, "custom", []string{`\(Worker_TP3 pid=\d+\) INFO [^\]]+\] Registering \d+ cuda graph addresses`}, []string{"all-reduce backends", "is disabled"}},
		{"vllm 0.12 pcie tp2", nil, []string{"--engine-version", "0.12", "-tp", "2", "--topology", "pcie"}, "custom", []string{`Registering \d+ cuda graph addresses`}, []string{"all-reduce backends", "is disabled"}},
		{"vllm 0.12 pcie tp4", nil, []string{"--engine-version", "0.12", "-tp", "4", "--topology", "pcie"}, "nccl", []string{workerWarn(0), workerWarn(3)}, []string{"all-reduce backends", "Registering"}},
		{"vllm 0.22 nvlink tp4", nil, []string{"-tp", "4"}, "custom", []string{usingLine("['CUSTOM', 'PYNCCL']")}, []string{"is disabled"}},
		{"vllm 0.22 pcie tp4", nil, []string{"-tp", "4", "--topology", "pcie"}, "nccl", []string{usingLine("['PYNCCL']"), workerWarn(2)}, []string{"CUSTOM'"}},
	}
	for _, c := range vllm {
		ts := startVLLM(t, c.env, c.args...)
		check(c, ts)
		if n := strings.Count(ts.log.String(), "all-reduce backends"); strings.HasPrefix(c.name, "vllm 0.22") && n != 1 {
			t.Errorf("%s: %d all-reduce backends lines, want exactly one", c.name, n)
		}
		_ = ts.stop()
	}
}

// TestPersonaReadinessAndLogLevels: the ready lines of each persona, and the log levels that drop
// INFO lines (SGLang --log-level, vLLM VLLM_LOGGING_LEVEL and --uvicorn-log-level).
func TestPersonaReadinessAndLogLevels(t *testing.T) {
	ts := start(t, nil, true, "--log-level", "warning", "--tp-size", "4", "--topology", "pcie")
	log := ts.log.String()
	for _, s := range []string{"fired up and ready to roll", "KV Cache is allocated", "max_total_num_tokens=", "ServerArgs(", "INFO:     ", "Load weight"} {
		if strings.Contains(log, s) {
			t.Errorf("--log-level warning: log contains the INFO line %q", s)
		}
	}
	if !strings.Contains(log, "CustomAllReduceV2 is disabled") {
		t.Errorf("--log-level warning dropped a WARNING line:\n%s", log)
	}
	if code, _ := ts.get(t, "/health"); code != 200 {
		t.Errorf("--log-level warning: /health %d after readiness", code)
	}
	_ = ts.stop()
	if _, err := ParseFlags([]string{"--log-level", "loud"}, io.Discard); err == nil || !strings.Contains(err.Error(), "--log-level") {
		t.Errorf("--log-level loud: %v", err)
	}
	ts = start(t, nil, true, "--log-level", "info", "--engine-version", "0.3")
	if !strings.Contains(ts.log.String(), "The server is fired up and ready to roll!") {
		t.Error("0.3: no ready line")
	}
	_ = ts.stop()

	for _, c := range []struct {
		persona, ready, notReady string
	}{{"0.10", `Starting vLLM API server 0 on http://127\.0\.0\.1:\d+`, "Starting vLLM server on"},
		{"0.12", `Starting vLLM API server 0 on http://127\.0\.0\.1:\d+`, "Starting vLLM server on"},
		{"0.22", `(?m)\(APIServer pid=\d+\) INFO [^\]]+\] Starting vLLM server on http://127\.0\.0\.1:\d+$`, "Starting vLLM API server"}} {
		ts := startVLLM(t, nil, "--engine-version", c.persona)
		log := ts.log.String()
		if !regexp.MustCompile(c.ready).MatchString(log) || strings.Contains(log, c.notReady) || !strings.Contains(log, "INFO:     Application startup complete.") {
			t.Errorf("vllm %s: ready lines wrong:\n%s", c.persona, log)
		}
		_ = ts.stop()
	}
	ts = startVLLM(t, map[string]string{"VLLM_LOGGING_LEVEL": "WARNING"})
	log = ts.log.String()
	if strings.Contains(log, " INFO ") || strings.Contains(log, "Starting vLLM") || !strings.Contains(log, "INFO:     Application startup complete.") {
		t.Errorf("VLLM_LOGGING_LEVEL=WARNING: vLLM's INFO lines printed or uvicorn's dropped:\n%s", log)
	}
	_ = ts.stop()
	ts = startVLLM(t, nil, "--uvicorn-log-level", "warning")
	log = ts.log.String()
	if strings.Contains(log, "INFO:     ") || !strings.Contains(log, "Starting vLLM server on") {
		t.Errorf("--uvicorn-log-level warning: uvicorn's INFO lines printed or vLLM's dropped:\n%s", log)
	}
	_ = ts.stop()
}

// TestPersonaGraphAndSpecFlags: the graph flag names of each release and the speculative
// algorithm names each engine accepts.
func TestPersonaGraphAndSpecFlags(t *testing.T) {
	o, err := ParseFlags([]string{"--cuda-graph-max-bs-decode", "32"}, io.Discard)
	if err != nil || o.CUDAGraphMaxBS != 32 || len(o.Warnings) != 0 {
		t.Errorf("latest --cuda-graph-max-bs-decode 32: %v %v %v", err, o.CUDAGraphMaxBS, o.Warnings)
	}
	ts := start(t, nil, false, "--cuda-graph-max-bs", "16")
	if ts.e.Opts.CUDAGraphMaxBS != 16 || !strings.Contains(ts.log.String(), "'--cuda-graph-max-bs is deprecated, use --cuda-graph-max-bs-decode'") {
		t.Errorf("latest --cuda-graph-max-bs 16: bs %d, no deprecation warning:\n%s", ts.e.Opts.CUDAGraphMaxBS, ts.log.String())
	}
	if ts.e.ServerInfo()["cuda_graph_max_bs_decode"] != 16 {
		t.Errorf("server info cuda_graph_max_bs_decode %v", ts.e.ServerInfo()["cuda_graph_max_bs_decode"])
	}
	_ = ts.stop()
	for _, v := range []string{"0.3", "0.4"} {
		if _, err := ParseFlags([]string{"--engine-version", v, "--cuda-graph-max-bs-decode", "32"}, io.Discard); err == nil || !strings.Contains(err.Error(), "cuda-graph-max-bs-decode") {
			t.Errorf("%s accepted --cuda-graph-max-bs-decode: %v", v, err)
		}
		if o, err := ParseFlags([]string{"--engine-version", v, "--cuda-graph-max-bs", "8"}, io.Discard); err != nil || o.CUDAGraphMaxBS != 8 || len(o.Warnings) != 0 {
			t.Errorf("%s --cuda-graph-max-bs 8: %v", v, err)
		}
	}
	var errb strings.Builder
	if code := Main(context.Background(), []string{"vllm", "--engine-version", "0.10", "serve", "m.json", "--max-cudagraph-capture-size", "64"}, io.Discard, &errb); code != 2 ||
		!strings.Contains(errb.String(), "vllm: error: unrecognized arguments: --max-cudagraph-capture-size 64\n") {
		t.Errorf("vllm 0.10 --max-cudagraph-capture-size: exit %d, %q", code, errb.String())
	}
	if o, err := ParseVLLMFlags([]string{"m", "--engine-version", "0.10", "--cuda-graph-sizes", "32"}, io.Discard); err != nil || o.CUDAGraphMaxBS != 32 {
		t.Errorf("vllm 0.10 --cuda-graph-sizes 32: %v", err)
	}
	for _, v := range []string{"0.12", "0.22"} {
		if o, err := ParseVLLMFlags([]string{"m", "--engine-version", v, "--max-cudagraph-capture-size", "64"}, io.Discard); err != nil || o.CUDAGraphMaxBS != 64 {
			t.Errorf("vllm %s --max-cudagraph-capture-size 64: %v", v, err)
		}
		if _, err := ParseVLLMFlags([]string{"m", "--engine-version", v, "--cuda-graph-sizes", "64"}, io.Discard); err == nil {
			t.Errorf("vllm %s accepted --cuda-graph-sizes", v)
		}
	}
	for _, a := range []string{"EAGLE", "EAGLE3", "NEXTN", "STANDALONE", "NGRAM", "eagle3"} {
		if _, err := ParseFlags([]string{"--speculative-algorithm", a}, io.Discard); err != nil {
			t.Errorf("sglang --speculative-algorithm %s: %v", a, err)
		}
	}
	for _, a := range []string{"MTP", "MEDUSA"} {
		errb.Reset()
		if code := Main(context.Background(), []string{"--speculative-algorithm", a}, io.Discard, &errb); code != 2 || !strings.Contains(errb.String(), "EAGLE, EAGLE3, NEXTN, STANDALONE, NGRAM") {
			t.Errorf("sglang --speculative-algorithm %s: exit %d %q", a, code, errb.String())
		}
	}
	for _, m := range []string{"eagle", "eagle3", "mtp", "ngram", "draft_model"} {
		if _, err := ParseVLLMFlags([]string{"m", "--speculative-config", `{"method": "` + m + `", "num_speculative_tokens": 2}`}, io.Discard); err != nil {
			t.Errorf("vllm method %s: %v", m, err)
		}
	}
	for _, m := range []string{"nextn", "standalone", "medusa"} {
		if _, err := ParseVLLMFlags([]string{"m", "--speculative-config", `{"method": "` + m + `", "num_speculative_tokens": 2}`}, io.Discard); err == nil || !strings.Contains(err.Error(), "eagle, eagle3, mtp, ngram, draft_model") {
			t.Errorf("vllm method %s: %v", m, err)
		}
	}
	if _, err := ParseVLLMFlags([]string{"m", "--engine-version", "0.12", "--profiler-config", `{"profiler": "torch", "torch_profiler_dir": "/tmp"}`}, io.Discard); err == nil {
		t.Error("vllm 0.12 accepted --profiler-config")
	}
}

// generateMeta posts a greedy /generate request with logprobs and returns its answer.
func generateMeta(t *testing.T, ts *testServer, text string, n int) map[string]any {
	t.Helper()
	code, body := ts.post(t, "/generate", map[string]any{"text": text, "return_logprob": true, "logprob_start_len": 0, "top_logprobs_num": 2,
		"sampling_params": map[string]any{"max_new_tokens": n, "temperature": 0, "ignore_eos": true}})
	var out map[string]any
	if err := json.Unmarshal(body, &out); code != 200 || err != nil {
		t.Fatalf("/generate: HTTP %d %v %s", code, err, body)
	}
	return out
}

// TestPersonaLogprobShapes: SGLang 0.3's input_token_logprobs has no leading null entry (entry i
// is prompt token i+1), 0.4's has [null, id, null] first; the logprobs themselves agree.
func TestPersonaLogprobShapes(t *testing.T) {
	old := start(t, nil, true, "--engine-version", "0.3")
	cur := start(t, nil, true, "--engine-version", "0.4")
	text := "The quick brown fox"
	o := generateMeta(t, old, text, 3)["meta_info"].(map[string]any)
	c := generateMeta(t, cur, text, 3)["meta_info"].(map[string]any)
	oi, ci := o["input_token_logprobs"].([]any), c["input_token_logprobs"].([]any)
	n := int(c["prompt_tokens"].(float64))
	if len(ci) != n || len(oi) != n-1 {
		t.Fatalf("input_token_logprobs: 0.4 %d entries, 0.3 %d, prompt %d; want %d and %d", len(ci), len(oi), n, n, n-1)
	}
	if e0 := ci[0].([]any); e0[0] != nil {
		t.Errorf("0.4 entry 0 %v, want a null logprob", e0)
	}
	for i := range oi {
		a, b := oi[i].([]any), ci[i+1].([]any)
		if a[0] == nil || a[0] != b[0] || a[1] != b[1] {
			t.Errorf("0.3 entry %d %v != 0.4 entry %d %v", i, a, i+1, b)
		}
	}
	if ot := o["input_top_logprobs"].([]any); len(ot) != n-1 || ot[0] == nil {
		t.Errorf("0.3 input_top_logprobs: %d entries, first %v", len(ot), ot[0])
	}
}

// TestPersonaSpecLogprobs: SGLang latest's spec-v2 logprob truncation (and SGLANG_ENABLE_SPEC_V2=0),
// the speculative meta_info fields per release, and vLLM 0.10/0.12's non-speculative decoding of
// requests with logprobs.
func TestPersonaSpecLogprobs(t *testing.T) {
	spec := []string{"--speculative-algorithm", "EAGLE3"}
	latest := start(t, nil, true, spec...)
	full := start(t, map[string]string{"SGLANG_ENABLE_SPEC_V2": "false"}, true, spec...)
	old := start(t, nil, true, append([]string{"--engine-version", "0.3"}, spec...)...)
	plain := start(t, nil, true)
	text := "Speculative decoding with logprobs"
	for _, c := range []struct {
		name    string
		ts      *testServer
		outLP   int
		verify  bool
		accepts bool
	}{{"latest", latest, 1, true, true}, {"latest SGLANG_ENABLE_SPEC_V2=false", full, 12, true, true}, {"0.3", old, 12, true, false}, {"no speculation", plain, 12, false, false}} {
		out := generateMeta(t, c.ts, text, 12)
		m := out["meta_info"].(map[string]any)
		if len(out["output_ids"].([]any)) != 12 || m["completion_tokens"] != 12.0 {
			t.Errorf("%s: output_ids %v, completion_tokens %v; want 12", c.name, out["output_ids"], m["completion_tokens"])
		}
		if got := len(m["output_token_logprobs"].([]any)); got != c.outLP || len(m["output_top_logprobs"].([]any)) != c.outLP {
			t.Errorf("%s: %d output_token_logprobs, want %d", c.name, got, c.outLP)
		}
		vc, hasVC := m["spec_verify_ct"].(float64)
		if hasVC != c.verify || (c.verify && !(vc >= 1 && vc <= 12)) {
			t.Errorf("%s: spec_verify_ct %v", c.name, m["spec_verify_ct"])
		}
		_, hasAL := m["spec_accept_length"]
		_, hasAT := m["spec_accept_token_num"]
		dt, hasDT := m["spec_draft_token_num"].(float64)
		if hasAL != c.accepts || hasAT != c.accepts || hasDT != c.accepts {
			t.Errorf("%s: spec_accept_length/token_num/draft_token_num present %v/%v/%v, want %v", c.name, hasAL, hasAT, hasDT, c.accepts)
		}
		if c.accepts && (dt != vc*3 || m["spec_accept_length"].(float64) != 12/vc) {
			t.Errorf("%s: draft tokens %v, accept length %v for %v verify steps", c.name, dt, m["spec_accept_length"], vc)
		}
	}
	// the truncated logprob is the first token's, as the full answer's
	a := generateMeta(t, latest, text, 12)["meta_info"].(map[string]any)["output_token_logprobs"].([]any)
	b := generateMeta(t, full, text, 12)["meta_info"].(map[string]any)["output_token_logprobs"].([]any)
	if fmt.Sprint(a[0]) != fmt.Sprint(b[0]) {
		t.Errorf("first output logprob %v, full answer's %v", a[0], b[0])
	}

	for _, c := range []struct {
		persona   string
		speculate bool // a request with logprobs is speculated
	}{{"0.10", false}, {"0.12", false}, {"0.22", true}} {
		ts := startVLLM(t, nil, "--engine-version", c.persona, "--max-num-seqs", "8", "--speculative-config", `{"method": "eagle3", "num_speculative_tokens": 3}`)
		req := map[string]any{"prompt": text, "max_tokens": 12, "temperature": 0, "ignore_eos": true, "return_token_ids": true}
		s0 := ts.e.Sched.Stats()
		plainOut := ts.complete(t, req).Choices[0].TokenIDs
		s1 := ts.e.Sched.Stats()
		req["logprobs"] = 1
		lpOut := ts.complete(t, req).Choices[0].TokenIDs
		s2 := ts.e.Sched.Stats()
		delete(req, "logprobs")
		req["prompt_logprobs"] = 0
		ts.complete(t, req)
		s3 := ts.e.Sched.Stats()
		if s1.SpecVerifies == s0.SpecVerifies {
			t.Errorf("vllm %s: a request without logprobs was not speculated", c.persona)
		}
		moved := s2.SpecVerifies != s1.SpecVerifies || s2.SpecDraftTokens != s1.SpecDraftTokens
		movedPrompt := s3.SpecVerifies != s2.SpecVerifies
		if moved != c.speculate || movedPrompt != c.speculate {
			t.Errorf("vllm %s: logprobs request moved the spec counters %v, prompt_logprobs %v; want %v", c.persona, moved, movedPrompt, c.speculate)
		}
		if fmt.Sprint(plainOut) != fmt.Sprint(lpOut) || len(lpOut) != 12 {
			t.Errorf("vllm %s: greedy output with logprobs %v, without %v", c.persona, lpOut, plainOut)
		}
		_ = ts.stop()
	}
}

// traceFile is a decoded profiler trace.
type traceFile struct {
	SchemaVersion   int              `json:"schemaVersion"`
	DeviceProps     []map[string]any `json:"deviceProperties"`
	DistributedInfo struct {
		Backend   string `json:"backend"`
		Rank      int    `json:"rank"`
		WorldSize int    `json:"world_size"`
	} `json:"distributedInfo"`
	TraceEvents []traceEvent `json:"traceEvents"`
}

func readTrace(t *testing.T, path string) traceFile {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	var tf traceFile
	if err := json.NewDecoder(zr).Decode(&tf); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return tf
}

// kernelCounts counts a trace's kernel events as the harness does: NCCL (/^nccl/i), custom (names
// with cross_device_reduce, all_reduce, allreduce or AllReduce, not nccl); it also collects the names.
func kernelCounts(t *testing.T, tf traceFile, rank int) (nccl, custom int, names map[string]bool) {
	t.Helper()
	names = map[string]bool{}
	for _, ev := range tf.TraceEvents {
		if ev.Cat != "kernel" {
			continue
		}
		if ev.Ph != "X" || ev.Pid != rank || ev.Tid != 7 || ev.Ts <= 0 || ev.Dur < 0 || ev.Args["device"] != float64(rank) || ev.Args["correlation"] == nil {
			t.Errorf("rank %d: malformed kernel event %+v", rank, ev)
		}
		names[ev.Name] = true
		switch low := strings.ToLower(ev.Name); {
		case strings.HasPrefix(low, "nccl"):
			nccl++
		case strings.Contains(low, "cross_device_reduce") || strings.Contains(low, "all_reduce") || strings.Contains(low, "allreduce"):
			custom++
		}
	}
	return nccl, custom, names
}

// profileFiles lists dir's trace files, sorted.
func profileFiles(t *testing.T, dir, suffix string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "*"+suffix))
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(m)
	return m
}

// TestProfilerTraces: /start_profile and /stop_profile write one trace per TP rank whose kernel
// events are exactly the allreduce calls that ran, under the algorithm that ran.
func TestProfilerTraces(t *testing.T) {
	custom := "void sglang::cross_device_reduce_1stage<float, 4>(sglang::RankData*, sglang::RankSignals, sglang::Signal*, float*, int, int)"
	ring := "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
	tree := "ncclDevKernel_AllReduce_Sum_f32_TREE_LL(ncclDevKernelArgsStorage<4096ul>)"
	for _, c := range []struct {
		name  string
		env   map[string]string
		args  []string
		kinds []string // the kernel names expected (all of them)
	}{
		{"nvlink tp4 custom", nil, []string{"--tp-size", "4"}, []string{custom, ring}},
		{"nvlink tp4 tree", map[string]string{"NCCL_ALGO": "Tree"}, []string{"--tp-size", "4", "--disable-custom-all-reduce"}, []string{tree}},
		{"pcie tp4 nccl", nil, []string{"--tp-size", "4", "--topology", "pcie"}, []string{ring}},
	} {
		dir := t.TempDir()
		ts := start(t, c.env, true, c.args...)
		g0 := ts.e.Group.Stats()
		code, body := ts.post(t, "/start_profile", map[string]any{"output_dir": dir, "activities": []string{"CPU", "GPU"}})
		if code != 200 || string(body) != "Start profiling.\n" {
			t.Fatalf("%s: /start_profile %d %q", c.name, code, body)
		}
		if code, body := ts.post(t, "/start_profile", map[string]any{"output_dir": dir}); code != 400 || !strings.Contains(string(body), "Profiling is already in progress") {
			t.Errorf("%s: second /start_profile %d %q", c.name, code, body)
		}
		// a 600-token prefill is above the custom buffer (512 tokens): those calls are NCCL's
		ts.complete(t, map[string]any{"prompt": strings.Repeat("y", 599), "max_tokens": 4, "temperature": 0})
		code, body = ts.post(t, "/stop_profile", "")
		if code != 200 || string(body) != "Stop profiling. This will take some time.\n" {
			t.Fatalf("%s: /stop_profile %d %q", c.name, code, body)
		}
		g1 := ts.e.Group.Stats()
		files := profileFiles(t, dir, ".trace.json.gz")
		if len(files) != 4 {
			t.Fatalf("%s: trace files %v, want 4", c.name, files)
		}
		for r, f := range files {
			if !regexp.MustCompile(fmt.Sprintf(`/\d+(\.\d+)?-TP-%d\.trace\.json\.gz$`, r)).MatchString(f) {
				t.Errorf("%s: file name %s", c.name, f)
			}
			tf := readTrace(t, f)
			if tf.SchemaVersion != 1 || tf.DistributedInfo.Backend != "nccl" || tf.DistributedInfo.Rank != r || tf.DistributedInfo.WorldSize != 4 || len(tf.DeviceProps) != 1 {
				t.Errorf("%s: header %+v", c.name, tf)
			}
			nccl, cust, names := kernelCounts(t, tf, r)
			wantNCCL := g1.RingCalls + g1.TreeCalls - g0.RingCalls - g0.TreeCalls
			if int64(nccl) != wantNCCL || int64(cust) != g1.CustomCalls-g0.CustomCalls || nccl+cust == 0 {
				t.Errorf("%s rank %d: %d nccl + %d custom kernels, the group ran %d nccl + %d custom", c.name, r, nccl, cust, wantNCCL, g1.CustomCalls-g0.CustomCalls)
			}
			var got []string
			for n := range names {
				got = append(got, n)
			}
			sort.Strings(got)
			want := append([]string(nil), c.kinds...)
			sort.Strings(want)
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("%s rank %d: kernels %q, want %q", c.name, r, got, want)
			}
			cpu := 0
			for _, ev := range tf.TraceEvents {
				if ev.Cat == "cpu_op" {
					cpu++
				}
			}
			if cpu != nccl+cust {
				t.Errorf("%s rank %d: %d cpu_op events for %d kernels", c.name, r, cpu, nccl+cust)
			}
		}
		if code, body := ts.post(t, "/stop_profile", ""); code != 400 || !strings.Contains(string(body), "not in progress") {
			t.Errorf("%s: /stop_profile when stopped: %d %q", c.name, code, body)
		}
		if ts.e.Group.Stats(); ts.e.prof.active() {
			t.Errorf("%s: profiler still on", c.name)
		}
		_ = ts.stop()
	}

	// num_steps: the traces appear on their own after that many forward steps; the directory
	// defaults to SGLANG_TORCH_PROFILER_DIR; bf16 kernels name their dtype.
	dir := t.TempDir()
	ts := start(t, map[string]string{SGLangProfilerDirEnv: dir}, true, "--tp-size", "2", "--dtype", "bfloat16")
	if code, _ := ts.post(t, "/start_profile", map[string]any{"num_steps": 2}); code != 200 {
		t.Fatalf("/start_profile num_steps: %d", code)
	}
	ts.complete(t, map[string]any{"prompt": "two steps", "max_tokens": 6, "temperature": 0, "ignore_eos": true})
	var files []string
	for deadline := time.Now().Add(10 * time.Second); len(files) < 2 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond) // the traces are written off the scheduler's goroutine
		files = profileFiles(t, dir, ".trace.json.gz")
	}
	if len(files) != 2 || ts.e.prof.active() {
		t.Fatalf("num_steps 2: files %v, still profiling %v", files, ts.e.prof.active())
	}
	layers := ts.e.Cfg.Layers
	for r, f := range files {
		_, cust, names := kernelCounts(t, readTrace(t, f), r)
		if cust != 2*2*layers || !names["void sglang::cross_device_reduce_1stage<__nv_bfloat16, 2>(sglang::RankData*, sglang::RankSignals, sglang::Signal*, __nv_bfloat16*, int, int)"] {
			t.Errorf("rank %d: %d custom kernels (want 2 steps x 2 per layer x %d layers) %v", r, cust, layers, names)
		}
	}
	if !strings.Contains(ts.log.String(), "Profiling done. Traces are saved to: "+dir) {
		t.Errorf("no Profiling done line")
	}
}

// TestVLLMProfiler: the profiler routes exist only when profiling is configured; traces are named
// as vLLM's workers name them and carry vLLM's custom kernel.
func TestVLLMProfiler(t *testing.T) {
	ts := startVLLM(t, nil, "-tp", "2")
	if code, _ := ts.post(t, "/start_profile", ""); code != 404 {
		t.Errorf("/start_profile without a profiler dir: %d, want 404", code)
	}
	_ = ts.stop()
	for _, c := range []struct {
		name string
		env  map[string]string
		args []string
	}{
		{"0.12 env", nil, []string{"--engine-version", "0.12"}},
		{"0.22 --profiler-config", nil, nil},
	} {
		dir := t.TempDir()
		if c.env == nil {
			c.env = map[string]string{}
		}
		args := append([]string{"-tp", "2"}, c.args...)
		if c.name == "0.12 env" {
			c.env[VLLMProfilerDirEnv] = dir
		} else {
			args = append(args, "--profiler-config", `{"profiler": "torch", "torch_profiler_dir": "`+dir+`"}`)
		}
		ts := startVLLM(t, c.env, args...)
		if code, body := ts.post(t, "/start_profile", ""); code != 200 || len(body) != 0 {
			t.Fatalf("%s: /start_profile %d %q", c.name, code, body)
		}
		g0 := ts.e.Group.Stats()
		ts.complete(t, map[string]any{"prompt": "profile me", "max_tokens": 5, "temperature": 0})
		if code, _ := ts.post(t, "/stop_profile", ""); code != 200 {
			t.Fatalf("%s: /stop_profile %d", c.name, code)
		}
		g1 := ts.e.Group.Stats()
		files := profileFiles(t, dir, ".pt.trace.json.gz")
		if len(files) != 2 {
			t.Fatalf("%s: files %v", c.name, files)
		}
		for r, f := range files {
			if !regexp.MustCompile(fmt.Sprintf(`-rank-%d\.\d+\.pt\.trace\.json\.gz$`, r)).MatchString(f) {
				t.Errorf("%s: file name %s", c.name, f)
			}
			nccl, cust, names := kernelCounts(t, readTrace(t, f), r)
			if int64(cust) != g1.CustomCalls-g0.CustomCalls || nccl != 0 || !names["void vllm::cross_device_reduce_1stage<float, 2>(vllm::RankData*, vllm::RankSignals, vllm::Signal*, float*, int, int)"] {
				t.Errorf("%s rank %d: %d custom %d nccl %v", c.name, r, cust, nccl, names)
			}
		}
		if !strings.Contains(ts.log.String(), "Route: /start_profile, Methods: POST") || !strings.Contains(ts.log.String(), "Torch profiler is enabled in the API server") {
			t.Errorf("%s: no profiler routes or warning in the log", c.name)
		}
		_ = ts.stop()
	}
}
