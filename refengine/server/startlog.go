// startlog.go holds the pieces of the start-up log: log levels, the server_args line and
// the formatting helpers of SGLang's lines.

package server

import (
	"fmt"
	"sort"
	"strings"

	"github.com/reckon-ci/reckon/refengine/memplan"
	"github.com/reckon-ci/reckon/refengine/model"
)

// setLogLevels applies the log levels: SGLang's --log-level (engine and uvicorn lines); vLLM's
// VLLM_LOGGING_LEVEL (engine lines) and --uvicorn-log-level (uvicorn's).
func (e *Engine) setLogLevels() error {
	o := e.Opts
	if o.Dialect == DialectVLLM {
		main, err := ParseLevel(e.getenv("VLLM_LOGGING_LEVEL"))
		if err != nil {
			return fmt.Errorf("VLLM_LOGGING_LEVEL: %w", err)
		}
		uv, err := ParseLevel(o.UvicornLogLevel)
		if err != nil {
			return fmt.Errorf("--uvicorn-log-level: %w", err)
		}
		e.Log.SetLevels(main, uv)
		return nil
	}
	lv, err := ParseLevel(o.LogLevel)
	if err != nil {
		return fmt.Errorf("--log-level: %w", err)
	}
	e.Log.SetLevels(lv, lv)
	return nil
}

func archName(c model.Config) string {
	if len(c.Architectures) > 0 {
		return c.Architectures[0]
	}
	return "RefEngineForCausalLM"
}

func graphBatchSizes(maxBS int) []int {
	var out []int
	for _, b := range []int{1, 2, 4, 8, 12, 16, 24, 32} {
		if b <= maxBS {
			out = append(out, b)
		}
	}
	for b := 40; b <= maxBS; b += 8 {
		out = append(out, b)
	}
	if len(out) == 0 || out[len(out)-1] != maxBS {
		out = append(out, maxBS)
	}
	sort.Ints(out)
	return out
}

func formatInts(xs []int) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = fmt.Sprint(x)
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

func pyBool(b bool) string {
	if b {
		return "True"
	}
	return "False"
}

func serverArgsLine(o *Options) string {
	spec := "None"
	if o.SpecAlgorithm != "" {
		spec = "'" + strings.ToUpper(o.SpecAlgorithm) + "'"
	}
	return fmt.Sprintf("server_args=ServerArgs(model_path='%s', tp_size=%d, host='%s', port=%d, dtype='%s', mem_fraction_static=%g, max_running_requests=%d, chunked_prefill_size=%d, max_prefill_tokens=%d, page_size=%d, cuda_graph_max_bs=%d, disable_cuda_graph=%s, disable_custom_all_reduce=%s, enable_deterministic_inference=%s, random_seed=%d, speculative_algorithm=%s, speculative_num_steps=%d, speculative_eagle_topk=%d, speculative_num_draft_tokens=%d, device_memory=%d, topology='%s')",
		o.ModelPath, o.TPSize, o.Host, o.Port, o.DType, o.MemFractionStatic, o.MaxRunning, o.ChunkedPrefill, o.MaxPrefillTokens, o.PageSize,
		o.CUDAGraphMaxBS, pyBool(o.DisableCUDAGraph), pyBool(o.DisableCustomAR), pyBool(o.Deterministic), o.RandomSeed, spec,
		o.SpecNumSteps, o.SpecEagleTopK, o.SpecNumDraftTokens, o.DeviceMemory, o.Topology)
}

// logRanks prints the start-up log's per-rank lines in SGLang's order: distributed init, weight
// loading, the KV pool, and the CUDA-graph capture.
func (e *Engine) logRanks(s *startup) {
	opts, cfg, sg, spec := e.Opts, e.Cfg, s.sg, s.spec
	pages, customARBytes := s.pages, s.customARBytes
	dtypeName := "torch.float32"
	if opts.DType == "bfloat16" {
		dtypeName = "torch.bfloat16"
	}
	for r := 0; r < opts.TPSize; r++ {
		p := e.Plans[r]
		sg.Rank(r, "Init torch distributed begin.")
		if e.CustomDisabledReason != "" {
			sg.RankAt(LevelWarning, r, "%s", e.CustomDisabledReason)
		}
		sg.Rank(r, "Init torch distributed ends. mem usage=%s", memplan.GiBString(customARBytes))
		avail := opts.DeviceMemory - customARBytes
		sg.Rank(r, "Load weight begin. avail mem=%s", memplan.GiBString(avail))
		sz := s.allSizes[r]
		tw := sz.TargetWeights
		avail -= tw
		sg.Rank(r, "Load weight end. elapsed=%.2f s, type=%s, dtype=%s, avail mem=%s, mem usage=%s.", s.loadElapsed, archName(cfg), dtypeName, memplan.GiBString(avail), memplan.GiBString(tw))
		if spec {
			dw := sz.DraftWeights
			sg.Rank(r, "Load weight begin. avail mem=%s", memplan.GiBString(avail))
			avail -= dw
			sg.Rank(r, "Load weight end. elapsed=%.2f s, type=RefEngineEagleDraft, dtype=%s, avail mem=%s, mem usage=%s.", 0.0, dtypeName, memplan.GiBString(avail), memplan.GiBString(dw))
		}
		kvT := int64(pages*opts.PageSize) * sz.TargetKVPerToken
		avail -= p.Activations + p.FaultReserve
		if p.FaultReserve > 0 {
			sg.Rank(r, "Fault injection: reserving %s per rank (--fault-reserve-mb %g).", memplan.GiBString(p.FaultReserve), opts.FaultReserveMB)
		}
		sg.Rank(r, "KV Cache is allocated. dtype: torch.float32, #tokens: %d, K size: %s, V size: %s", pages*opts.PageSize, memplan.GiBString(kvT/2), memplan.GiBString(kvT/2))
		avail -= kvT
		if spec {
			kvD := int64(pages*opts.PageSize) * sz.DraftKVPerToken
			sg.Rank(r, "KV Cache is allocated. dtype: torch.float32, #tokens: %d, K size: %s, V size: %s", pages*opts.PageSize, memplan.GiBString(kvD/2), memplan.GiBString(kvD/2))
			avail -= kvD
		}
		sg.Rank(r, "Memory pool end. avail mem=%s", memplan.GiBString(avail))
		if !opts.DisableCUDAGraph {
			e.logGraphCapture(s, r, avail)
		}
	}
}

// logGraphCapture prints rank r's CUDA-graph capture lines, from avail free bytes.
func (e *Engine) logGraphCapture(s *startup, r int, avail int64) {
	opts, sg := e.Opts, s.sg
	if r == 0 && s.custom && s.rule == "v1" && opts.Persona.RegisteringLine {
		// v1 registers the captured graphs' buffers (custom_all_reduce.py
		// register_graph_buffers); v2 registers them without a word.
		sg.Rank(r, "Registering %d cuda graph addresses", 2*e.Cfg.Layers*len(s.bsList))
	}
	bs := formatInts(s.bsList)
	sg.Rank(r, "Capture target %s CUDA graph begin. backend=full, num_tokens_per_req=%d, bs=%s, avail mem=%s", s.phase, s.numDraft, bs, memplan.GiBString(avail))
	avail -= s.graphTarget
	sg.Rank(r, "Capture target %s CUDA graph end. elapsed=%.2f s, mem usage=%s, avail mem=%s.", s.phase, 0.0, memplan.GiBString(s.graphTarget), memplan.GiBString(avail))
	if s.spec {
		sg.Rank(r, "Capture draft decode CUDA graph begin. backend=full, num_tokens_per_req=1, bs=%s, avail mem=%s", bs, memplan.GiBString(avail))
		avail -= s.graphDraft
		sg.Rank(r, "Capture draft decode CUDA graph end. elapsed=%.2f s, mem usage=%s, avail mem=%s.", 0.0, memplan.GiBString(s.graphDraft), memplan.GiBString(avail))
	}
}
