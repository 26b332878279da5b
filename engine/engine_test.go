package engine_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/reckon-ci/reckon/engine"
)

func TestAdapterFor(t *testing.T) {
	for kind, want := range map[string]string{"sglang": "sglang", "SGLang": "sglang", "vllm": "vllm", "refengine": "sglang"} {
		a, err := engine.AdapterFor(kind)
		if err != nil || a.Name() != want {
			t.Errorf("AdapterFor(%q) = %v, %v; want %s", kind, a, err, want)
		}
	}
	if _, err := engine.AdapterFor("tgi"); err == nil || !strings.Contains(err.Error(), "expected one of sglang, vllm") {
		t.Errorf("AdapterFor(tgi) err = %v", err)
	}
}

func TestDetectEngine(t *testing.T) {
	cases := map[string]string{
		"[2025-06-12 22:41:35 TP0] Load weight begin. avail mem=46.74 GB\n":                                     "sglang",
		"INFO 01-30 03:19:14 kv_cache_utils.py:395] # GPU blocks: 1381\n":                                       "vllm",
		"(EngineCore_DP0 pid=1) INFO 10-21 09:11:57 [kv_cache_utils.py:1087] GPU KV cache size: 425,424 tokens": "vllm",
		// sglang printing through vLLM's logging set-up (old versions import vllm)
		"INFO 04-03 04:46:18 __init__.py:190] Automatically detected platform cuda.\n[2025-04-03 04:46:21] server_args=ServerArgs(model_path='m', tp_size=1)\n": "sglang",
		"hello world\nnothing to see\n": "",
		"":                              "",
	}
	for log, want := range cases {
		if got := engine.DetectEngine([]byte(log)); got != want {
			t.Errorf("DetectEngine(%q) = %q, want %q", log, got, want)
		}
	}
}

func TestParseLogFileErrors(t *testing.T) {
	dir := t.TempDir()
	junk := filepath.Join(dir, "junk.log")
	if err := os.WriteFile(junk, []byte("just some text\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := engine.ParseLogFile(filepath.Join(dir, "missing.log"), "sglang"); err == nil || !strings.Contains(err.Error(), "missing.log") {
		t.Errorf("missing file: err = %v", err)
	}
	if _, err := engine.ParseLogFile(junk, "auto"); err == nil || !strings.Contains(err.Error(), "cannot tell which engine") {
		t.Errorf("undetectable: err = %v", err)
	}
	if _, err := engine.ParseLogFile(junk, "tgi"); err == nil || !strings.Contains(err.Error(), "junk.log") {
		t.Errorf("unknown kind: err = %v", err)
	}
	// An explicit kind parses anything, reporting nothing known.
	rep, err := engine.ParseLogFile(junk, "vllm")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(rep)
	want := `{"engine":"vllm","ready":false,"allreduce":"unknown","custom_allreduce_disabled_reason":null,"weights_gib":null,"kv_cache_tokens":null,"kv_cache_gib":null,"available_gpu_mem_gib":null,"cuda_graph_seconds":null,"cuda_graph_gib":null,"max_running_requests":null,"context_len":null,"max_concurrency":null,"spec_accept_length":null,"errors":[]}`
	if string(b) != want {
		t.Errorf("JSON keys/nulls:\n got %s\nwant %s", b, want)
	}
}
