package workload

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/reckon-ci/reckon/internal/domain"
)

// Source formats recognised by ImportFile (Result.Metadata.SourceFormat).
const (
	FormatReckon   = "reckon"
	FormatVLLM     = "vllm-bench-serve"
	FormatSGLang   = "sglang-bench-serving"
	FormatAIPerf   = "aiperf"
	FormatGenAI    = "genai-perf"
	FormatNCCL     = "nccl-tests"
	FormatNCCLJSON = "nccl-tests-json"
)

// ImportFile reads a result file of reckon, vLLM bench serve (JSON, or JSONL with
// --append-result), SGLang bench_serving (JSONL), GenAI-Perf/AIPerf (aggregate JSON), a log with
// the printed "Serving Benchmark Result" summary of vLLM or SGLang, or nccl-tests (text output or
// -J JSON), detecting the format from the content. A file with several results
// (JSONL) gives the last one, with a warning; ImportAll gives them all.
func ImportFile(path string) (*Result, error) {
	return ImportFileWith(path, ImportOptions{})
}

// ImportOptions say what a result file does not. ToolVersion is the version of the tool that
// wrote it (for example "0.25.1"), needed where the tool's definitions changed between versions
// and its files do not record the version (vLLM's max_concurrent_requests: the busiest whole
// second up to 0.28, the exact peak after); it is recorded in each result's
// metadata.semantics with that basis.
type ImportOptions struct {
	ToolVersion string
}

// ImportFileWith is ImportFile with options.
func ImportFileWith(path string, opts ImportOptions) (*Result, error) {
	rs, err := ImportAllWith(path, opts)
	if err != nil {
		return nil, err
	}
	r := rs[len(rs)-1]
	if len(rs) > 1 {
		r.warnf("%s holds %d results; this is the last one", path, len(rs))
	}
	return r, nil
}

// ImportAll reads every result of a file (see ImportFile).
func ImportAll(path string) ([]*Result, error) {
	return ImportAllWith(path, ImportOptions{})
}

// ImportAllWith is ImportAll with options. A file larger than MaxImportBytes is refused
// before it is read; JSON Lines are decoded one record at a time, so that memory follows the
// largest record and the results, not the file.
func ImportAllWith(path string, opts ImportOptions) ([]*Result, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("import: %w", err)
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Mode().IsRegular() && st.Size() > MaxImportBytes {
		return nil, fmt.Errorf("import %s: %d MiB, larger than the %d MiB a result file may have", path, st.Size()>>20, MaxImportBytes>>20)
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxImportBytes+1))
	if err != nil {
		return nil, fmt.Errorf("import %s: %w", path, err)
	}
	if len(data) > MaxImportBytes {
		return nil, fmt.Errorf("import %s: larger than the %d MiB a result file may have", path, MaxImportBytes>>20)
	}
	rs, err := ImportWith(data, filepath.Base(path), opts)
	if err != nil {
		return nil, fmt.Errorf("import %s: %w", path, err)
	}
	for _, r := range rs {
		r.Metadata.SourceFile = path
	}
	labelRuns(rs)
	return rs, nil
}

// labelRuns labels each result of a file with several (SGLang's appended JSONL, vLLM
// --append-result, a sweep summary) by its place in the file and its load: label "run" =
// "N/M request_rate=R max_concurrency=C", so that every record stays its own trial and a reader
// sees which load it measured.
func labelRuns(rs []*Result) {
	if len(rs) < 2 {
		return
	}
	for i, r := range rs {
		w := r.Metadata.Workload
		rate := "inf"
		if w.RequestRate > 0 {
			rate = strconv.FormatFloat(w.RequestRate, 'g', -1, 64)
		}
		if r.Metadata.Labels["request_rate"] == "trace" {
			rate = "trace"
		}
		run := fmt.Sprintf("%d/%d request_rate=%s", i+1, len(rs), rate)
		if d := r.Metadata.Labels["dataset_name"]; d != "" {
			run += " dataset=" + d
		}
		if w.MaxConcurrency > 0 {
			run += fmt.Sprintf(" max_concurrency=%d", w.MaxConcurrency)
		}
		if r.Metadata.Labels == nil {
			r.Metadata.Labels = map[string]string{}
		}
		r.Metadata.Labels["run"] = run
	}
}

// Import parses the content of a result file; name (the file's base name) only helps to tell
// GenAI-Perf from AIPerf.
func Import(data []byte, name string) ([]*Result, error) {
	return ImportWith(data, name, ImportOptions{})
}

// ImportWith is Import with options.
func ImportWith(data []byte, name string, opts ImportOptions) ([]*Result, error) {
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 {
		return nil, fmt.Errorf("empty file")
	}
	if looksLikeConsole(trimmed) && !looksLikeNCCL(trimmed) {
		return checkResults(importConsole(trimmed, opts))
	}
	if trimmed[0] != '{' && trimmed[0] != '[' || looksLikeNCCL(trimmed) {
		if looksLikeNCCL(trimmed) {
			return checkResults(importNCCLText(trimmed))
		}
		return nil, fmt.Errorf("unrecognised format: expected JSON (vLLM, GenAI-Perf/AIPerf, reckon), JSONL (SGLang, vLLM --append-result), a printed \"Serving Benchmark Result\" summary or nccl-tests text output")
	}
	if len(trimmed) > MaxImportBytes {
		return nil, fmt.Errorf("larger than the %d MiB a result file may have", MaxImportBytes>>20)
	}
	var out []*Result
	// add converts one decoded object (where: the record it came from, for error messages).
	add := func(o map[string]any, where string) error {
		if len(out) >= MaxImportRecords {
			return fmt.Errorf("%s: more than %d results in one file", where, MaxImportRecords)
		}
		r, err := importObject(o, name, opts)
		if err != nil {
			if where != "" {
				return fmt.Errorf("%s: %w", where, err)
			}
			return err
		}
		out = append(out, r)
		return nil
	}
	if isJSONLines(trimmed) {
		// JSON Lines: one record decoded, converted and dropped at a time.
		lineNo := 0
		for rest := trimmed; len(rest) > 0; {
			var line []byte
			line, rest, _ = bytes.Cut(rest, []byte("\n"))
			lineNo++
			line = bytes.TrimSpace(line)
			if len(line) == 0 {
				continue
			}
			where := fmt.Sprintf("line %d", lineNo)
			clean, err := sanitizeNonFinite(line)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", where, err)
			}
			o, err := decodeObject(clean)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", where, err)
			}
			if err := add(o, where); err != nil {
				return nil, err
			}
		}
		return out, nil
	}
	clean, err := sanitizeNonFinite(trimmed)
	if err != nil {
		return nil, err
	}
	// One JSON document, or an array of result objects (vllm bench sweep's summary.json)?
	if doc, err := decodeObject(clean); err == nil {
		if err := add(doc, ""); err != nil {
			return nil, err
		}
	} else if arr, isArr := decodeArray(clean); isArr {
		if len(arr) == 0 {
			return nil, fmt.Errorf("an empty JSON array holds no result")
		}
		for i, x := range arr {
			o, ok := x.(map[string]any)
			if !ok {
				return nil, fmt.Errorf("a JSON array is not a known result format unless every element is a result object; element %d is %T", i, x)
			}
			if err := add(o, fmt.Sprintf("element %d", i)); err != nil {
				return nil, err
			}
			arr[i] = nil
		}
	} else {
		// Not one document: the first line that is not an object says where.
		lineNo := 0
		for _, line := range bytes.Split(clean, []byte("\n")) {
			lineNo++
			if line = bytes.TrimSpace(line); len(line) == 0 {
				continue
			}
			if _, err := decodeObject(line); err != nil {
				return nil, fmt.Errorf("line %d: %w", lineNo, err)
			}
		}
		return nil, fmt.Errorf("line 1: %w", err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no result found")
	}
	return out, nil
}

// checkResults checks the results of a text format (checkResult), naming the run of the file
// that holds a value out of its range.
func checkResults(rs []*Result, err error) ([]*Result, error) {
	if err != nil {
		return nil, err
	}
	for i, r := range rs {
		if err := checkResult(r); err != nil {
			if len(rs) > 1 {
				return nil, fmt.Errorf("run %d: %w", i+1, err)
			}
			return nil, err
		}
	}
	return rs, nil
}

// isJSONLines tells JSON Lines from one JSON document: the first non-empty line is a whole
// JSON object and another non-empty line follows it.
func isJSONLines(b []byte) bool {
	first, rest, more := bytes.Cut(b, []byte("\n"))
	first = bytes.TrimSpace(first)
	if !more || len(bytes.TrimSpace(rest)) == 0 || len(first) == 0 || first[0] != '{' {
		return false
	}
	clean, err := sanitizeNonFinite(first)
	if err != nil {
		return false
	}
	return json.Valid(clean) && bytes.HasSuffix(clean, []byte("}"))
}

// importObject converts one decoded result object of any JSON format and checks its numbers
// against their ranges (checkResult).
func importObject(o map[string]any, name string, opts ImportOptions) (*Result, error) {
	var r *Result
	var err error
	switch format := classify(o, name); format {
	case FormatReckon:
		r, err = importReckon(o)
	case FormatVLLM:
		r, err = importVLLM(o, opts)
	case FormatSGLang:
		r, err = importSGLang(o)
	case FormatAIPerf, FormatGenAI:
		r, err = importAIPerf(o, format)
	case FormatNCCLJSON:
		r, err = importNCCLJSON(o)
	case "aiperf-records":
		err = fmt.Errorf("this is AIPerf's per-request profile_export.jsonl; import the aggregate profile_export_aiperf.json written next to it")
	default:
		err = fmt.Errorf("unrecognised JSON result: expected vLLM bench serve keys (output_throughput, mean_ttft_ms, ...), SGLang bench_serving keys (mean_e2e_latency_ms, ...), GenAI-Perf/AIPerf metric objects ({\"unit\", \"avg\", ...}) or a reckon result (schema %q)", ResultSchema)
	}
	if err != nil {
		return nil, err
	}
	if err := checkResult(r); err != nil {
		return nil, err
	}
	sort.Strings(r.Missing)
	return r, nil
}

// decodeArray decodes b as one JSON array; ok is false when it is not one.
func decodeArray(b []byte) ([]any, bool) {
	if len(b) == 0 || b[0] != '[' {
		return nil, false
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var arr []any
	if err := dec.Decode(&arr); err != nil || dec.More() {
		return nil, false
	}
	return arr, true
}

func decodeObject(b []byte) (map[string]any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var o map[string]any
	if err := dec.Decode(&o); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, fmt.Errorf("more than one JSON value")
	}
	if o == nil {
		return nil, fmt.Errorf("expected a JSON object")
	}
	return o, nil
}

// Sentinels that stand for Python's non-finite literals after sanitizeNonFinite.
const (
	sentinelPrefix = "__reckon_nonfinite__:"
	sentinelNaN    = sentinelPrefix + "NaN"
	sentinelPosInf = sentinelPrefix + "Infinity"
	sentinelNegInf = sentinelPrefix + "-Infinity"
)

// sanitizeNonFinite rewrites the bare literals NaN, Infinity and -Infinity that Python's json
// module writes (and Go's decoder rejects) into sentinel strings, leaving string contents alone.
func sanitizeNonFinite(b []byte) ([]byte, error) {
	if !bytes.Contains(b, []byte("NaN")) && !bytes.Contains(b, []byte("Infinity")) {
		return b, nil
	}
	var out bytes.Buffer
	out.Grow(len(b) + 64)
	inStr, esc := false, false
	line := 1
	for i := 0; i < len(b); i++ {
		c := b[i]
		if c == '\n' {
			line++
		}
		if inStr {
			out.WriteByte(c)
			switch {
			case esc:
				esc = false
			case c == '\\':
				esc = true
			case c == '"':
				inStr = false
			}
			continue
		}
		switch {
		case c == '"':
			inStr = true
			out.WriteByte(c)
		case bytes.HasPrefix(b[i:], []byte("NaN")):
			out.WriteString(`"` + sentinelNaN + `"`)
			i += len("NaN") - 1
		case bytes.HasPrefix(b[i:], []byte("-Infinity")):
			out.WriteString(`"` + sentinelNegInf + `"`)
			i += len("-Infinity") - 1
		case bytes.HasPrefix(b[i:], []byte("+Infinity")):
			out.WriteString(`"` + sentinelPosInf + `"`)
			i += len("+Infinity") - 1
		case bytes.HasPrefix(b[i:], []byte("Infinity")):
			out.WriteString(`"` + sentinelPosInf + `"`)
			i += len("Infinity") - 1
		default:
			out.WriteByte(c)
		}
	}
	if inStr {
		return nil, fmt.Errorf("line %d: unterminated string", line)
	}
	return out.Bytes(), nil
}

// classify tells the format of one decoded JSON object.
func classify(o map[string]any, name string) string {
	if s, _ := o["schema"].(string); s == ResultSchema {
		return FormatReckon
	}
	if _, ok := o["results"].([]any); ok {
		if _, ok := o["average_bus_bandwidth"]; ok {
			return FormatNCCLJSON
		}
	}
	if md, ok := o["metadata"].(map[string]any); ok {
		if _, ok := md["request_start_ns"]; ok {
			if _, ok := o["metrics"]; ok {
				return "aiperf-records"
			}
		}
	}
	if isAIPerf(o) {
		lname := strings.ToLower(name)
		if strings.Contains(lname, "genai_perf") || strings.Contains(lname, "genai-perf") {
			return FormatGenAI
		}
		if strings.Contains(lname, "aiperf") {
			return FormatAIPerf
		}
		if _, ok := o["records"]; ok {
			return FormatAIPerf
		}
		if _, ok := o["input_config"]; ok {
			return FormatGenAI
		}
		return FormatAIPerf
	}
	for _, k := range []string{"mean_e2e_latency_ms", "median_e2e_latency_ms", "total_throughput", "accept_length", "total_output_tokens_retokenized", "random_input_len"} {
		if _, ok := o[k]; ok {
			return FormatSGLang
		}
	}
	for _, k := range []string{"output_throughput", "mean_ttft_ms", "median_ttft_ms", "request_throughput", "total_token_throughput"} {
		if _, ok := o[k]; ok {
			return FormatVLLM
		}
	}
	return ""
}

// aiperfStats are the statistic keys of a GenAI-Perf/AIPerf metric object.
var aiperfStats = []string{"avg", "min", "max", "p1", "p5", "p10", "p25", "p50", "p75", "p90", "p95", "p99", "std"}

func isAIPerfMetric(v any) bool {
	m, ok := v.(map[string]any)
	if !ok {
		return false
	}
	if _, ok := m["unit"]; !ok {
		return false
	}
	_, avg := m["avg"]
	_, p50 := m["p50"]
	return avg || p50
}

func isAIPerf(o map[string]any) bool {
	src := o
	if rec, ok := o["records"].(map[string]any); ok {
		src = rec
	}
	n := 0
	for _, v := range src {
		if isAIPerfMetric(v) {
			n++
		}
	}
	return n > 0
}

// ---- typed access to the decoded map ----

// num reads a JSON number (or a non-finite sentinel). ok is false for absent, null or non-numbers.
func num(v any) (f float64, ok bool, nonFinite string) {
	switch x := v.(type) {
	case json.Number:
		f, err := x.Float64()
		return f, err == nil, ""
	case float64:
		return x, true, ""
	case string:
		switch x {
		case sentinelNaN:
			return math.NaN(), false, "NaN"
		case sentinelPosInf:
			return math.Inf(1), false, "Infinity"
		case sentinelNegInf:
			return math.Inf(-1), false, "-Infinity"
		}
	}
	return 0, false, ""
}

// metricSetters maps Result metric keys to their fields.
func (r *Result) metricSetters() map[string]reflect.Value {
	out := map[string]reflect.Value{}
	for _, f := range r.metricFields() {
		out[f.key] = f.v
	}
	return out
}

// importer accumulates one imported result and remembers which metrics were set.
type importer struct {
	r       *Result
	setters map[string]reflect.Value
	set     map[string]bool
	unknown []string
	// err is the first value outside its range (see checkMetric), naming the source field.
	err error
}

func newImporter(format, tool string) *importer {
	r := &Result{Schema: ResultSchema}
	r.Metadata.SourceFormat = format
	r.Metadata.Tool = tool
	return &importer{r: r, setters: r.metricSetters(), set: map[string]bool{}}
}

// metric sets our metric key from a source value (src names the source key in warnings).
func (im *importer) metric(key, src string, v any) {
	f, ok, nf := num(v)
	if nf != "" {
		im.r.warnf("%s is %s in the source: reported as missing", src, nf)
		return
	}
	if !ok {
		if v != nil {
			im.r.warnf("%s: expected a number, got %v: reported as missing", src, v)
		}
		return
	}
	fv, has := im.setters[key]
	if !has {
		im.extra(key, f)
		return
	}
	if err := checkMetric(key, f, fv.Kind() == reflect.Int); err != nil {
		im.fail(src, err)
		return
	}
	if fv.Kind() == reflect.Int {
		fv.SetInt(int64(f))
	} else {
		fv.SetFloat(f)
	}
	im.set[key] = true
}

func (im *importer) extra(key string, f float64) {
	if err := domain.Measured(f, false); err != nil {
		im.fail(key, err)
		return
	}
	if im.r.Extra == nil {
		im.r.Extra = map[string]float64{}
	}
	im.r.Extra[key] = f
}

// result is finish, or the first range error met while importing.
func (im *importer) result() (*Result, error) {
	r := im.finish()
	if im.err != nil {
		return nil, im.err
	}
	return r, nil
}

// finish marks every metric that was not set as missing and reports unknown keys.
func (im *importer) finish() *Result {
	for _, f := range im.r.metricFields() {
		if !im.set[f.key] {
			im.r.setMissing(f.key)
		}
	}
	sort.Strings(im.r.Missing)
	if len(im.unknown) > 0 {
		sort.Strings(im.unknown)
		im.r.warnf("unknown fields (kept in extra when numeric, labels when text): %s", strings.Join(im.unknown, ", "))
	}
	return im.r
}

func str(v any) string {
	switch x := v.(type) {
	case string:
		if strings.HasPrefix(x, sentinelPrefix) {
			return strings.TrimPrefix(x, sentinelPrefix)
		}
		return x
	case json.Number:
		return x.String()
	case bool:
		return strconv.FormatBool(x)
	}
	return ""
}

// requestRate reads a request rate: a number, "inf", or Infinity; 0 means all at once.
func requestRate(v any) (float64, bool) {
	if f, ok, nf := num(v); ok {
		return f, true
	} else if nf == "Infinity" {
		return 0, true
	}
	if s, ok := v.(string); ok && strings.EqualFold(strings.TrimSpace(s), "inf") {
		return 0, true
	}
	return 0, false
}

func floats(v any) ([]float64, bool) {
	arr, ok := v.([]any)
	if !ok {
		return nil, false
	}
	out := make([]float64, 0, len(arr))
	for _, x := range arr {
		f, ok, _ := num(x)
		if !ok {
			f = math.NaN()
		}
		out = append(out, f)
	}
	return out, true
}

// details reads vLLM/SGLang per-request arrays (seconds), when present.
func (im *importer) details(o map[string]any, used map[string]bool) {
	keys := []string{"input_lens", "output_lens", "ttfts", "itls", "latencies", "start_times", "errors", "generated_texts"}
	present := false
	for _, k := range keys {
		if _, ok := o[k]; ok {
			present = true
			used[k] = true
		}
	}
	if !present {
		return
	}
	d := &Details{}
	toInts := func(name string, v any) []int {
		fs, _ := floats(v)
		out := make([]int, len(fs))
		for i, f := range fs {
			if math.IsNaN(f) {
				continue
			}
			if err := domain.Count(f, MaxImportCount); err != nil {
				im.fail(fmt.Sprintf("%s[%d]", name, i), err)
				return nil
			}
			out[i] = int(f)
		}
		return out
	}
	d.InputLens = toInts("input_lens", o["input_lens"])
	d.OutputLens = toInts("output_lens", o["output_lens"])
	d.TTFTs, _ = floats(o["ttfts"])
	d.Latencies, _ = floats(o["latencies"])
	d.StartTimes, _ = floats(o["start_times"])
	if arr, ok := o["itls"].([]any); ok {
		for _, x := range arr {
			fs, _ := floats(x)
			d.ITLs = append(d.ITLs, fs)
		}
	}
	if arr, ok := o["errors"].([]any); ok {
		for _, x := range arr {
			d.Errors = append(d.Errors, str(x))
		}
	}
	im.r.Details = d
}

// statKey matches "<stat>_<metric>_ms" keys such as p99.9_ttft_ms or p50_itl_ms.
func statKey(k string) bool {
	if !strings.HasSuffix(k, "_ms") {
		return false
	}
	for _, m := range []string{"_ttft_ms", "_tpot_ms", "_itl_ms", "_e2el_ms", "_e2e_latency_ms"} {
		if strings.HasSuffix(k, m) {
			return true
		}
	}
	return false
}

// importReckon reads reckon's own result file.
func importReckon(o map[string]any) (*Result, error) {
	raw, err := json.Marshal(o)
	if err != nil {
		return nil, fmt.Errorf("reckon result: %w", err)
	}
	var r Result
	if err := json.Unmarshal(raw, &r); err != nil {
		return nil, fmt.Errorf("reckon result: %w", err)
	}
	// A metric key the file does not have (written by an older reckon) is missing, never 0.
	for _, k := range MetricKeys() {
		if _, ok := o[k]; !ok && r.NCCL == nil {
			r.setMissing(k)
		}
	}
	if r.Metadata.Semantics == nil && r.Metadata.Tool == "reckon" {
		// Written before results recorded their definitions: max_concurrent_requests was then
		// the busiest whole second, now max_concurrent_requests_1s.
		s := ReckonSemantics(r.Metadata.ToolVersion)
		s.Basis = "a reckon result written before semantics were recorded: that reckon's definitions"
		s.PeakConcurrency = DefPeakBusiestSecond
		r.Metadata.Semantics = s
		if !slices.Contains(r.Missing, "max_concurrent_requests") {
			r.MaxConcurrentRequests1s, r.MaxConcurrentRequests = r.MaxConcurrentRequests, 0
			r.Missing = slices.DeleteFunc(r.Missing, func(k string) bool { return k == "max_concurrent_requests_1s" })
			r.setMissing("max_concurrent_requests")
			r.warnf("max_concurrent_requests of this older reckon result is the busiest-second figure: read as max_concurrent_requests_1s")
		}
	}
	return &r, nil
}
