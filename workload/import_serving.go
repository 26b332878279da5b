package workload

import (
	"fmt"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// vllmMeta are vLLM result keys that describe the run rather than measure it.
var vllmMeta = map[string]bool{
	"date": true, "endpoint_type": true, "backend": true, "label": true, "model_id": true, "tokenizer_id": true,
	"num_prompts": true, "request_rate": true, "burstiness": true, "max_concurrency": true,
	"served_model_name": true, "model_ids": true, "ramp_up_strategy": true, "ramp_up_start_rps": true,
	"ramp_up_end_rps": true, "rps_change_events": true,
}

// importVLLM reads one `vllm bench serve --save-result` object (current keys, and the old
// "request_goodput:" key). String values of unknown keys are --metadata labels.
func importVLLM(o map[string]any, opts ImportOptions) (*Result, error) {
	im := newImporter(FormatVLLM, "vllm bench serve")
	r := im.r
	used := map[string]bool{}
	md := &r.Metadata
	im.vllmMetadata(o)
	for k := range vllmMeta {
		used[k] = true
	}
	used["max_concurrent_requests"] = true
	peak, hasPeak := o["max_concurrent_requests"]
	r.Metadata.Semantics = im.vllmPeak("max_concurrent_requests", peak, hasPeak, md.Workload.MaxConcurrency, opts)
	if _, legacy := o["request_goodput:"]; legacy && opts.ToolVersion == "" {
		r.Metadata.Semantics.Version = "legacy benchmark_serving.py"
		r.Metadata.Semantics.Basis = "inferred: the legacy key \"request_goodput:\""
	}
	im.details(o, used)
	if v, ok := o["request_goodput:"]; ok {
		used["request_goodput:"] = true
		r.warnf("legacy key \"request_goodput:\" (older benchmark_serving.py) read as request_goodput")
		im.metric("request_goodput", "request_goodput:", v)
	}
	if v, ok := o["spec_decode_acceptance_length"]; ok {
		used["spec_decode_acceptance_length"] = true
		im.metric("spec_accept_length", "spec_decode_acceptance_length", v)
	}
	if arr, ok := o["spec_decode_per_position_acceptance_rates"].([]any); ok {
		used["spec_decode_per_position_acceptance_rates"] = true
		for i, x := range arr {
			if f, ok, _ := num(x); ok {
				im.extra(fmt.Sprintf("spec_decode_acceptance_rate_pos%d", i), f)
			}
		}
	}
	im.generic(o, used, nil)
	im.dropPlaceholderStats()
	return im.result()
}

// vllmMetadata files the run's description from a vLLM result object o: its date and model
// (model_id, else served_model_name, else model_ids), its labels (ramp-up strategy, backend,
// endpoint type, label) and its workload (prompts, request rate, burstiness, max concurrency).
func (im *importer) vllmMetadata(o map[string]any) {
	r := im.r
	md := &r.Metadata
	md.Date = str(o["date"])
	md.Model = str(o["model_id"])
	if s := str(o["served_model_name"]); s != "" && md.Model == "" {
		md.Model = s
	}
	if ids, ok := o["model_ids"].([]any); ok && md.Model == "" {
		var names []string
		for _, x := range ids {
			if s := str(x); s != "" {
				names = append(names, s)
			}
		}
		md.Model = strings.Join(names, ",")
	}
	if s := str(o["ramp_up_strategy"]); s != "" {
		md.labels()["ramp_up_strategy"] = s
		for _, k := range []string{"ramp_up_start_rps", "ramp_up_end_rps"} {
			if f, ok, _ := num(o[k]); ok {
				im.extra(k, f)
			}
		}
	}
	if b := str(o["backend"]); b != "" {
		md.labels()["backend"] = b
	}
	if e := str(o["endpoint_type"]); e != "" {
		md.labels()["endpoint_type"] = e
	}
	if l := str(o["label"]); l != "" {
		md.labels()["label"] = l
	}
	if n, ok := im.count("num_prompts", o["num_prompts"], MaxImportCount); ok {
		md.Workload.NumPrompts = n
	}
	if v, has := o["request_rate"]; has {
		if rate, ok := requestRate(v); ok {
			md.Workload.RequestRate = rate
		} else {
			r.warnf("request_rate: expected a number or \"inf\", got %v", v)
		}
	}
	if f, ok := im.measured("burstiness", o["burstiness"]); ok {
		md.Workload.Burstiness = f
	}
	if n, ok := im.count("max_concurrency", o["max_concurrency"], MaxImportCount); ok {
		md.Workload.MaxConcurrency = n
		im.metric("max_concurrency", "max_concurrency", o["max_concurrency"])
	}
}

// vllmPeak files vLLM's max_concurrent_requests (v, under the source's name src; has: the file
// has it) under the key of the definition it was computed with, and returns the semantics of
// the result: up to vLLM 0.28 the busiest whole second (max_concurrent_requests_1s), after it
// the exact peak (max_concurrent_requests). vLLM's files do not record the version, so it is
// opts.ToolVersion, else inferred when the value exceeds the concurrency cap (an exact peak
// cannot), else unknown: the value is then kept under vLLM's own name
// (vllm_max_concurrent_requests) and a warning says why.
func (im *importer) vllmPeak(src string, v any, has bool, maxConc int, opts ImportOptions) *Semantics {
	r := im.r
	version, basis, peak := "unknown", "not recorded in the file: vllm bench serve writes no version", ""
	if opts.ToolVersion != "" {
		if p, ok := vllmPeakVersion(opts.ToolVersion); ok {
			version, basis, peak = opts.ToolVersion, "given with --tool-version", p
		} else {
			r.warnf("--tool-version %q: expected a vLLM version such as 0.25.1 (or main): ignored", opts.ToolVersion)
		}
	}
	f, isNum, _ := num(v)
	if has && isNum && maxConc > 0 && f > float64(maxConc) {
		switch peak {
		case "":
			version, peak = "<= 0.28", DefPeakBusiestSecond
			basis = fmt.Sprintf("inferred: %s %g exceeds max_concurrency %d, which an exact peak cannot; vLLM up to 0.28 counts the busiest whole second", src, f, maxConc)
		case DefPeakExact:
			r.warnf("%s %g exceeds max_concurrency %d: not an exact peak, although --tool-version %s says so; kept as the busiest-second figure", src, f, maxConc, opts.ToolVersion)
			peak = DefPeakBusiestSecond
		}
	}
	if has && v != nil {
		switch peak {
		case DefPeakExact:
			im.metric("max_concurrent_requests", src, v)
		case DefPeakBusiestSecond:
			im.metric("max_concurrent_requests_1s", src, v)
		default:
			if isNum {
				im.extra("vllm_max_concurrent_requests", f)
			}
			r.warnf("%s: vLLM computes it over whole-second buckets up to 0.28 and as the exact peak after; the file does not record its version: kept as vllm_max_concurrent_requests (give --tool-version to read it as max_concurrent_requests or max_concurrent_requests_1s)", src)
		}
	}
	return vllmSemantics(version, basis, peak)
}

// sglangAlias maps SGLang bench_serving keys to reckon's (vLLM) names.
var sglangAlias = map[string]string{
	"total_throughput":      "total_token_throughput",
	"accept_length":         "spec_accept_length",
	"mean_e2e_latency_ms":   "mean_e2el_ms",
	"median_e2e_latency_ms": "median_e2el_ms",
	"std_e2e_latency_ms":    "std_e2el_ms",
	"p90_e2e_latency_ms":    "p90_e2el_ms",
	"p95_e2e_latency_ms":    "p95_e2el_ms",
	"p99_e2e_latency_ms":    "p99_e2el_ms",
}

// importSGLang reads one line of `sglang.bench_serving --output-file` JSONL.
func importSGLang(o map[string]any) (*Result, error) {
	im := newImporter(FormatSGLang, "sglang.bench_serving")
	r := im.r
	md := &r.Metadata
	used := map[string]bool{}
	for _, k := range []string{"tag", "backend", "dataset_name", "request_rate", "max_concurrency", "sharegpt_output_len",
		"random_input_len", "random_output_len", "random_range_ratio", "server_info", "model_id", "model", "max_concurrent_requests"} {
		used[k] = true
	}
	backend := str(o["backend"])
	if backend != "" {
		md.labels()["backend"] = backend
	}
	md.Semantics = sglangSemantics(backend)
	if f, ok, _ := num(o["max_concurrent_requests"]); ok {
		// Its definition (whole-second buckets or exact) is not pinned for SGLang's client:
		// kept under SGLang's own name.
		im.extra("sglang_max_concurrent_requests", f)
	}
	if t := str(o["tag"]); t != "" {
		md.labels()["tag"] = t
	}
	md.Workload.Dataset = str(o["dataset_name"])
	if v, has := o["request_rate"]; has {
		if rate, ok := requestRate(v); ok {
			md.Workload.RequestRate = rate
		} else if str(v) == "trace" {
			md.labels()["request_rate"] = "trace"
			r.warnf("request_rate is \"trace\" (arrival times replayed from a trace): workload.request_rate 0 does not mean all at once here")
		} else {
			r.warnf("request_rate: expected a number or Infinity, got %v", v)
		}
	}
	if n, ok := im.count("max_concurrency", o["max_concurrency"], MaxImportCount); ok {
		md.Workload.MaxConcurrency = n
		im.metric("max_concurrency", "max_concurrency", o["max_concurrency"])
	}
	im.sglangLengths(o)
	md.Model = str(o["model_id"])
	if si, ok := o["server_info"].(map[string]any); ok {
		if v := str(si["version"]); v != "" {
			md.labels()["server_version"] = v
		}
		if m := str(si["model_path"]); m != "" && md.Model == "" {
			md.Model = m
		}
	}
	im.details(o, used)
	im.generic(o, used, sglangAlias)
	if _, ok := o["failed"]; !ok {
		r.warnf("SGLang bench_serving does not report failed requests: failed is missing")
	}
	im.dropPlaceholderStats()
	return im.result()
}

// sglangLengths reads SGLang's length settings with SGLang's meaning. Its --random-range-ratio r
// draws a random length from [max(⌊L·r⌋, 1), L] (r = 1: fixed L; its default 0: 1..L), where
// reckon's and vLLM's r spread over L(1±r): the interval is converted (workload.input_lens /
// output_lens), input_len / output_len are set only for a fixed length (the one case where
// both tools mean the same by them), and the settings are kept under SGLang's own names in
// workload.tool_settings. random_* apply only to the random datasets, sharegpt_output_len only to
// sharegpt; the settings of the other dataset are kept, not read.
func (im *importer) sglangLengths(o map[string]any) {
	w := &im.r.Metadata.Workload
	for _, k := range []string{"random_input_len", "random_output_len", "random_range_ratio", "sharegpt_output_len"} {
		if v, ok := o[k]; ok && v != nil {
			if w.ToolSettings == nil {
				w.ToolSettings = map[string]string{}
			}
			w.ToolSettings["sglang."+k] = str(v)
		}
	}
	ds := strings.ToLower(w.Dataset)
	switch {
	case strings.HasPrefix(ds, "random"):
		r, hasR := im.measured("random_range_ratio", o["random_range_ratio"])
		in, hasIn := im.count("random_input_len", o["random_input_len"], MaxImportCount)
		out, hasOut := im.count("random_output_len", o["random_output_len"], MaxImportCount)
		if !hasR {
			if hasIn || hasOut {
				im.r.warnf("random_range_ratio is not in the file: the lengths drawn around random_input_len/random_output_len are unknown")
			}
			return
		}
		if hasIn {
			w.InputLens = SGLangLenRange(in, r)
		}
		if hasOut {
			w.OutputLens = SGLangLenRange(out, r)
		}
		if r >= 1 {
			if hasIn {
				w.InputLen = in
			}
			if hasOut {
				w.OutputLen = out
			}
		} else {
			im.r.warnf("SGLang's random_range_ratio %g draws lengths from [max(⌊L·%g⌋, 1), L] (input %s, output %s); reckon's range ratio means L(1±r), so input_len/output_len are left out and the intervals are in workload.input_lens/output_lens",
				r, r, w.InputLens, w.OutputLens)
		}
	case ds == "sharegpt":
		if n, ok := im.count("sharegpt_output_len", o["sharegpt_output_len"], MaxImportCount); ok && n > 0 {
			w.OutputLen = n
			w.OutputLens = &LenRange{n, n}
		}
	}
}

// generic maps every remaining key: our metric names directly (or through alias), other
// numbers into Extra, text into labels; keys neither known nor a statistic are reported.
func (im *importer) generic(o map[string]any, used map[string]bool, alias map[string]string) {
	keys := make([]string, 0, len(o))
	for k := range o {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if used[k] {
			continue
		}
		v := o[k]
		key := k
		if a, ok := alias[k]; ok {
			key = a
		}
		if _, ok := im.setters[key]; ok {
			if v == nil {
				continue // null: not measured (for example request_goodput without --goodput)
			}
			im.metric(key, k, v)
			continue
		}
		if f, ok, nf := num(v); ok || nf != "" {
			if nf != "" {
				im.r.warnf("%s is %s in the source: left out", k, nf)
				continue
			}
			im.extra(strings.ReplaceAll(k, "_e2e_latency_ms", "_e2el_ms"), f)
			if !statKey(k) && !knownExtra[k] {
				im.unknown = append(im.unknown, k)
			}
			continue
		}
		switch x := v.(type) {
		case string:
			im.r.Metadata.labels()[k] = str(x)
			if !knownExtra[k] {
				im.unknown = append(im.unknown, k)
			}
		case nil:
		default:
			if pm := rePercentilesKey.FindStringSubmatch(k); pm != nil && im.percentiles(k, pm[1], v) {
				continue
			}
			if !knownExtra[k] {
				im.unknown = append(im.unknown, k)
			}
		}
	}
}

// rePercentilesKey matches vLLM's in-memory percentile lists ("percentiles_ttft_ms":
// [[50, 10.1], [99, 30.2]]) that some wrappers write instead of the flat pNN_ keys.
var rePercentilesKey = regexp.MustCompile(`^percentiles_(ttft|tpot|itl|e2el|e2e_latency)_ms$`)

// percentiles reads a list of [percentile, value] pairs, or an object {"99": value}, into the
// pNN_<metric>_ms keys; a flat key already in the file wins. It reports whether v had that shape.
func (im *importer) percentiles(src, metric string, v any) bool {
	if metric == "e2e_latency" {
		metric = "e2el"
	}
	pairs := map[string]any{}
	switch x := v.(type) {
	case []any:
		for _, e := range x {
			pair, ok := e.([]any)
			if !ok || len(pair) != 2 {
				return false
			}
			p, ok, _ := num(pair[0])
			if !ok {
				return false
			}
			pairs[strconv.FormatFloat(p, 'f', -1, 64)] = pair[1]
		}
	case map[string]any:
		for p, val := range x {
			f, err := strconv.ParseFloat(strings.TrimPrefix(strings.TrimSpace(p), "p"), 64)
			if err != nil {
				return false
			}
			pairs[strconv.FormatFloat(f, 'f', -1, 64)] = val
		}
	default:
		return false
	}
	for p, val := range pairs {
		key := "p" + p + "_" + metric + "_ms"
		if im.set[key] {
			continue
		}
		if _, done := im.r.Extra[key]; done {
			continue
		}
		im.metric(key, fmt.Sprintf("%s[%s]", src, p), val)
	}
	return true
}

// knownExtra are keys of vLLM/SGLang results that reckon keeps in Extra without a warning.
var knownExtra = map[string]bool{
	"rtfx": true, "input_throughput": true, "total_output_tokens_retokenized": true, "total_input_text_tokens": true,
	"total_input_vision_tokens": true, "spec_decode_acceptance_rate": true, "spec_decode_num_drafts": true,
	"spec_decode_draft_tokens": true, "spec_decode_accepted_tokens": true, "max_itl_ms": true,
	"max_output_tokens_per_s": true, "max_concurrent_requests": true, "concurrency": true,
	"last_gen_throughput": true, "output_lens_retokenized": true, "output_throughput_retokenized": true,
}

func (m *Metadata) labels() map[string]string {
	if m.Labels == nil {
		m.Labels = map[string]string{}
	}
	return m.Labels
}

// latencyGroups are the latency metrics whose statistics vLLM and SGLang compute from a list of
// samples; for an empty list they write 0 (np.mean(x or 0)), which is no measurement.
var latencyGroups = []string{"ttft", "tpot", "itl", "e2el"}

// dropPlaceholderStats turns statistics that stand for "no sample" into missing metrics: every
// latency statistic when no request completed, and a latency group whose statistics are all
// exactly 0 (TPOT when every output had one token, ITL of a non-streaming backend).
func (im *importer) dropPlaceholderStats() {
	r := im.r
	groupKeys := func(g string) (fields, extra []string) {
		suffix := "_" + g + "_ms"
		for k := range im.setters {
			if strings.HasSuffix(k, suffix) && im.set[k] {
				fields = append(fields, k)
			}
		}
		for k := range r.Extra {
			if strings.HasSuffix(k, suffix) {
				extra = append(extra, k)
			}
		}
		sort.Strings(fields)
		sort.Strings(extra)
		return fields, extra
	}
	drop := func(fields, extra []string) {
		for _, k := range fields {
			im.setters[k].SetZero()
			delete(im.set, k)
		}
		for _, k := range extra {
			delete(r.Extra, k)
		}
	}
	if im.set["completed"] && r.Completed == 0 {
		var dropped []string
		for _, g := range latencyGroups {
			fields, extra := groupKeys(g)
			if len(fields)+len(extra) > 0 {
				dropped = append(dropped, g)
			}
			drop(fields, extra)
		}
		if im.set["max_output_tokens_per_s"] && r.MaxOutputTokensPerS == 0 {
			drop([]string{"max_output_tokens_per_s"}, nil)
		}
		msg := "no request completed (completed = 0"
		if im.set["failed"] {
			msg += fmt.Sprintf(", failed = %d", r.Failed)
		}
		msg += ")"
		if len(dropped) > 0 {
			msg += fmt.Sprintf(": the %s statistics in the file are placeholders (0), reported as missing", strings.Join(dropped, "/"))
		}
		r.warnf("%s", msg)
		return
	}
	for _, g := range latencyGroups {
		fields, _ := groupKeys(g)
		for _, k := range fields {
			if v := im.setters[k].Float(); v < 0 || math.Signbit(v) {
				drop([]string{k}, nil)
				r.warnf("%s is negative (%g) in the source; a latency cannot be negative: reported as missing", k, v)
			}
		}
	}
	for _, g := range latencyGroups {
		fields, extra := groupKeys(g)
		if len(fields) == 0 {
			continue
		}
		allZero := true
		for _, k := range fields {
			if im.setters[k].Float() != 0 {
				allZero = false
			}
		}
		for _, k := range extra {
			if r.Extra[k] != 0 {
				allZero = false
			}
		}
		if !allZero {
			continue
		}
		drop(fields, extra)
		r.warnf("every %s statistic is exactly 0: no %s sample was measured (the tool writes 0 for an empty list; for example TPOT when no output had more than one token, ITL without streaming): reported as missing", strings.ToUpper(g), strings.ToUpper(g))
	}
}
