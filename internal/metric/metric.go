// Package metric is reckon's one registry of metrics: each metric's name, the direction in which
// it improves, its unit, and who produces it (the engine's report, reckon's GPU sampler, reckon's
// own workload, or only result files of other tools that reckon imports). spec validates the
// metrics a check names through it, gate takes a statistical check's direction from it, and
// reporters take units and directions from it. docs/metrics.md's registry table is generated from
// it (TestDocTable).
//
// It is a leaf: it imports nothing of the harness.
package metric

import (
	"regexp"
	"slices"
	"strings"
)

// Direction says which way a metric gets better.
type Direction string

// Directions. The values are gate.Direction's.
const (
	// HigherIsBetter: throughputs, KV capacity, accept length.
	HigherIsBetter Direction = "higher_is_better"
	// LowerIsBetter: latencies, failures.
	LowerIsBetter Direction = "lower_is_better"
	// NoDirection: a quantity with no better side (the weights' size, the context length, a
	// configured cap). It may be bounded by floor and relative checks, never judged by a
	// statistical one.
	NoDirection Direction = ""
)

// Source is a set of producers of a metric.
type Source uint8

// Sources.
const (
	// EngineReport: the engine's logs and /server_info as read by its adapter (engine.Report,
	// `reckon logs parse --json`). Which of these a given engine kind reports is the adapter's
	// list (suites.ReportedMetrics).
	EngineReport Source = 1 << iota
	// GPUSampler: reckon's GPU memory sampler (nvidia-smi) during a config's launch.
	GPUSampler
	// Workload: reckon's own workload, one value per trial (workload.Result).
	Workload
	// Imported: result files of other tools that `reckon import` and `reckon compare` read
	// (vLLM, SGLang, GenAI-Perf/AIPerf, nccl-tests). A metric with only this source is never
	// measured by a spec's run.
	Imported
)

var sourceNames = []struct {
	s    Source
	name string
}{{EngineReport, "engine report"}, {GPUSampler, "GPU sampler"}, {Workload, "workload"}, {Imported, "imported"}}

// Has reports whether s includes any source of o.
func (s Source) Has(o Source) bool { return s&o != 0 }

// String lists the sources, e.g. "engine report, workload".
func (s Source) String() string {
	var parts []string
	for _, n := range sourceNames {
		if s.Has(n.s) {
			parts = append(parts, n.name)
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// Metric describes one metric.
type Metric struct {
	// Name is the key under which results, engine reports and checks name it.
	Name string
	// Direction is the way it improves (NoDirection: bounded, never compared statistically).
	Direction Direction
	// Unit is its unit ("" for a pure number).
	Unit string
	// Sources are its producers.
	Sources Source
	// Doc says what it is, in one line.
	Doc string
}

// Comparable reports whether a statistical check (throughput, latency) may judge the metric:
// it has a direction.
func (m Metric) Comparable() bool { return m.Direction != NoDirection }

// Names of metrics that other packages refer to by name.
const (
	KVCacheTokens    = "kv_cache_tokens"
	KVCacheGiB       = "kv_cache_gib"
	PeakGPUMemGiB    = "peak_gpu_mem_gib"
	SpecAcceptLength = "spec_accept_length"
	OutputThroughput = "output_throughput"
	RequestGoodput   = "request_goodput"
)

// LatencyStats are the statistics reckon's workload reports for each of LatencyQuantities
// (workload/stats.go summarize), and LatencyQuantities the per-request quantities: the latency
// metrics it emits are STAT_QUANTITY_ms, e.g. median_tpot_ms.
var (
	LatencyStats      = []string{"mean", "median", "std", "p90", "p95", "p99"}
	LatencyQuantities = []string{"ttft", "tpot", "itl", "e2el"}
)

var latencyDocs = map[string]string{
	"ttft": "time to first token of successful requests",
	"tpot": "time per output token after the first, per request with more than one output token",
	"itl":  "inter-token latency: every gap between content events, pooled over successful requests",
	"e2el": "end-to-end latency of successful requests",
}

const (
	engine   = EngineReport
	workload = Workload
	imported = Imported
)

// registry lists every named metric, engine report first (in the order of engine.Report), then
// the GPU sampler, reckon's workload (in the order of workload.Result) and imported-only names.
var registry = func() []Metric {
	r := []Metric{
		{"weights_gib", NoDirection, "GiB", engine, "memory taken by the model weights"},
		{KVCacheTokens, HigherIsBetter, "tok", engine, "KV cache capacity in tokens"},
		{KVCacheGiB, HigherIsBetter, "GiB", engine, "memory of the KV cache"},
		{"available_gpu_mem_gib", NoDirection, "GiB", engine, "free GPU memory left after start-up (SGLang's available_gpu_mem)"},
		{"cuda_graph_seconds", NoDirection, "s", engine, "time spent capturing CUDA graphs (slowest rank)"},
		{"cuda_graph_gib", NoDirection, "GiB", engine, "memory taken by CUDA graphs"},
		{"max_running_requests", NoDirection, "req", engine, "the scheduler's cap on concurrently running requests"},
		{"context_len", NoDirection, "tok", engine, "maximum context length (SGLang context_len, vLLM max_model_len)"},
		{"max_concurrency", NoDirection, "", engine | workload | imported, "engine report: vLLM's maximum concurrency for the configured tokens per request; workload result: the configured concurrency cap (0 = none)"},
		{SpecAcceptLength, HigherIsBetter, "tok", engine | workload | imported, "mean speculative-decoding accept length (engine log; the workload reads /server_info after a trial)"},
		{PeakGPUMemGiB, NoDirection, "GiB", GPUSampler, "largest peak GPU memory over the GPUs during the launch (nvidia-smi)"},

		{"duration", LowerIsBetter, "s", workload | imported, "from the first benchmark request's send to the end of the last"},
		{"completed", HigherIsBetter, "req", workload | imported, "successful benchmark requests"},
		{"failed", LowerIsBetter, "req", workload | imported, "failed benchmark requests"},
		{"total_input_tokens", NoDirection, "tok", workload | imported, "input tokens of successful requests"},
		{"total_output_tokens", NoDirection, "tok", workload | imported, "output tokens of successful requests"},
		{"request_throughput", HigherIsBetter, "req/s", workload | imported, "completed / duration"},
		{RequestGoodput, HigherIsBetter, "req/s", workload | imported, "requests meeting every goodput SLO / duration (only with goodput SLOs)"},
		{OutputThroughput, HigherIsBetter, "tok/s", workload | imported, "total_output_tokens / duration"},
		{"total_token_throughput", HigherIsBetter, "tok/s", workload | imported, "(total_input_tokens + total_output_tokens) / duration"},
		{"max_output_tokens_per_s", HigherIsBetter, "tok/s", workload | imported, "busiest whole second of token arrivals"},
		{"max_concurrent_requests", NoDirection, "req", workload | imported, "largest number of successful requests in flight at one instant (current vLLM's figure)"},
		{"max_concurrent_requests_1s", NoDirection, "req", workload | imported, "busiest whole second of successful requests in flight (vLLM's max_concurrent_requests up to 0.28)"},
		{"peak_in_flight", NoDirection, "req", workload, "largest number of requests in flight at one instant"},
		{"concurrency", NoDirection, "req", workload | imported, "Σ e2el / duration (SGLang's Little's-law figure)"},
	}
	for _, q := range LatencyQuantities {
		for _, st := range LatencyStats {
			r = append(r, Metric{LatencyName(st, q), LowerIsBetter, "ms", workload | imported, st + " " + latencyDocs[q]})
		}
	}
	return append(r,
		Metric{"input_throughput", HigherIsBetter, "tok/s", imported, "total_input_tokens / duration (SGLang, vLLM console)"},
		Metric{"accept_length", HigherIsBetter, "tok", imported, "SGLang's name for spec_accept_length"},
		Metric{"spec_decode_acceptance_length", HigherIsBetter, "tok", imported, "vLLM's name for spec_accept_length"},
		Metric{"spec_decode_acceptance_rate", HigherIsBetter, "", imported, "vLLM's speculative acceptance rate"},
		Metric{"avg_busbw_gbps", HigherIsBetter, "GB/s", imported, "nccl-tests: average bus bandwidth"},
		Metric{"max_busbw_gbps", HigherIsBetter, "GB/s", imported, "nccl-tests: largest bus bandwidth over the sizes"},
		Metric{"wrong_total", LowerIsBetter, "", imported, "nccl-tests: wrong elements over the validated sizes"},
	)
}()

// LatencyName is the name of a latency statistic, e.g. LatencyName("median", "tpot") is
// "median_tpot_ms".
func LatencyName(stat, quantity string) string { return stat + "_" + quantity + "_ms" }

// Pattern is a family of imported-result keys that the registry knows by shape rather than by
// name: other tools' statistics and throughputs under their own names. Every pattern's only
// source is Imported.
type Pattern struct {
	// Shape is the family in words, e.g. "STAT_QUANTITY_UNIT".
	Shape string
	// Direction and Unit of every key of the family ("" Unit: taken from the key, see unitGroup).
	Direction Direction
	Unit      string
	// Doc says which keys the family holds.
	Doc string

	re        *regexp.Regexp
	unitGroup int // the submatch that holds the unit, 0 for Unit
}

// patterns, tried in order after the named metrics.
var patterns = []Pattern{
	{
		Shape: "STAT_QUANTITY_UNIT", Direction: LowerIsBetter, Unit: "ms or s",
		Doc: "STAT one of mean, median, std, min, max, pNN(.N); QUANTITY one of ttft, tpot, itl, e2el, e2e_latency, latency; UNIT ms or s (e.g. p99.9_itl_ms, p25_ttft_ms, p99_ttft_s)",
		re:  regexp.MustCompile(`^(mean|median|std|min|max|p[0-9]+(\.[0-9]+)?)_(ttft|tpot|itl|e2el|e2e_latency|latency)_(ms|s)$`), unitGroup: 4,
	},
	{
		Shape: "*_throughput, *_per_s, *_goodput", Direction: HigherIsBetter,
		Doc: "any other rate (e.g. total_throughput)",
		re:  regexp.MustCompile(`^.*(_throughput|_per_s|_goodput)$`),
	},
	{
		Shape: "*_latency_ms, *_ttft_ms, *_tpot_ms, *_itl_ms, *_e2el_ms", Direction: LowerIsBetter, Unit: "ms",
		Doc: "any other latency in milliseconds (e.g. avg_ttft_ms)",
		re:  regexp.MustCompile(`^.*(_latency|_ttft|_tpot|_itl|_e2el)_ms$`),
	},
}

var byName = func() map[string]Metric {
	m := make(map[string]Metric, len(registry))
	for _, x := range registry {
		if _, dup := m[x.Name]; dup {
			panic("metric: " + x.Name + " registered twice")
		}
		m[x.Name] = x
	}
	return m
}()

// Lookup returns the metric called name: a named metric, else the first Pattern it matches
// (with Sources Imported). ok is false for a name the registry does not know.
func Lookup(name string) (m Metric, ok bool) {
	if m, ok := byName[name]; ok {
		return m, true
	}
	for _, p := range patterns {
		sm := p.re.FindStringSubmatch(name)
		if sm == nil {
			continue
		}
		unit := p.Unit
		if p.unitGroup > 0 {
			unit = sm[p.unitGroup]
		}
		return Metric{Name: name, Direction: p.Direction, Unit: unit, Sources: Imported, Doc: p.Doc}, true
	}
	return Metric{Name: name}, false
}

// All returns every named metric in registry order (patterns are not included; see Patterns).
func All() []Metric { return slices.Clone(registry) }

// Patterns returns the imported-result families Lookup also recognises.
func Patterns() []Pattern { return slices.Clone(patterns) }

// Produced returns the named metrics that at least one of sources produces, in registry order:
// what a spec whose run has those sources can gate.
func Produced(sources Source) []Metric {
	var out []Metric
	for _, m := range registry {
		if m.Sources.Has(sources) {
			out = append(out, m)
		}
	}
	return out
}

// Names returns the metrics' names, in order.
func Names(ms []Metric) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.Name
	}
	return out
}
