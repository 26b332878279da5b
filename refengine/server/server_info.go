// server_info.go holds GET /server_info (SGLang's server args and internal state, and the
// reference engine's own facts under "refengine").

package server

import (
	"net/http"
	"strings"

	"github.com/reckon-ci/reckon/refengine/memplan"
	"github.com/reckon-ci/reckon/refengine/sched"
	"github.com/reckon-ci/reckon/refengine/tp"
)

// ServerInfo is what /server_info (/get_server_info) reports (also used by tests): the server
// arguments, version, KV capacity, memory usage and internal_states as SGLang reports them, and
// under "refengine" the facts only the reference engine knows (refengineFacts).
func (e *Engine) ServerInfo() map[string]any {
	st := e.Sched.Stats()
	p := e.Plans[0]
	// weight, kvcache and cuda_graph are the target model's, as SGLang reports them (and as the
	// log lines give them); the draft model's parts are reported separately.
	targetW := e.Group.Shard(tp.Target, 0).Bytes()
	targetKV := e.Group.KVStore(tp.Target, 0).Bytes()
	if e.Opts.ModelledMemory {
		targetW, targetKV = e.sizes.TargetWeights, e.sizes.kvTarget()
	}
	mem := map[string]any{
		"weight":           round4(memplan.GiB(targetW)),
		"kvcache":          round4(memplan.GiB(targetKV)),
		"token_capacity":   e.Alloc.CapacityTokens(),
		"cuda_graph":       round4(memplan.GiB(e.GraphTarget)),
		"draft_weight":     round4(memplan.GiB(p.Weights - targetW)),
		"draft_kvcache":    round4(memplan.GiB(e.kvBytes(0) - targetKV)),
		"draft_cuda_graph": round4(memplan.GiB(e.GraphDraft)),
		"custom_allreduce": round4(memplan.GiB(p.CustomAR)),
		"activations":      round4(memplan.GiB(p.Activations)),
		"fault_reserve":    round4(memplan.GiB(p.FaultReserve)),
		"leaked_tokens":    st.LeakedTokens,
		"leaked":           round4(memplan.GiB(int64(st.LeakedTokens) * e.kvBytes(0) / int64(max(1, e.Alloc.CapacityTokens())))),
	}
	internal := map[string]any{
		"memory_usage":                          mem,
		"max_total_num_tokens":                  e.Alloc.CapacityTokens(),
		"last_gen_throughput":                   st.LastGenThroughput,
		"avg_spec_accept_length":                nil,
		"effective_max_running_requests_per_dp": e.MaxRunning,
		"token_usage":                           st.TokenUsage(),
		"num_running_reqs":                      st.Running,
		"num_queue_reqs":                        st.Queued,
	}
	info := map[string]any{
		"model_path": e.Opts.ModelPath, "served_model_name": e.modelName(), "tp_size": e.Opts.TPSize,
		"host": e.Opts.Host, "port": e.Opts.Port, "dtype": e.Opts.DType, "mem_fraction_static": e.Opts.MemFractionStatic,
		"max_running_requests": e.MaxRunning, "chunked_prefill_size": e.Opts.ChunkedPrefill,
		"max_prefill_tokens": e.Opts.MaxPrefillTokens, "context_length": e.ContextLen, "page_size": e.Opts.PageSize,
		"cuda_graph_max_bs": e.Opts.CUDAGraphMaxBS, "disable_cuda_graph": e.Opts.DisableCUDAGraph,
		"disable_custom_all_reduce": e.Opts.DisableCustomAR, "random_seed": e.Opts.RandomSeed,
		"enable_deterministic_inference": e.Opts.Deterministic, "log_level": e.Opts.LogLevel,
		"speculative_algorithm": nil, "version": e.Opts.Persona.Version,
		"memory_usage": mem, "max_total_num_tokens": e.Alloc.CapacityTokens(),
		"last_gen_throughput": st.LastGenThroughput,
		"internal_states":     []map[string]any{internal},
		"refengine":           e.refengineFacts(st),
	}
	if e.Opts.Persona.GraphFlagDecode {
		// sglang server_args: the decode batch limit has its own name; the old one stays unset
		// (the real run's /get_server_info had cuda_graph_max_bs = None).
		info["cuda_graph_max_bs_decode"] = e.Opts.CUDAGraphMaxBS
		info["cuda_graph_max_bs"] = nil
	}
	if e.Opts.Persona.FusionAutoEnable {
		// sglang server_args after __post_init__: the auto-enable sets the field itself.
		info["enable_flashinfer_allreduce_fusion"] = e.Fused
		info["enforce_disable_flashinfer_allreduce_fusion"] = e.Opts.EnforceDisableFusion
	}
	if e.Opts.SpecAlgorithm != "" {
		al := st.AvgAcceptLength()
		info["speculative_algorithm"] = strings.ToUpper(e.Opts.SpecAlgorithm)
		info["speculative_num_steps"] = e.Opts.SpecNumSteps
		info["speculative_eagle_topk"] = e.Opts.SpecEagleTopK
		info["speculative_num_draft_tokens"] = e.Opts.SpecNumDraftTokens
		info["avg_spec_accept_length"] = al
		internal["avg_spec_accept_length"] = al
	}
	return info
}

// refengineFacts are what the reference engine knows about itself and no release reports: the
// persona, the modelled device and interconnect, the memory plan, the allreduce backend in effect
// and the engagement counters of the allreduce paths (was the custom path used, did its largest
// message stay within its buffer, did a fault alter results), the faults and the weight seed.
func (e *Engine) refengineFacts(st sched.Stats) map[string]any {
	p := e.Plans[0]
	gs := e.Group.Stats()
	return map[string]any{
		"persona": e.Opts.Persona.Name, "dialect": string(e.Opts.Dialect), "refengine_version": Version,
		"device_memory": e.Opts.DeviceMemory, "topology": e.Opts.Topology, "interconnect": e.Interconnect.Describe(),
		"allreduce_backend": e.Backend, "custom_allreduce_rule": e.CustomARRule,
		"custom_allreduce_disabled_reason":   nilIfEmpty(e.CustomDisabledReason),
		"custom_allreduce_forced":            e.CustomForced,
		"custom_allreduce_max_bytes":         e.CustomMaxBytes,
		"nccl_algorithm":                     string(e.NCCLAlgorithm),
		"custom_allreduce_calls":             gs.CustomCalls,
		"flashinfer_allreduce_fusion_calls":  gs.FusedCalls,
		"nccl_allreduce_calls":               gs.RingCalls + gs.TreeCalls,
		"nccl_ring_calls":                    gs.RingCalls,
		"nccl_tree_calls":                    gs.TreeCalls,
		"custom_allreduce_max_message_bytes": gs.MaxCustomBytes,
		"faulted_calls":                      gs.FaultedCalls,
		"modelled_comm_time_s":               st.CommTime.Seconds(),
		"fault_delay_s":                      st.FaultDelay.Seconds(),
		"generation_tokens_total":            st.GenerationTokensTotal,
		"memory_plan": map[string]any{
			"device": p.DeviceBytes, "fraction": e.Opts.MemFractionStatic, "static": p.Static, "weights": p.Weights,
			"custom_allreduce": p.CustomAR, "graph_reserve": p.GraphReserve, "activations": p.Activations,
			"fault_reserve": p.FaultReserve, "kv_cache": e.kvBytes(0), "available": e.available(0),
		},
		"faults": map[string]any{"allreduce_error": e.Opts.FaultAllReduceError, "allreduce_scale": e.Opts.FaultAllReduceScale,
			"allreduce_drop_rank_above": sizeOrNil(e.Opts.FaultDropRank, e.Opts.FaultDropRankAbove),
			"allreduce_stale_above":     sizeOrNil(e.Opts.FaultStale, e.Opts.FaultStaleAbove),
			"allreduce_min_batch":       e.Opts.FaultMinBatch, "reserve_mb": e.Opts.FaultReserveMB,
			"allreduce_accumulate": nilIfEmpty(e.Opts.FaultAccumulate), "allreduce_rank_order": e.Opts.FaultRankOrder,
			"slowdown": e.Opts.FaultSlowdown, "crash_after": e.Opts.FaultCrashAfter, "hang_startup": e.Opts.FaultHangStartup,
			"leak_mb_per_request": e.Opts.FaultLeakMBPerReq},
		"allreduce_oracle": nilIfEmpty(e.Opts.AllReduceOracle),
		"weight_seed":      e.WeightSeed,
		"model_file_seed":  e.FileSeed,
		"profiling":        e.prof.active(),
		"clock":            e.Opts.Clock,
		"device_clock":     e.deviceClockFacts(st),
	}
}

// deviceClockFacts describe the modelled device clock (nil on the wall clock): what is modelled
// (the GPU and the model whose size sets step times, while the real model computes every logit),
// the noise settings, and the counters, among them the steps whose real CPU compute overran the
// modelled time.
func (e *Engine) deviceClockFacts(st sched.Stats) any {
	if e.Device == nil {
		return nil
	}
	d := st.Device
	t := e.Device
	return map[string]any{
		"gpu": t.GPU.Name, "gpu_description": t.GPU.Display, "gpu_memory_bytes": t.GPU.MemoryBytes,
		"gpu_hbm_gbps": t.GPU.HBMGBps, "gpu_bf16_tflops": t.GPU.BF16TFLOPS, "gpu_source": t.GPU.Source,
		"model": t.Model.Name, "model_weight_bytes": t.Model.WeightBytes(), "model_source": t.Model.Source,
		"computed_model":  e.Cfg.Name,
		"note":            "step times are the modelled model's on the modelled GPU; the real (computed) model is the small one, which produces every logit",
		"describe":        t.Describe(),
		"modelled_memory": e.Opts.ModelledMemory,
		"slowdown":        e.Opts.FaultSlowdown,
		"noise": map[string]any{"step_cv": e.Opts.ClockStepCV, "step_period_s": e.Opts.ClockStepPeriod.Seconds(),
			"launch_cv": e.Opts.ClockLaunchCV, "drift_per_minute": e.Opts.ClockDriftPerMinute, "seed": e.Opts.ClockSeed,
			"launch": e.Launch, "launch_factor": d.LaunchFactor},
		"steps": d.Steps, "cpu_overrun_steps": d.Overruns, "worst_cpu_overrun_s": d.WorstOverrun.Seconds(),
		"modelled_s": d.Modelled.Seconds(), "real_compute_s": d.Real.Seconds(), "slept_s": d.Slept.Seconds(),
		"catch_up_s": e.Opts.ClockCatchUp.Seconds(), "repaid_s": d.Repaid.Seconds(),
		"modelled_compute_s": st.DeviceCompute.Seconds(),
	}
}

// sizeOrNil is a fault's size threshold in bytes, or nil when the fault is off.
func sizeOrNil(on bool, b int64) any {
	if !on {
		return nil
	}
	return b
}

func nilIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func round4(x float64) float64 { return float64(int64(x*1e4+0.5)) / 1e4 }

func (e *Engine) serverInfo(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, e.ServerInfo())
}
