// vllm_metrics.go holds the vLLM dialect's GET /metrics (Prometheus text) and the histograms
// it writes.

package server

import (
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"

	"github.com/reckon-ci/reckon/refengine/memplan"
)

// vllmMetrics is GET /metrics with vLLM V1's metric names (vllm/v1/metrics/loggers.py): request
// gauges, KV cache usage, token counters, finish counts, latency histograms, the cache config
// info gauge and, with speculative decoding, the spec-decode counters. Counters start when the
// server is ready (the warmup is not counted, as vLLM's dummy runs are not).
func (e *Engine) vllmMetrics(w http.ResponseWriter, _ *http.Request) {
	st := e.Sched.Stats()
	e.v.mu.Lock()
	base := e.v.base
	ttft, itl, e2e := e.v.ttft.clone(), e.v.itl.clone(), e.v.e2e.clone()
	success := make(map[string]int64, len(e.v.success))
	for k, v := range e.v.success {
		success[k] = v
	}
	e.v.mu.Unlock()
	lbl := fmt.Sprintf(`engine="0",model_name=%q`, e.modelName())
	var b strings.Builder
	head := func(name, typ, help string) {
		fmt.Fprintf(&b, "# HELP vllm:%s %s\n# TYPE vllm:%s %s\n", name, help, name, typ)
	}
	metric := func(name, typ, help string, v any) {
		head(name, typ, help)
		series := name
		if typ == "counter" {
			series += "_total"
		}
		fmt.Fprintf(&b, "vllm:%s{%s} %v\n", series, lbl, v)
	}
	metric("num_requests_running", "gauge", "Number of requests in model execution batches.", st.Running)
	metric("num_requests_waiting", "gauge", "Number of requests waiting to be processed.", st.Queued)
	metric("kv_cache_usage_perc", "gauge", "KV-cache usage. 1 means 100 percent usage.", strconv.FormatFloat(st.TokenUsage(), 'g', -1, 64))
	metric("num_preemptions", "counter", "Cumulative number of preemption from the engine.", 0)
	metric("prompt_tokens", "counter", "Number of prefill tokens processed.", st.PromptTokensTotal-base.PromptTokensTotal)
	metric("generation_tokens", "counter", "Number of generation tokens processed.", st.GenerationTokensTotal-base.GenerationTokensTotal)
	head("request_success", "counter", "Count of successfully processed requests.")
	reasons := []string{"stop", "length", "abort"}
	for k := range success {
		if k != "stop" && k != "length" && k != "abort" {
			reasons = append(reasons, k)
		}
	}
	sort.Strings(reasons[3:])
	for _, k := range reasons {
		fmt.Fprintf(&b, "vllm:request_success_total{%s,finished_reason=%q} %d\n", lbl, k, success[k])
	}
	for _, h := range []struct {
		name, help string
		h          *histogram
	}{{"time_to_first_token_seconds", "Histogram of time to first token in seconds.", ttft},
		{"time_per_output_token_seconds", "Histogram of time per output token in seconds.", itl},
		{"e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.", e2e}} {
		head(h.name, "histogram", h.help)
		h.h.write(&b, "vllm:"+h.name, lbl)
	}
	head("cache_config_info", "gauge", "Information of the LLMEngine CacheConfig")
	fmt.Fprintf(&b, "vllm:cache_config_info{block_size=\"%d\",cache_dtype=\"auto\",enable_prefix_caching=\"False\",engine=\"0\",gpu_memory_utilization=\"%g\",num_gpu_blocks=\"%d\"} 1.0\n",
		e.Opts.PageSize, e.Opts.MemFractionStatic, e.Alloc.CapacityTokens()/e.Opts.PageSize)
	if e.Opts.SpecAlgorithm != "" {
		metric("spec_decode_num_drafts", "counter", "Number of spec decoding drafts.", st.SpecVerifies-base.SpecVerifies)
		metric("spec_decode_num_draft_tokens", "counter", "Number of draft tokens.", st.SpecDraftTokens-base.SpecDraftTokens)
		metric("spec_decode_num_accepted_tokens", "counter", "Number of accepted tokens.", st.SpecDraftAccepted-base.SpecDraftAccepted)
		head("spec_decode_num_accepted_tokens_per_pos", "counter", "Accepted tokens per draft position.")
		for i := 0; i < e.Opts.SpecNumSteps; i++ {
			var v, b0 int64
			if i < len(st.SpecAcceptedPerPos) {
				v = st.SpecAcceptedPerPos[i]
			}
			if i < len(base.SpecAcceptedPerPos) {
				b0 = base.SpecAcceptedPerPos[i]
			}
			fmt.Fprintf(&b, "vllm:spec_decode_num_accepted_tokens_per_pos_total{%s,position=\"%d\"} %d\n", lbl, i, v-b0)
		}
	}
	// The reference engine's own gauges, in vLLM's namespace style.
	metric("refengine_kv_cache_tokens", "gauge", "KV cache token capacity of the reference engine (GPU KV cache size).", e.Alloc.CapacityTokens())
	metric("refengine_kv_cache_gib", "gauge", "KV cache bytes really allocated per rank, GiB (target + draft).", round4(memplan.GiB(e.kvBytes(0))))
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write([]byte(b.String()))
}

// histogram is a Prometheus histogram (cumulative buckets, sum, count).
type histogram struct {
	bounds []float64
	counts []int64 // per bucket (not cumulative); the last is +Inf
	sum    float64
	n      int64
}

func newHistogram(bounds ...float64) *histogram {
	return &histogram{bounds: bounds, counts: make([]int64, len(bounds)+1)}
}

func (h *histogram) observe(v float64) {
	i := sort.SearchFloat64s(h.bounds, v) // first bound >= v: Prometheus buckets are le
	h.counts[i]++
	h.sum += v
	h.n++
}

func (h *histogram) clone() *histogram {
	c := *h
	c.counts = append([]int64(nil), h.counts...)
	return &c
}

func (h *histogram) write(b *strings.Builder, name, lbl string) {
	var cum int64
	for i, ub := range h.bounds {
		cum += h.counts[i]
		fmt.Fprintf(b, "%s_bucket{%s,le=\"%s\"} %d\n", name, lbl, strconv.FormatFloat(ub, 'f', -1, 64), cum)
	}
	cum += h.counts[len(h.bounds)]
	fmt.Fprintf(b, "%s_bucket{%s,le=\"+Inf\"} %d\n%s_sum{%s} %g\n%s_count{%s} %d\n", name, lbl, cum, name, lbl, h.sum, name, lbl, h.n)
}
