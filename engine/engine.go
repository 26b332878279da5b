// Package engine launches LLM serving engines and reads what they actually did.
//
// An Adapter (engine/sglang, engine/vllm) knows one engine kind's command line, ready signal
// and log grammar. Launch starts an engine under a supervisor of reckon's own (the harness
// binary re-executed in supervise mode: a child subreaper with a parent-death signal, with a
// cgroup v2 of the engine's own where writable), in its own process group, with its output in
// a log file, waits until it is ready and stops the whole tree (SIGTERM, grace, SIGKILL) on
// Stop, on context cancellation, on harness SIGINT/SIGTERM (StopAllOnSignal), on panic
// (StopAllOnPanic) and, through the supervisor, on the harness's own death (docs/reliability.md). ParseLogFile and Adapter.ParseLog turn a log into a Report: memory plan,
// KV capacity, effective allreduce backend, readiness and classified errors.
//
// The engine package never judges: it reports, and the gate decides.
package engine

import (
	"bytes"
	"fmt"
	"io"
	"regexp"
	"strings"

	"github.com/reckon-ci/reckon/engine/internal/core"
	"github.com/reckon-ci/reckon/engine/sglang"
	"github.com/reckon-ci/reckon/engine/vllm"
	"github.com/reckon-ci/reckon/internal/safefile"
)

// Report is the EngineReport read from an engine log (see core.Report for the fields; JSON
// keys: engine, ready, allreduce, custom_allreduce_disabled_reason, weights_gib,
// kv_cache_tokens, kv_cache_gib, available_gpu_mem_gib, cuda_graph_seconds, cuda_graph_gib,
// max_running_requests, context_len, max_concurrency, spec_accept_length, errors).
type Report = core.Report

// LogError is one classified error of a log: kind, 1-based line and text.
type LogError = core.LogError

// Adapter knows one engine kind's command line, readiness and log grammar.
type Adapter = core.Adapter

// LaunchConfig is one way of launching an engine (model, TP size, flags, env).
type LaunchConfig = core.LaunchConfig

// Speculative describes speculative-decoding settings of a LaunchConfig.
type Speculative = core.Speculative

// Effective allreduce backends (Report.AllReduce).
const (
	AllReduceCustom  = core.AllReduceCustom
	AllReduceNCCL    = core.AllReduceNCCL
	AllReduceUnknown = core.AllReduceUnknown
)

// Error kinds (LogError.Kind).
const (
	KindOOM             = core.KindOOM
	KindCUDA            = core.KindCUDA
	KindNCCL            = core.KindNCCL
	KindCustomAllReduce = core.KindCustomAllReduce
	KindGraphCapture    = core.KindGraphCapture
	KindKVTooSmall      = core.KindKVTooSmall
	KindTraceback       = core.KindTraceback
	KindOther           = core.KindOther
)

// Kinds lists the engine kinds AdapterFor accepts.
var Kinds = []string{sglang.Name, vllm.Name}

// AdapterFor returns the adapter of an engine kind: "sglang" or "vllm" ("refengine" is
// launched through the sglang adapter with a command override, so it is accepted as an alias).
func AdapterFor(kind string) (Adapter, error) {
	switch strings.ToLower(strings.TrimSpace(kind)) {
	case sglang.Name, "refengine":
		return sglang.New(), nil
	case vllm.Name:
		return vllm.New(), nil
	}
	return nil, fmt.Errorf("engine kind %q: expected one of sglang, vllm", kind)
}

type marker struct {
	re     *regexp.Regexp
	weight int
}

var (
	sglangMarkers = []marker{
		{regexp.MustCompile(`fired up and ready to roll`), 5},
		{regexp.MustCompile(`max_total_num_tokens=`), 5},
		{regexp.MustCompile(`KV Cache is allocated\.`), 4},
		{regexp.MustCompile(`Load weight (?:begin|end)\.`), 4},
		{regexp.MustCompile(`(?m)\[(?:\d{4}-\d\d-\d\d )?\d\d:\d\d:\d\d(?: (?:DP\d+ )?(?:PP\d+ )?TP\d+(?: EP\d+)?)?\] |\[gpu(?:_id)?=\d+\] `), 2},
		{regexp.MustCompile(`ServerArgs\(`), 5},
		{regexp.MustCompile(`sglang\.launch_server|sglang`), 1},
		{regexp.MustCompile(`/sglang/srt/`), 2},
		{regexp.MustCompile(`(?i)(?:Decode|Prefill) batch[.,] #`), 3},
		{regexp.MustCompile(`Capture (?:cuda graph|target|draft)`), 3},
	}
	vllmMarkers = []marker{
		{regexp.MustCompile(`Starting vLLM API server|vLLM API server version|version \d+\.\d+\.\d+\S*\s*$`), 5},
		{regexp.MustCompile(`GPU KV cache size: |# (?:GPU|cuda) blocks: `), 5},
		{regexp.MustCompile(`Maximum concurrency for [\d,]+ tokens per request`), 5},
		{regexp.MustCompile(`Model loading took |Loading model weights took `), 4},
		{regexp.MustCompile(`\((?:VllmWorker|VllmWorkerProcess|EngineCore|Worker_|APIServer|RayWorkerWrapper)\w*[^()]*pid=\d+`), 4},
		{regexp.MustCompile(`(?:INFO|WARNING|ERROR|DEBUG) \d\d-\d\d \d\d:\d\d:\d\d (?:\[[\w.]+:\d+\]|[\w.]+:\d+\])`), 2},
		{regexp.MustCompile(`Initializing an? (?:V1 )?LLM engine|vllm serve|vllm\.entrypoints`), 3},
		{regexp.MustCompile(`SpecDecoding metrics: |Speculative metrics: Draft acceptance rate|the rest of the memory reserved for KV Cache|Graph capturing finished in|Profiling CUDA graph memory: `), 4},
		{regexp.MustCompile(`/vllm/(?:model_executor|worker|v1|engine|entrypoints|distributed)/`), 2},
		{regexp.MustCompile(`Capturing CUDA graph shapes|Capturing CUDA graphs \(|\bVLLM: `), 3},
	}
)

func score(markers []marker, log []byte) int {
	s := 0
	for _, m := range markers {
		if n := len(m.re.FindAllIndex(log, 50)); n > 0 {
			s += m.weight * min(n, 10)
		}
	}
	return s
}

// DetectEngine guesses which engine wrote a log: "sglang", "vllm", or "" when neither
// grammar's markers appear.
func DetectEngine(log []byte) string {
	clean := []byte(core.StripANSI(string(core.ToUTF8(log))))
	sg, vl := score(sglangMarkers, clean), score(vllmMarkers, clean)
	switch {
	case sg == 0 && vl == 0:
		return ""
	case sg >= vl:
		return sglang.Name
	default:
		return vllm.Name
	}
}

// detectLimit is how much of a log DetectEngine looks at in ParseLogFile.
const detectLimit = 8 << 20

// ParseLogFile parses the log at path with the grammar of kind ("sglang", "vllm", or "auto"
// to detect it). An unknown kind, an undetectable log or an unreadable file is an error that
// names the file.
func ParseLogFile(path, kind string) (*Report, error) {
	f, err := safefile.OpenNamed(path)
	if err != nil {
		return nil, fmt.Errorf("engine log: %w", err)
	}
	defer f.Close()
	return parseLog(f, path, kind)
}

// ParseEngineLog is ParseLogFile for a log the harness wrote while an engine ran: the engine can
// reach that path (/proc/self/fd/1) and put a link or a FIFO there, so the file is opened as
// safefile.Open does (no link followed, nothing but a regular file).
func ParseEngineLog(path, kind string) (*Report, error) {
	f, err := safefile.Open(path)
	if err != nil {
		return nil, fmt.Errorf("engine log: %w", err)
	}
	defer f.Close()
	return parseLog(f, path, kind)
}

func parseLog(f io.Reader, path, kind string) (*Report, error) {
	if strings.EqualFold(strings.TrimSpace(kind), "auto") || kind == "" {
		head, err := io.ReadAll(io.LimitReader(f, detectLimit))
		if err != nil {
			return nil, fmt.Errorf("engine log %s: %w", path, err)
		}
		kind = DetectEngine(head)
		if kind == "" {
			return nil, fmt.Errorf("engine log %s: cannot tell which engine wrote it (no SGLang or vLLM records found); pass the engine kind explicitly", path)
		}
		a, _ := AdapterFor(kind)
		rep, err := a.ParseLog(io.MultiReader(bytes.NewReader(head), f))
		if err != nil {
			return nil, fmt.Errorf("engine log %s: %w", path, err)
		}
		return rep, nil
	}
	a, err := AdapterFor(kind)
	if err != nil {
		return nil, fmt.Errorf("engine log %s: %w", path, err)
	}
	rep, err := a.ParseLog(f)
	if err != nil {
		return nil, fmt.Errorf("engine log %s: %w", path, err)
	}
	return rep, nil
}
