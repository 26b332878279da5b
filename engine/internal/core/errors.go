package core

import (
	"regexp"
	"strings"
)

// maxErrors caps the errors kept per log; a crash loop must not produce megabytes of JSON.
const maxErrors = 200

// maxErrorText caps LogError.Text.
const maxErrorText = 400

// prefixREs match the line prefixes of both engines, of uvicorn, and the decorations that
// log collectors and issue trackers add (docker/CI timestamps, compose service names, table
// borders, markdown emphasis), in the order they nest. Each consumes at most one space after
// the prefix so that traceback indentation survives.
var prefixREs = []*regexp.Regexp{
	// paste decorations: "**", "> ", table borders, compose "vllm-1  | ", buildkite "  | "
	regexp.MustCompile(`^\s*(?:\*\*|>+ ?|\x{2502} ?|\| ?|[\w.-]+\s+\| ?)`),
	// container/CI timestamps: "2026-03-11T17:57:09.855212259Z ", "[2025-12-13T19:54:35Z] "
	regexp.MustCompile(`^\s*\[?\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?\]? ?`),
	// vLLM process tags: (VllmWorker rank=1 pid=123), (EngineCore_DP0 pid=9), (RayWorkerWrapper pid=1, ip=...)
	regexp.MustCompile(`^\s*\((?:[A-Za-z_][\w]*)(?:\s+[^()]*)?pid=\d+[^()]*\) ?`),
	// vLLM level + timestamp + location: "INFO 03-22 18:40:47 [file.py:137] " or "INFO 12-13 02:09:14 file.py:10] "
	regexp.MustCompile(`^\s*(?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL)\s+\d\d-\d\d\s+\d\d:\d\d:\d\d(?:[.,]\d+)?(?: \[[^\]]*\] ?| [\w.\-]+:\d+\] ?| ?)`),
	// SGLang: "[2025-06-12 22:41:35 TP0] ", "[22:41:35 TP0] ", "[2025-11-04 05:27:13 DP0 TP0 EP0] "
	regexp.MustCompile(`^\s*\[(?:\d{4}-\d\d-\d\d[ T])?\d\d:\d\d:\d\d(?:[.,]\d+)?(?:\s+[^\]]*)?\] ?`),
	// SGLang v0.1–0.2: "[gpu_id=0] "
	regexp.MustCompile(`^\s*\[gpu(?:_id)?=\d+\] ?`),
	// uvicorn / python logging: "INFO:     ", "ERROR:root:"
	regexp.MustCompile(`^\s*(?:DEBUG|INFO|WARNING|ERROR|CRITICAL):(?:[\w.]+:)?\s*`),
}

// StripPrefix removes the engine/uvicorn prefixes (rank tags, levels, timestamps, source
// locations) and paste decorations from the start of a log line.
func StripPrefix(line string) string {
	for range 4 {
		before := line
		for _, re := range prefixREs {
			if loc := re.FindStringIndex(line); loc != nil && loc[1] > 0 {
				line = line[loc[1]:]
			}
		}
		if line == before {
			break
		}
	}
	return line
}

var (
	errorLevelRE = regexp.MustCompile(`(?:^|[\s)\]])(?:ERROR|CRITICAL|FATAL)(?:\s+\d\d-\d\d\s+\d\d:\d\d:\d\d|:)`)
	tracebackRE  = regexp.MustCompile(`Traceback \(most recent call last\)`)
	frameRE      = regexp.MustCompile(`^\s*File "[^"]*", line \d+`)
	// exceptionRE finds "SomeError: message" / "pkg.SomeException" at the start of the
	// (prefix-stripped) text or after a space.
	exceptionRE = regexp.MustCompile(`(?:^|[\s:])((?:[A-Za-z_]\w*\.)*\w*(?:Error|Exception|Exit|Interrupt|Failure|Abort))(?::\s|:$|$)`)
	digitsRE    = regexp.MustCompile(`\d+(?:\.\d+)?`)
)

type rule struct {
	kind string
	re   *regexp.Regexp
	not  *regexp.Regexp
}

// rules are tried in order; the first match classifies the line.
var rules = []rule{
	{KindKVTooSmall, regexp.MustCompile(`No available memory for the cache blocks|larger than the maximum number of tokens that can be stored in KV cache|KV cache is needed, which is larger than the available KV cache memory|Not enough memory\. Please try to increase --mem-fraction-static|(?i:insufficient (?:gpu )?memory for (?:the )?kv cache)|(?i:kv cache (?:is )?too small)|max_total_num_tokens(?: is|=)\s*(?:0|-\d+)\b|profiled value -\d+`), nil},
	{KindCustomAllReduce, regexp.MustCompile(`custom_all_reduce[\w.]*\.cuh?:\d+|(?i:custom[ _]?all[ _-]?reduce\w*).*(?i:error|failed|failure|exception|invalid argument|not supported between)|(?:register_graph_buffers|get_graph_buffer_ipc_meta|_gather_ipc_meta|register_buffer).*(?i:error|failed|invalid argument)`), regexp.MustCompile(`is disabled (?:because|due to)|To silence this warning`)},
	{KindGraphCapture, regexp.MustCompile(`(?i:capture cuda graph failed|cuda ?graph capture (?:failed|error)|graph capture failed|failed to capture (?:cuda )?graph|cudaErrorStreamCapture\w*|operation not permitted when stream is capturing|during capture|capture_cuda_graph.*error|CUDA graph.*(?:capture|capturing).*(?:failed|error))`), nil},
	{KindOOM, regexp.MustCompile(`(?i:cuda out of memory|OutOfMemoryError|CUDA error: out of memory|cudaErrorMemoryAllocation|\bout of memory\b|failed to allocate memory|\bOOM\b(?: error| when|-killed| killed))`), nil},
	{KindNCCL, regexp.MustCompile(`NCCL error|nccl(?:Internal|UnhandledCuda|System|InvalidUsage|InvalidArgument|Remote)Error|NCCL WARN|ProcessGroupNCCL.*(?i:timeout|timed out|error|abort)|Watchdog caught collective operation timeout|DistBackendError|NCCL communicator was aborted|NCCL_ERROR|ncclCommInitRank failed`), nil},
	{KindCUDA, regexp.MustCompile(`CUDA error|CUDA driver error|CUDART error|(?i:cuda failure)|cudaError[A-Z]\w*|CUBLAS_STATUS_(?:[A-RT-Z]\w*|S[A-TV-Z]\w*)|CUDNN_STATUS_(?:[A-RT-Z]\w*)|illegal memory access|device-side assert(?:ion)? triggered|no CUDA-capable device|Xid \d+`), nil},
	{KindOther, regexp.MustCompile(`exceeds the maximum allowed length|Received sigquit from a child|child process.*(?:died|exited|failed)|died unexpectedly`), nil},
}

// Classify returns the error kind of a line, or "" when it is not an error line. Patterns are
// matched on the line without its prefix; traceback frames and indented code are never errors
// by themselves. Error-level lines without a known pattern, and bare exception lines, are
// "other".
func Classify(line string) string {
	body := StripPrefix(line)
	if frameRE.MatchString(body) {
		return ""
	}
	for _, r := range rules {
		if r.re.MatchString(body) && (r.not == nil || !r.not.MatchString(body)) {
			return r.kind
		}
	}
	if isIndentedOrEmpty(body) {
		return ""
	}
	if errorLevelRE.MatchString(line) {
		return KindOther
	}
	if m := exceptionRE.FindStringSubmatchIndex(body); m != nil && m[0] == 0 && !isNoiseException(body) {
		return KindOther
	}
	return ""
}

// isIndentedOrEmpty reports traceback code lines ("    x = f()", "    ^^^^") and blank text.
func isIndentedOrEmpty(body string) bool {
	t := strings.TrimSpace(body)
	if t == "" || strings.Trim(t, "^~ ") == "" {
		return true
	}
	return body[0] == ' ' || body[0] == '\t'
}

// isNoiseException filters lines that look like exceptions but are not: warnings categories,
// code lines of tracebacks.
func isNoiseException(body string) bool {
	t := strings.TrimSpace(body)
	return strings.HasPrefix(t, "raise ") || strings.HasPrefix(t, "except ") || strings.Contains(t, "Warning:")
}

// ErrorCollector turns log lines into classified LogErrors. Python tracebacks are collapsed
// into the exception line that ends them; the same message repeated by several ranks is kept
// once (its first occurrence).
type ErrorCollector struct {
	errs      []LogError
	seen      map[string]bool
	tbPending bool
	tbLine    int
	tbText    string
	tbAge     int
}

// Line feeds one log line (ANSI already stripped) with its number.
func (c *ErrorCollector) Line(n int, line string) {
	if c.seen == nil {
		c.seen = map[string]bool{}
	}
	if tracebackRE.MatchString(line) {
		c.flushTraceback()
		c.tbPending, c.tbLine, c.tbText, c.tbAge = true, n, line, 0
		// "Scheduler hit an exception: Traceback ..." carries nothing more on this line.
		return
	}
	body := StripPrefix(line)
	isFrame := frameRE.MatchString(body)
	if !c.tbPending && isFrame {
		// A traceback whose header is not in the log (an excerpt, or a rank's output cut).
		c.tbPending, c.tbLine, c.tbText, c.tbAge = true, n, line, 0
		return
	}
	if c.tbPending {
		c.tbAge++
		if isFrame || isIndentedOrEmpty(body) {
			return
		}
		if m := exceptionRE.FindStringSubmatchIndex(body); m != nil && !isNoiseException(body) && isExceptionStart(body, m[2]) {
			kind := Classify(line)
			if kind == "" || kind == KindOther {
				kind = KindTraceback
			}
			c.add(kind, n, line)
			c.tbPending = false
			return
		}
		if c.tbAge > 400 {
			c.flushTraceback()
		}
		return
	}
	if kind := Classify(line); kind != "" {
		c.add(kind, n, line)
	}
}

// isExceptionStart reports whether the exception name at index i starts the message: only
// whitespace or a "raise"-free prefix before it.
func isExceptionStart(body string, i int) bool {
	return strings.TrimSpace(body[:i]) == ""
}

func (c *ErrorCollector) flushTraceback() {
	if c.tbPending {
		c.add(KindTraceback, c.tbLine, c.tbText)
		c.tbPending = false
	}
}

func (c *ErrorCollector) add(kind string, n int, line string) {
	text := strings.TrimSpace(line)
	key := kind + "\x00" + digitsRE.ReplaceAllString(StripPrefix(text), "#")
	if c.seen[key] {
		return
	}
	c.seen[key] = true
	if len(c.errs) >= maxErrors {
		return
	}
	if len(text) > maxErrorText {
		text = truncateUTF8(text, maxErrorText)
	}
	c.errs = append(c.errs, LogError{Kind: kind, Line: n, Text: text})
}

// Errors returns the errors found so far (a traceback without its exception line is reported
// as kind traceback). It never returns nil.
func (c *ErrorCollector) Errors() []LogError {
	c.flushTraceback()
	if c.errs == nil {
		return []LogError{}
	}
	return c.errs
}

func truncateUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && n < len(s) && (s[n]&0xC0) == 0x80 {
		n--
	}
	return s[:n] + "…"
}
