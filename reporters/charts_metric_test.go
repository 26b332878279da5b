package reporters

import (
	"github.com/reckon-ci/reckon/spec"
	"testing"

	"github.com/reckon-ci/reckon/gate"
)

// TestChartsAskTheRegistry: the charts take a check's side (throughput or latency) and its unit
// from the metric registry, not from the metric's spelling.
func TestChartsAskTheRegistry(t *testing.T) {
	stat := func(kind, metric string) *gate.Check {
		return &gate.Check{Verdict: gate.Verdict{Kind: kind, Stat: &gate.StatResult{Metric: metric}}}
	}
	for _, c := range []struct {
		kind, metric        string
		throughput, latency bool
	}{
		{string(spec.KindThroughput), "output_throughput", true, false},
		{string(spec.KindLatency), "median_tpot_ms", false, true},
		{string(spec.KindThroughput), "request_goodput", true, false},
		{string(spec.KindLatency), "output_throughput", false, true},
		{string(spec.KindRelative), "p99_ttft_ms", false, true},
		{string(spec.KindRelative), "kv_cache_tokens", true, false},
		{string(spec.KindRelative), "weights_gib", false, false},
		{string(spec.KindFloor), "max_output_tokens_per_s", true, false},
	} {
		ch := stat(c.kind, c.metric)
		if got := isThroughputCheck(ch); got != c.throughput {
			t.Errorf("isThroughputCheck(%s %s) = %v", c.kind, c.metric, got)
		}
		if got := isLatencyCheck(ch); got != c.latency {
			t.Errorf("isLatencyCheck(%s %s) = %v", c.kind, c.metric, got)
		}
	}
	for k, want := range map[string]string{
		"output_throughput": "tok/s", "request_throughput": "req/s", "request_goodput": "req/s", "p99_itl_ms": "ms",
		"spec_accept_length": "tok", "duration": "s", "p99_ttft_s": "s", "model_id": "model_id",
	} {
		if got := metricUnit(k); got != want {
			t.Errorf("metricUnit(%q) = %q, want %q", k, got, want)
		}
	}
}
