package workload

import (
	"bufio"
	"bytes"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
)

// FormatConsole is the source format of a result read from the printed summary of vLLM's
// bench serve or SGLang's bench_serving ("Serving Benchmark Result").
const FormatConsole = "serving-benchmark-console"

var (
	reConsoleStart = regexp.MustCompile(`=+\s*Serving Benchmark Result\s*=+`)
	reConsoleRule  = regexp.MustCompile(`^=+$`)
	reConsoleLine  = regexp.MustCompile(`^(.+?):\s+(\S+)\s*$`)
	reConsoleStat  = regexp.MustCompile(`^(mean|median|std|p\d+(?:\.\d+)?|max) (ttft|tpot|itl|e2el|e2e latency) \(ms\)$`)
	// Prefixes that log collectors and shells add in front of the summary lines.
	reConsolePrefix = regexp.MustCompile(`^(?:\s*\[\d+,\d+\]<std(?:out|err)>:|\s*#\s?|\s*>\s?)`)
)

// consoleScalar maps printed labels (lower case) to metric keys.
var consoleScalar = map[string]string{
	"successful requests":                  "completed",
	"failed requests":                      "failed",
	"benchmark duration (s)":               "duration",
	"total input tokens":                   "total_input_tokens",
	"total generated tokens":               "total_output_tokens",
	"request throughput (req/s)":           "request_throughput",
	"request goodput (req/s)":              "request_goodput",
	"output token throughput (tok/s)":      "output_throughput",
	"peak output token throughput (tok/s)": "max_output_tokens_per_s",
	"total token throughput (tok/s)":       "total_token_throughput",
	"total throughput (tok/s)":             "total_token_throughput",
	"concurrency":                          "concurrency",
	"accept length":                        "spec_accept_length",
	"acceptance length":                    "spec_accept_length",
	"input token throughput (tok/s)":       "input_throughput",
	"total generated tokens (retokenized)": "total_output_tokens_retokenized",
	"acceptance rate (%)":                  "spec_decode_acceptance_rate",
	"drafts":                               "spec_decode_num_drafts",
	"draft tokens":                         "spec_decode_draft_tokens",
	"accepted tokens":                      "spec_decode_accepted_tokens",
	"total input text tokens":              "total_input_text_tokens",
	"total input vision tokens":            "total_input_vision_tokens",
}

func looksLikeConsole(b []byte) bool { return reConsoleStart.Match(b) }

// importConsole reads every "Serving Benchmark Result" block of a log. Values are as printed
// (rounded to two decimals), which a warning says.
//
// A block with a "Backend:" line is SGLang's (its definitions for that backend), otherwise vLLM's;
// vLLM's "Peak concurrent requests" is filed by its version's definition as in importVLLM.
func importConsole(b []byte, opts ImportOptions) ([]*Result, error) {
	var out []*Result
	var im *importer
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	lineNo, seen := 0, 0
	var rate, maxConc, preRate, preConc, backend string
	var peak any
	hasPeak := false
	var blockErr error
	blockLine, peakLine := 0, 0
	finish := func() {
		if im == nil || blockErr != nil {
			return
		}
		if seen > 0 {
			r := im.r
			if f, err := strconv.ParseFloat(rate, 64); err == nil && !math.IsInf(f, 0) && f > 0 {
				r.Metadata.Workload.RequestRate = f
			}
			if n, err := strconv.Atoi(maxConc); err == nil {
				r.Metadata.Workload.MaxConcurrency = n
				r.MaxConcurrency = n
				im.set["max_concurrency"] = true
			}
			if backend != "" {
				r.Metadata.Semantics = sglangSemantics(backend)
				if f, ok, _ := num(peak); hasPeak && ok {
					im.extra("sglang_max_concurrent_requests", f)
				}
			} else {
				r.Metadata.Semantics = im.vllmPeak("Peak concurrent requests", peak, hasPeak, r.Metadata.Workload.MaxConcurrency, opts)
			}
			r.warnf("read from the printed summary: values are rounded as printed (two decimals)")
			im.dropPlaceholderStats()
			res, err := im.result()
			if err != nil {
				line := peakLine
				if line == 0 {
					line = blockLine
				}
				blockErr = fmt.Errorf("line %d: %w", line, err)
				return
			}
			out = append(out, res)
		}
		im, seen, rate, maxConc, backend, peak, hasPeak, peakLine = nil, 0, "", "", "", nil, false, 0
	}
	for sc.Scan() {
		if im != nil && im.err != nil {
			return nil, fmt.Errorf("line %d: %w", lineNo, im.err)
		}
		if blockErr != nil {
			return nil, blockErr
		}
		lineNo++
		line := strings.TrimSpace(reConsolePrefix.ReplaceAllString(sc.Text(), ""))
		if reConsoleStart.MatchString(line) {
			finish()
			if len(out) >= MaxImportRecords {
				return nil, fmt.Errorf("line %d: more than %d summaries in one file", lineNo, MaxImportRecords)
			}
			blockLine = lineNo
			im = newImporter(FormatConsole, "serving benchmark (printed summary)")
			// vLLM prints the traffic settings before the block.
			rate, maxConc = preRate, preConc
			preRate, preConc = "", ""
			continue
		}
		if im == nil {
			if m := reConsoleLine.FindStringSubmatch(line); m != nil {
				switch strings.ToLower(strings.TrimSpace(m[1])) {
				case "traffic request rate":
					preRate = m[2]
				case "maximum request concurrency", "max request concurrency":
					preConc = m[2]
				}
			}
			continue
		}
		if reConsoleRule.MatchString(line) {
			finish()
			continue
		}
		if strings.HasPrefix(line, "-") || line == "" {
			continue // section titles such as "---------------Time to First Token----------------"
		}
		m := reConsoleLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		label, val := strings.ToLower(strings.TrimSpace(m[1])), m[2]
		switch label {
		case "backend":
			backend = val
			im.r.Metadata.labels()["backend"] = val
			im.r.Metadata.Tool = toolForBackend(val)
			continue
		case "traffic request rate":
			rate = val
			continue
		case "max request concurrency", "max reqeuest concurrency", "maximum request concurrency":
			maxConc = val
			continue
		}
		f, err := strconv.ParseFloat(val, 64)
		if err != nil {
			im.r.warnf("line %d: %q: value %q is not a number", lineNo, m[1], val)
			continue
		}
		if label == "peak concurrent requests" {
			peak, hasPeak, peakLine = f, true, lineNo
			seen++
			continue
		}
		if key, ok := consoleScalar[label]; ok {
			im.metric(key, m[1], f)
			seen++
			continue
		}
		if s := reConsoleStat.FindStringSubmatch(label); s != nil {
			metric := s[2]
			if metric == "e2e latency" {
				metric = "e2el"
			}
			im.metric(s[1]+"_"+metric+"_ms", m[1], f)
			seen++
			continue
		}
		im.unknown = append(im.unknown, m[1])
		im.extra(strings.ReplaceAll(label, " ", "_"), f)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("line %d: %w", lineNo+1, err)
	}
	if im != nil && im.err != nil {
		return nil, fmt.Errorf("line %d: %w", lineNo, im.err)
	}
	finish()
	if blockErr != nil {
		return nil, blockErr
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("a \"Serving Benchmark Result\" block without metrics")
	}
	return out, nil
}

func toolForBackend(b string) string {
	if strings.HasPrefix(b, "sglang") {
		return "sglang.bench_serving"
	}
	return "serving benchmark (printed summary)"
}
