package sglang

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/reckon-ci/reckon/engine/internal/core"
)

func TestCommand(t *testing.T) {
	a := New()
	got, err := a.Command(core.LaunchConfig{
		Model: "meta-llama/Llama-3.1-70B", TPSize: 8, Host: "127.0.0.1", Port: 30001,
		DisableCustomAllReduce: true, CUDAGraphMaxBS: 32, MemFractionStatic: 0.85,
		Speculative: &core.Speculative{Algorithm: "EAGLE3", DraftModelPath: "d/eagle3", NumSteps: 3, EagleTopK: 1, NumDraftTokens: 4},
		ExtraArgs:   []string{"--trust-remote-code"},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"python3", "-m", "sglang.launch_server", "--model-path", "meta-llama/Llama-3.1-70B", "--tp-size", "8",
		"--host", "127.0.0.1", "--port", "30001", "--disable-custom-all-reduce", "--cuda-graph-max-bs-decode", "32",
		"--mem-fraction-static", "0.85", "--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", "d/eagle3",
		"--speculative-num-steps", "3", "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "4", "--trust-remote-code"}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("argv (-want +got):\n%s", d)
	}
	// Command override (the reference engine), defaults left out.
	got, err = a.Command(core.LaunchConfig{Command: []string{"bin/refengine"}, Model: "tiny", Port: 1234})
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]string{"bin/refengine", "--model-path", "tiny", "--port", "1234"}, got); d != "" {
		t.Errorf("override argv (-want +got):\n%s", d)
	}
}

func TestCommandGraphFlagByVersion(t *testing.T) {
	for ver, want := range map[string]string{
		"":                      "--cuda-graph-max-bs-decode",
		"0.0.0.dev1+g5dd2c243e": "--cuda-graph-max-bs-decode",
		"0.5.15":                "--cuda-graph-max-bs-decode",
		"0.6.0":                 "--cuda-graph-max-bs-decode",
		"0.5.3.post1":           "--cuda-graph-max-bs",
		"0.4.10":                "--cuda-graph-max-bs",
		"0.3.6":                 "--cuda-graph-max-bs",
	} {
		got, err := New().Command(core.LaunchConfig{Model: "m", CUDAGraphMaxBS: 16, EngineVersion: ver})
		if err != nil {
			t.Fatalf("%q: %v", ver, err)
		}
		if d := cmp.Diff([]string{"python3", "-m", "sglang.launch_server", "--model-path", "m", want, "16"}, got); d != "" {
			t.Errorf("version %q (-want +got):\n%s", ver, d)
		}
	}
	if _, err := New().Command(core.LaunchConfig{Model: "m", EngineVersion: "soon"}); err == nil || !strings.Contains(err.Error(), `"soon"`) {
		t.Errorf("bad version: err = %v", err)
	}
}

func TestSpeculativeAlgorithms(t *testing.T) {
	for alg, want := range map[string]string{"EAGLE": "EAGLE", "eagle3": "EAGLE3", "NEXTN": "NEXTN", "MTP": "NEXTN", "STANDALONE": "STANDALONE", "NGRAM": "NGRAM"} {
		got, err := New().Command(core.LaunchConfig{Model: "m", Speculative: &core.Speculative{Algorithm: alg}})
		if err != nil {
			t.Fatalf("%s: %v", alg, err)
		}
		if d := cmp.Diff([]string{"python3", "-m", "sglang.launch_server", "--model-path", "m", "--speculative-algorithm", want}, got); d != "" {
			t.Errorf("%s (-want +got):\n%s", alg, d)
		}
	}
	_, err := New().Command(core.LaunchConfig{Model: "m", Speculative: &core.Speculative{Algorithm: "MEDUSA"}})
	if err == nil || !strings.Contains(err.Error(), "MEDUSA") || !strings.Contains(err.Error(), "EAGLE, EAGLE3, MTP, NEXTN, NGRAM, STANDALONE") {
		t.Errorf("MEDUSA: err = %v, want an error naming the accepted list", err)
	}
	if d := cmp.Diff(SpeculativeAlgorithms(), New().SpeculativeAlgorithms()); d != "" {
		t.Error(d)
	}
	for _, alg := range SpeculativeAlgorithms() {
		if _, err := SpeculativeAlgorithm(alg); err != nil {
			t.Errorf("listed %s rejected: %v", alg, err)
		}
	}
}

func TestVersionCommand(t *testing.T) {
	a := New()
	for _, c := range []struct {
		cmd, want []string
	}{
		{nil, []string{"python3", "-c", "import sglang; print(sglang.__version__)"}},
		{[]string{"/venv/bin/python", "-m", "sglang.launch_server"}, []string{"/venv/bin/python", "-c", "import sglang; print(sglang.__version__)"}},
		{[]string{"bin/refengine", "--engine-version", "0.4"}, []string{"bin/refengine", "--engine-version", "0.4", "--version"}},
	} {
		if d := cmp.Diff(c.want, a.VersionCommand(core.LaunchConfig{Command: c.cmd, Model: "m", ExtraArgs: []string{"--x"}})); d != "" {
			t.Errorf("%v (-want +got):\n%s", c.cmd, d)
		}
	}
}

func TestCommandRejectsBadConfig(t *testing.T) {
	cases := map[string]core.LaunchConfig{
		"model":                  {},
		"tp size":                {Model: "m", TPSize: -1},
		"mem fraction static":    {Model: "m", MemFractionStatic: 1.2},
		"cuda graph max bs":      {Model: "m", CUDAGraphMaxBS: -4},
		"port":                   {Model: "m", Port: 70000},
		"speculative: algorithm": {Model: "m", Speculative: &core.Speculative{NumSteps: 3}},
	}
	for field, c := range cases {
		if _, err := New().Command(c); err == nil || !strings.Contains(err.Error(), field) {
			t.Errorf("%s: err = %v, want an error naming %q", field, err, field)
		}
	}
}

func TestReadyLine(t *testing.T) {
	a := New()
	if !a.ReadyLine("[2025-01-01 10:00:00] The server is fired up and ready to roll!") {
		t.Error("ready line not recognised")
	}
	if a.ReadyLine("INFO:     Application startup complete.") {
		t.Error("uvicorn startup (before warmup) must not count as SGLang ready")
	}
}

// A synthetic multi-rank log in the formats of sglang.md §4 that the real excerpts in
// fixtures/logs do not cover together: colour codes, GiB, glued records, the budget line,
// newest CUDA-graph records, the printed server args and the ready line.
const multiRank = "[2026-07-01 10:00:00] server_args=ServerArgs(model_path='m', tp_size=2, context_length=None, max_running_requests=None, disable_custom_all_reduce=True)\n" +
	"\x1b[32m[2026-07-01 10:00:01 TP0] Load weight begin. avail mem=78.50 GB\x1b[0m\n" +
	"[2026-07-01 10:00:01 TP1] Load weight begin. avail mem=78.40 GB\n" +
	"Loading safetensors checkpoint shards: 100% 4/4[2026-07-01 10:00:09 TP0] Load weight end. elapsed=8.01 s, type=LlamaForCausalLM, quant=fp8, fmt=e4m3, avail mem=62.10 GB, mem usage=16.40 GB.[2026-07-01 10:00:09 TP1] Load weight end. elapsed=8.02 s, type=LlamaForCausalLM, avail mem=62.00 GiB, mem usage=16.40 GiB.\n" +
	"[2026-07-01 10:00:09 TP0] Load weight end. elapsed=1.00 s, type=LlamaEagle3, dtype=torch.bfloat16, avail mem=61.20 GB, mem usage=-1.86 GB.\n" +
	"[2026-07-01 10:00:10 TP0] KV Cache is allocated. dtype: torch.bfloat16, #tokens: 1,234,567, K size: 20.00 GB, V size: 20.00 GB\n" +
	"[2026-07-01 10:00:10 TP1] KV Cache is allocated. dtype: torch.bfloat16, #tokens: 1,234,000, K size: 19.99 GB, V size: 19.99 GB\n" +
	"[2026-07-01 10:00:10 TP0] KV Cache is allocated. dtype: torch.bfloat16, #tokens: 1,234,567, K size: 1.00 GB, V size: 1.00 GB\n" +
	"[2026-07-01 10:00:10 TP0] Memory pool end. avail mem=19.00 GB\n" +
	"[2026-07-01 10:00:10 TP1] Memory pool end. avail mem=18.90 GB\n" +
	"[2026-07-01 10:00:11 TP0] Capture target verify CUDA graph begin. backend=full, num_tokens_per_req=4, bs=[1, 2, 4], avail mem=19.00 GB\n" +
	"[2026-07-01 10:00:20 TP0] Capture target verify CUDA graph end. elapsed=9.00 s, mem usage=0.60 GB, avail mem=18.40 GB.\n" +
	"[2026-07-01 10:00:20 TP0] Capture draft decode CUDA graph end. elapsed=3.50 s, mem usage=0.20 GB, avail mem=18.20 GB.\n" +
	"[2026-07-01 10:00:11 TP1] Capture target verify CUDA graph begin. backend=full, num_tokens_per_req=4, bs=[1, 2, 4], avail mem=18.90 GB\n" +
	"[2026-07-01 10:00:20 TP1] Capture target verify CUDA graph end. elapsed=10.00 s, avail mem=18.10 GB.\n" +
	"[2026-07-01 10:00:21 TP0] max_total_num_tokens=1234000, chunked_prefill_size=8192, max_prefill_tokens=16384, max_running_requests=128, context_len=131072, available_gpu_mem=18.10 GB\n" +
	"[2026-07-01 10:00:30] The server is fired up and ready to roll!\n" +
	"[2026-07-01 10:00:31 TP0] Decode batch, #running-req: 4, #token: 900, token usage: 0.01, accept len: 3.00, accept rate: 0.75, cuda graph: True, gen throughput (token/s): 410.00, #queue-req: 0\n" +
	"[2026-07-01 10:00:32 TP0] Decode batch, #running-req: 4, #token: 990, token usage: 0.01, accept len: 2.50, accept rate: 0.62, cuda graph: True, gen throughput (token/s): 400.00, #queue-req: 0\n"

func TestParseSyntheticMultiRank(t *testing.T) {
	got, err := Parse(strings.NewReader(multiRank))
	if err != nil {
		t.Fatal(err)
	}
	f := core.Float
	want := &core.Report{
		Engine: "sglang", Ready: true, AllReduce: "nccl",
		CustomAllReduceDisabledReason: core.String("disabled by flag (disable_custom_all_reduce=True)"),
		WeightsGiB:                    f(16.40), // first Load weight end per rank (target, not the draft's -1.86)
		KVCacheTokens:                 core.Int(1234000),
		KVCacheGiB:                    f(39.98), // min over ranks of the target pool: TP1 19.99+19.99
		AvailableGPUMemGiB:            f(18.10), // the budget line
		CUDAGraphSeconds:              f(12.5),  // TP0 9.00 + 3.50 (slowest rank)
		CUDAGraphGiB:                  f(0.8),   // TP0 0.60+0.20, TP1 18.90-18.10 = 0.80
		MaxRunningRequests:            core.Int(128),
		ContextLen:                    core.Int(131072),
		SpecAcceptLength:              f(2.75),
		Errors:                        []core.LogError{},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("report (-want +got):\n%s", d)
	}
}

func TestParseOldestFormat(t *testing.T) {
	log := "[gpu_id=0] Load weight begin. avail mem=23.20 GB\n" +
		"[gpu_id=0] Load weight end. type=LlamaForCausalLM, dtype=torch.float16, avail mem=10.60 GB\n" +
		"[gpu_id=1] Load weight begin. avail mem=23.30 GB\n" +
		"[gpu_id=1] Load weight end. type=LlamaForCausalLM, dtype=torch.float16, avail mem=10.80 GB\n" +
		"[gpu_id=0] max_total_num_tokens=41123, max_prefill_tokens=16384, context_len=4096\n" +
		"[gpu_id=0] Capture cuda graph begin. This can take up to several minutes.\n" +
		"[gpu_id=0] Capture cuda graph end. Time elapsed: 2.64 s\n"
	got, err := Parse(strings.NewReader(log))
	if err != nil {
		t.Fatal(err)
	}
	if got.WeightsGiB == nil || *got.WeightsGiB != 12.5 || *got.KVCacheTokens != 41123 || *got.ContextLen != 4096 ||
		got.MaxRunningRequests != nil || *got.CUDAGraphSeconds != 2.64 || got.CUDAGraphGiB != nil || got.Ready {
		t.Errorf("report = %+v", got)
	}
}

// BenchmarkParse measures parsing speed on a long multi-rank log (~100k lines).
func BenchmarkParse(b *testing.B) {
	log := strings.Repeat(multiRank, 5000)
	b.SetBytes(int64(len(log)))
	b.ResetTimer()
	for range b.N {
		if _, err := Parse(strings.NewReader(log)); err != nil {
			b.Fatal(err)
		}
	}
}

// A sliding-window model's capacity is its full-attention pool; a draft model's weights and
// KV pool (on the rank that loaded it, and the identical pool on another rank) are not the
// target's, while a different pool on another rank still is.
func TestParseSWAAndDraftPools(t *testing.T) {
	log := "[2026-01-31 13:50:39 TP0] Use sliding window memory pool. full_layer_tokens=375360, swa_layer_tokens=300288\n" +
		"[2026-01-31 13:50:39 TP0] KV Cache is allocated. #tokens: 300288, K size: 8.38 GB, V size: 5.59 GB\n"
	got, err := Parse(strings.NewReader(log))
	if err != nil || got.KVCacheTokens == nil || *got.KVCacheTokens != 375360 {
		t.Errorf("SWA: %+v, %v; want 375360 KV tokens", got, err)
	}
	log = "[2025-07-28 11:04:15 TP0] Load weight end. type=LlamaForCausalLMEagle3, dtype=torch.bfloat16, avail mem=6.31 GB, mem usage=1.49 GB.\n" +
		"[2025-07-28 11:04:15 TP0] KV Cache is allocated. #tokens: 42632, K size: 0.03 GB, V size: 0.03 GB\n" +
		"[2025-07-28 11:04:15 TP1] KV Cache is allocated. #tokens: 42632, K size: 0.03 GB, V size: 0.03 GB\n"
	got, _ = Parse(strings.NewReader(log))
	if got.WeightsGiB != nil || got.KVCacheTokens != nil || got.KVCacheGiB != nil {
		t.Errorf("draft only: weights %v, KV %v / %v; want all null", got.WeightsGiB, got.KVCacheTokens, got.KVCacheGiB)
	}
	log += "[2025-07-28 11:04:16 TP2] KV Cache is allocated. #tokens: 900000, K size: 9.00 GB, V size: 9.00 GB\n"
	got, _ = Parse(strings.NewReader(log))
	if got.KVCacheTokens == nil || *got.KVCacheTokens != 900000 {
		t.Errorf("target pool of TP2 after TP0's draft: KV tokens %v, want 900000", got.KVCacheTokens)
	}
}
