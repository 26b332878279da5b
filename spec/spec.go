// Package spec is the gate spec: a YAML file naming the engine to launch, the configurations to
// launch it in, the workloads to drive each one with, and the checks that decide the verdict.
//
// Load and Parse validate the whole file and report every problem at once, each as
// "file:line:col: field: what was expected" (see ErrorList). docs/spec.md is the format's
// reference. The types here are plain data: the suites read them and call the engine, workload
// and gate packages; this package starts nothing and judges nothing.
package spec

import (
	"encoding/json"
	"time"
)

// Engine kinds.
const (
	EngineSGLang = "sglang"
	EngineVLLM   = "vllm"
)

// Effective allreduce backends that a config can expect (the names EngineReport uses).
const (
	AllReduceCustom = "custom"
	AllReduceNCCL   = "nccl"
	// AllReduceFused is FlashInfer allreduce fusion, which SGLang turns on by itself for some
	// MoE models (wire/enginefacts).
	AllReduceFused = "fused"
)

// Spec is one gate spec file.
type Spec struct {
	// Name names the spec in reports and baseline files (baselines/<testbed>/<name>.json).
	Name string `json:"name"`
	// Tags become Ginkgo labels on every spec of the suite.
	Tags []string `json:"tags,omitempty"`
	// Engine is how to launch the engine; every config extends it.
	Engine Engine `json:"engine"`
	// Configs are the ways of launching the engine, in file order. Names are unique.
	Configs []*Config `json:"configs"`
	// Workloads are the load patterns, in file order. Names are unique.
	Workloads []*Workload `json:"workloads,omitempty"`
	// Numerics configures the numerics probe (greedy outputs with logprobs) that equivalence
	// checks compare. Nil when the spec has no numerics section.
	Numerics *Numerics `json:"numerics,omitempty"`
	// Checks are the verdicts, in file order, followed by the expect checks implied by
	// configs[].expect. Names are unique.
	Checks []*Check `json:"checks"`
	// DerivedTwins are the configs reckon added as twins of equivalence checks that name none
	// (also in Configs, with DerivedFrom set).
	DerivedTwins []DerivedTwin `json:"derived_twins,omitempty"`
	// File is the path the spec was read from (or the name given to Parse).
	File string `json:"file"`
}

// Engine is the base launch settings shared by every config.
type Engine struct {
	// Kind is the engine's adapter: EngineSGLang or EngineVLLM. The reference engine speaks the
	// SGLang dialect and is launched through the sglang adapter with a Command override.
	Kind string `json:"kind"`
	// Command replaces the adapter's default command (python3 -m sglang.launch_server, vllm
	// serve); empty means the default.
	Command []string `json:"command,omitempty"`
	// Model is the model path or hub id passed to the engine.
	Model string `json:"model"`
	// TPSize is the tensor-parallel size (default 1).
	TPSize int `json:"tp_size"`
	// MemFractionStatic is SGLang's --mem-fraction-static (vLLM: --gpu-memory-utilization);
	// nil leaves the engine's default.
	MemFractionStatic *float64 `json:"mem_fraction_static,omitempty"`
	// CudaGraphMaxBS is the largest CUDA-graph batch size; nil leaves the engine's default.
	CudaGraphMaxBS *int `json:"cuda_graph_max_bs,omitempty"`
	// DisableCustomAllReduce passes --disable-custom-all-reduce to every config (configs may
	// override it).
	DisableCustomAllReduce bool `json:"disable_custom_all_reduce,omitempty"`
	// Args are extra command-line arguments given to every config, before the config's own.
	Args []string `json:"args,omitempty"`
	// Env is added to the environment of every config; a config's env wins.
	Env map[string]string `json:"env,omitempty"`
	// ReadyTimeout bounds the wait for the engine to become ready (default 10m).
	ReadyTimeout Duration `json:"ready_timeout"`
	// StopGrace is the time between SIGTERM and SIGKILL when stopping (default 10s).
	StopGrace Duration `json:"stop_grace"`
	// Version is the engine release the spec is written for (e.g. "0.12.0"): the adapters build
	// version-dependent flags for it. Empty: reckon asks the engine's command for its version
	// before the first launch (`vllm --version`, sglang.__version__), else assumes the newest.
	// Either way the version the running engine reports is compared with it.
	Version string `json:"version,omitempty"`
}

// Config is one way of launching the engine. Unset fields inherit the engine's.
type Config struct {
	// Name is unique within the spec; it names the log file, the result files and report rows.
	Name string `json:"name"`
	// Tags are extra Ginkgo labels for this config's specs.
	Tags []string `json:"tags,omitempty"`
	// Command replaces engine.command for this config (another build: a second venv, container
	// image or binary, e.g. main's and the PR's engine side by side); empty inherits it.
	Command []string `json:"command,omitempty"`
	// Model overrides engine.model; empty inherits it.
	Model string `json:"model,omitempty"`
	// TPSize overrides engine.tp_size.
	TPSize *int `json:"tp_size,omitempty"`
	// MemFractionStatic overrides engine.mem_fraction_static.
	MemFractionStatic *float64 `json:"mem_fraction_static,omitempty"`
	// CudaGraphMaxBS overrides engine.cuda_graph_max_bs.
	CudaGraphMaxBS *int `json:"cuda_graph_max_bs,omitempty"`
	// DisableCustomAllReduce overrides engine.disable_custom_all_reduce.
	DisableCustomAllReduce *bool `json:"disable_custom_all_reduce,omitempty"`
	// Speculative enables speculative decoding for this config.
	Speculative *Speculative `json:"speculative,omitempty"`
	// Args are appended after engine.args.
	Args []string `json:"args,omitempty"`
	// Env is merged over engine.env (the config wins).
	Env map[string]string `json:"env,omitempty"`
	// Expect is what the engine must have actually done in this config (read from its logs).
	Expect Expect `json:"expect,omitzero"`
	// Line is the config's line in the spec file (for messages).
	Line int `json:"line"`
	// DerivedFrom is set on a config reckon added itself: the twin of an equivalence check that
	// names no twin or oracle (DerivedFrom is its base). See Check.TwinDerived.
	DerivedFrom string `json:"derived_from,omitempty"`
}

// Expect is what a config's engine report must show. Empty fields expect nothing.
type Expect struct {
	// AllReduce is the effective allreduce backend: AllReduceCustom or AllReduceNCCL.
	AllReduce string `json:"allreduce,omitempty"`
}

// IsZero reports whether nothing is expected.
func (e Expect) IsZero() bool { return e.AllReduce == "" }

// Speculative is the speculative-decoding setup of a config.
type Speculative struct {
	// Algorithm: EAGLE, EAGLE3, NEXTN, MTP, STANDALONE, NGRAM or MEDUSA (upper case).
	Algorithm string `json:"algorithm"`
	// DraftModel is the draft model path or hub id (optional for NEXTN/MTP/NGRAM).
	DraftModel string `json:"draft_model,omitempty"`
	// NumSteps is SGLang's --speculative-num-steps (0: engine default).
	NumSteps int `json:"num_steps,omitempty"`
	// EagleTopK is SGLang's --speculative-eagle-topk (0: engine default).
	EagleTopK int `json:"eagle_topk,omitempty"`
	// NumDraftTokens is SGLang's --speculative-num-draft-tokens, vLLM's num_speculative_tokens
	// (0: engine default).
	NumDraftTokens int `json:"num_draft_tokens,omitempty"`
}

// Workload is one load pattern. Exactly one of Concurrency (closed loop) and RequestRate (open
// loop, Poisson arrivals shaped by Burstiness) is set.
type Workload struct {
	Name string   `json:"name"`
	Tags []string `json:"tags,omitempty"`
	// Concurrency is the number of requests in flight (closed loop); 0 when RequestRate is used.
	Concurrency int `json:"concurrency,omitempty"`
	// RequestRate is the mean arrival rate in requests/s (open loop); 0 when Concurrency is used.
	RequestRate float64 `json:"request_rate,omitempty"`
	// Burstiness is the gamma shape of inter-arrival times (1 = Poisson); open loop only.
	Burstiness float64 `json:"burstiness,omitempty"`
	// NumPrompts is the number of measured requests per trial.
	NumPrompts int `json:"num_prompts"`
	// InputLen and OutputLen are the synthetic prompt and output lengths in tokens (with a
	// dataset: the output cap, and the input length is the dataset's).
	InputLen  int `json:"input_len"`
	OutputLen int `json:"output_len"`
	// Dataset is an optional JSONL or ShareGPT file; empty means synthetic prompts.
	Dataset string `json:"dataset,omitempty"`
	// Warmup is the number of unmeasured requests sent before each trial.
	Warmup int `json:"warmup"`
	// Trials is the number of trials per config (statistical checks need several; default 5).
	Trials int `json:"trials"`
	// MaxTrials bounds the trials the gate may add while a verdict is inconclusive
	// (sequential testing); equal to Trials when not set.
	MaxTrials int `json:"max_trials"`
	// Launches is how many times each config that runs this workload is launched (default 1).
	// Above 1 the configs are relaunched in a balanced interleaved order (A B B A A B ...),
	// Trials trials per launch, and statistical checks treat launches as the unit.
	// 0 means the default, 1 (see LaunchCount).
	Launches int `json:"launches,omitempty"`
	// Seed makes prompt sampling and arrivals reproducible.
	Seed int64 `json:"seed"`
	// RequestTimeout bounds one request (default 5m).
	RequestTimeout Duration `json:"request_timeout"`
	// Goodput holds the workload's SLOs in milliseconds by "ttft", "tpot" and "e2el" (spec keys
	// ttft_ms, tpot_ms, e2el_ms): request_goodput counts the requests meeting every one. Nil
	// without a goodput section (request_goodput is then never measured).
	Goodput map[string]float64 `json:"goodput,omitempty"`
	// Temperature and TopP are the sampling settings of every request (nil Temperature: 0, greedy;
	// nil TopP: the engine's default).
	Temperature *float64 `json:"temperature,omitempty"`
	TopP        *float64 `json:"top_p,omitempty"`
	// IgnoreEOS asks for exactly the output length (default true; ignore_eos: false lets a
	// request stop at end-of-sequence).
	IgnoreEOS bool `json:"ignore_eos"`
	// Endpoint is the API the requests go to: EndpointCompletions (default) or EndpointChat.
	Endpoint string `json:"endpoint,omitempty"`
	// Configs are configs that run this workload's trials whether or not a statistical check
	// names them, so that their trials are in the results and in a recorded baseline.
	Configs []string `json:"configs,omitempty"`
	// Line is the workload's line in the spec file.
	Line int `json:"line"`
}

// Workload endpoints (Workload.Endpoint).
const (
	EndpointCompletions = "completions"
	EndpointChat        = "chat"
)

// LaunchCount is the number of launches of each config that runs the workload (Launches, at
// least 1).
func (w *Workload) LaunchCount() int { return max(1, w.Launches) }

// Numerics configures the numerics probe run against every config that an equivalence check
// names.
type Numerics struct {
	// Prompts is a JSONL file of prompts ({"id": ..., "prompt": ...} per line).
	Prompts string `json:"prompts"`
	// MaxTokens is the greedy continuation length (default 32).
	MaxTokens int `json:"max_tokens"`
	// TopLogprobs is the number of alternatives recorded per position (default 5).
	TopLogprobs int `json:"top_logprobs"`
	// BatchSize is how many teacher-forced sequences the under-load pass sends at once (default
	// 8; 0 turns the pass off).
	BatchSize int `json:"batch_size"`
}

// Duration is a time.Duration written in YAML and JSON as a string such as "30s" or "1m30s".
type Duration time.Duration

// D returns the time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// String formats the duration as time.Duration does.
func (d Duration) String() string { return time.Duration(d).String() }

// MarshalJSON writes the duration as a string ("30s").
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(d.String()) }

// UnmarshalJSON reads a string written by MarshalJSON.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}
