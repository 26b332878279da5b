// import_detect.go holds the decoding of an import's JSON (objects, arrays, JSON lines, the
// non-finite sentinels) and the classification of its format.

package workload

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
)

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
