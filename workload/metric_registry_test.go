package workload

import (
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/reckon-ci/reckon/internal/metric"
)

// TestResultMatchesRegistry pins the metric registry's workload metrics (internal/metric) to what
// this package's Result holds: a metric the registry says reckon's workload measures is a Result
// field, and every numeric Result field is registered as the workload's. The latency statistics
// are exactly summarize's for each quantity setDist fills.
func TestResultMatchesRegistry(t *testing.T) {
	keys := MetricKeys()
	registered := metric.Names(metric.Produced(metric.Workload))
	sort.Strings(keys)
	sort.Strings(registered)
	if !slices.Equal(keys, registered) {
		t.Errorf("Result's metric keys and the registry's workload metrics differ:\nResult:   %v\nregistry: %v", keys, registered)
	}
	// A measured run fills every latency statistic the registry lists.
	r := ComputeMetrics([]RequestRecord{{Success: true, OutputTokens: 3, PromptTokens: 4, TTFT: 1e6, Latency: 3e6, ITLs: []time.Duration{1e6, 1e6}}}, time.Second, nil)
	m := r.Metrics()
	for _, q := range metric.LatencyQuantities {
		for _, s := range metric.LatencyStats {
			if _, ok := m[metric.LatencyName(s, q)]; !ok {
				t.Errorf("a measured run has no %s", metric.LatencyName(s, q))
			}
		}
	}
}
