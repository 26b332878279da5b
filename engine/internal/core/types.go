// Package core holds the types shared by the engine package and its per-engine adapters
// (engine/sglang, engine/vllm), and the log-reading machinery they have in common: line
// scanning with ANSI stripping, number parsing, per-rank aggregation and error classification.
//
// Users import package engine, which re-exports these types under the same names.
package core

import "io"

// Allreduce backends as reported in Report.AllReduce.
const (
	AllReduceCustom  = "custom"
	AllReduceNCCL    = "nccl"
	AllReduceUnknown = "unknown"
)

// Error kinds used in LogError.Kind.
const (
	KindOOM             = "oom"
	KindCUDA            = "cuda"
	KindNCCL            = "nccl"
	KindCustomAllReduce = "custom_allreduce"
	KindGraphCapture    = "graph_capture"
	KindKVTooSmall      = "kv_too_small"
	KindTraceback       = "traceback"
	KindOther           = "other"
)

// Report is the EngineReport: what the engine actually did, read from its log. Pointer fields
// are nil (JSON null) when the log does not say. Memory values are GiB (the engines print "GB"
// or "GiB" for the same binary unit) and, with several ranks, the minimum over ranks.
type Report struct {
	// Engine is the engine kind whose grammar read the log: "sglang" or "vllm".
	Engine string `json:"engine"`
	// Ready is true when the log shows the engine's ready signal.
	Ready bool `json:"ready"`
	// AllReduce is the effective tensor-parallel allreduce backend: "custom", "nccl" or "unknown".
	AllReduce string `json:"allreduce"`
	// CustomAllReduceDisabledReason is why custom allreduce was not used, when the log says.
	CustomAllReduceDisabledReason *string `json:"custom_allreduce_disabled_reason"`
	// WeightsGiB is the memory taken by the model weights.
	WeightsGiB *float64 `json:"weights_gib"`
	// KVCacheTokens is the KV cache capacity in tokens.
	KVCacheTokens *int64 `json:"kv_cache_tokens"`
	// KVCacheGiB is the memory of the KV cache.
	KVCacheGiB *float64 `json:"kv_cache_gib"`
	// AvailableGPUMemGiB is the free GPU memory left after start-up (SGLang's available_gpu_mem).
	AvailableGPUMemGiB *float64 `json:"available_gpu_mem_gib"`
	// CUDAGraphSeconds is the time spent capturing CUDA graphs (all phases, slowest rank).
	CUDAGraphSeconds *float64 `json:"cuda_graph_seconds"`
	// CUDAGraphGiB is the memory taken by CUDA graphs (all phases).
	CUDAGraphGiB *float64 `json:"cuda_graph_gib"`
	// MaxRunningRequests is the scheduler's cap on concurrently running requests.
	MaxRunningRequests *int64 `json:"max_running_requests"`
	// ContextLen is the maximum context length (SGLang context_len, vLLM max_model_len).
	ContextLen *int64 `json:"context_len"`
	// MaxConcurrency is vLLM's "Maximum concurrency for N tokens per request: X x".
	MaxConcurrency *float64 `json:"max_concurrency"`
	// SpecAcceptLength is the mean speculative-decoding accept length (tokens per step).
	SpecAcceptLength *float64 `json:"spec_accept_length"`
	// Errors are the classified error lines, in log order. Never nil.
	Errors []LogError `json:"errors"`
}

// LogError is one classified error found in an engine log.
type LogError struct {
	// Kind is one of oom, cuda, nccl, custom_allreduce, graph_capture, kv_too_small,
	// traceback, other.
	Kind string `json:"kind"`
	// Line is the 1-based line number in the log.
	Line int `json:"line"`
	// Text is the line (ANSI codes removed, trimmed, at most 400 bytes).
	Text string `json:"text"`
}

// Speculative describes speculative decoding settings for a launch.
type Speculative struct {
	// Algorithm is reckon's spelling of the algorithm: EAGLE, EAGLE3, NEXTN, MTP, STANDALONE,
	// NGRAM or MEDUSA (case-insensitive). Each adapter maps it to its engine's name and rejects
	// the ones its engine lacks (see Adapter.SpeculativeAlgorithms).
	Algorithm string
	// DraftModelPath is the draft model (path or hub id); empty when the algorithm needs none.
	DraftModelPath string
	// NumSteps is the number of draft steps (depth).
	NumSteps int
	// EagleTopK is the branching factor of the EAGLE draft tree.
	EagleTopK int
	// NumDraftTokens is the number of draft tokens verified per step.
	NumDraftTokens int
}

// LaunchConfig is one way of launching an engine.
type LaunchConfig struct {
	// Command overrides the adapter's default command (e.g. ["bin/refengine"]); the adapter's
	// flags are appended to it. Empty means the adapter default.
	Command []string
	// Model is the model path or hub id.
	Model string
	// TPSize is the tensor-parallel size; 0 leaves the engine default.
	TPSize int
	// Host and Port are where the engine listens. Launch fills Port when it is 0.
	Host string
	Port int
	// DisableCustomAllReduce adds the engine's flag that turns custom allreduce off.
	DisableCustomAllReduce bool
	// CUDAGraphMaxBS is the largest batch size captured in a CUDA graph; 0 = engine default.
	CUDAGraphMaxBS int
	// MemFractionStatic is the GPU memory fraction for weights+KV (vLLM: gpu-memory-utilization);
	// 0 = engine default.
	MemFractionStatic float64
	// Speculative enables speculative decoding when non-nil.
	Speculative *Speculative
	// ExtraArgs are appended verbatim after the adapter's flags.
	ExtraArgs []string
	// Env is added to the engine's environment.
	Env map[string]string
	// EngineVersion is the engine release the flags are built for, e.g. "0.12.0",
	// "0.5.3.post1" or "0.0.0.dev1+g5dd2c243e" (a main-branch build); "" assumes the newest.
	// engine.DetectVersion finds it.
	EngineVersion string
}

// Adapter knows one engine kind's command line, readiness and log grammar.
type Adapter interface {
	// Name is the engine kind: "sglang" or "vllm".
	Name() string
	// Command returns the argv for a launch: the command (override or default) plus flags.
	Command(c LaunchConfig) ([]string, error)
	// HealthPath is the HTTP path that answers 200 when the engine is healthy, e.g. "/health".
	HealthPath() string
	// ReadyLine reports whether one log line is the engine's ready signal.
	ReadyLine(line string) bool
	// ParseLog reads a whole log into a Report.
	ParseLog(r io.Reader) (*Report, error)
	// VersionCommand returns the argv that prints the engine's version (last version-looking
	// token of its output) for a launch configured as c.
	VersionCommand(c LaunchConfig) []string
	// SpeculativeAlgorithms lists reckon's spellings of the speculative algorithms this engine
	// accepts (upper case, e.g. EAGLE3); Command rejects the others.
	SpeculativeAlgorithms() []string
}
