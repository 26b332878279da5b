// startlog.go holds the pieces of the start-up log: log levels, the server_args line and
// the formatting helpers of SGLang's lines.

package server

import (
	"fmt"
	"sort"
	"strings"

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
