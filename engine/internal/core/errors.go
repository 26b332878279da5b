package core

import (
	"regexp"
	"sort"
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
	// journald/syslog: "Feb 04 08:47:05 host sudo[477901]: " (any month language)
	regexp.MustCompile(`^\s*\p{L}{3,5}\.? +\d{1,2} \d\d:\d\d:\d\d \S+ [\w./-]+(?:\[\d+\])?: ?`),
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
	{KindCustomAllReduce, regexp.MustCompile(`custom_all_reduce[\w.]*\.cuh?:\d+|(?i:custom[ _]?all[ _-]?reduce\w*).*(?i:error|failed|failure|exception|invalid argument|not supported between)|(?i:error|failed|failure).*(?i:custom[ _]?all[ _-]?reduce)|peer access is not supported|(?:register_graph_buffers|get_graph_buffer_ipc_meta|_gather_ipc_meta|register_buffer).*(?i:error|failed|invalid argument)`), regexp.MustCompile(`is disabled (?:because|due to)|To silence this warning`)},
	{KindGraphCapture, regexp.MustCompile(`(?i:capture cuda graph failed|cuda ?graph capture (?:failed|error)|graph capture failed|failed to capture (?:cuda )?graph|cudaErrorStreamCapture\w*|operation not permitted when stream is capturing|during capture|capture_cuda_graph.*error|CUDA graph.*(?:capture|capturing).*(?:failed|error))`), nil},
	{KindOOM, regexp.MustCompile(`is less than desired GPU memory utilization|(?i:cuda out of memory|OutOfMemoryError|CUDA error: out of memory|cudaErrorMemoryAllocation|\bout of memory\b|failed to allocate memory|\bOOM\b(?: error| when|-killed| killed))`), nil},
	{KindNCCL, regexp.MustCompile(`NCCL error|nccl(?:Internal|UnhandledCuda|System|InvalidUsage|InvalidArgument|Remote)Error|NCCL WARN|ProcessGroupNCCL.*(?i:timeout|timed out|error|abort)|Watchdog caught collective operation timeout|DistBackendError|DistNetworkError|NCCL communicator was aborted|NCCL_ERROR|ncclCommInitRank failed`), nil},
	{KindCUDA, regexp.MustCompile(`CUDA error|CUDA driver error|CUDART error|(?i:cuda failure)|cudaError[A-Z]\w*|CUBLAS_STATUS_(?:[A-RT-Z]\w*|S[A-TV-Z]\w*)|CUDNN_STATUS_(?:[A-RT-Z]\w*)|illegal memory access|device-side assert(?:ion)? triggered|no CUDA-capable device|Xid \d+`), nil},
	{KindOther, regexp.MustCompile(`exceeds the maximum allowed length|Received sigquit from a child|child process.*(?:died|exited|failed)|died unexpectedly`), nil},
}

// Classify returns the error kind of a line, or "" when it is not an error line. Patterns are
// matched on the line without its prefix; traceback frames and indented code are never errors
// by themselves. Error-level lines without a known pattern, and bare exception lines, are
// "other".
func Classify(line string) string {
	body := StripPrefix(line)
	if isFrame(body) {
		return ""
	}
	if mayMatchRule(body) {
		for _, r := range rules {
			if r.re.MatchString(body) && (r.not == nil || !r.not.MatchString(body)) {
				return r.kind
			}
		}
	}
	if isIndentedOrEmpty(body) {
		return ""
	}
	if hasErrorLevel(line) && errorLevelRE.MatchString(line) {
		return KindOther
	}
	if mayBeException(body) {
		if m := exceptionRE.FindStringSubmatchIndex(body); m != nil && m[0] == 0 && !isNoiseException(body) {
			return KindOther
		}
	}
	return ""
}

// ruleKeywords are lower-case fragments of which every rule needs at least one; lines
// without any of them (nearly all lines of a healthy log) skip the regular expressions.
var ruleKeywords = []string{"memory", "cache", "mem-fraction", "profiled value", "max_total_num_tokens",
	"all_reduce", "allreduce", "all-reduce", "all reduce", "graph", "ipc_meta", "register_buffer", "peer access",
	"capture", "capturing", "nccl", "distbackend", "distnetwork", "watchdog", "cuda", "cublas", "cudnn", "illegal",
	"assert", "xid", "oom", "allocate", "exceeds the maximum", "sigquit", "child process", "died"}

func mayMatchRule(body string) bool {
	lower := strings.ToLower(body)
	for _, k := range ruleKeywords {
		if strings.Contains(lower, k) {
			return true
		}
	}
	return false
}

func hasErrorLevel(line string) bool {
	return strings.Contains(line, "ERROR") || strings.Contains(line, "CRITICAL") || strings.Contains(line, "FATAL")
}

func mayBeException(body string) bool {
	for _, k := range []string{"Error", "Exception", "Exit", "Interrupt", "Failure", "Abort"} {
		if strings.Contains(body, k) {
			return true
		}
	}
	return false
}

func isFrame(body string) bool {
	return strings.Contains(body, `File "`) && frameRE.MatchString(body)
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
// into the exception line that ends them, per rank (workers of a multi-GPU engine interleave
// their tracebacks line by line); the same message repeated by several ranks is kept once (its
// first occurrence).
type ErrorCollector struct {
	errs    []LogError
	seen    map[string]bool
	pending map[string]*pendingTB
	lastKey string
}

type pendingTB struct {
	line int
	text string
	age  int
}

var (
	tagRankRE = regexp.MustCompile(`\(([A-Za-z_]\w*)[^()]*?\bpid=(\d+)[^()]*\)`)
	sglRankRE = regexp.MustCompile(`^\s*\[[^\]]*?\b((?:DP\d+ )?(?:PP\d+ )?TP\d+(?: EP\d+)?)\]|^\s*\[gpu(?:_id)?=(\d+)\]`)
)

// rankOf returns the rank tag of a line ("" when it has none).
func rankOf(line string) string {
	if m := tagRankRE.FindStringSubmatch(line); m != nil {
		return m[1] + "/" + m[2]
	}
	if m := sglRankRE.FindStringSubmatch(line); m != nil {
		return m[1] + m[2]
	}
	return ""
}

// Line feeds one log line (ANSI already stripped) with its number.
func (c *ErrorCollector) Line(n int, line string) {
	if c.seen == nil {
		c.seen = map[string]bool{}
		c.pending = map[string]*pendingTB{}
	}
	isTB := strings.Contains(line, "Traceback (most recent call last)")
	body := StripPrefix(line)
	frame := isFrame(body)
	if !isTB && !frame && len(c.pending) == 0 {
		if kind := Classify(line); kind != "" {
			c.add(kind, n, line)
		}
		return
	}
	key := rankOf(line)
	if key == "" {
		key = c.lastKey // untagged continuation lines belong to the latest traceback
	}
	if isTB {
		c.flush(key)
		c.pending[key] = &pendingTB{line: n, text: line}
		c.lastKey = key
		// "Scheduler hit an exception: Traceback ..." carries nothing more on this line.
		return
	}
	tb := c.pending[key]
	if tb == nil && frame {
		// A traceback whose header is not in the log (an excerpt, or a rank's output cut).
		c.pending[key] = &pendingTB{line: n, text: line}
		c.lastKey = key
		return
	}
	if tb != nil {
		tb.age++
		if frame || isIndentedOrEmpty(body) {
			return
		}
		if m := exceptionRE.FindStringSubmatchIndex(body); m != nil && !isNoiseException(body) && isExceptionStart(body, m[2]) {
			kind := Classify(line)
			if kind == "" || kind == KindOther {
				kind = KindTraceback
			}
			c.add(kind, n, line)
			delete(c.pending, key)
			return
		}
		if tb.age > 400 {
			c.flush(key)
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

func (c *ErrorCollector) flush(key string) {
	if tb := c.pending[key]; tb != nil {
		c.add(KindTraceback, tb.line, tb.text)
		delete(c.pending, key)
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

// Errors returns the errors found so far, in line order (a traceback without its exception
// line is reported as kind traceback at its first line). It never returns nil.
func (c *ErrorCollector) Errors() []LogError {
	keys := make([]string, 0, len(c.pending))
	for k := range c.pending {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(a, b int) bool { return c.pending[keys[a]].line < c.pending[keys[b]].line })
	for _, k := range keys {
		c.flush(k)
	}
	if c.errs == nil {
		return []LogError{}
	}
	sort.SliceStable(c.errs, func(a, b int) bool { return c.errs[a].Line < c.errs[b].Line })
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
