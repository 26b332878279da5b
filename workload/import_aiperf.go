package workload

import (
	"sort"
	"strings"
)

// aiperfLatency maps GenAI-Perf/AIPerf latency metrics to reckon's. AIPerf's "inter_token_latency"
// is the per-request (latency − TTFT)/(OSL − 1), which vLLM calls TPOT; its "inter_chunk_latency"
// is the chunk gaps, which vLLM calls ITL.
var aiperfLatency = map[string]string{
	"time_to_first_token": "ttft",
	"request_latency":     "e2el",
	"inter_token_latency": "tpot",
	"inter_chunk_latency": "itl",
}

// aiperfScalar maps single-value GenAI-Perf/AIPerf metrics (their "avg") to reckon's keys.
var aiperfScalar = map[string]string{
	"request_throughput":      "request_throughput",
	"output_token_throughput": "output_throughput",
	"total_token_throughput":  "total_token_throughput",
	"benchmark_duration":      "duration",
	"request_count":           "completed",
	"error_request_count":     "failed",
	"total_osl":               "total_output_tokens",
	"total_isl":               "total_input_tokens",
}

// aiperfNonMetric are top-level keys that are not metrics.
var aiperfNonMetric = map[string]bool{
	"input_config": true, "telemetry_data": true, "error_summary": true, "was_cancelled": true,
	"start_time": true, "end_time": true, "records": true, "llm_metrics": true, "metadata": true,
	"aiperf_version": true, "schema_version": true, "server_metrics": true, "good_request_count": true,
	"goodput": true, "error_isl": true, "total_error_isl": true, "status": true,
}

// timeScale converts a time unit to milliseconds.
func timeScale(unit string) (float64, bool) {
	switch strings.ToLower(strings.TrimSpace(unit)) {
	case "ms", "msec", "milliseconds":
		return 1, true
	case "ns", "nanoseconds":
		return 1e-6, true
	case "us", "µs", "microseconds":
		return 1e-3, true
	case "s", "sec", "seconds":
		return 1000, true
	}
	return 0, false
}

// importAIPerf reads a GenAI-Perf (profile_export_genai_perf.json) or AIPerf
// (profile_export_aiperf.json) aggregate: metric objects {"unit", "avg", "p50", ...}.
func importAIPerf(o map[string]any, format string) (*Result, error) {
	tool := "aiperf"
	if format == FormatGenAI {
		tool = "genai-perf"
	}
	im := newImporter(format, tool)
	r := im.r
	metrics := map[string]any{}
	for k, v := range o {
		metrics[k] = v
	}
	for _, wrap := range []string{"records", "llm_metrics"} {
		if inner, ok := o[wrap].(map[string]any); ok {
			for k, v := range inner {
				metrics[k] = v
			}
		}
	}
	aiperfMetadata(im, o, tool)
	if b, ok := o["was_cancelled"].(bool); ok && b {
		r.warnf("the benchmark was cancelled before it completed")
	}
	names := make([]string, 0, len(metrics))
	for k := range metrics {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, name := range names {
		aiperfMetric(im, name, metrics[name])
	}
	if _, ok := o["goodput"]; ok {
		if f, ok, _ := num(o["goodput"]); ok {
			im.extra("aiperf_goodput", f)
		} else if g, ok := o["goodput"].(map[string]any); ok {
			if f, ok, _ := num(g["avg"]); ok {
				im.metric("request_goodput", "goodput", f)
			}
		}
	}
	if im.set["mean_tpot_ms"] {
		r.warnf("AIPerf/GenAI-Perf inter_token_latency is the per-request (latency - TTFT)/(OSL - 1): imported as TPOT (vLLM's name); its ITL is not vLLM's pooled chunk gaps")
	}
	if im.set["mean_itl_ms"] {
		r.warnf("AIPerf inter_chunk_latency imported as ITL (chunk gaps)")
	}
	aiperfErrors(im, o)
	return im.result()
}

// aiperfMetadata reads the run's metadata: the tool's version, model, date, load generator
// settings and seed, and the semantics they imply.
func aiperfMetadata(im *importer, o map[string]any, tool string) {
	r := im.r
	if v := str(o["aiperf_version"]); v != "" {
		r.Metadata.ToolVersion = v
	}
	if md, ok := o["metadata"].(map[string]any); ok {
		if v := str(md["aiperf_version"]); v != "" {
			r.Metadata.ToolVersion = v
		}
		r.Metadata.Model = str(md["model"])
	}
	r.Metadata.Date = str(o["start_time"])
	if ic, ok := o["input_config"].(map[string]any); ok {
		if ep, ok := ic["endpoint"].(map[string]any); ok {
			if names, ok := ep["model_names"].([]any); ok && len(names) > 0 {
				r.Metadata.Model = str(names[0])
			}
		}
		if lg, ok := ic["loadgen"].(map[string]any); ok {
			if n, ok := im.count("input_config.loadgen.concurrency", lg["concurrency"], MaxImportCount); ok {
				r.Metadata.Workload.MaxConcurrency = n
				r.MaxConcurrency = n
				im.set["max_concurrency"] = true
			}
			if f, ok := im.measured("input_config.loadgen.request_rate", lg["request_rate"]); ok {
				r.Metadata.Workload.RequestRate = f
			}
		}
		if in, ok := ic["input"].(map[string]any); ok {
			if n, ok := im.count("input_config.input.random_seed", in["random_seed"], 1<<53); ok {
				seed := int64(n)
				r.Metadata.Seed = &seed
			}
		}
		if n, ok := im.count("input_config.concurrency", ic["concurrency"], MaxImportCount); ok && r.Metadata.Workload.MaxConcurrency == 0 {
			r.Metadata.Workload.MaxConcurrency = n
			r.MaxConcurrency = n
			im.set["max_concurrency"] = true
		}
	}
	var serverTokens *bool
	if ic, ok := o["input_config"].(map[string]any); ok {
		if ep, ok := ic["endpoint"].(map[string]any); ok {
			if b, ok := ep["use_server_token_count"].(bool); ok {
				serverTokens = &b
			}
		}
	}
	r.Metadata.Semantics = aiperfSemantics(tool, r.Metadata.ToolVersion, serverTokens)
}

// aiperfMetric imports one metric object, or a bare number, under its name.
func aiperfMetric(im *importer, name string, v any) {
	r := im.r
	if aiperfNonMetric[name] {
		return
	}
	m, ok := v.(map[string]any)
	if !ok || !isAIPerfMetric(v) {
		if f, ok, _ := num(v); ok {
			// A bare number (some versions write request_count as one).
			if key, known := aiperfScalar[name]; known {
				im.metric(key, name, f)
			} else {
				im.extra(name, f)
				im.unknown = append(im.unknown, name)
			}
		} else if v != nil {
			im.unknown = append(im.unknown, name)
		}
		return
	}
	unit := str(m["unit"])
	if short, known := aiperfLatency[name]; known {
		scale, ok := timeScale(unit)
		if !ok {
			r.warnf("%s: unknown time unit %q: left out", name, unit)
			return
		}
		for stat, ours := range map[string]string{"avg": "mean", "p50": "median", "std": "std", "p90": "p90", "p95": "p95", "p99": "p99"} {
			if f, ok, _ := num(m[stat]); ok {
				im.metric(ours+"_"+short+"_ms", name+"."+stat, f*scale)
			}
		}
		for _, stat := range []string{"min", "max", "p1", "p5", "p10", "p25", "p75"} {
			if f, ok, _ := num(m[stat]); ok {
				im.extra(stat+"_"+short+"_ms", f*scale)
			}
		}
		return
	}
	if key, known := aiperfScalar[name]; known {
		f, ok, _ := num(m["avg"])
		if !ok {
			r.warnf("%s has no avg: reported as missing", name)
			return
		}
		if key == "duration" {
			scale, ok := timeScale(unit)
			if !ok {
				r.warnf("benchmark_duration: unknown time unit %q: left out", unit)
				return
			}
			f = f * scale / 1000
		}
		im.metric(key, name, f)
		return
	}
	// Other distributions (sequence lengths, per-user throughput, telemetry): keep their
	// statistics in Extra under "<name>_<stat>".
	for _, stat := range aiperfStats {
		if f, ok, _ := num(m[stat]); ok {
			im.extra(name+"_"+stat, f)
		}
	}
}

// aiperfErrors counts the failed requests from error_summary when error_request_count did not.
func aiperfErrors(im *importer, o map[string]any) {
	r := im.r
	if !im.set["failed"] {
		// error_request_count may be null while error_summary still counts the errors.
		if es, ok := o["error_summary"].([]any); ok {
			total := 0
			for _, e := range es {
				if m, ok := e.(map[string]any); ok {
					if n, ok := im.count("error_summary.count", m["count"], MaxImportCount); ok {
						total += n
					}
				}
			}
			r.Failed = total
			im.set["failed"] = true
		}
	}
}
