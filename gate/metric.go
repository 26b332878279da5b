package gate

import (
	"regexp"
	"strings"
)

// Direction says which way a metric gets better.
type Direction string

// Directions. DirectionUnknown metrics are printed but never judged.
const (
	HigherIsBetter   Direction = "higher_is_better"
	LowerIsBetter    Direction = "lower_is_better"
	DirectionUnknown Direction = ""
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
		return KindThroughput
	}
	return KindLatency
}

// latencyRE matches the latency keys of vLLM `bench serve` and SGLang `bench_serving` result
// files: mean_/median_/std_/pNN_ followed by ttft, tpot, itl, e2el or e2e_latency, in ms.
var latencyRE = regexp.MustCompile(`^(mean|median|std|min|max|p[0-9]+(\.[0-9]+)?)_(ttft|tpot|itl|e2el|e2e_latency|latency)_(ms|s)$`)

// exactDirections holds the non-pattern keys of vLLM and SGLang result files.
var exactDirections = map[string]Metric{
	"output_throughput":             {Direction: HigherIsBetter, Unit: "tok/s"},
	"total_token_throughput":        {Direction: HigherIsBetter, Unit: "tok/s"},
	"input_throughput":              {Direction: HigherIsBetter, Unit: "tok/s"},
	"request_throughput":            {Direction: HigherIsBetter, Unit: "req/s"},
	"request_goodput":               {Direction: HigherIsBetter, Unit: "req/s"},
	"max_output_tokens_per_s":       {Direction: HigherIsBetter, Unit: "tok/s"},
	"accept_length":                 {Direction: HigherIsBetter, Unit: "tok"},
	"spec_decode_acceptance_length": {Direction: HigherIsBetter, Unit: "tok"},
	"spec_decode_acceptance_rate":   {Direction: HigherIsBetter},
	"spec_accept_length":            {Direction: HigherIsBetter, Unit: "tok"},
	"avg_busbw_gbps":                {Direction: HigherIsBetter, Unit: "GB/s"},
	"max_busbw_gbps":                {Direction: HigherIsBetter, Unit: "GB/s"},
	"wrong_total":                   {Direction: LowerIsBetter},
	"completed":                     {Direction: HigherIsBetter, Unit: "req"},
	"failed":                        {Direction: LowerIsBetter, Unit: "req"},
	"duration":                      {Direction: LowerIsBetter, Unit: "s"},
	"kv_cache_tokens":               {Direction: HigherIsBetter, Unit: "tok"},
	"kv_cache_gib":                  {Direction: HigherIsBetter, Unit: "GiB"},
}

// MetricFor returns the metric descriptor for a result key (vLLM/SGLang key names, e.g.
// "output_throughput", "median_ttft_ms", "p99_itl_ms"). ok is false when the direction is not
// known; such metrics can be printed but not gated.
func MetricFor(name string) (m Metric, ok bool) {
	if d, found := exactDirections[name]; found {
		d.Name = name
		return d, true
	}
	if sm := latencyRE.FindStringSubmatch(name); sm != nil {
		return Metric{Name: name, Direction: LowerIsBetter, Unit: sm[4]}, true
	}
	switch {
	case strings.HasSuffix(name, "_throughput") || strings.HasSuffix(name, "_per_s") || strings.HasSuffix(name, "_goodput"):
		return Metric{Name: name, Direction: HigherIsBetter}, true
	case strings.HasSuffix(name, "_latency_ms") || strings.HasSuffix(name, "_ttft_ms") || strings.HasSuffix(name, "_tpot_ms") ||
		strings.HasSuffix(name, "_itl_ms") || strings.HasSuffix(name, "_e2el_ms"):
		return Metric{Name: name, Direction: LowerIsBetter, Unit: "ms"}, true
	}
	return Metric{Name: name}, false
}
