package gate

import (
	"github.com/reckon-ci/reckon/internal/metric"
	"github.com/reckon-ci/reckon/spec"
)

// Direction says which way a metric gets better.
type Direction string

// Directions, the registry's (internal/metric). DirectionUnknown metrics are printed but never
// judged.
const (
	HigherIsBetter   = Direction(metric.HigherIsBetter)
	LowerIsBetter    = Direction(metric.LowerIsBetter)
	DirectionUnknown = Direction(metric.NoDirection)
)

// Metric names a measured quantity and the direction in which it improves.
type Metric struct {
	Name      string    `json:"name"`
	Direction Direction `json:"direction"`
	Unit      string    `json:"unit,omitempty"`
}

// Kind returns the Verdict kind for a statistical check of this metric: "throughput" for
// higher-is-better metrics and "latency" for lower-is-better ones.
func (m Metric) Kind() string {
	if m.Direction == HigherIsBetter {
		return string(spec.KindThroughput)
	}
	return string(spec.KindLatency)
}

// MetricFor returns the metric descriptor for a result key (vLLM/SGLang key names, e.g.
// "output_throughput", "median_ttft_ms", "p99_itl_ms"), looked up in the metric registry
// (internal/metric, docs/metrics.md). ok is false when the direction is not known (a name the
// registry does not know, or one with no better side, such as weights_gib); such metrics can be
// printed but not gated.
func MetricFor(name string) (m Metric, ok bool) {
	r, found := metric.Lookup(name)
	if !found || !r.Comparable() {
		return Metric{Name: name}, false
	}
	return Metric{Name: name, Direction: Direction(r.Direction), Unit: r.Unit}, true
}
