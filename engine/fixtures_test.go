package engine_test

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"unicode/utf16"

	"github.com/google/go-cmp/cmp"

	"github.com/reckon-ci/reckon/engine"
)

func f(v float64) *float64 { return &v }
func i(v int64) *int64     { return &v }
func s(v string) *string   { return &v }

// errAt is an expected error: kind, line and a fragment of its text.
type errAt struct {
	Kind string
	Line int
	Has  string
}

// fixture is one real log excerpt (fixtures/logs/ENGINE/NAME.log, cited in NAME.source) with
// the values a careful reader gets from it. Fields left zero are expected to be null.
type fixture struct {
	engine, name string
	want         engine.Report
	errs         []errAt
}

const pcie = "it's not supported on more than two PCIe-only GPUs"

// undetectable excerpts carry no record specific to either engine.
var undetectable = map[string]bool{"nccl_watchdog_timeout_cpp_frames_2024_10": true, "multinode_watchdog_rfc3339_brackets_2025_02": true}

var fixtures = []fixture{
	// ---------------- SGLang ----------------
	{"sglang", "v03_prefix_prefill_2024", engine.Report{AllReduce: "unknown"}, nil},
	{"sglang", "capture_fail_flashinfer_2024_10", engine.Report{AllReduce: "unknown", AvailableGPUMemGiB: f(8.38)},
		[]errAt{{"traceback", 3, "Traceback (most recent call last)"}}},
	{"sglang", "pcie_tp4_custom_ar_disabled_2025_06", engine.Report{AllReduce: "nccl", CustomAllReduceDisabledReason: s(pcie)}, nil},
	{"sglang", "tp3_custom_ar_disabled_gloo_2025_09", engine.Report{AllReduce: "nccl", CustomAllReduceDisabledReason: s(pcie)}, nil},
	{"sglang", "tp8_kv_alloc_2025_10", engine.Report{AllReduce: "unknown", KVCacheTokens: i(2795207), KVCacheGiB: f(106.62), AvailableGPUMemGiB: f(11.87)}, nil},
	{"sglang", "tp2_custom_ar_registering_2025_11", engine.Report{AllReduce: "custom", AvailableGPUMemGiB: f(11.17), CUDAGraphSeconds: f(11.39), CUDAGraphGiB: f(1.00)}, nil},
	{"sglang", "musa_piecewise_tqdm_glued_2026_03", engine.Report{AllReduce: "custom", AvailableGPUMemGiB: f(10.81), CUDAGraphSeconds: f(27.41), CUDAGraphGiB: f(0.83)}, nil},
	{"sglang", "kv_dtype_newest_tqdm_glued_2026_06", engine.Report{AllReduce: "unknown", KVCacheTokens: i(1106304), KVCacheGiB: f(50.64), AvailableGPUMemGiB: f(12.05)}, nil},
	{"sglang", "eagle3_accept_len_2025_10", engine.Report{AllReduce: "unknown", SpecAcceptLength: f(1.954)}, nil},
	{"sglang", "capture_oom_deepep_2025_04", engine.Report{AllReduce: "unknown"},
		[]errAt{{"graph_capture", 18, "Capture cuda graph failed: CUDA out of memory"}}},
	{"sglang", "stream_capture_not_permitted_2025_07", engine.Report{AllReduce: "unknown"},
		[]errAt{{"graph_capture", 8, "operation not permitted when stream is capturing"}, {"traceback", 16, "Traceback"}}},
	{"sglang", "capture_illegal_memory_access_2025_04", engine.Report{AllReduce: "unknown"},
		[]errAt{{"graph_capture", 3, "illegal memory access"}}},
	{"sglang", "input_too_long_scheduler_exception_2025_03", engine.Report{AllReduce: "unknown"},
		[]errAt{{"other", 2, "TypeError"}, {"other", 3, "exceeds the maximum allowed length"}, {"traceback", 5, "Scheduler hit an exception"}}},
	{"sglang", "dp_attention_negative_kv_rocm_2025_07", engine.Report{AllReduce: "unknown", WeightsGiB: f(166.59)},
		[]errAt{{"kv_too_small", 2, "profiled value -561981"}}},
	{"sglang", "budget_line_2026_06", engine.Report{AllReduce: "unknown", KVCacheTokens: i(2086558), AvailableGPUMemGiB: f(17.22), MaxRunningRequests: i(33), ContextLen: i(256000)}, nil},
	{"sglang", "tp1_untagged_load_begin_2025_12", engine.Report{AllReduce: "unknown"}, nil},
	{"sglang", "eagle_draft_graph_2025_09", engine.Report{AllReduce: "unknown", AvailableGPUMemGiB: f(15.31), CUDAGraphSeconds: f(62.67), CUDAGraphGiB: f(0.21)}, nil},
	{"sglang", "eagle2_prefill_uvicorn_2025_01", engine.Report{AllReduce: "unknown"}, nil},
	{"sglang", "dp8_registering_zero_hang_2025_10", engine.Report{AllReduce: "custom"}, nil},
	// begin - end avail, min over TP24..31
	{"sglang", "multinode_tp32_weights_no_usage_2025_02", engine.Report{AllReduce: "unknown", WeightsGiB: f(41.17)}, nil},
	{"sglang", "nccl_watchdog_timeout_cpp_frames_2024_10", engine.Report{AllReduce: "unknown"},
		[]errAt{{"nccl", 6, "DistBackendError"}, {"nccl", 7, "Watchdog caught collective operation timeout"}}},
	{"sglang", "custom_ar_v2_invalid_argument_2026_05", engine.Report{AllReduce: "unknown"},
		[]errAt{{"custom_allreduce", 1, "custom_all_reduce.cuh:37"}, {"graph_capture", 2, "Capture cuda graph failed"}}},
	{"sglang", "dp_ep_tqdm_glued_load_weight_2026_05", engine.Report{AllReduce: "unknown", WeightsGiB: f(16.39), KVCacheTokens: i(1029388), KVCacheGiB: f(94.24), AvailableGPUMemGiB: f(27.57)}, nil},
	{"sglang", "weights_leave_no_kv_room_2026_07", engine.Report{AllReduce: "unknown", WeightsGiB: f(125.65)},
		[]errAt{{"kv_too_small", 3, "leave no GPU memory for the KV cache"}}},
	{"sglang", "npu_mamba_decode_accept_len_2026_07", engine.Report{AllReduce: "unknown", SpecAcceptLength: f(3.13)}, nil},
	{"sglang", "python_logging_metrics_mixin_2026_06", engine.Report{AllReduce: "unknown"}, nil},
	// cut before any Load weight end
	{"sglang", "tp4_truncated_at_load_fence_glitch_2026_09", engine.Report{AllReduce: "unknown"}, nil},
	{"sglang", "dp1_tp_pair_prefixes_2026_01", engine.Report{AllReduce: "unknown"}, nil},
	{"sglang", "dynamo_rng_during_graph_capture_2025_05", engine.Report{AllReduce: "unknown"},
		[]errAt{{"graph_capture", 1, "during CUDA graph capture"}, {"traceback", 9, "Traceback"}}},
	{"sglang", "capture_failed_gloo_connection_2025_03", engine.Report{AllReduce: "unknown"},
		[]errAt{{"graph_capture", 18, "Capture cuda graph failed: [../third_party/gloo"}}},
	// Only the EAGLE3 draft's weights and KV pool are in the excerpt: none of them is the target's.
	{"sglang", "eagle3_draft_only_tp2_registering_2025_07", engine.Report{AllReduce: "custom", AvailableGPUMemGiB: f(6.88), CUDAGraphSeconds: f(5.48), CUDAGraphGiB: f(0.10)}, nil},
	{"sglang", "v03_capture_failed_triton_hints_2024_09", engine.Report{AllReduce: "unknown"},
		[]errAt{{"graph_capture", 12, "Triton Error [CUDA]: an illegal memory access"}}},
	{"sglang", "llama4_graph_end_6gb_2025_07", engine.Report{AllReduce: "unknown", AvailableGPUMemGiB: f(5.24), CUDAGraphSeconds: f(19.50), CUDAGraphGiB: f(6.19)}, nil},
	{"sglang", "req_slots_exhausted_bracket_lost_2025_09", engine.Report{AllReduce: "unknown"},
		[]errAt{{"kv_too_small", 2, "alloc_req_slots runs out of memory"}}},
	{"sglang", "multinode_tp16_spans_nodes_2025_02", engine.Report{AllReduce: "nccl", CustomAllReduceDisabledReason: s("this process group spans across nodes")}, nil},
	{"sglang", "multinode_watchdog_rfc3339_brackets_2025_02", engine.Report{AllReduce: "unknown"},
		[]errAt{{"nccl", 1, "detected by watchdog"}, {"nccl", 2, "Timeout at NCCL work"}, {"nccl", 3, "Some NCCL operations have failed"}}},
	// the Mamba conv-state pool is not KV
	{"sglang", "lfm2_mamba_cache_bench_one_batch_2025_12", engine.Report{AllReduce: "unknown", WeightsGiB: f(1.52), KVCacheTokens: i(473854), KVCacheGiB: f(5.42), AvailableGPUMemGiB: f(2.39), CUDAGraphSeconds: f(1.01), CUDAGraphGiB: f(0.03)}, nil},
	// no Load weight begin: weights unknown
	{"sglang", "v04_weights_no_usage_budget_no_avail_2024_12", engine.Report{AllReduce: "unknown", KVCacheTokens: i(56524), AvailableGPUMemGiB: f(2.44), CUDAGraphSeconds: f(2.19), MaxRunningRequests: i(2049), ContextLen: i(32768)}, nil},
	// retraction warnings, the server goes on
	{"sglang", "decode_oom_retraction_not_error_2025_03", engine.Report{AllReduce: "unknown"}, nil},
	// full-attention pool, not the SWA pool's #tokens
	{"sglang", "swa_pool_full_layer_tokens_2026_01", engine.Report{AllReduce: "unknown", KVCacheTokens: i(375360), KVCacheGiB: f(13.97)}, nil},

	// ---------------- vLLM ----------------
	{"vllm", "v0_7_3_pcie_tp4_workerprocess_2025_02", engine.Report{AllReduce: "nccl", CustomAllReduceDisabledReason: s("it's not supported on more than two PCIe-only GPU")}, nil},
	{"vllm", "v0_tp8_custom_ar_disabled_nccl_info_2024_07", engine.Report{AllReduce: "nccl", CustomAllReduceDisabledReason: s(pcie)}, nil},
	{"vllm", "v0_memory_profiling_max_seq_len_2024_12", engine.Report{AllReduce: "unknown", WeightsGiB: f(14.9888), KVCacheTokens: i(23648), KVCacheGiB: f(2.89), ContextLen: i(29000), MaxConcurrency: f(0.82)},
		[]errAt{{"kv_too_small", 5, "larger than the maximum number of tokens that can be stored in KV cache (23648)"}}},
	{"vllm", "v1_early_gpu_blocks_2025_01", engine.Report{AllReduce: "unknown", WeightsGiB: f(67.7229), KVCacheTokens: i(1381 * 16), ContextLen: i(2048), MaxConcurrency: f(10.79)}, nil},
	{"vllm", "v0_tp8_gemma2_weights_blocks_2024_08", engine.Report{AllReduce: "unknown", WeightsGiB: f(2.3463), KVCacheTokens: i(22982 * 16)}, nil},
	{"vllm", "v1_worker_tp_graph_profiling_2026_08", engine.Report{AllReduce: "unknown", KVCacheGiB: f(6.87)}, nil},
	{"vllm", "v1_enginecore_kv_graph_ready_2025_10", engine.Report{AllReduce: "unknown", KVCacheTokens: i(425424), KVCacheGiB: f(16.23), CUDAGraphSeconds: f(7), CUDAGraphGiB: f(0.95), ContextLen: i(65536), MaxConcurrency: f(6.49)}, nil},
	{"vllm", "v1_untagged_kv_graph_userwarning_2025_06", engine.Report{AllReduce: "unknown", KVCacheTokens: i(251920), KVCacheGiB: f(26.91), CUDAGraphSeconds: f(14), CUDAGraphGiB: f(0.84), ContextLen: i(40960), MaxConcurrency: f(6.15)}, nil},
	{"vllm", "v1_model_loading_gib_memory_2025_11", engine.Report{AllReduce: "unknown", WeightsGiB: f(2.0513), KVCacheTokens: i(1587648), KVCacheGiB: f(33.31), ContextLen: i(2048), MaxConcurrency: f(775.22)}, nil},
	{"vllm", "v0_tqdm_graph_capture_2024_12", engine.Report{AllReduce: "unknown", CUDAGraphSeconds: f(14), CUDAGraphGiB: f(0.21)}, nil},
	{"vllm", "v0_memory_profile_tp2_cuda_blocks_2025_04", engine.Report{AllReduce: "unknown", WeightsGiB: f(10.30), KVCacheTokens: i(7299 * 16), KVCacheGiB: f(14.26), ContextLen: i(50000), MaxConcurrency: f(2.34)}, nil},
	{"vllm", "v0_k9s_box_border_2025_03", engine.Report{AllReduce: "unknown", WeightsGiB: f(12.55), KVCacheTokens: i(7191 * 16), KVCacheGiB: f(56.18)}, nil},
	{"vllm", "v1_llama4_oom_tp8_markdown_bold_2025_07", engine.Report{AllReduce: "unknown"},
		[]errAt{{"oom", 1, "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.50 GiB"}, {"other", 2, "EngineCore failed to start"}, {"traceback", 3, "Traceback"}}},
	{"vllm", "v1_nccl_unhandled_cuda_oom_2025_05", engine.Report{AllReduce: "unknown"},
		[]errAt{{"nccl", 9, "DistBackendError: NCCL error"}, {"nccl", 10, "ncclUnhandledCudaError"}, {"oom", 12, "Cuda failure 'out of memory'"}, {"other", 13, "died unexpectedly"}}},
	{"vllm", "v1_spec_decode_metrics_ngram_2025_09", engine.Report{AllReduce: "unknown", SpecAcceptLength: f(5.44)}, nil},
	{"vllm", "v0_speculative_metrics_2024_08", engine.Report{AllReduce: "unknown", SpecAcceptLength: f(0.510 * 5)}, nil},
	{"vllm", "v0_6_4_no_cache_blocks_compose_2024_11", engine.Report{AllReduce: "unknown"},
		[]errAt{{"kv_too_small", 3, "ValueError: No available memory for the cache blocks"}}},
	{"vllm", "v1_worker_tp0_graph_capture_error_ci_2025_12", engine.Report{AllReduce: "unknown"},
		[]errAt{{"traceback", 2, "cuda_graph.py"}}},
	{"vllm", "v1_docker_ts_workerproc_failed_2026_03", engine.Report{AllReduce: "unknown"},
		[]errAt{{"other", 4, "WorkerProc failed to start"}, {"traceback", 5, "Traceback"}}},
	{"vllm", "v1_journald_v100_pynccl_only_2025_08", engine.Report{AllReduce: "nccl", CustomAllReduceDisabledReason: s(pcie)}, nil},
	{"vllm", "v1_journald_config_dump_tp4_2025_02", engine.Report{AllReduce: "unknown", ContextLen: i(32678)}, nil},
	{"vllm", "v1_registering_graph_addresses_pool_2026_07", engine.Report{AllReduce: "custom", CUDAGraphSeconds: f(1), CUDAGraphGiB: f(0.45)}, nil},
	{"vllm", "v1_custom_ar_cuh_invalid_argument_2026_05", engine.Report{AllReduce: "unknown"},
		[]errAt{{"custom_allreduce", 2, "custom_all_reduce.cuh:455"}}},
	{"vllm", "v0_2_ray_invalid_device_function_2024_01", engine.Report{AllReduce: "unknown"},
		[]errAt{{"cuda", 16, "invalid device function"}}},
	{"vllm", "v0_10_2_tp2_config_dump_2025_09", engine.Report{AllReduce: "unknown", ContextLen: i(32768)}, nil},
	{"vllm", "v0_memory_profiling_results_table_2024_12", engine.Report{AllReduce: "unknown", WeightsGiB: f(14.96), KVCacheGiB: f(53.29)}, nil},
	{"vllm", "v0_workerprocess_tp4_rest_reserved_kv_2025_04", engine.Report{AllReduce: "unknown", WeightsGiB: f(21.21), KVCacheGiB: f(1.57)}, nil},
	// 5 sizes summed: 108 MiB
	{"vllm", "v1_lazy_graph_per_size_mib_2025_08", engine.Report{AllReduce: "unknown", CUDAGraphSeconds: f(0.263), CUDAGraphGiB: f(0.1055)}, nil},
	{"vllm", "v1_bold_numbers_init_engine_2025_06", engine.Report{AllReduce: "unknown", WeightsGiB: f(3.4213), KVCacheTokens: i(613024), CUDAGraphSeconds: f(17), CUDAGraphGiB: f(0.48), ContextLen: i(131072), MaxConcurrency: f(4.68)}, nil},
	{"vllm", "v1_omni_stage_prefix_2026_02", engine.Report{AllReduce: "unknown", KVCacheTokens: i(2925232), KVCacheGiB: f(100.43), ContextLen: i(32768), MaxConcurrency: f(89.27)}, nil},
	{"vllm", "v1_speculator_prefill_graphs_2026_09", engine.Report{AllReduce: "unknown", KVCacheGiB: f(6.13), CUDAGraphSeconds: f(4), CUDAGraphGiB: f(0.11)}, nil},
	{"vllm", "v0_loading_weights_gb_workerprocess_2025_01", engine.Report{AllReduce: "unknown", WeightsGiB: f(7.9692)}, nil},
	{"vllm", "v0_ray_nccl_watchdog_bare_sgr_2024_07", engine.Report{AllReduce: "unknown"},
		[]errAt{{"nccl", 1, "Watchdog caught collective operation timeout"}, {"nccl", 2, "Timeout at NCCL work"}, {"nccl", 3, "Some NCCL operations have failed"}, {"nccl", 5, "watchdog thread terminated"}}},
	{"vllm", "v0_buildkite_worker_died_nccl_timeout_2024_07", engine.Report{AllReduce: "unknown"},
		[]errAt{{"other", 1, "died, exit code: -6"}, {"nccl", 3, "Watchdog caught"}, {"nccl", 4, "Timeout at NCCL work"}, {"nccl", 5, "Some NCCL operations"}, {"nccl", 7, "watchdog thread terminated"}}},
	{"vllm", "v0_workerprocess_oom_chained_traceback_2024_10", engine.Report{AllReduce: "unknown"},
		[]errAt{{"oom", 1, "CUDA out of memory"}, {"traceback", 5, "Traceback"}}},
	{"vllm", "v1_ci_ray_task_error_wrapped_2026_02", engine.Report{AllReduce: "unknown"},
		[]errAt{{"traceback", 3, "RayTaskError(ValueError)"}, {"traceback", 6, "worker_base.py"}}},
	{"vllm", "v0_llumlet_tag_weights_gb_2024_11", engine.Report{AllReduce: "unknown", WeightsGiB: f(6.3101)}, nil},
	{"vllm", "v0_tp8_gpu_blocks_concurrency_2025_07", engine.Report{AllReduce: "unknown", WeightsGiB: f(1.9028), KVCacheTokens: i(464716 * 16), ContextLen: i(131072), MaxConcurrency: f(56.73)}, nil},
	{"vllm", "v0_8_cuda_blocks_profile_windows_2025_04", engine.Report{AllReduce: "unknown", WeightsGiB: f(0.4678), KVCacheTokens: i(12200 * 16), KVCacheGiB: f(13.40), ContextLen: i(2048), MaxConcurrency: f(95.31)}, nil},
	{"vllm", "v1_tp4_graph_then_workerproc_exception_2025_05", engine.Report{AllReduce: "unknown", CUDAGraphSeconds: f(78), CUDAGraphGiB: f(2.28)},
		[]errAt{{"other", 5, "WorkerProc hit an exception"}, {"traceback", 6, "Traceback"}}},
	{"vllm", "v0_tp4_model_loading_gb_profile_warnings_2025_03", engine.Report{AllReduce: "unknown", WeightsGiB: f(15.4137)}, nil},
	{"vllm", "v0_8_cuda_blocks_graph_init_engine_2025_02", engine.Report{AllReduce: "unknown", WeightsGiB: f(1.12), KVCacheTokens: i(36184 * 16), KVCacheGiB: f(61.84), CUDAGraphSeconds: f(2), CUDAGraphGiB: f(0.13), ContextLen: i(8192), MaxConcurrency: f(70.67)}, nil},
	// capture cut before it ends
	{"vllm", "v0_cat_v_esc_caret_m_ray_capture_2025_02", engine.Report{AllReduce: "unknown"}, nil},
	{"vllm", "dynamo_wrapped_custom_ar_cuh_2025_04", engine.Report{AllReduce: "unknown"},
		[]errAt{{"custom_allreduce", 2, "custom_all_reduce.cuh:368"}}},
	{"vllm", "v0_10_0_non_default_args_max_model_len_2025_07", engine.Report{AllReduce: "unknown", ContextLen: i(32768)}, nil},
	{"vllm", "v1_double_tag_dp_actor_sampler_oom_2025_12", engine.Report{AllReduce: "unknown"},
		[]errAt{{"oom", 6, "warming up sampler"}}},
	{"vllm", "v1_tp8_sampler_warmup_oom_2025_03", engine.Report{AllReduce: "unknown"},
		[]errAt{{"oom", 1, "warming up sampler"}, {"other", 4, "WorkerProc hit an exception"}, {"traceback", 5, "Traceback"}}},
	// the estimate is not reported
	{"vllm", "v1_estimated_graph_memory_autotuner_2026_03", engine.Report{AllReduce: "unknown", KVCacheTokens: i(188640), KVCacheGiB: f(17.36), ContextLen: i(131072), MaxConcurrency: f(5.23)}, nil},
}

func TestParseRealLogFixtures(t *testing.T) {
	for _, fx := range fixtures {
		t.Run(fx.engine+"/"+fx.name, func(t *testing.T) {
			path := filepath.Join("..", "fixtures", "logs", fx.engine, fx.name+".log")
			got, err := engine.ParseLogFile(path, fx.engine)
			if err != nil {
				t.Fatal(err)
			}
			want := fx.want
			want.Engine = fx.engine
			gotErrs := got.Errors
			got.Errors, want.Errors = nil, nil
			if d := cmp.Diff(&want, got); d != "" {
				t.Errorf("report mismatch (-want +got):\n%s", d)
			}
			if len(gotErrs) != len(fx.errs) {
				t.Fatalf("got %d errors %+v, want %d %+v", len(gotErrs), gotErrs, len(fx.errs), fx.errs)
			}
			for k, e := range fx.errs {
				g := gotErrs[k]
				if g.Kind != e.Kind || g.Line != e.Line || !strings.Contains(g.Text, e.Has) {
					t.Errorf("error %d = %+v, want kind %s line %d containing %q", k, g, e.Kind, e.Line, e.Has)
				}
			}
			// The same file parsed with engine auto-detection gives the same engine, unless the
			// excerpt has no record of either engine's own (a bare C++ abort).
			if undetectable[fx.name] {
				if _, err := engine.ParseLogFile(path, "auto"); err == nil {
					t.Errorf("auto-detection succeeded on an excerpt without engine records")
				}
				return
			}
			auto, err := engine.ParseLogFile(path, "auto")
			if err != nil {
				t.Fatalf("auto: %v", err)
			}
			if auto.Engine != fx.engine {
				t.Errorf("auto-detected %q, want %q", auto.Engine, fx.engine)
			}
		})
	}
}

// TestFixturesAreCitedAndCovered: every excerpt has a sidecar with its public URL and an
// entry in the table above, and each engine has at least 12 of them.
func TestFixturesAreCitedAndCovered(t *testing.T) {
	inTable := map[string]bool{}
	count := map[string]int{}
	for _, fx := range fixtures {
		inTable[fx.engine+"/"+fx.name] = true
		count[fx.engine]++
	}
	for _, eng := range []string{"sglang", "vllm"} {
		if count[eng] < 12 {
			t.Errorf("%s: %d fixtures, want >= 12", eng, count[eng])
		}
		logs, _ := filepath.Glob(filepath.Join("..", "fixtures", "logs", eng, "*.log"))
		sort.Strings(logs)
		for _, l := range logs {
			name := strings.TrimSuffix(filepath.Base(l), ".log")
			if !inTable[eng+"/"+name] {
				t.Errorf("%s has no expected values in the fixture table", l)
			}
			src, err := os.ReadFile(strings.TrimSuffix(l, ".log") + ".source")
			if err != nil || !strings.HasPrefix(string(src), "https://") {
				t.Errorf("%s: sidecar .source with the URL missing or malformed: %v", l, err)
			}
		}
	}
}

// TestParseUTF16Log: the same excerpt saved as UTF-16 with a BOM (PowerShell's ">" on Windows)
// is detected and parsed like the UTF-8 original.
func TestParseUTF16Log(t *testing.T) {
	src := filepath.Join("..", "fixtures", "logs", "vllm", "v0_8_cuda_blocks_profile_windows_2025_04.log")
	text, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	enc := []byte{0xFF, 0xFE}
	for _, u := range utf16.Encode([]rune(string(text))) {
		enc = append(enc, byte(u), byte(u>>8))
	}
	path := filepath.Join(t.TempDir(), "utf16.log")
	if err := os.WriteFile(path, enc, 0o600); err != nil {
		t.Fatal(err)
	}
	want, err := engine.ParseLogFile(src, "vllm")
	if err != nil {
		t.Fatal(err)
	}
	got, err := engine.ParseLogFile(path, "auto")
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("UTF-16 report differs (-utf8 +utf16):\n%s", d)
	}
}
