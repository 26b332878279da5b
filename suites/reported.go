package suites

import (
	"fmt"
	"strings"

	"github.com/reckon-ci/reckon/spec"
)

// reportedMetrics lists, per engine adapter, the EngineReport values its log grammar can give
// (engine/sglang/parse.go, engine/vllm/parse.go). SGLang (and the reference engine, which speaks
// its log format) states the memory left after start-up; vLLM never does, and it states the max
// concurrency its KV cache allows, which SGLang does not. TestReportedMetricsMatchParsers pins
// each list against the parsers' output on the log samples under fixtures/logs.
var reportedMetrics = map[string][]string{
	"sglang": {"weights_gib", "kv_cache_tokens", "kv_cache_gib", "available_gpu_mem_gib", "cuda_graph_seconds", "cuda_graph_gib", "max_running_requests", "context_len", "spec_accept_length"},
	"vllm":   {"weights_gib", "kv_cache_tokens", "kv_cache_gib", "cuda_graph_seconds", "cuda_graph_gib", "max_running_requests", "context_len", "max_concurrency", "spec_accept_length"},
}

// ReportedMetrics returns the EngineReport values the logs of an engine kind can give (false for
// an unknown kind). The reference engine uses the SGLang adapter.
func ReportedMetrics(kind string) ([]string, bool) {
	k := strings.ToLower(strings.TrimSpace(kind))
	if k == "refengine" {
		k = "sglang"
	}
	m, ok := reportedMetrics[k]
	return m, ok
}

// EngineProblems returns the spec's settings that the engine kind would silently drop or could
// never judge, each at its file:line: a floor or relative check on a value the kind's logs never
// report, and (vLLM) a speculative num_draft_tokens that its --speculative-config cannot express.
// `reckon spec check` and the gate (before launching anything) both reject them.
func EngineProblems(s *spec.Spec) spec.ErrorList {
	var out spec.ErrorList
	if reported, ok := ReportedMetrics(s.Engine.Kind); ok {
		out = append(out, s.UnreportedMetrics(reported)...)
	}
	if strings.EqualFold(strings.TrimSpace(s.Engine.Kind), "vllm") {
		for i, c := range s.Configs {
			l, err := s.Resolved(c.Name)
			if err != nil || l.Speculative == nil {
				continue
			}
			if msg := vllmDraftTokensProblem(l.Speculative); msg != "" {
				out = append(out, &spec.Error{Code: spec.CodeUnsupported, File: s.File, Line: c.Line, Column: 1,
					Field: fmt.Sprintf("configs[%d].speculative.num_draft_tokens", i), Msg: fmt.Sprintf("config %s: %s", c.Name, msg)})
			}
		}
	}
	return out
}

// vllmDraftTokensProblem explains why a speculative section's num_draft_tokens would not take
// effect on vLLM ("" when it does). vLLM drafts a chain of num_speculative_tokens tokens: the
// adapter maps num_steps to it, or num_draft_tokens when num_steps is not set. With both set,
// num_draft_tokens is in effect only when it says the same chain as SGLang counts it (num_steps
// drafted tokens plus the verified root: num_steps + 1); any other value would be dropped.
func vllmDraftTokensProblem(sp *spec.Speculative) string {
	if sp.NumSteps <= 0 || sp.NumDraftTokens <= 0 || sp.NumDraftTokens == sp.NumSteps+1 {
		return ""
	}
	return fmt.Sprintf("num_draft_tokens %d with num_steps %d: vLLM drafts a chain of num_steps tokens (--speculative-config num_speculative_tokens %d) and cannot take a separate number of draft tokens; remove num_draft_tokens, or set it to num_steps + 1 (%d) for the same chain",
		sp.NumDraftTokens, sp.NumSteps, sp.NumSteps, sp.NumSteps+1)
}
