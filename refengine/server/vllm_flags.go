package server

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// Dialect is the serving engine whose command line, log lines and HTTP API the reference engine
// speaks. The engine underneath (model, ranks, allreduce, memory plan, scheduler) is the same.
type Dialect string

// The dialects.
const (
	DialectSGLang Dialect = "sglang"
	DialectVLLM   Dialect = "vllm"
)

// vLLM's defaults where they differ from the SGLang dialect's. vLLM V1 picks max_num_seqs and
// max_num_batched_tokens by device size; these are its values for the API server on a device
// under 70 GiB, which the modelled device is.
const (
	vllmDefaultPort           = 8000
	vllmDefaultGPUMemUtil     = 0.9
	vllmDefaultMaxNumSeqs     = 256
	vllmDefaultBatchedTokens  = 2048
	vllmDefaultMaxLogprobs    = 20
	vllmMaxCaptureSizeCeiling = 512
)

// vllmIgnoredString and vllmIgnoredBool are vLLM flags the reference engine accepts and
// ignores: they change nothing it models.
var (
	vllmIgnoredString = []string{"tokenizer", "revision", "tokenizer-revision", "tokenizer-mode", "load-format", "download-dir",
		"kv-cache-dtype", "quantization", "api-key", "chat-template", "tool-call-parser", "reasoning-parser",
		"distributed-executor-backend", "compilation-config", "generation-config", "hf-overrides", "swap-space",
		"cpu-offload-gb", "response-role", "root-path", "logits-processor-pattern", "attention-backend"}
	vllmIgnoredBool = []string{"trust-remote-code", "enable-prefix-caching", "no-enable-prefix-caching", "enable-chunked-prefill",
		"no-enable-chunked-prefill", "disable-log-requests", "enable-log-requests", "disable-uvicorn-access-log",
		"disable-frontend-multiprocessing", "enable-auto-tool-choice", "disable-fastapi-docs", "enable-prompt-tokens-details",
		"async-scheduling", "no-async-scheduling", "enable-server-load-tracking"}
)

// vllmSpecMethods are the speculative "method" names vLLM accepts (vllm/config/speculative.py).
// The reference engine drafts every one of them with the draft model it derives from the target.
var vllmSpecMethods = []string{"eagle", "eagle3", "mtp", "ngram", "draft_model"}

// parseProfilerConfig reads vLLM's --profiler-config JSON (vllm/config/profiler.py): the torch
// profiler and its trace directory. It returns the directory.
func parseProfilerConfig(s string) (string, error) {
	var pc struct {
		Profiler string `json:"profiler"`
		Dir      string `json:"torch_profiler_dir"`
	}
	dec := json.NewDecoder(strings.NewReader(s))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&pc); err != nil {
		return "", fmt.Errorf(`--profiler-config %q: %v; expected e.g. {"profiler": "torch", "torch_profiler_dir": "/tmp/traces"}`, s, err)
	}
	if pc.Profiler != "torch" {
		return "", fmt.Errorf(`--profiler-config: "profiler" %q: expected "torch" (the only profiler the reference engine has)`, pc.Profiler)
	}
	if strings.TrimSpace(pc.Dir) == "" {
		return "", errors.New(`--profiler-config: "torch_profiler_dir" is required with "profiler": "torch"`)
	}
	return pc.Dir, nil
}

// maxGraphSize reads --cuda-graph-sizes (one size, or several separated by commas or spaces)
// and returns the largest.
func maxGraphSize(s string) (int, error) {
	best := 0
	for _, f := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' }) {
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 {
			return 0, fmt.Errorf("invalid int value: %q (expected positive batch sizes)", f)
		}
		best = max(best, n)
	}
	if best == 0 {
		return 0, fmt.Errorf("expected at least one batch size, got %q", s)
	}
	return best, nil
}

// vllmUsageLine is the first line of vLLM's usage message.
const vllmUsageLine = "usage: vllm serve [model_tag] [options]"

// ParseVLLMFlags parses a `vllm serve` command line (without "vllm serve"): the model as the
// positional argument (or --model), vLLM's flag names and defaults (--tensor-parallel-size/-tp,
// --gpu-memory-utilization 0.9, --max-num-seqs, --max-num-batched-tokens, --max-model-len,
// --block-size, --max-cudagraph-capture-size, --enforce-eager, --disable-custom-all-reduce,
// --speculative-config JSON, --seed, --max-logprobs, --disable-log-stats, port 8000), plus the
// reference engine's own flags (--topology, --device-memory, --fault-*, ...). An unknown flag is
// rejected as vLLM's argument parser rejects it ("unrecognized arguments").
func ParseVLLMFlags(args []string, stderr io.Writer) (*Options, error) {
	persona, args, err := personaOf(DialectVLLM, args)
	if err != nil {
		return nil, fmt.Errorf("%w: vllm: error: %w", errUsage, err)
	}
	o := &Options{Dialect: DialectVLLM, Persona: persona, MaxPrefillTokens: 16384, DecodeLogInterval: 0, LogLevel: "info"}
	if !persona.MaxCaptureSizeFlag {
		if err := rejectMaxCaptureSize(args); err != nil {
			return nil, err
		}
	}
	fs := flag.NewFlagSet("vllm serve", flag.ContinueOnError)
	// As vLLM's argument parser: --help prints the options, an error only the usage line and
	// the error (Main prints those).
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	fv := registerVLLMFlags(fs, o, persona)
	for _, a := range args {
		if a == "-h" || a == "-help" || a == "--help" {
			fs.SetOutput(stderr)
			fmt.Fprintln(stderr, vllmUsageLine+"\n\nThe reference engine's vLLM dialect. Options:")
			fs.PrintDefaults()
			return nil, flag.ErrHelp
		}
	}
	positional, err := parseAroundPositional(fs, args)
	if err != nil {
		return nil, err
	}
	switch {
	case len(positional) > 1:
		return nil, fmt.Errorf("%w: vllm serve: error: unrecognized arguments: %s (expected one model_tag)", errUsage, strings.Join(positional[1:], " "))
	case len(positional) == 1 && *fv.model != "" && *fv.model != positional[0]:
		return nil, fmt.Errorf("%w: vllm serve: error: model_tag %q and --model %q disagree (expected one model)", errUsage, positional[0], *fv.model)
	case len(positional) == 1:
		o.ModelPath = positional[0]
	case *fv.model != "":
		o.ModelPath = *fv.model
	default:
		o.ModelPath = "fixtures/models/tiny.json"
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if set["tp"] {
		set["tensor-parallel-size"] = true
	}
	if err := o.finishVLLM(fv, set); err != nil {
		return nil, err
	}
	o.NonDefaultArgs = vllmNonDefaultArgs(o, set, len(positional) == 1)
	if err := o.validate(); err != nil {
		return nil, fmt.Errorf("%w: %w", errUsage, err)
	}
	return o, nil
}

// rejectMaxCaptureSize rejects --max-cudagraph-capture-size, with its value, as releases before
// that flag do (argparse: "unrecognized arguments").
func rejectMaxCaptureSize(args []string) error {
	for i, a := range args {
		name, val, hasVal := strings.Cut(a, "=")
		if name != "--max-cudagraph-capture-size" {
			continue
		}
		if !hasVal && i+1 < len(args) {
			val = args[i+1]
		}
		return fmt.Errorf("%w: vllm: error: unrecognized arguments: %s", errUsage, strings.TrimSpace(name+" "+val))
	}
	return nil
}

// vllmFlagValues are the flags of ParseVLLMFlags that are read after parsing rather than
// straight into the Options.
type vllmFlagValues struct {
	model, spec    *string
	graphSizes     string
	profilerConfig string
	ef             engineFlags
}

// registerVLLMFlags defines vLLM's flags on fs for the persona's release (its CUDA graph and
// profiler flags), the reference engine's own flags, and the flags accepted and ignored.
func registerVLLMFlags(fs *flag.FlagSet, o *Options, persona *Persona) *vllmFlagValues {
	fv := &vllmFlagValues{}
	fv.model = fs.String("model", "", "model config JSON (also the positional model_tag)")
	fs.StringVar(&o.ServedModelName, "served-model-name", "", "model name served by /v1/models (default: the model)")
	fs.IntVar(&o.TPSize, "tensor-parallel-size", 1, "tensor parallel ranks: 1, 2, 4 or 8")
	fs.IntVar(&o.TPSize, "tp", 1, "alias of --tensor-parallel-size")
	fs.StringVar(&o.Host, "host", "127.0.0.1", "listen address")
	fs.IntVar(&o.Port, "port", vllmDefaultPort, "listen port (0 = any free port)")
	fs.StringVar(&o.DType, "dtype", "auto", "auto|float32|bfloat16 (bfloat16 rounds activations at allreduce boundaries)")
	fs.Float64Var(&o.MemFractionStatic, "gpu-memory-utilization", vllmDefaultGPUMemUtil, "fraction of device memory for weights, activations, graphs and KV cache")
	fs.IntVar(&o.MaxRunning, "max-num-seqs", vllmDefaultMaxNumSeqs, "maximum sequences per iteration")
	fs.IntVar(&o.ChunkedPrefill, "max-num-batched-tokens", vllmDefaultBatchedTokens, "maximum tokens per iteration (chunked prefill)")
	fs.IntVar(&o.ContextLength, "max-model-len", 0, "context length (0 = the model's max_position_embeddings)")
	fs.IntVar(&o.PageSize, "block-size", 16, "KV cache block size in tokens")
	if persona.MaxCaptureSizeFlag {
		fs.IntVar(&o.CUDAGraphMaxBS, "max-cudagraph-capture-size", 0, "largest captured batch size (0 = min(2 x max-num-seqs, 512), as vLLM)")
	} else {
		fs.StringVar(&fv.graphSizes, "cuda-graph-sizes", "", "CUDA graph capture sizes (one size N: 1, 2, 4 and multiples of 8 up to N; several, comma-separated: those)")
	}
	if persona.ProfilerConfigFlag {
		fs.StringVar(&fv.profilerConfig, "profiler-config", "", `profiler as JSON, e.g. {"profiler": "torch", "torch_profiler_dir": "/tmp/traces"}`)
	}
	fs.StringVar(&o.UvicornLogLevel, "uvicorn-log-level", "info", "uvicorn's log level: debug, info, warning, error, critical or trace")
	fs.BoolVar(&o.DisableCUDAGraph, "enforce-eager", false, "no CUDA graphs (no graph reserve)")
	fs.BoolVar(&o.DisableCustomAR, "disable-custom-all-reduce", false, "disable the custom (one-shot) allreduce and fall back to NCCL (ring; tree with NCCL_ALGO=Tree)")
	fv.spec = fs.String("speculative-config", "", `speculative decoding as JSON, e.g. {"method": "eagle3", "num_speculative_tokens": 3}`)
	fs.Int64Var(&o.RandomSeed, "seed", 0, "seed for sampling (requests without a seed)")
	fs.IntVar(&o.MaxLogprobs, "max-logprobs", vllmDefaultMaxLogprobs, "largest logprobs / prompt_logprobs a request may ask for")
	fs.BoolVar(&o.DisableLogStats, "disable-log-stats", false, "no periodic stats lines")
	fs.BoolVar(&o.TokensAsTokenIDs, "return-tokens-as-token-ids", false, `name logprob tokens "token_id:N"`)
	fv.ef = registerEngineFlags(fs, o)
	for _, name := range vllmIgnoredString {
		fs.String(name, "", "accepted for compatibility; ignored")
	}
	for _, name := range vllmIgnoredBool {
		fs.Bool(name, false, "accepted for compatibility; ignored")
	}
	return fv
}

// parseAroundPositional parses args with fs, returning the positional arguments: vLLM takes the
// positional model_tag anywhere, while Go's flag package stops at the first positional argument,
// so parsing resumes after each one.
func parseAroundPositional(fs *flag.FlagSet, args []string) ([]string, error) {
	var positional []string
	rest := args
	for {
		if err := fs.Parse(rest); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, fmt.Errorf("%w: %s", errUsage, vllmArgError(err))
		}
		if fs.NArg() == 0 {
			return positional, nil
		}
		positional = append(positional, fs.Arg(0))
		rest = fs.Args()[1:]
	}
}

// finishVLLM applies the flags read after parsing (the engine flags, the speculative config, the
// uvicorn log level, the profiler config and the CUDA graph sizes; set names those given) and
// defaults the largest captured batch size as vLLM does.
func (o *Options) finishVLLM(fv *vllmFlagValues, set map[string]bool) error {
	if err := fv.ef.finish(o); err != nil {
		return fmt.Errorf("%w: %w", errUsage, err)
	}
	if err := o.validateVLLM(*fv.spec); err != nil {
		return fmt.Errorf("%w: %w", errUsage, err)
	}
	if _, err := ParseLevel(o.UvicornLogLevel); err != nil {
		return fmt.Errorf("%w: vllm serve: error: argument --uvicorn-log-level: %w", errUsage, err)
	}
	if set["profiler-config"] {
		dir, err := parseProfilerConfig(fv.profilerConfig)
		if err != nil {
			return fmt.Errorf("%w: %w", errUsage, err)
		}
		o.ProfilerDir = dir
	}
	if set["cuda-graph-sizes"] {
		bs, err := maxGraphSize(fv.graphSizes)
		if err != nil {
			return fmt.Errorf("%w: vllm serve: error: argument --cuda-graph-sizes: %w", errUsage, err)
		}
		o.CUDAGraphMaxBS = bs
	}
	if !(set["max-cudagraph-capture-size"] || set["cuda-graph-sizes"]) || o.CUDAGraphMaxBS == 0 {
		o.CUDAGraphMaxBS = min(2*o.MaxRunning, vllmMaxCaptureSizeCeiling)
	}
	return nil
}

// vllmArgError rewrites a flag-package error in the words of vLLM's argument parser.
func vllmArgError(err error) string {
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "flag provided but not defined: "); ok {
		name = "--" + strings.TrimLeft(name, "-")
		return fmt.Sprintf("vllm serve: error: unrecognized arguments: %s (not a flag of vLLM's serve command that the reference engine knows; `refengine vllm serve --help` lists them)", name)
	}
	return "vllm serve: error: argument " + msg
}

// validateVLLM checks the vLLM-named settings (so that errors name vLLM's flags) and applies the
// speculative config.
func (o *Options) validateVLLM(specJSON string) error {
	switch o.TPSize {
	case 1, 2, 4, 8:
	default:
		return fmt.Errorf("--tensor-parallel-size %d: expected 1, 2, 4 or 8", o.TPSize)
	}
	switch o.DType {
	case "auto", "float32", "bfloat16":
	default:
		return fmt.Errorf("--dtype %q: expected auto, float32 or bfloat16 (the reference engine has no float16)", o.DType)
	}
	if o.Port < 0 || o.Port > 65535 {
		return fmt.Errorf("--port %d: expected 0..65535", o.Port)
	}
	if !(o.MemFractionStatic > 0 && o.MemFractionStatic <= 1) {
		return fmt.Errorf("--gpu-memory-utilization %v: expected a fraction in (0, 1]", o.MemFractionStatic)
	}
	for _, c := range []struct {
		name string
		v    int
	}{{"--max-num-seqs", o.MaxRunning}, {"--max-num-batched-tokens", o.ChunkedPrefill}, {"--block-size", o.PageSize}} {
		if c.v < 1 {
			return fmt.Errorf("%s %d: expected a positive number", c.name, c.v)
		}
	}
	if o.CUDAGraphMaxBS < 0 {
		return fmt.Errorf("--max-cudagraph-capture-size %d: expected a positive batch size (or 0 for vLLM's default)", o.CUDAGraphMaxBS)
	}
	if o.ContextLength < 0 {
		return fmt.Errorf("--max-model-len %d: expected a positive number of tokens (or 0 for the model's)", o.ContextLength)
	}
	if o.MaxLogprobs < 0 {
		return fmt.Errorf("--max-logprobs %d: expected >= 0", o.MaxLogprobs)
	}
	if strings.TrimSpace(specJSON) == "" {
		return nil
	}
	return o.applyVLLMSpecConfig(specJSON)
}

// applyVLLMSpecConfig checks --speculative-config (a JSON object with vLLM's keys, a known
// method and 1..16 speculative tokens) and sets the speculative decoding options from it.
func (o *Options) applyVLLMSpecConfig(specJSON string) error {
	dec := json.NewDecoder(strings.NewReader(specJSON))
	dec.UseNumber()
	var sc map[string]any
	if err := dec.Decode(&sc); err != nil {
		return fmt.Errorf("--speculative-config %q: not a JSON object (%v); expected e.g. {\"method\": \"eagle3\", \"num_speculative_tokens\": 3}", specJSON, err)
	}
	keys := make([]string, 0, len(sc))
	for k := range sc {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		switch k {
		case "method", "model", "num_speculative_tokens", "draft_tensor_parallel_size", "max_model_len", "revision", "quantization",
			"prompt_lookup_max", "prompt_lookup_min":
		default:
			return fmt.Errorf("--speculative-config: unknown key %q (expected method, model, num_speculative_tokens, draft_tensor_parallel_size, max_model_len, revision, quantization, prompt_lookup_max or prompt_lookup_min)", k)
		}
	}
	method, _ := sc["method"].(string)
	if method == "" {
		return fmt.Errorf(`--speculative-config: "method" is required: expected one of %s`, strings.Join(vllmSpecMethods, ", "))
	}
	if !slices.Contains(vllmSpecMethods, strings.ToLower(method)) {
		// vllm/config/speculative.py: SpeculativeConfig's method is a Literal of these names.
		return fmt.Errorf(`--speculative-config: 1 validation error for SpeculativeConfig: method: Input should be %s (got %q)`, strings.Join(vllmSpecMethods, ", "), method)
	}
	n, ok := sc["num_speculative_tokens"].(json.Number)
	if !ok {
		return errors.New(`--speculative-config: "num_speculative_tokens" is required: expected an integer 1..16`)
	}
	k, err := strconv.Atoi(n.String())
	if err != nil || k < 1 || k > 16 {
		return fmt.Errorf(`--speculative-config: "num_speculative_tokens" %s: expected an integer 1..16`, n)
	}
	if v, ok := sc["model"]; ok {
		s, isStr := v.(string)
		if !isStr {
			return fmt.Errorf(`--speculative-config: "model" %v: expected a string (the draft model; the reference engine derives its draft from the target)`, v)
		}
		o.SpecDraftModelPath = s
	}
	o.SpecAlgorithm = strings.ToUpper(method)
	o.SpecNumSteps = k
	o.SpecNumDraftTokens = k + 1
	o.SpecEagleTopK = 1
	return nil
}

// vllmNonDefaultArgs renders the arguments given on the command line as vLLM's "non-default
// args" log line does: a Python dict of argument names to values.
func vllmNonDefaultArgs(o *Options, set map[string]bool, positional bool) [][2]string {
	var out [][2]string
	add := func(k, v string) { out = append(out, [2]string{k, v}) }
	if positional {
		add("model_tag", pyStr(o.ModelPath))
	}
	if set["host"] {
		add("host", pyStr(o.Host))
	}
	if set["port"] {
		add("port", strconv.Itoa(o.Port))
	}
	if positional || set["model"] {
		add("model", pyStr(o.ModelPath))
	}
	for _, f := range []struct {
		flag, key string
		val       func() string
	}{
		{"dtype", "dtype", func() string { return pyStr(o.DType) }},
		{"seed", "seed", func() string { return strconv.FormatInt(o.RandomSeed, 10) }},
		{"max-model-len", "max_model_len", func() string { return strconv.Itoa(o.ContextLength) }},
		{"enforce-eager", "enforce_eager", func() string { return pyBool(o.DisableCUDAGraph) }},
		{"served-model-name", "served_model_name", func() string { return "[" + pyStr(o.ServedModelName) + "]" }},
		{"tensor-parallel-size", "tensor_parallel_size", func() string { return strconv.Itoa(o.TPSize) }},
		{"disable-custom-all-reduce", "disable_custom_all_reduce", func() string { return pyBool(o.DisableCustomAR) }},
		{"block-size", "block_size", func() string { return strconv.Itoa(o.PageSize) }},
		{"gpu-memory-utilization", "gpu_memory_utilization", func() string { return strconv.FormatFloat(o.MemFractionStatic, 'f', -1, 64) }},
		{"max-num-batched-tokens", "max_num_batched_tokens", func() string { return strconv.Itoa(o.ChunkedPrefill) }},
		{"max-num-seqs", "max_num_seqs", func() string { return strconv.Itoa(o.MaxRunning) }},
		{"max-logprobs", "max_logprobs", func() string { return strconv.Itoa(o.MaxLogprobs) }},
		{"disable-log-stats", "disable_log_stats", func() string { return pyBool(o.DisableLogStats) }},
		{"speculative-config", "speculative_config", func() string { return pySpecConfig(o) }},
		{"max-cudagraph-capture-size", "max_cudagraph_capture_size", func() string { return strconv.Itoa(o.CUDAGraphMaxBS) }},
		{"cuda-graph-sizes", "cuda_graph_sizes", func() string { return "[" + strconv.Itoa(o.CUDAGraphMaxBS) + "]" }},
		{"uvicorn-log-level", "uvicorn_log_level", func() string { return pyStr(o.UvicornLogLevel) }},
	} {
		if set[f.flag] {
			add(f.key, f.val())
		}
	}
	return out
}

func pyStr(s string) string { return "'" + strings.ReplaceAll(s, "'", `\'`) + "'" }

// pySpecConfig renders the speculative config as vLLM echoes it (a Python dict).
func pySpecConfig(o *Options) string {
	if o.SpecAlgorithm == "" {
		return "None"
	}
	s := fmt.Sprintf("{'method': %s, 'num_speculative_tokens': %d", pyStr(strings.ToLower(o.SpecAlgorithm)), o.SpecNumSteps)
	if o.SpecDraftModelPath != "" {
		s += ", 'model': " + pyStr(o.SpecDraftModelPath)
	}
	return s + "}"
}

// formatNonDefaultArgs is the dict of vLLM's "non-default args" line.
func formatNonDefaultArgs(a [][2]string) string {
	parts := make([]string, len(a))
	for i, kv := range a {
		parts[i] = "'" + kv[0] + "': " + kv[1]
	}
	return "{" + strings.Join(parts, ", ") + "}"
}
