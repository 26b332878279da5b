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
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	p := &consoleParser{opts: opts}
	for sc.Scan() {
		if err := p.scanLine(sc.Text()); err != nil {
			return nil, err
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("line %d: %w", p.lineNo+1, err)
	}
	if p.im != nil && p.im.err != nil {
		return nil, fmt.Errorf("line %d: %w", p.lineNo, p.im.err)
	}
	p.finish()
	if p.blockErr != nil {
		return nil, p.blockErr
	}
	if len(p.out) == 0 {
		return nil, fmt.Errorf("a \"Serving Benchmark Result\" block without metrics")
	}
	return p.out, nil
}

// consoleParser is the state of importConsole between lines: the results so far, the block being
// read (im, nil outside a block) with the settings and peak it printed, and the traffic settings
// printed before the next block.
type consoleParser struct {
	opts                            ImportOptions
	out                             []*Result
	im                              *importer
	lineNo, seen                    int
	rate, maxConc, preRate, preConc string
	backend                         string
	peak                            any
	hasPeak                         bool
	blockErr                        error
	blockLine, peakLine             int
}

// scanLine reads one line of the log: a block's start or end rule, a setting before a block, or
// a value inside one. It returns the error that stops the import, if any (an importer error or a
// block that failed is reported on the next line, as the scan goes on until then).
func (p *consoleParser) scanLine(text string) error {
	if p.im != nil && p.im.err != nil {
		return fmt.Errorf("line %d: %w", p.lineNo, p.im.err)
	}
	if p.blockErr != nil {
		return p.blockErr
	}
	p.lineNo++
	line := strings.TrimSpace(reConsolePrefix.ReplaceAllString(text, ""))
	if reConsoleStart.MatchString(line) {
		p.finish()
		if len(p.out) >= MaxImportRecords {
			return fmt.Errorf("line %d: more than %d summaries in one file", p.lineNo, MaxImportRecords)
		}
		p.blockLine = p.lineNo
		p.im = newImporter(FormatConsole, "serving benchmark (printed summary)")
		// vLLM prints the traffic settings before the block.
		p.rate, p.maxConc = p.preRate, p.preConc
		p.preRate, p.preConc = "", ""
		return nil
	}
	if p.im == nil {
		p.preamble(line)
		return nil
	}
	if reConsoleRule.MatchString(line) {
		p.finish()
		return nil
	}
	if strings.HasPrefix(line, "-") || line == "" {
		return nil // section titles such as "---------------Time to First Token----------------"
	}
	if m := reConsoleLine.FindStringSubmatch(line); m != nil {
		p.blockValue(m[1], m[2])
	}
	return nil
}

// preamble keeps the traffic settings vLLM prints outside a block, for the block that follows.
func (p *consoleParser) preamble(line string) {
	m := reConsoleLine.FindStringSubmatch(line)
	if m == nil {
		return
	}
	switch strings.ToLower(strings.TrimSpace(m[1])) {
	case "traffic request rate":
		p.preRate = m[2]
	case "maximum request concurrency", "max request concurrency":
		p.preConc = m[2]
	}
}

// blockValue files one "label: value" line of a block: a setting, the peak concurrency, a known
// scalar or latency statistic, or an unknown metric kept as an extra.
func (p *consoleParser) blockValue(printed, val string) {
	im := p.im
	label := strings.ToLower(strings.TrimSpace(printed))
	switch label {
	case "backend":
		p.backend = val
		im.r.Metadata.labels()["backend"] = val
		im.r.Metadata.Tool = toolForBackend(val)
		return
	case "traffic request rate":
		p.rate = val
		return
	case "max request concurrency", "max reqeuest concurrency", "maximum request concurrency":
		p.maxConc = val
		return
	}
	f, err := strconv.ParseFloat(val, 64)
	if err != nil {
		im.r.warnf("line %d: %q: value %q is not a number", p.lineNo, printed, val)
		return
	}
	if label == "peak concurrent requests" {
		p.peak, p.hasPeak, p.peakLine = f, true, p.lineNo
		p.seen++
		return
	}
	if key, ok := consoleScalar[label]; ok {
		im.metric(key, printed, f)
		p.seen++
		return
	}
	if s := reConsoleStat.FindStringSubmatch(label); s != nil {
		metric := s[2]
		if metric == "e2e latency" {
			metric = "e2el"
		}
		im.metric(s[1]+"_"+metric+"_ms", printed, f)
		p.seen++
		return
	}
	im.unknown = append(im.unknown, printed)
	im.extra(strings.ReplaceAll(label, " ", "_"), f)
}

// finish closes the block being read: a block with metrics becomes a result (or blockErr), and
// the block's state is reset. It does nothing outside a block or after a block failed.
func (p *consoleParser) finish() {
	if p.im == nil || p.blockErr != nil {
		return
	}
	if p.seen > 0 {
		res, err := p.blockResult()
		if err != nil {
			line := p.peakLine
			if line == 0 {
				line = p.blockLine
			}
			p.blockErr = fmt.Errorf("line %d: %w", line, err)
			return
		}
		p.out = append(p.out, res)
	}
	p.im, p.seen, p.rate, p.maxConc, p.backend, p.peak, p.hasPeak, p.peakLine = nil, 0, "", "", "", nil, false, 0
}

// blockResult completes the block's result: its traffic settings, the semantics of its backend
// (SGLang's with a "Backend:" line, else vLLM's with its peak concurrency), and the rounding warning.
func (p *consoleParser) blockResult() (*Result, error) {
	im := p.im
	r := im.r
	if f, err := strconv.ParseFloat(p.rate, 64); err == nil && !math.IsInf(f, 0) && f > 0 {
		r.Metadata.Workload.RequestRate = f
	}
	if n, err := strconv.Atoi(p.maxConc); err == nil {
		r.Metadata.Workload.MaxConcurrency = n
		r.MaxConcurrency = n
		im.set["max_concurrency"] = true
	}
	if p.backend != "" {
		r.Metadata.Semantics = sglangSemantics(p.backend)
		if f, ok, _ := num(p.peak); p.hasPeak && ok {
			im.extra("sglang_max_concurrent_requests", f)
		}
	} else {
		r.Metadata.Semantics = im.vllmPeak("Peak concurrent requests", p.peak, p.hasPeak, r.Metadata.Workload.MaxConcurrency, p.opts)
	}
	r.warnf("read from the printed summary: values are rounded as printed (two decimals)")
	im.dropPlaceholderStats()
	return im.result()
}

func toolForBackend(b string) string {
	if strings.HasPrefix(b, "sglang") {
		return "sglang.bench_serving"
	}
	return "serving benchmark (printed summary)"
}
