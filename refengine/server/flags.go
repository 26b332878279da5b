package server

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/reckon-ci/reckon/refengine/device"
	"github.com/reckon-ci/reckon/wire/enginefacts"
)

// Options are the engine's command-line settings. Names follow SGLang's server arguments where
// SGLang has them; the reference engine's own settings (modelled device, faults) are extra.
type Options struct {
	// Dialect is the engine the process speaks: DialectSGLang (flags, logs, HTTP API of SGLang)
	// or DialectVLLM (vLLM's). The engine underneath is the same.
	Dialect Dialect
	// Persona is the release of the dialect's engine that the process imitates (--engine-version;
	// the newest by default).
	Persona *Persona
	// Warnings are lines the command line itself earned (a deprecated flag), printed at start-up
	// as the engine's argument parsing prints them.
	Warnings          []string
	ModelPath         string
	ServedModelName   string
	TPSize            int
	Host              string
	Port              int
	DType             string
	MemFractionStatic float64
	DeviceMemory      int64
	MaxRunning        int
	ChunkedPrefill    int
	MaxPrefillTokens  int
	MaxTotalTokens    int
	ContextLength     int
	PageSize          int
	CUDAGraphMaxBS    int
	DisableCUDAGraph  bool
	DisableCustomAR   bool
	// EnableFusion and EnforceDisableFusion are SGLang's --enable-flashinfer-allreduce-fusion
	// and --enforce-disable-flashinfer-allreduce-fusion (personas with FusionAutoEnable).
	EnableFusion, EnforceDisableFusion bool
	Deterministic                      bool
	RandomSeed                         int64
	DecodeLogInterval                  int
	Topology                           string
	// LogLevel is SGLang's --log-level (also uvicorn's there); vLLM's engine lines follow
	// VLLM_LOGGING_LEVEL instead.
	LogLevel string
	// UvicornLogLevel is vLLM's --uvicorn-log-level.
	UvicornLogLevel string
	// ProfilerDir is where the torch profiler writes traces, from vLLM's --profiler-config
	// (0.22); "" when not set there (the environment may still set it).
	ProfilerDir string
	// Interconnect overrides of the topology's default modelled constants (0 = default).
	LinkGBps, BusGBps, LatencyUs, TransferUs float64

	SpecAlgorithm      string
	SpecDraftModelPath string
	SpecNumSteps       int
	SpecEagleTopK      int
	SpecNumDraftTokens int

	// The custom-allreduce faults (tp.Options has their meaning). FaultDropRank and FaultStale
	// say whether those faults are on; their thresholds are in bytes.
	FaultAllReduceError float64
	FaultAllReduceScale float64
	FaultDropRank       bool
	FaultDropRankAbove  int64
	FaultStale          bool
	FaultStaleAbove     int64
	FaultMinBatch       int
	// FaultAccumulate is the custom kernel's accumulator: "" (float32, correct) or "bfloat16"
	// (the bf16 accumulation fault). FaultRankOrder: every rank sums in its own order.
	FaultAccumulate string
	FaultRankOrder  bool
	// AllReduceOracle, when not "", makes the custom path the reference kernel summing in that
	// fixed rank order ("forward" or "reverse"): an oracle config for the equivalence check.
	AllReduceOracle   string
	FaultReserveMB    float64
	FaultSlowdown     float64
	FaultCrashAfter   int
	FaultHangStartup  bool
	FaultLeakMBPerReq float64
	// FaultFailEvery N > 0: every N-th generation request fails with HTTP 500; only in launch
	// index FaultFailLaunch when that is >= 0 (every launch when -1).
	FaultFailEvery  int
	FaultFailLaunch int64

	// Clock is "wall" (each step takes its real CPU compute plus the modelled communication) or
	// "modelled" (the device clock: each step lasts the longer of its real compute and the
	// modelled time of the modelled model on the modelled GPU; package device).
	Clock string
	// ModelledGPU and ModelledModel name the device clock's GPU and model (device tables).
	ModelledGPU, ModelledModel string
	// ModelledMemory computes the memory plan in the modelled model's bytes on the modelled GPU's
	// memory (the KV pool's token count follows; the real model still computes).
	ModelledMemory bool
	// DeviceMemoryDefault: --device-memory was not given (192MiB, or the modelled GPU's memory
	// with --modelled-memory).
	DeviceMemoryDefault bool
	// The device clock's seeded noise (device.Noise); ClockLaunch < 0: not given.
	ClockStepCV, ClockLaunchCV, ClockDriftPerMinute float64
	ClockStepPeriod                                 time.Duration
	ClockSeed                                       uint64
	ClockLaunch                                     int64
	ClockLaunchCounter                              string
	// ClockCatchUp bounds the CPU overrun that later steps repay from their slack (device.Pacer).
	ClockCatchUp time.Duration

	// WeightSeed overrides the model file's seed of the generated weights (0 = the file's).
	WeightSeed uint64

	SkipWarmup bool

	// vLLM dialect only (see ParseVLLMFlags).
	// MaxLogprobs caps logprobs and prompt_logprobs per request (--max-logprobs, default 20).
	MaxLogprobs int
	// DisableLogStats turns off the periodic stats lines (--disable-log-stats).
	DisableLogStats bool
	// TokensAsTokenIDs names every logprob token "token_id:N" (--return-tokens-as-token-ids).
	TokensAsTokenIDs bool
	// NonDefaultArgs are the vLLM arguments given on the command line, in vLLM's
	// "non-default args" rendering (name, Python literal), in the order vLLM prints them.
	NonDefaultArgs [][2]string
}

// sglangSpecAlgorithms are the --speculative-algorithm names SGLang accepts (server_args.py
// choices; SpeculativeAlgorithm in spec_info.py). The reference engine drafts every one of them
// with the draft model it derives from the target.
var sglangSpecAlgorithms = []string{"EAGLE", "EAGLE3", "NEXTN", "STANDALONE", "NGRAM"}

// graphFlag is the name of the flag that sets the largest captured decode batch in the
// persona's release.
func (o *Options) graphFlag() string {
	switch {
	case o.Dialect == DialectVLLM && o.Persona != nil && !o.Persona.MaxCaptureSizeFlag:
		return "--cuda-graph-sizes"
	case o.Dialect == DialectVLLM:
		return "--max-cudagraph-capture-size"
	case o.Persona != nil && o.Persona.GraphFlagDecode:
		return "--cuda-graph-max-bs-decode"
	}
	return "--cuda-graph-max-bs"
}

// errUsage marks a command-line error (exit code 2).
var errUsage = errors.New("usage")

// ParseFlags parses the engine's command line in the SGLang dialect (the default). Errors name
// the flag and what was expected. ParseVLLMFlags reads vLLM's `vllm serve` command line.
func ParseFlags(args []string, stderr io.Writer) (*Options, error) {
	persona, args, err := personaOf(DialectSGLang, args)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errUsage, err)
	}
	o := &Options{Dialect: DialectSGLang, Persona: persona}
	fs := flag.NewFlagSet("refengine", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.ModelPath, "model-path", "fixtures/models/tiny.json", "model config JSON (shape and seed of the generated weights)")
	fs.StringVar(&o.ServedModelName, "served-model-name", "", "model name served by /v1/models (default: the model path)")
	fs.IntVar(&o.TPSize, "tp-size", 1, "tensor parallel ranks: 1, 2, 4 or 8")
	fs.IntVar(&o.TPSize, "tp", 1, "alias of --tp-size")
	fs.StringVar(&o.Host, "host", "127.0.0.1", "listen address")
	fs.IntVar(&o.Port, "port", 30000, "listen port (0 = any free port)")
	fs.StringVar(&o.DType, "dtype", "auto", "auto|float32|bfloat16 (bfloat16 rounds activations at allreduce boundaries)")
	fs.Float64Var(&o.MemFractionStatic, "mem-fraction-static", 0.8, "fraction of device memory for weights, KV cache and reserves")
	fs.IntVar(&o.MaxRunning, "max-running-requests", 128, "maximum requests in the running batch")
	fs.IntVar(&o.ChunkedPrefill, "chunked-prefill-size", 4096, "maximum prompt tokens per prefill step")
	fs.IntVar(&o.MaxPrefillTokens, "max-prefill-tokens", 16384, "largest prefill (sizes a forced custom-allreduce workspace)")
	fs.IntVar(&o.MaxTotalTokens, "max-total-tokens", 0, "cap on the KV pool size in tokens (0 = from the memory plan)")
	fs.IntVar(&o.ContextLength, "context-length", 0, "context length (0 = the model's max_position_embeddings)")
	fs.IntVar(&o.PageSize, "page-size", 16, "KV cache page size in tokens")
	legacyGraphBS := 0
	if persona.GraphFlagDecode {
		fs.IntVar(&o.CUDAGraphMaxBS, "cuda-graph-max-bs-decode", 64, "largest decode batch with a (modelled) graph; sizes the graph reserve")
		fs.IntVar(&legacyGraphBS, "cuda-graph-max-bs", 0, "deprecated alias of --cuda-graph-max-bs-decode")
	} else {
		fs.IntVar(&o.CUDAGraphMaxBS, "cuda-graph-max-bs", 64, "largest decode batch with a (modelled) graph; sizes the graph reserve")
	}
	fs.BoolVar(&o.DisableCUDAGraph, "disable-cuda-graph", false, "no graph reserve")
	fs.BoolVar(&o.SkipWarmup, "skip-server-warmup", false, "declare ready without the warmup request")
	fs.BoolVar(&o.DisableCustomAR, "disable-custom-all-reduce", false, "disable the custom (one-shot) allreduce and fall back to NCCL (ring; tree with NCCL_ALGO=Tree)")
	if persona.FusionAutoEnable {
		fs.BoolVar(&o.EnableFusion, "enable-flashinfer-allreduce-fusion", false, "run the allreduces as FlashInfer allreduce fusion (one-shot); auto-enabled for "+strings.Join(enginefacts.SGLangFusionAutoEnable.Values, ", ")+" on an SM90/SM100 modelled GPU")
		fs.BoolVar(&o.EnforceDisableFusion, "enforce-disable-flashinfer-allreduce-fusion", false, "never run FlashInfer allreduce fusion, whatever the auto-enable says")
	}
	fs.BoolVar(&o.Deterministic, "enable-deterministic-inference", false, "batch-invariant allreduce (each token row reduced on its own)")
	fs.Int64Var(&o.RandomSeed, "random-seed", 0, "seed for sampling (requests without a seed)")
	fs.IntVar(&o.DecodeLogInterval, "decode-log-interval", 40, "decode steps between Decode batch log lines")
	fs.StringVar(&o.LogLevel, "log-level", "info", "lowest level of the lines printed: debug, info, warning, error or critical (warning and above drop every INFO line, the ready line included)")
	fs.StringVar(&o.SpecAlgorithm, "speculative-algorithm", "", "EAGLE, EAGLE3, NEXTN, STANDALONE or NGRAM (the draft model is always derived from the target)")
	fs.StringVar(&o.SpecDraftModelPath, "speculative-draft-model-path", "", "accepted; the draft is always derived from the target")
	fs.IntVar(&o.SpecNumSteps, "speculative-num-steps", 3, "draft steps per round")
	fs.IntVar(&o.SpecEagleTopK, "speculative-eagle-topk", 1, "draft branching (only 1 is supported)")
	fs.IntVar(&o.SpecNumDraftTokens, "speculative-num-draft-tokens", 4, "tokens verified per round (num-steps+1 with topk 1)")
	ef := registerEngineFlags(fs, o)
	registerSGLangIgnored(fs)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, err
		}
		return nil, fmt.Errorf("%w: %w", errUsage, err)
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("%w: unexpected argument %q (all settings are --flags)", errUsage, fs.Arg(0))
	}
	if persona.GraphFlagDecode {
		set := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
		if set["cuda-graph-max-bs"] {
			// sglang server_args.py: the old name still works, with a warning.
			o.Warnings = append(o.Warnings, "'--cuda-graph-max-bs is deprecated, use --cuda-graph-max-bs-decode'")
			if !set["cuda-graph-max-bs-decode"] {
				o.CUDAGraphMaxBS = legacyGraphBS
			}
		}
	}
	if _, err := ParseLevel(o.LogLevel); err != nil {
		return nil, fmt.Errorf("%w: --log-level: %w", errUsage, err)
	}
	if err := ef.finish(o); err != nil {
		return nil, fmt.Errorf("%w: %w", errUsage, err)
	}
	if err := o.validate(); err != nil {
		return nil, fmt.Errorf("%w: %w", errUsage, err)
	}
	return o, nil
}

// registerSGLangIgnored adds the SGLang flags that are accepted and ignored (they do not change
// what the reference engine does).
func registerSGLangIgnored(fs *flag.FlagSet) {
	for _, name := range []string{"tokenizer-path", "attention-backend", "sampling-defaults", "kv-cache-dtype", "load-format", "quantization",
		"schedule-policy", "api-key", "admin-api-key", "watchdog-timeout", "stream-interval", "schedule-conservativeness",
		"cuda-graph-bs", "sampling-backend", "grammar-backend", "reasoning-parser", "tool-call-parser", "chat-template", "revision"} {
		fs.String(name, "", "accepted for compatibility; ignored")
	}
	for _, name := range []string{"trust-remote-code", "enable-metrics", "disable-radix-cache", "enable-p2p-check",
		"enable-torch-compile", "disable-overlap-schedule", "enable-mixed-chunk", "log-requests", "enable-mscclpp", "enable-symm-mem",
		"enable-nccl-nvls", "enable-cache-report", "show-time-cost"} {
		fs.Bool(name, false, "accepted for compatibility; ignored")
	}
}

// engineFlags holds the raw values of the reference engine's own flags (modelled hardware,
// weights, faults) that need parsing after the flag set has run. Both dialects register them.
type engineFlags struct {
	devMem, dropAbove, staleAbove *string
}

// registerEngineFlags adds the flags that belong to the reference engine itself, whatever its
// dialect: the modelled device and interconnect, the weight seed and the fault injections.
func registerEngineFlags(fs *flag.FlagSet, o *Options) engineFlags {
	var ef engineFlags
	ef.devMem = fs.String("device-memory", "", "modelled device memory per rank (e.g. 192MiB, 2GiB; default 192MiB, or the modelled GPU's with --modelled-memory)")
	fs.StringVar(&o.Clock, "clock", "wall", "step timing: wall (real CPU compute plus modelled communication) or modelled (the device clock: each step lasts max(real compute, modelled time of --modelled-model on --modelled-gpu))")
	fs.StringVar(&o.ModelledGPU, "modelled-gpu", "h100", "device clock: the modelled GPU (h100, h200, rtx-pro-6000)")
	fs.StringVar(&o.ModelledModel, "modelled-model", "llama-3.1-70b", "device clock: the modelled model whose size sets step times (llama-3.1-70b, kimi-k2.5-int4)")
	fs.BoolVar(&o.ModelledMemory, "modelled-memory", false, "memory plan in the modelled model's bytes on the modelled GPU (needs --clock modelled)")
	fs.DurationVar(&o.ClockCatchUp, "clock-catch-up", time.Second, "device clock: steps whose CPU compute overran their modelled time are made up by the following steps' slack, up to this much (0 = every step lasts exactly max(real, modelled))")
	fs.Float64Var(&o.ClockStepCV, "clock-step-cv", 0, "device clock noise: within-launch CV of a log-normal factor on each step's modelled time (0 = off)")
	fs.DurationVar(&o.ClockStepPeriod, "clock-step-period", 0, "device clock noise: hold each within-launch draw for this much modelled time (0 = a draw per step)")
	fs.Float64Var(&o.ClockLaunchCV, "clock-launch-cv", 0, "device clock noise: between-launch CV, one log-normal factor per launch from (--clock-seed, launch index)")
	fs.Float64Var(&o.ClockDriftPerMinute, "clock-drift-per-minute", 0, "device clock noise: modelled step times grow by this fraction per minute of modelled busy time")
	fs.Uint64Var(&o.ClockSeed, "clock-seed", 0, "device clock noise: seed of the noise draws")
	fs.Int64Var(&o.ClockLaunch, "clock-launch", -1, "device clock noise: this launch's index (with --clock-seed it fixes the between-launch factor)")
	fs.StringVar(&o.ClockLaunchCounter, "clock-launch-counter", "", "device clock noise: file holding the next launch index; each start takes it and writes it + 1 (used when --clock-launch is not given)")
	fs.StringVar(&o.Topology, "topology", "nvlink", "modelled interconnect: nvlink or pcie")
	fs.Float64Var(&o.LinkGBps, "interconnect-link-gbps", 0, "override the modelled link bandwidth, GB/s (0 = topology default)")
	fs.Float64Var(&o.BusGBps, "interconnect-bus-gbps", 0, "override the modelled shared PCIe bus bandwidth, GB/s (0 = default)")
	fs.Float64Var(&o.LatencyUs, "interconnect-latency-us", 0, "override the modelled per-step latency, us (0 = default)")
	fs.Float64Var(&o.TransferUs, "interconnect-transfer-us", 0, "override the modelled per-transfer PCIe overhead, us (0 = default)")
	fs.Uint64Var(&o.WeightSeed, "weight-seed", 0, "generate the weights from seed `N` instead of the model file's seed (0 = the file's); the draft model derives from them")
	fs.Float64Var(&o.FaultAllReduceError, "fault-allreduce-error", 0, "fault (custom allreduce): every result element gets a relative error of exactly `REL` with a pseudo-random sign (0 = off)")
	fs.Float64Var(&o.FaultAllReduceScale, "fault-allreduce-scale", 0, "fault (custom allreduce): results are multiplied by 1+`EPS`, a wrong scale factor (EPS > -1; 0 = off)")
	ef.dropAbove = fs.String("fault-allreduce-drop-rank-above", "", "fault (custom allreduce): messages of more than `SIZE` bytes (e.g. 64KiB; 0 = all) miss the last rank's contribution, on every rank (default off)")
	ef.staleAbove = fs.String("fault-allreduce-stale-above", "", "fault (custom allreduce): messages of more than `SIZE` bytes (e.g. 64KiB; 0 = all) return the previous call's result of the same size; the first call of a size is correct (default off)")
	fs.IntVar(&o.FaultMinBatch, "fault-allreduce-min-batch", 0, "fault (custom allreduce): the other --fault-allreduce-* faults apply only to allreduces of at least `N` tokens (0 = any size)")
	fs.StringVar(&o.FaultAccumulate, "fault-allreduce-accumulate", "", "fault (custom allreduce): `DTYPE` of the kernel's accumulator: bfloat16 adds the ranks' bf16 inputs in bf16 in rank order, rounding after every addition (needs --dtype bfloat16); float32 or empty = the correct kernel")
	fs.BoolVar(&o.FaultRankOrder, "fault-allreduce-rank-order", false, "fault (custom allreduce): every rank r sums the inputs in its own order r, r+1, ..., r-1 instead of 0..n-1, so the ranks' results can differ in the last bits")
	fs.StringVar(&o.AllReduceOracle, "allreduce-oracle", "", "oracle config: the custom path runs the reference kernel, float32 accumulation in a fixed rank `ORDER` (forward = 0..n-1, reverse = n-1..0) with one rounding; needs the custom allreduce in effect and no --fault-allreduce-* flag")
	fs.Float64Var(&o.FaultReserveMB, "fault-reserve-mb", 0, "fault: extra reserved memory per rank in MiB (KV shrinks)")
	fs.Float64Var(&o.FaultSlowdown, "fault-slowdown", 1, "fault: each step takes this many times longer")
	fs.IntVar(&o.FaultCrashAfter, "fault-crash-after", 0, "fault: crash (exit 1, traceback in the log) after this many requests")
	fs.BoolVar(&o.FaultHangStartup, "fault-hang-startup", false, "fault: never become ready")
	fs.Float64Var(&o.FaultLeakMBPerReq, "fault-leak-mb-per-request", 0, "fault: each finished request leaks this many MiB of KV pages")
	fs.IntVar(&o.FaultFailEvery, "fault-fail-every", 0, "fault: every `N`-th generation request fails with HTTP 500 and the engine's error body, as an internal error does (0 = off)")
	fs.Int64Var(&o.FaultFailLaunch, "fault-fail-launch", -1, "fault: --fault-fail-every applies only in launch index `L` (0 = the first; from --clock-launch or --clock-launch-counter); -1 = every launch")
	return ef
}

// allReduceFaultFlags names the --fault-allreduce-* flags that are on.
func (o *Options) allReduceFaultFlags() []string {
	var on []string
	for _, f := range []struct {
		name string
		set  bool
	}{{"--fault-allreduce-error", o.FaultAllReduceError != 0}, {"--fault-allreduce-scale", o.FaultAllReduceScale != 0},
		{"--fault-allreduce-drop-rank-above", o.FaultDropRank}, {"--fault-allreduce-stale-above", o.FaultStale},
		{"--fault-allreduce-min-batch", o.FaultMinBatch != 0}, {"--fault-allreduce-accumulate", o.FaultAccumulate == "bfloat16"},
		{"--fault-allreduce-rank-order", o.FaultRankOrder}} {
		if f.set {
			on = append(on, f.name)
		}
	}
	return on
}

// finish parses the engine flags' raw values into o.
func (ef engineFlags) finish(o *Options) error {
	dm := *ef.devMem
	if strings.TrimSpace(dm) == "" {
		dm, o.DeviceMemoryDefault = "192MiB", true
	}
	b, err := ParseBytes(dm)
	if err != nil {
		return fmt.Errorf("--device-memory: %w", err)
	}
	o.DeviceMemory = b
	for _, f := range []struct {
		name, val string
		on        *bool
		dst       *int64
	}{{"--fault-allreduce-drop-rank-above", *ef.dropAbove, &o.FaultDropRank, &o.FaultDropRankAbove},
		{"--fault-allreduce-stale-above", *ef.staleAbove, &o.FaultStale, &o.FaultStaleAbove}} {
		if strings.TrimSpace(f.val) == "" {
			continue
		}
		v, err := parseSize(f.val, true)
		if err != nil {
			return fmt.Errorf("%s: %w", f.name, err)
		}
		*f.on, *f.dst = true, v
	}
	return nil
}

func (o *Options) validate() error {
	switch o.TPSize {
	case 1, 2, 4, 8:
	default:
		return fmt.Errorf("--tp-size %d: expected 1, 2, 4 or 8", o.TPSize)
	}
	switch o.DType {
	case "auto", "float32", "bfloat16":
	default:
		return fmt.Errorf("--dtype %q: expected auto, float32 or bfloat16", o.DType)
	}
	if o.Port < 0 || o.Port > 65535 {
		return fmt.Errorf("--port %d: expected 0..65535", o.Port)
	}
	if !(o.MemFractionStatic > 0 && o.MemFractionStatic <= 1) {
		return fmt.Errorf("--mem-fraction-static %v: expected a number in (0, 1]", o.MemFractionStatic)
	}
	if o.MaxRunning < 1 || o.ChunkedPrefill < 1 || o.PageSize < 1 || o.CUDAGraphMaxBS < 1 || o.MaxPrefillTokens < 1 {
		return fmt.Errorf("--max-running-requests, --chunked-prefill-size, --max-prefill-tokens, --page-size and %s must be positive", o.graphFlag())
	}
	if o.Topology != "nvlink" && o.Topology != "pcie" {
		return fmt.Errorf("--topology %q: expected nvlink or pcie", o.Topology)
	}
	if err := o.validateClock(); err != nil {
		return err
	}
	if o.Dialect != DialectVLLM && !slices.Contains(append([]string{"", "NONE"}, sglangSpecAlgorithms...), strings.ToUpper(o.SpecAlgorithm)) {
		return fmt.Errorf("--speculative-algorithm %q: invalid choice (choose from %s)", o.SpecAlgorithm, strings.Join(sglangSpecAlgorithms, ", "))
	}
	if strings.EqualFold(o.SpecAlgorithm, "none") {
		o.SpecAlgorithm = ""
	}
	if o.SpecAlgorithm != "" {
		if o.SpecEagleTopK != 1 {
			return fmt.Errorf("--speculative-eagle-topk %d: only 1 is supported", o.SpecEagleTopK)
		}
		if o.SpecNumSteps < 1 || o.SpecNumSteps > 16 {
			return fmt.Errorf("--speculative-num-steps %d: expected 1..16", o.SpecNumSteps)
		}
		if o.SpecNumDraftTokens < 2 {
			return fmt.Errorf("--speculative-num-draft-tokens %d: expected at least 2", o.SpecNumDraftTokens)
		}
	}
	if o.LinkGBps < 0 || o.BusGBps < 0 || o.LatencyUs < 0 || o.TransferUs < 0 {
		return errors.New("--interconnect-* overrides must be >= 0 (0 keeps the topology's default)")
	}
	if !(o.FaultAllReduceError >= 0) || math.IsInf(o.FaultAllReduceError, 0) {
		return fmt.Errorf("--fault-allreduce-error %v: expected a relative error >= 0 (0 = off)", o.FaultAllReduceError)
	}
	if !(o.FaultAllReduceScale > -1) || math.IsInf(o.FaultAllReduceScale, 0) {
		return fmt.Errorf("--fault-allreduce-scale %v: expected EPS > -1 (results are multiplied by 1+EPS; 0 = off)", o.FaultAllReduceScale)
	}
	if o.FaultMinBatch < 0 {
		return fmt.Errorf("--fault-allreduce-min-batch %d: expected a number of tokens >= 0 (0 = any batch)", o.FaultMinBatch)
	}
	switch o.FaultAccumulate {
	case "", "float32", "fp32":
		o.FaultAccumulate = ""
	case "bfloat16", "bf16":
		o.FaultAccumulate = "bfloat16"
		if o.DType != "bfloat16" {
			return fmt.Errorf("--fault-allreduce-accumulate bfloat16 needs --dtype bfloat16 (the dtype is %s: its allreduce inputs are float32, accumulated in float32)", o.DType)
		}
	default:
		return fmt.Errorf("--fault-allreduce-accumulate %q: expected bfloat16 (the fault) or float32 (the correct kernel)", o.FaultAccumulate)
	}
	switch o.AllReduceOracle {
	case "", "forward", "reverse":
	default:
		return fmt.Errorf("--allreduce-oracle %q: expected forward or reverse", o.AllReduceOracle)
	}
	if o.AllReduceOracle != "" {
		if on := o.allReduceFaultFlags(); len(on) > 0 {
			return fmt.Errorf("--allreduce-oracle %s: an oracle must be correct, but %s given", o.AllReduceOracle, strings.Join(on, ", "))
		}
	}
	if o.FaultFailEvery < 0 {
		return fmt.Errorf("--fault-fail-every %d: expected N >= 0 (0 = off)", o.FaultFailEvery)
	}
	if o.FaultFailLaunch < -1 {
		return fmt.Errorf("--fault-fail-launch %d: expected a launch index >= 0, or -1 for every launch", o.FaultFailLaunch)
	}
	if o.FaultFailLaunch >= 0 && o.FaultFailEvery == 0 {
		return errors.New("--fault-fail-launch needs --fault-fail-every N")
	}
	if o.FaultFailLaunch >= 0 && o.ClockLaunch < 0 && o.ClockLaunchCounter == "" {
		return errors.New("--fault-fail-launch needs --clock-launch N or --clock-launch-counter FILE: without a launch index every launch is launch 0")
	}
	if o.FaultReserveMB < 0 || o.FaultSlowdown < 1 || o.FaultCrashAfter < 0 || o.FaultLeakMBPerReq < 0 {
		return errors.New("fault flags: errors, reserves and leaks must be >= 0 and --fault-slowdown >= 1")
	}
	return nil
}

// ParseBytes reads a size such as "192MiB", "2GiB", "512MB", "1G" or a plain byte count.
func ParseBytes(s string) (int64, error) {
	return parseSize(s, false)
}

// parseSize is ParseBytes; with zero it also accepts a size of 0 (in any unit).
func parseSize(s string, zero bool) (int64, error) {
	t := strings.TrimSpace(s)
	units := []struct {
		suf string
		mul float64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"GB", 1e9}, {"MB", 1e6}, {"KB", 1e3}, {"G", 1 << 30}, {"M", 1 << 20}, {"K", 1 << 10}, {"B", 1}}
	mul := 1.0
	for _, u := range units {
		if strings.HasSuffix(t, u.suf) {
			t = strings.TrimSpace(strings.TrimSuffix(t, u.suf))
			mul = u.mul
			break
		}
	}
	v, err := strconv.ParseFloat(t, 64)
	if err != nil || !(v >= 0) || (v == 0 && !zero) || math.IsInf(v, 0) || v*mul > math.MaxInt64/2 {
		if zero {
			return 0, fmt.Errorf("%q is not a size (expected a byte count >= 0, e.g. 0, 4096, 64KiB or 1MiB)", s)
		}
		return 0, fmt.Errorf("%q is not a size (expected e.g. 192MiB, 2GiB or a byte count)", s)
	}
	return int64(v * mul), nil
}

// validateClock checks the device clock's flags.
func (o *Options) validateClock() error {
	switch o.Clock {
	case "wall", "modelled":
	default:
		return fmt.Errorf("--clock %q: expected wall or modelled", o.Clock)
	}
	if _, err := device.LookupGPU(o.ModelledGPU); err != nil {
		return fmt.Errorf("--modelled-gpu: %w", err)
	}
	if _, err := device.LookupModel(o.ModelledModel); err != nil {
		return fmt.Errorf("--modelled-model: %w", err)
	}
	if o.Clock != "modelled" {
		if o.ModelledMemory {
			return errors.New("--modelled-memory needs --clock modelled")
		}
		if o.ClockStepCV != 0 || o.ClockLaunchCV != 0 || o.ClockDriftPerMinute != 0 {
			return errors.New("--clock-step-cv, --clock-launch-cv and --clock-drift-per-minute need --clock modelled")
		}
	}
	if err := o.noise(0).Validate(); err != nil {
		return err
	}
	if o.ClockCatchUp < 0 {
		return fmt.Errorf("--clock-catch-up %v: expected a non-negative duration", o.ClockCatchUp)
	}
	if o.ClockLaunchCV > 0 && o.ClockLaunch < 0 && o.ClockLaunchCounter == "" {
		return errors.New("--clock-launch-cv needs --clock-launch N or --clock-launch-counter FILE: without a launch index every launch would draw the same factor")
	}
	return nil
}

// noise is the device clock's noise for launch index launch.
func (o *Options) noise(launch uint64) device.Noise {
	return device.Noise{StepCV: o.ClockStepCV, StepPeriod: o.ClockStepPeriod, LaunchCV: o.ClockLaunchCV,
		DriftPerMinute: o.ClockDriftPerMinute, Seed: o.ClockSeed, Launch: launch}
}
