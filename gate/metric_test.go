package gate

import "testing"

// TestMetricForUnchanged pins MetricFor's answers as they were before the direction table moved
// into the metric registry (internal/metric): every name it knew keeps its direction and unit,
// and every name it did not know stays unknown.
func TestMetricForUnchanged(t *testing.T) {
	for _, c := range []struct {
		name string
		dir  Direction
		unit string
		ok   bool
	}{
		{"output_throughput", "higher_is_better", "tok/s", true},
		{"total_token_throughput", "higher_is_better", "tok/s", true},
		{"input_throughput", "higher_is_better", "tok/s", true},
		{"request_throughput", "higher_is_better", "req/s", true},
		{"request_goodput", "higher_is_better", "req/s", true},
		{"max_output_tokens_per_s", "higher_is_better", "tok/s", true},
		{"accept_length", "higher_is_better", "tok", true},
		{"spec_decode_acceptance_length", "higher_is_better", "tok", true},
		{"spec_decode_acceptance_rate", "higher_is_better", "", true},
		{"spec_accept_length", "higher_is_better", "tok", true},
		{"avg_busbw_gbps", "higher_is_better", "GB/s", true},
		{"max_busbw_gbps", "higher_is_better", "GB/s", true},
		{"wrong_total", "lower_is_better", "", true},
		{"completed", "higher_is_better", "req", true},
		{"failed", "lower_is_better", "req", true},
		{"duration", "lower_is_better", "s", true},
		{"kv_cache_tokens", "higher_is_better", "tok", true},
		{"kv_cache_gib", "higher_is_better", "GiB", true},
		{"mean_ttft_ms", "lower_is_better", "ms", true},
		{"median_ttft_ms", "lower_is_better", "ms", true},
		{"std_ttft_ms", "lower_is_better", "ms", true},
		{"p90_ttft_ms", "lower_is_better", "ms", true},
		{"p95_ttft_ms", "lower_is_better", "ms", true},
		{"p99_ttft_ms", "lower_is_better", "ms", true},
		{"mean_tpot_ms", "lower_is_better", "ms", true},
		{"median_tpot_ms", "lower_is_better", "ms", true},
		{"std_tpot_ms", "lower_is_better", "ms", true},
		{"p90_tpot_ms", "lower_is_better", "ms", true},
		{"p95_tpot_ms", "lower_is_better", "ms", true},
		{"p99_tpot_ms", "lower_is_better", "ms", true},
		{"mean_itl_ms", "lower_is_better", "ms", true},
		{"median_itl_ms", "lower_is_better", "ms", true},
		{"std_itl_ms", "lower_is_better", "ms", true},
		{"p90_itl_ms", "lower_is_better", "ms", true},
		{"p95_itl_ms", "lower_is_better", "ms", true},
		{"p99_itl_ms", "lower_is_better", "ms", true},
		{"mean_e2el_ms", "lower_is_better", "ms", true},
		{"median_e2el_ms", "lower_is_better", "ms", true},
		{"std_e2el_ms", "lower_is_better", "ms", true},
		{"p90_e2el_ms", "lower_is_better", "ms", true},
		{"p95_e2el_ms", "lower_is_better", "ms", true},
		{"p99_e2el_ms", "lower_is_better", "ms", true},
		{"p99.9_itl_ms", "lower_is_better", "ms", true},
		{"min_ttft_ms", "lower_is_better", "ms", true},
		{"max_itl_ms", "lower_is_better", "ms", true},
		{"p99_ttft_s", "lower_is_better", "s", true},
		{"mean_e2e_latency_ms", "lower_is_better", "ms", true},
		{"median_latency_ms", "lower_is_better", "ms", true},
		{"mean_latency_ms", "lower_is_better", "ms", true},
		{"p25_ttft_ms", "lower_is_better", "ms", true},
		{"p75_tpot_ms", "lower_is_better", "ms", true},
		{"avg_ttft_ms", "lower_is_better", "ms", true},
		{"total_throughput", "higher_is_better", "", true},
		{"goodput", "", "", false},
		{"foo_per_s", "higher_is_better", "", true},
		{"my_goodput", "higher_is_better", "", true},
		{"mean_e2e_ms", "", "", false},
		{"p99_e2e_ms", "", "", false},
		{"model_id", "", "", false},
		{"weights_gib", "", "", false},
		{"available_gpu_mem_gib", "", "", false},
		{"cuda_graph_seconds", "", "", false},
		{"cuda_graph_gib", "", "", false},
		{"max_running_requests", "", "", false},
		{"context_len", "", "", false},
		{"max_concurrency", "", "", false},
		{"peak_gpu_mem_gib", "", "", false},
		{"total_input_tokens", "", "", false},
		{"total_output_tokens", "", "", false},
		{"max_concurrent_requests", "", "", false},
		{"peak_in_flight", "", "", false},
		{"concurrency", "", "", false},
		{"", "", "", false},
		{"ttft", "", "", false},
		{"e2e_latency_ms", "lower_is_better", "ms", true},
		{"p99_ttft_ms_x", "", "", false},
		{"time_to_first_token_ms", "", "", false},
	} {
		m, ok := MetricFor(c.name)
		if ok != c.ok || m.Direction != c.dir || m.Unit != c.unit || m.Name != c.name {
			t.Errorf("MetricFor(%q) = %+v, %v; want direction %q, unit %q, %v", c.name, m, ok, c.dir, c.unit, c.ok)
		}
	}
}
