// Package workload drives a serving engine with load (closed-loop concurrency or open-loop
// Poisson/gamma arrivals), measures serving metrics with the definitions of vLLM's `bench serve`
// and SGLang's `bench_serving` (docs/metrics.md), runs numerics probes, and reads the result files
// of other tools (vLLM, SGLang, GenAI-Perf/AIPerf, nccl-tests) into the same Result type.
package workload

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"sort"
	"strings"

	"github.com/reckon-ci/reckon/internal/atomicfile"
)

// ResultSchema is the value of Result.Schema written by this version of reckon.
const ResultSchema = "reckon.result/v1"

// Result is one benchmark run, measured by reckon or imported from another tool. Metric fields
// use the key names of vLLM's `bench serve --save-result` JSON. Latencies are in milliseconds,
// throughputs per second, Duration in seconds.
//
// A metric the source did not report is listed in Missing (its field is then zero and Metrics
// leaves it out): nothing is guessed.
type Result struct {
	Schema   string   `json:"schema"`
	Metadata Metadata `json:"metadata"`

	Duration          float64 `json:"duration"`
	Completed         int     `json:"completed"`
	Failed            int     `json:"failed"`
	TotalInputTokens  int     `json:"total_input_tokens"`
	TotalOutputTokens int     `json:"total_output_tokens"`

	RequestThroughput    float64 `json:"request_throughput"`
	RequestGoodput       float64 `json:"request_goodput"`
	OutputThroughput     float64 `json:"output_throughput"`
	TotalTokenThroughput float64 `json:"total_token_throughput"`
	MaxOutputTokensPerS  float64 `json:"max_output_tokens_per_s"`
	MaxConcurrency       int     `json:"max_concurrency"`
	// MaxConcurrentRequests is the largest number of successful requests in flight at one
	// instant (half-open [send, end) intervals), as current vllm bench serve computes its key of
	// this name; MaxConcurrentRequests1s is the busiest whole second instead (vLLM's figure up to
	// 0.28, which counts requests that merely share a second together).
	MaxConcurrentRequests   int     `json:"max_concurrent_requests"`
	MaxConcurrentRequests1s int     `json:"max_concurrent_requests_1s"`
	PeakInFlight            int     `json:"peak_in_flight"`
	Concurrency             float64 `json:"concurrency"`
	SpecAcceptLength        float64 `json:"spec_accept_length"`

	MeanTTFTMs   float64 `json:"mean_ttft_ms"`
	MedianTTFTMs float64 `json:"median_ttft_ms"`
	StdTTFTMs    float64 `json:"std_ttft_ms"`
	P90TTFTMs    float64 `json:"p90_ttft_ms"`
	P95TTFTMs    float64 `json:"p95_ttft_ms"`
	P99TTFTMs    float64 `json:"p99_ttft_ms"`

	MeanTPOTMs   float64 `json:"mean_tpot_ms"`
	MedianTPOTMs float64 `json:"median_tpot_ms"`
	StdTPOTMs    float64 `json:"std_tpot_ms"`
	P90TPOTMs    float64 `json:"p90_tpot_ms"`
	P95TPOTMs    float64 `json:"p95_tpot_ms"`
	P99TPOTMs    float64 `json:"p99_tpot_ms"`

	MeanITLMs   float64 `json:"mean_itl_ms"`
	MedianITLMs float64 `json:"median_itl_ms"`
	StdITLMs    float64 `json:"std_itl_ms"`
	P90ITLMs    float64 `json:"p90_itl_ms"`
	P95ITLMs    float64 `json:"p95_itl_ms"`
	P99ITLMs    float64 `json:"p99_itl_ms"`

	MeanE2ELMs   float64 `json:"mean_e2el_ms"`
	MedianE2ELMs float64 `json:"median_e2el_ms"`
	StdE2ELMs    float64 `json:"std_e2el_ms"`
	P90E2ELMs    float64 `json:"p90_e2el_ms"`
	P95E2ELMs    float64 `json:"p95_e2el_ms"`
	P99E2ELMs    float64 `json:"p99_e2el_ms"`

	// Missing lists the metric keys above that the source did not report (or that this run did
	// not measure, such as request_goodput without --goodput).
	Missing []string `json:"missing,omitempty"`
	// Warnings: everything a reader should know (unknown keys in an imported file, definitions
	// that differ from vLLM's, failed requests' first errors).
	Warnings []string `json:"warnings,omitempty"`
	// Extra holds further numeric metrics of the source under their own names (for example
	// input_throughput, p25_ttft_ms).
	Extra map[string]float64 `json:"extra,omitempty"`
	// NCCL is set for nccl-tests output.
	NCCL *NCCLResult `json:"nccl,omitempty"`
	// Details holds per-request data (with Options.Details, or vLLM --save-detailed files).
	Details *Details `json:"details,omitempty"`
}

// Metadata says what was measured, where, and by which tool.
type Metadata struct {
	Engine  string `json:"engine,omitempty"`
	Config  string `json:"config,omitempty"`
	Testbed string `json:"testbed,omitempty"`
	Model   string `json:"model,omitempty"`
	// Seed is nil when the source does not record one (never a default 0).
	Seed         *int64            `json:"seed,omitempty"`
	Workload     Workload          `json:"workload"`
	Tool         string            `json:"tool"`
	ToolVersion  string            `json:"tool_version,omitempty"`
	SourceFormat string            `json:"source_format"`
	SourceFile   string            `json:"source_file,omitempty"`
	Date         string            `json:"date,omitempty"`
	Labels       map[string]string `json:"labels,omitempty"`
	// Semantics names the definitions the result was measured with (which tool, which version
	// of its definitions, and how that was known); see Semantics.
	Semantics *Semantics `json:"semantics,omitempty"`
}

// Workload describes the load that produced a result. RequestRate 0 means "all requests at
// once" (vLLM's inf).
type Workload struct {
	Name           string  `json:"name,omitempty"`
	Dataset        string  `json:"dataset,omitempty"`
	NumPrompts     int     `json:"num_prompts,omitempty"`
	RequestRate    float64 `json:"request_rate"`
	Burstiness     float64 `json:"burstiness,omitempty"`
	MaxConcurrency int     `json:"max_concurrency,omitempty"`
	InputLen       int     `json:"input_len,omitempty"`
	OutputLen      int     `json:"output_len,omitempty"`
	RangeRatio     float64 `json:"range_ratio,omitempty"`
	// InputLens and OutputLens are the interval synthetic lengths were drawn from, uniformly
	// over the integers min..max inclusive: reckon's and vLLM's [L(1−r), L(1+r)], or another
	// tool's range converted with its own definition (SGLang: [max(⌊L·r⌋, 1), L]).
	InputLens  *LenRange `json:"input_lens,omitempty"`
	OutputLens *LenRange `json:"output_lens,omitempty"`
	Warmup     int       `json:"warmup,omitempty"`
	// IgnoreEOS and Temperature are nil when the source does not record them (an imported
	// file), never a default. TemperatureServerDefault says that no temperature was sent, so
	// the server's default applied (current vllm bench serve without --temperature).
	IgnoreEOS                *bool              `json:"ignore_eos,omitempty"`
	Temperature              *float64           `json:"temperature,omitempty"`
	TemperatureServerDefault bool               `json:"temperature_server_default,omitempty"`
	TopP                     *float64           `json:"top_p,omitempty"`
	Goodput                  map[string]float64 `json:"goodput,omitempty"`
	// PrefixLen is the shared prefix of synthetic prompts, in tokens.
	PrefixLen int `json:"prefix_len,omitempty"`
	// PromptMode says how synthetic prompts were sent: "token_ids" (exact lengths) or "text"
	// (calibrated by the server's usage counts, TextCalibration).
	PromptMode      string           `json:"prompt_mode,omitempty"`
	TextCalibration *TextCalibration `json:"text_calibration,omitempty"`
	// OutputLenSource is "dataset" when output lengths came from the dataset (ShareGPT replies).
	OutputLenSource string `json:"output_len_source,omitempty"`
	// Endpoint is the API path the requests went to ("/v1/completions" when empty).
	Endpoint string `json:"endpoint,omitempty"`
	// ToolSettings keeps settings of an imported file under the tool's own names and meanings
	// (for example "sglang.random_range_ratio"), beside any conversion into the fields above.
	ToolSettings map[string]string `json:"tool_settings,omitempty"`
}

// LenRange is an inclusive interval of token lengths.
type LenRange struct {
	Min int `json:"min"`
	Max int `json:"max"`
}

// String writes the interval as "min..max", or "L" when it holds one length.
func (l *LenRange) String() string {
	if l == nil {
		return "unknown"
	}
	if l.Min == l.Max {
		return fmt.Sprint(l.Min)
	}
	return fmt.Sprintf("%d..%d", l.Min, l.Max)
}

// ReckonLenRange is the interval reckon (and vLLM's random dataset) draws a length from for
// length l and range ratio r: [max(1, ⌊l(1−r)⌋), ⌈l(1+r)⌉]; l itself when r is 0.
func ReckonLenRange(l int, r float64) *LenRange {
	if l <= 0 {
		return nil
	}
	if r <= 0 {
		return &LenRange{l, l}
	}
	lo := max(1, int(math.Floor(float64(l)*(1-r))))
	return &LenRange{lo, max(lo, int(math.Ceil(float64(l)*(1+r))))}
}

// SGLangLenRange is the interval SGLang's bench_serving draws a random length from for its
// --random-*-len l and --random-range-ratio r (datasets/common.py compute_random_lens:
// np.random.randint(max(int(l*r), 1), l+1)): [max(⌊l·r⌋, 1), l]. r = 1 is a fixed length l;
// SGLang's default r = 0 is 1..l.
func SGLangLenRange(l int, r float64) *LenRange {
	if l <= 0 {
		return nil
	}
	return &LenRange{max(int(math.Floor(float64(l)*r)), 1), l}
}

// Details holds per-request data with vLLM's key names and units (seconds).
//
// InputLens and OutputLens (the server's usage counts per request, 0 for a failed request) are
// always written by reckon bench; the timings only with Options.Details.
type Details struct {
	InputLens  []int       `json:"input_lens"`
	OutputLens []int       `json:"output_lens"`
	TTFTs      []float64   `json:"ttfts,omitempty"`
	ITLs       [][]float64 `json:"itls,omitempty"`
	Latencies  []float64   `json:"latencies,omitempty"`
	StartTimes []float64   `json:"start_times,omitempty"`
	Errors     []string    `json:"errors,omitempty"`
}

// NCCLResult is nccl-tests output: one row per message size and the footer.
type NCCLResult struct {
	Collective     string    `json:"collective,omitempty"`
	Rows           []NCCLRow `json:"rows"`
	AvgBusBWGBps   float64   `json:"avg_busbw_gbps"`
	AvgBusBWStatus string    `json:"avg_busbw_status,omitempty"` // "OK", "FAILED" or ""
	// OutOfBounds is the "# Out of bounds values" count when printed (-1: not printed).
	OutOfBounds int `json:"out_of_bounds"`
	// WrongTotal sums #wrong over rows where it was checked (N/A rows are not counted).
	WrongTotal int `json:"wrong_total"`
	// Validated is false when every #wrong was N/A (validation off).
	Validated bool `json:"validated"`
}

// NCCLRow is one size's measurement, out-of-place and in-place.
type NCCLRow struct {
	SizeBytes  int64        `json:"size_bytes"`
	Count      int64        `json:"count"`
	Type       string       `json:"type"`
	RedOp      string       `json:"redop,omitempty"`
	Root       *int         `json:"root,omitempty"`
	OutOfPlace NCCLMeasure  `json:"out_of_place"`
	InPlace    *NCCLMeasure `json:"in_place,omitempty"`
}

// NCCLMeasure is one measurement of a row. Wrong is nil when nccl-tests printed N/A (no
// validation); Error is the max relative error of older nccl-tests versions.
type NCCLMeasure struct {
	TimeUs    float64  `json:"time_us"`
	AlgBWGBps float64  `json:"algbw_gbps"`
	BusBWGBps float64  `json:"busbw_gbps"`
	Wrong     *int64   `json:"wrong"`
	Error     *float64 `json:"error,omitempty"`
}

// metricFields lists the numeric fields of Result with their JSON key.
func (r *Result) metricFields() []struct {
	key string
	v   reflect.Value
} {
	var out []struct {
		key string
		v   reflect.Value
	}
	rv := reflect.ValueOf(r).Elem()
	rt := rv.Type()
	for i := 0; i < rt.NumField(); i++ {
		f := rt.Field(i)
		switch f.Type.Kind() {
		case reflect.Float64, reflect.Int:
		default:
			continue
		}
		key, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		out = append(out, struct {
			key string
			v   reflect.Value
		}{key, rv.Field(i)})
	}
	return out
}

// MetricKeys returns the key names of every metric field of Result, in declaration order.
func MetricKeys() []string {
	var r Result
	var keys []string
	for _, f := range r.metricFields() {
		keys = append(keys, f.key)
	}
	return keys
}

// Metrics returns every numeric metric the result holds, by vLLM key name (plus Extra, and for
// nccl-tests avg_busbw_gbps, max_busbw_gbps and wrong_total). Missing metrics are left out.
func (r *Result) Metrics() map[string]float64 {
	missing := make(map[string]bool, len(r.Missing))
	for _, k := range r.Missing {
		missing[k] = true
	}
	m := make(map[string]float64)
	if r.NCCL == nil {
		for _, f := range r.metricFields() {
			if missing[f.key] {
				continue
			}
			if f.v.Kind() == reflect.Int {
				m[f.key] = float64(f.v.Int())
			} else {
				m[f.key] = f.v.Float()
			}
		}
	} else {
		m["avg_busbw_gbps"] = r.NCCL.AvgBusBWGBps
		m["wrong_total"] = float64(r.NCCL.WrongTotal)
		maxBus := 0.0
		for _, row := range r.NCCL.Rows {
			maxBus = math.Max(maxBus, row.OutOfPlace.BusBWGBps)
			if row.InPlace != nil {
				maxBus = math.Max(maxBus, row.InPlace.BusBWGBps)
			}
		}
		if len(r.NCCL.Rows) > 0 {
			m["max_busbw_gbps"] = maxBus
		}
		for _, k := range r.Missing {
			delete(m, k)
		}
	}
	for k, v := range r.Extra {
		if !missing[k] {
			m[k] = v
		}
	}
	return m
}

// setMissing records key as not reported (once).
func (r *Result) setMissing(key string) {
	for _, k := range r.Missing {
		if k == key {
			return
		}
	}
	r.Missing = append(r.Missing, key)
}

// warnf appends a warning.
func (r *Result) warnf(format string, args ...any) {
	r.Warnings = append(r.Warnings, fmt.Sprintf(format, args...))
}

// WriteResult writes r as indented JSON to path atomically (a temporary file in the same
// directory, then rename), creating the directory when needed.
func WriteResult(path string, r *Result) error {
	if r.Schema == "" {
		r.Schema = ResultSchema
	}
	sort.Strings(r.Missing)
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("write result %s: encoding: %w", path, err)
	}
	data = append(data, '\n')
	return atomicfile.WriteFile(path, data)
}

func jsonIndent(v any) ([]byte, error) {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(data, '\n'), nil
}

// MarshalJSON writes the result with vLLM's key names; a metric listed in Missing is written as
// null, never as the zero its field holds, so that no reader takes an absent latency for 0 ms.
func (r Result) MarshalJSON() ([]byte, error) {
	type plain Result
	data, err := json.Marshal(plain(r))
	if err != nil || len(r.Missing) == 0 {
		return data, err
	}
	missing := make(map[string]bool, len(r.Missing))
	for _, k := range r.Missing {
		missing[k] = true
	}
	metric := map[string]bool{}
	for _, k := range MetricKeys() {
		metric[k] = true
	}
	// Re-emit the object's members in order, with null for the missing metrics.
	dec := json.NewDecoder(bytes.NewReader(data))
	if _, err := dec.Token(); err != nil {
		return nil, err
	}
	var b bytes.Buffer
	b.WriteByte('{')
	first := true
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, err
		}
		key, _ := t.(string)
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, err
		}
		if !first {
			b.WriteByte(',')
		}
		first = false
		kb, _ := json.Marshal(key)
		b.Write(kb)
		b.WriteByte(':')
		if metric[key] && missing[key] {
			b.WriteString("null")
		} else {
			b.Write(raw)
		}
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// UnmarshalJSON reads a result written by MarshalJSON (or by an older reckon, which wrote 0 for
// a missing metric and listed it in missing): a null metric is missing.
func (r *Result) UnmarshalJSON(data []byte) error {
	type plain Result
	var p plain
	if err := json.Unmarshal(data, &p); err != nil {
		return err
	}
	*r = Result(p)
	var members map[string]json.RawMessage
	if err := json.Unmarshal(data, &members); err != nil {
		return err
	}
	for _, k := range MetricKeys() {
		if v, ok := members[k]; ok && string(bytes.TrimSpace(v)) == "null" {
			r.setMissing(k)
		}
	}
	return nil
}

// WriteResults writes several results as one indented JSON array (which Import reads back, one
// result per element) to path atomically.
func WriteResults(path string, rs []*Result) error {
	for _, r := range rs {
		if r.Schema == "" {
			r.Schema = ResultSchema
		}
		sort.Strings(r.Missing)
	}
	data, err := jsonIndent(rs)
	if err != nil {
		return fmt.Errorf("write results %s: encoding: %w", path, err)
	}
	return atomicfile.WriteFile(path, data)
}
