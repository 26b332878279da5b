package spec

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
)

// TestMetricsOnlyFromSources: a latency check on a metric that reckon's workload never measures
// is rejected at its metric field, with the metrics the check can gate; one it measures loads.
// (Before the metric registry, p75_tpot_ms and p99_e2e_ms loaded and were skipped at run time.)
func TestMetricsOnlyFromSources(t *testing.T) {
	data, err := os.ReadFile("../fixtures/specs/default.yaml")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(data), "\n")
	line, col := lineOf(t, lines, "    metric: median_tpot_ms", 0), 13 // the latency check's metric
	with := func(m string) []byte {
		l := append([]string(nil), lines...)
		l[line-1] = "    metric: " + m
		return []byte(strings.Join(l, "\n"))
	}
	gateable := strings.Join(metricsWhere(IsResultMetric), ", ")
	for _, c := range []struct{ metric, why string }{
		{"p75_tpot_ms", "p75_tpot_ms is not produced by reckon's workload (its sources: imported)"},
		{"p99_e2e_ms", `unknown metric "p99_e2e_ms"`},
		{"p99.9_itl_ms", "p99.9_itl_ms is not produced by reckon's workload (its sources: imported)"},
		{"input_throughput", "input_throughput is not produced by reckon's workload (its sources: imported)"},
		{"peak_in_flight", "peak_in_flight has no better direction (a count or a setting), so a latency check cannot compare it"},
		{"kv_cache_tokens", "kv_cache_tokens is not produced by reckon's workload (its sources: engine report)"},
	} {
		_, err := Parse(with(c.metric), "default.yaml")
		var list ErrorList
		if !errors.As(err, &list) || len(list) != 1 {
			t.Errorf("%s: got %v, want one error", c.metric, err)
			continue
		}
		e := list[0]
		if e.File != "default.yaml" || e.Line != line || e.Column != col || e.Field != "checks[9].metric" {
			t.Errorf("%s: error at %s:%d:%d %s, want default.yaml:%d:%d checks[9].metric", c.metric, e.File, e.Line, e.Column, e.Field, line, col)
		}
		if !strings.HasPrefix(e.Msg, c.why) || !strings.HasSuffix(e.Msg, "(expected one of the metrics reckon's workload produces: "+gateable+")") {
			t.Errorf("%s: message %q, want it to start %q and list %s", c.metric, e.Msg, c.why, gateable)
		}
	}
	for _, m := range []string{"median_tpot_ms", "p99_tpot_ms", "p90_e2el_ms", "mean_itl_ms", "std_ttft_ms", "output_throughput"} {
		s, err := Parse(with(m), "default.yaml")
		if err != nil {
			t.Errorf("%s rejected: %v", m, err)
			continue
		}
		found := false
		for _, c := range s.Checks {
			if c.Kind == KindLatency && c.Line == line-3 {
				found = true
				if c.Stat().Metric != m {
					t.Errorf("the latency check's metric = %q, want %q", c.Stat().Metric, m)
				}
			}
		}
		if !found {
			t.Errorf("%s: no latency check at default.yaml:%d", m, line-3)
		}
	}
	// The list names exactly the workload's six statistics of its four latencies, no others.
	for _, want := range []string{"median_tpot_ms", "p95_itl_ms", "std_e2el_ms", "request_goodput"} {
		if !strings.Contains(gateable, want) {
			t.Errorf("gateable metrics lack %s: %s", want, gateable)
		}
	}
	for _, not := range []string{"p75", "e2e_ms", "e2e_latency", "kv_cache", "peak_in_flight"} {
		if strings.Contains(gateable, not) {
			t.Errorf("gateable metrics hold %s: %s", not, gateable)
		}
	}
}

// TestFloorMetrics: a floor bounds an engine report or GPU sampler metric per launch, or with a
// workload any metric reckon's workload measures, even one without a direction.
func TestFloorMetrics(t *testing.T) {
	for _, m := range []string{"kv_cache_tokens", "peak_gpu_mem_gib", "spec_accept_length", "max_concurrency"} {
		if !IsEngineMetric(m) {
			t.Errorf("IsEngineMetric(%q) = false", m)
		}
	}
	for _, m := range []string{"output_throughput", "p99_ttft_ms", "peak_in_flight", "failed", "total_output_tokens"} {
		if !IsWorkloadMetric(m) || IsEngineMetric(m) {
			t.Errorf("%s: IsWorkloadMetric %v, IsEngineMetric %v; want true, false", m, IsWorkloadMetric(m), IsEngineMetric(m))
		}
	}
	for _, m := range []string{"p75_tpot_ms", "input_throughput", "avg_busbw_gbps", "goodput"} {
		if IsWorkloadMetric(m) || IsEngineMetric(m) {
			t.Errorf("%s: a floor accepts it, but no source of a spec's run produces it", m)
		}
	}
}

// TestRelativeMetricMessage: a relative check on a metric of reckon's workload is told that the
// engine report and the GPU sampler do not produce it (not that it lacks a direction).
func TestRelativeMetricMessage(t *testing.T) {
	data, err := os.ReadFile("../fixtures/specs/default.yaml")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(data), "\n")
	// the first relative check's metric
	line := lineOf(t, lines, "    metric: kv_cache_tokens", lineOf(t, lines, "  - kind: relative", 0))
	lines[line-1] = "    metric: peak_in_flight"
	_, err = Parse([]byte(strings.Join(lines, "\n")), "default.yaml")
	want := fmt.Sprintf("default.yaml:%d:13: checks[2].metric:", line) + " peak_in_flight is not produced by the engine report or the GPU sampler (its sources: workload), so this check could never judge it (expected one of the metrics the engine report or the GPU sampler produces: " + strings.Join(EngineMetrics, ", ") + ")"
	if err == nil || err.Error() != want {
		t.Errorf("got %v\nwant %s", err, want)
	}
}

// lineOf is the 1-based number of the first line equal to text after line `after`.
func lineOf(t *testing.T, lines []string, text string, after int) int {
	t.Helper()
	for i := after; i < len(lines); i++ {
		if lines[i] == text {
			return i + 1
		}
	}
	t.Fatalf("default.yaml has no line %q after line %d", text, after)
	return 0
}
