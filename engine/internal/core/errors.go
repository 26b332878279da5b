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
	// kubectl logs --prefix: "[pod/vllm-0/vllm] "
	regexp.MustCompile(`^\s*\[pod/[^\]\s]+\] ?`),
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

// prefixWindow bounds the text StripPrefix looks at for one prefix.
const prefixWindow = 160

// StripPrefix removes the engine/uvicorn prefixes (rank tags, levels, timestamps, source
// locations) and paste decorations from the start of a log line.
func StripPrefix(line string) string {
	for range 4 {
		before := line
		for _, re := range prefixREs {
			// Prefixes are short; matching on a bounded head keeps the cost independent of
			// the line length (the backtracking matcher's set-up is proportional to it).
			head := line[:min(len(line), prefixWindow)]
			if loc := re.FindStringIndex(head); loc != nil && loc[1] > 0 {
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
	// (prefix-stripped) text or after a space; Ray's wrapped form "RayTaskError(ValueError): "
	// included.
	exceptionRE = regexp.MustCompile(`(?:^|[\s:])((?:[A-Za-z_]\w*\.)*\w*(?:Error|Exception|Exit|Interrupt|Failure|Abort))(?:\([\w.]+\))?(?::\s|:$|$)`)
	digitsRE    = regexp.MustCompile(`\d+(?:\.\d+)?`)
)

// rule classifies a line when one of its lower-case substrings occurs in it, or when its
// regular expression (run only when one of its gate substrings occurs) matches; unless one of
// its not-substrings occurs. Substrings keep classification cheap: a healthy log has millions
// of lines and almost none of them is an error.
type rule struct {
	kind string
	any  []string
	gate []string
	re   *regexp.Regexp
	not  []string
}

func containsAny(s string, subs []string) bool {
	for _, k := range subs {
		if strings.Contains(s, k) {
			return true
		}
	}
	return false
}

func (r rule) match(lower string) bool {
	if containsAny(lower, r.not) {
		return false
	}
	if containsAny(lower, r.any) {
		return true
	}
	return r.re != nil && containsAny(lower, r.gate) && r.re.MatchString(lower)
}

// rules are tried in order on the lower-cased line body; the first match classifies the line.
var rules = []rule{
	{kind: KindKVTooSmall,
		any: []string{"no available memory for the cache blocks", "can be stored in kv cache",
			"kv cache is needed, which is larger than the available kv cache memory",
			"not enough memory. please try to increase --mem-fraction-static", "kv cache too small",
			"kv cache is too small", "profiled value -",
			// SGLang's token/request pools (sized at start-up from the KV budget) exhausted
			"alloc_token_slots runs out of memory", "alloc_req_slots runs out of memory",
			"prefill out of memory. try", "decode out of memory. try"},
		gate: []string{"max_total_num_tokens", "insufficient", "kv cache"},
		re:   regexp.MustCompile(`max_total_num_tokens(?: is|=)\s*(?:0|-\d+)\b|(?:insufficient|\bno) (?:gpu |free |available )?memory (?:left )?for (?:the )?kv cache`)},
	{kind: KindCustomAllReduce,
		any:  []string{"peer access is not supported"},
		gate: []string{"all_reduce", "allreduce", "all-reduce", "all reduce", "ipc_meta", "register_buffer", "graph_buffer"},
		re:   regexp.MustCompile(`custom_all_reduce[\w.]*\.cuh?:\d+|custom[ _]?all[ _-]?reduce\w*.*(?:error|failed|failure|exception|invalid argument)|(?:error|failed|failure).*custom[ _]?all[ _-]?reduce|(?:register_graph_buffers|get_graph_buffer_ipc_meta|_gather_ipc_meta|register_buffer).*(?:error|failed|invalid argument)`),
		not:  []string{"is disabled because", "is disabled due to", "to silence this warning"}},
	{kind: KindGraphCapture,
		any: []string{"capture cuda graph failed", "graph capture failed", "cuda graph capture error",
			"failed to capture", "cudaerrorstreamcapture", "operation not permitted when stream is capturing", "during capture",
			"during cuda graph capture"},
		gate: []string{"graph"},
		re:   regexp.MustCompile(`cuda ?graph.*(?:capture|capturing).*(?:failed|error)|capture_cuda_graph.*error`)},
	{kind: KindOOM,
		any: []string{"is less than desired gpu memory utilization", "out of memory", "outofmemoryerror",
			"cudaerrormemoryallocation", "failed to allocate memory", " oom error", " oom when", "oom-killed", "oom killed"},
		// start-up hints that mention memory without anything having failed
		// and SGLang's "Decode out of memory happened. #retracted_reqs: …" (KV-pool pressure: the
		// scheduler retracts requests and goes on)
		not: []string{"if you are running out of memory", "if out-of-memory", "consider decreasing", "to avoid oom", "may cause oom", "in case of oom",
			"out of memory happened"}},
	{kind: KindNCCL,
		any: []string{"nccl error", "ncclinternalerror", "ncclunhandledcudaerror", "ncclsystemerror", "ncclinvalidusage",
			"ncclinvalidargument", "ncclremoteerror", "nccl warn", "watchdog caught collective operation timeout",
			"distbackenderror", "distnetworkerror", "nccl communicator was aborted", "nccl_error", "ncclcomminitrank failed"},
		gate: []string{"processgroupnccl"},
		re:   regexp.MustCompile(`processgroupnccl.*(?:timeout|timed out|error|abort)`)},
	{kind: KindCUDA,
		any: []string{"cuda error", "cuda driver error", "cudart error", "cuda failure", "illegal memory access",
			"device-side assert triggered", "no cuda-capable device"},
		gate: []string{"cudaerror", "cublas_status", "cudnn_status", "xid "},
		re:   regexp.MustCompile(`cudaerror[a-z]\w*|cublas_status_(?:[a-rt-z]\w*|s[a-tv-z]\w*)|cudnn_status_[a-rt-z]\w*|xid \d+`)},
	{kind: KindOther,
		any:  []string{"exceeds the maximum allowed length", "received sigquit from a child", "memory leak detected", "died unexpectedly", "scheduler is dead"},
		gate: []string{"child process"},
		re:   regexp.MustCompile(`child process.*(?:died|exited|failed)`)},
}

// Classify returns the error kind of a line, or "" when it is not an error line. Patterns are
// matched on the line without its prefix; traceback frames and indented code are never errors
// by themselves. Error-level lines without a known pattern, and bare exception lines, are
// "other".
func Classify(line string) string { return classify(line, StripPrefix(line)) }

func classify(line, body string) string {
	if isFrame(body) || isCppFrame(body) || isChainLine(body) {
		return ""
	}
	if k := ruleKind(body); k != "" {
		return k
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

// ruleKind returns the kind of the first rule matching the body, or "".
func ruleKind(body string) string {
	lower := strings.ToLower(body)
	for _, r := range rules {
		if r.match(lower) {
			return r.kind
		}
	}
	return ""
}

// isFrame reports a Python traceback frame ('File "x.py", line N').
func isFrame(body string) bool {
	return strings.Contains(body, `File "`) && frameRE.MatchString(body)
}

// isCppFrame reports a C++ stack frame as PyTorch prints them ("frame #3: c10d::...").
func isCppFrame(body string) bool {
	return strings.HasPrefix(strings.TrimSpace(body), "frame #")
}

// isChainLine reports the sentences Python prints between chained tracebacks ("The above
// exception was the direct cause of the following exception:", "During handling of the above
// exception, another exception occurred:"): they join two errors and are none themselves.
func isChainLine(body string) bool {
	return strings.Contains(body, "he above exception was") || strings.Contains(body, "handling of the above exception")
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
	// customAR is set when a frame is in the custom-allreduce code: the exception that ends
	// the traceback is then a custom-allreduce failure even when its own text ("RuntimeError:
	// CUDA error: invalid argument") does not say so.
	customAR bool
}

// customARFrame reports a traceback frame inside custom allreduce.
func customARFrame(body string) bool {
	return strings.Contains(body, "custom_all_reduce") || strings.Contains(body, "register_graph_buffers") ||
		strings.Contains(body, "ipc_meta")
}

var (
	tagRankRE = regexp.MustCompile(`\(([A-Za-z_]\w*)[^()]*?\bpid=(\d+)[^()]*\)`)
	sglRankRE = regexp.MustCompile(`^\s*\[[^\]]*?\b((?:[A-Z]{1,4}\d+)(?: [A-Z]{1,4}\d+)*)\]|^\s*\[gpu(?:_id)?=(\d+)\]`)
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
		if kind := classify(line, body); kind != "" {
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
		c.pending[key] = &pendingTB{line: n, text: line, customAR: customARFrame(body)}
		c.lastKey = key
		return
	}
	if tb != nil {
		tb.age++
		if frame && customARFrame(body) {
			tb.customAR = true
		}
		if frame || isIndentedOrEmpty(body) {
			return
		}
		if m := exceptionRE.FindStringSubmatchIndex(body); m != nil && !isNoiseException(body) && isExceptionStart(body, m[2]) {
			kind := classify(line, body)
			if tb.customAR && (kind == "" || kind == KindOther || kind == KindCUDA) {
				kind = KindCustomAllReduce
			}
			if kind == "" || kind == KindOther {
				kind = KindTraceback
			}
			c.add(kind, n, line)
			delete(c.pending, key)
			return
		}
		// A line of its own inside the traceback (another rank's record, a C++ abort):
		// classified by the rules only, never as a generic error-level line.
		if !isCppFrame(body) {
			if k := ruleKind(body); k != "" {
				c.add(k, n, line)
			}
		}
		if tb.age > 400 {
			c.flush(key)
		}
		return
	}
	if kind := classify(line, body); kind != "" {
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
