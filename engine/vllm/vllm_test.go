package vllm

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/reckon-ci/reckon/engine/internal/core"
)

func TestCommand(t *testing.T) {
	got, err := New().Command(core.LaunchConfig{
		Model: "Qwen/Qwen3-8B", TPSize: 4, Host: "0.0.0.0", Port: 8001, DisableCustomAllReduce: true,
		CUDAGraphMaxBS: 64, MemFractionStatic: 0.9,
		Speculative: &core.Speculative{Algorithm: "EAGLE3", DraftModelPath: "d/eagle3", NumSteps: 3},
		ExtraArgs:   []string{"--max-model-len", "8192"},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"vllm", "serve", "Qwen/Qwen3-8B", "--tensor-parallel-size", "4", "--host", "0.0.0.0", "--port", "8001",
		"--disable-custom-all-reduce", "--max-cudagraph-capture-size", "64", "--gpu-memory-utilization", "0.9",
		"--speculative-config", `{"method":"eagle3","model":"d/eagle3","num_speculative_tokens":3}`, "--max-model-len", "8192"}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("argv (-want +got):\n%s", d)
	}
	for field, c := range map[string]core.LaunchConfig{
		"model":                  {},
		"gpu memory utilization": {Model: "m", MemFractionStatic: 2},
		"topk":                   {Model: "m", Speculative: &core.Speculative{Algorithm: "eagle", EagleTopK: 4}},
	} {
		if _, err := New().Command(c); err == nil || !strings.Contains(err.Error(), field) {
			t.Errorf("%s: err = %v, want an error naming %q", field, err, field)
		}
	}
}

func TestCommandGraphFlagByVersion(t *testing.T) {
	for ver, want := range map[string]string{
		"": "--max-cudagraph-capture-size", "0.22.1": "--max-cudagraph-capture-size", "0.12.0": "--max-cudagraph-capture-size",
		"0.11.1": "--max-cudagraph-capture-size", "0.11.0": "--cuda-graph-sizes", "0.10.2": "--cuda-graph-sizes", "0.10.2rc2.dev47+g1234abc": "--cuda-graph-sizes",
	} {
		got, err := New().Command(core.LaunchConfig{Model: "m", CUDAGraphMaxBS: 64, EngineVersion: ver})
		if err != nil {
			t.Fatalf("%q: %v", ver, err)
		}
		if d := cmp.Diff([]string{"vllm", "serve", "m", want, "64"}, got); d != "" {
			t.Errorf("version %q (-want +got):\n%s", ver, d)
		}
	}
	if _, err := New().Command(core.LaunchConfig{Model: "m", EngineVersion: "x.y"}); err == nil || !strings.Contains(err.Error(), `"x.y"`) {
		t.Errorf("bad version: err = %v", err)
	}
}

func TestSpeculativeMethods(t *testing.T) {
	for alg, want := range map[string]string{"EAGLE": "eagle", "EAGLE3": "eagle3", "MTP": "mtp", "nextn": "mtp", "NGRAM": "ngram", "STANDALONE": "draft_model"} {
		got, err := New().Command(core.LaunchConfig{Model: "m", Speculative: &core.Speculative{Algorithm: alg, NumSteps: 2}})
		if err != nil {
			t.Fatalf("%s: %v", alg, err)
		}
		js := `{"method":"` + want + `","num_speculative_tokens":2}`
		if d := cmp.Diff([]string{"vllm", "serve", "m", "--speculative-config", js}, got); d != "" {
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
}

func TestVersionCommand(t *testing.T) {
	a := New()
	for _, c := range []struct{ cmd, want []string }{
		{nil, []string{"vllm", "--version"}},
		{[]string{"bin/refengine", "vllm", "--engine-version", "0.12", "serve"}, []string{"bin/refengine", "vllm", "--engine-version", "0.12", "--version"}},
		{[]string{"/venv/bin/vllm"}, []string{"/venv/bin/vllm", "--version"}},
	} {
		if d := cmp.Diff(c.want, a.VersionCommand(core.LaunchConfig{Command: c.cmd, Model: "m"})); d != "" {
			t.Errorf("%v (-want +got):\n%s", c.cmd, d)
		}
	}
}

func TestReadyLine(t *testing.T) {
	a := New()
	for _, l := range []string{"(APIServer pid=1) INFO 06-14 04:58:29 [api_server.py:583] Starting vLLM server on http://0.0.0.0:8000", "(APIServer pid=1) INFO 08-19 14:58:41 [api_server.py:1818] Starting vLLM API server 0 on http://0.0.0.0:8000", "INFO:     Application startup complete."} {
		if !a.ReadyLine(l) {
			t.Errorf("%q not recognised as ready", l)
		}
	}
	if a.ReadyLine("INFO 01-30 03:19:14 kv_cache_utils.py:395] # GPU blocks: 1381") {
		t.Error("KV line taken for ready")
	}
}

// Synthetic V1 TP2 log in the vllm.md §4 formats: per-worker memory values (min over ranks),
// the backend-chain line, non-default args, the current spec-decode line, colour codes.
const v1TP2 = "(APIServer pid=10) INFO 09-01 10:00:00 [utils.py:233] non-default args: {'model': 'm', 'tensor_parallel_size': 2, 'max_num_seqs': 64, 'max_model_len': 16384, 'speculative_config': {'method': 'eagle3', 'num_speculative_tokens': 3}}\n" +
	"\x1b[1;36m(Worker_TP0 pid=20)\x1b[0;0m INFO 09-01 10:00:05 [cuda_communicator.py:245] Using ['CUSTOM', 'SYMM_MEM', 'PYNCCL'] all-reduce backends (in dispatch order) for group 'tp:0' out of potential backends\n" +
	"(Worker_TP0 pid=20) INFO 09-01 10:00:10 [gpu_model_runner.py:3341] Model loading took 7.6000 GiB memory and 20.5 seconds\n" +
	"(Worker_TP1 pid=21) INFO 09-01 10:00:10 [gpu_model_runner.py:3341] Model loading took 7.5000 GiB memory and 20.6 seconds\n" +
	"(Worker_TP0 pid=20) INFO 09-01 10:00:20 [gpu_worker.py:348] Available KV cache memory: 30.10 GiB\n" +
	"(Worker_TP1 pid=21) INFO 09-01 10:00:20 [gpu_worker.py:348] Available KV cache memory: 29.90 GiB\n" +
	"(EngineCore_DP0 pid=15) INFO 09-01 10:00:21 [kv_cache_utils.py:1234] GPU KV cache size: 1,234,560 tokens\n" +
	"(EngineCore_DP0 pid=15) INFO 09-01 10:00:21 [kv_cache_utils.py:1239] Maximum concurrency for 16,384 tokens per request: 75.35x\n" +
	"(Worker_TP0 pid=20) INFO 09-01 10:00:30 [gpu_model_runner.py:3480] Graph capturing finished in 9 secs, took 0.50 GiB\n" +
	"(Worker_TP1 pid=21) INFO 09-01 10:00:30 [gpu_model_runner.py:3480] Graph capturing finished in 11 secs, took 512.00 MiB\n" +
	"(APIServer pid=10) INFO 09-01 10:00:40 [api_server.py:1818] Starting vLLM API server 0 on http://0.0.0.0:8000\n" +
	"(APIServer pid=10) INFO 09-01 10:01:00 [metrics.py:96] SpecDecoding metrics: Mean acceptance length: 3.00, Accepted throughput: 40.00 tokens/s, Drafted throughput: 60.00 tokens/s, Accepted: 400 tokens, Drafted: 600 tokens, Per-position acceptance rate: 0.8, 0.7, 0.5, Avg Draft acceptance rate: 66.7%\n" +
	"(APIServer pid=10) INFO 09-01 10:01:10 [metrics.py:96] SpecDecoding metrics: Mean acceptance length: 2.00, Accepted throughput: 10.00 tokens/s, Drafted throughput: 30.00 tokens/s, Accepted: 100 tokens, Drafted: 200 tokens, Per-position acceptance rate: 0.5, 0.3, 0.2, Avg Draft acceptance rate: 33.3%\n" +
	"(APIServer pid=10) INFO 09-01 10:01:20 [metrics.py:96] SpecDecoding metrics: Mean acceptance length: 1.00, Accepted throughput: 0.00 tokens/s, Drafted throughput: 0.00 tokens/s, Accepted: 0 tokens, Drafted: 0 tokens\n"

func TestParseSyntheticV1TP2(t *testing.T) {
	got, err := Parse(strings.NewReader(v1TP2))
	if err != nil {
		t.Fatal(err)
	}
	f := core.Float
	want := &core.Report{
		Engine: "vllm", Ready: true, AllReduce: "custom",
		WeightsGiB: f(7.5), KVCacheTokens: core.Int(1234560), KVCacheGiB: f(29.9),
		CUDAGraphSeconds: f(11), CUDAGraphGiB: f(0.5), MaxRunningRequests: core.Int(64),
		ContextLen: core.Int(16384), MaxConcurrency: f(75.35),
		SpecAcceptLength: f(2.75), // weighted by drafted tokens: (3*600 + 2*200) / 800; the idle interval is ignored
		Errors:           []core.LogError{},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("report (-want +got):\n%s", d)
	}
}

func TestParseEarlyV1SpecAndFlagOff(t *testing.T) {
	log := "INFO 04-01 10:00:00 [core.py:61] Initializing a V1 LLM engine (v0.8.3) with config: model='m', speculative_config=SpeculativeConfig(method='eagle', num_speculative_tokens=2), max_seq_len=4096, tensor_parallel_size=2, disable_custom_all_reduce=True, block_size=32\n" +
		"INFO 04-01 10:00:10 [kv_cache_utils.py:395] # GPU blocks: 100\n" +
		"INFO 04-01 10:01:00 [metrics.py:60] SpecDecoding metrics: Draft acceptance rate: 50.0%, Accepted: 50 tokens, Drafted: 100 tokens\n"
	got, err := Parse(strings.NewReader(log))
	if err != nil {
		t.Fatal(err)
	}
	if got.AllReduce != "nccl" || *got.KVCacheTokens != 3200 || *got.ContextLen != 4096 || *got.SpecAcceptLength != 2 {
		t.Errorf("report = allreduce %s kv %v ctx %v accept %v", got.AllReduce, *got.KVCacheTokens, *got.ContextLen, *got.SpecAcceptLength)
	}
}

// BenchmarkParse measures parsing speed on a long multi-worker log (~70k lines).
func BenchmarkParse(b *testing.B) {
	log := strings.Repeat(v1TP2, 5000)
	b.SetBytes(int64(len(log)))
	b.ResetTimer()
	for range b.N {
		if _, err := Parse(strings.NewReader(log)); err != nil {
			b.Fatal(err)
		}
	}
}

// The padded profile table of v0.6.5 and markdown bold around numbers of pasted logs.
func TestParseProfileTableAndBold(t *testing.T) {
	log := "INFO 12-13 19:54:18 worker.py:243] model weights take   14.96GiB\n" +
		"INFO 12-13 19:54:18 worker.py:243] available_kv_cache_memory    53.29GiB\n" +
		"INFO 06-19 23:05:35 [gpu_model_runner.py:1608] Graph capturing finished in **17 secs**, took 0.48 GiB\n"
	got, err := Parse(strings.NewReader(log))
	if err != nil {
		t.Fatal(err)
	}
	if got.WeightsGiB == nil || *got.WeightsGiB != 14.96 || got.KVCacheGiB == nil || *got.KVCacheGiB != 53.29 ||
		got.CUDAGraphSeconds == nil || *got.CUDAGraphSeconds != 17 || got.CUDAGraphGiB == nil || *got.CUDAGraphGiB != 0.48 {
		t.Errorf("report = %+v", got)
	}
}
