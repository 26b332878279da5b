// Package server is the reference engine's process: it parses SGLang-style flags, builds the
// tensor-parallel model, computes the memory plan, allocates the KV pool, prints SGLang-format
// start-up lines, and serves SGLang's HTTP API (OpenAI completions, /generate, server info,
// metrics) until SIGTERM.
package server

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/reckon-ci/reckon/refengine/collective"
	"github.com/reckon-ci/reckon/refengine/device"
	"github.com/reckon-ci/reckon/refengine/interconnect"
	"github.com/reckon-ci/reckon/refengine/kvcache"
	"github.com/reckon-ci/reckon/refengine/memplan"
	"github.com/reckon-ci/reckon/refengine/model"
	"github.com/reckon-ci/reckon/refengine/sched"
	"github.com/reckon-ci/reckon/refengine/tp"
)

// Version is the reference engine's own version (/server_info's "refengine" object); the version
// the engine reports as its engine's is its persona's (Persona.Version).
const Version = "refengine-0.1"

// ForceCustomAREnv forces the custom allreduce where SGLang would refuse it (PCIe, tp > 2).
const ForceCustomAREnv = "REFENGINE_FORCE_CUSTOM_AR"

// customTokens is the size of the standard custom-allreduce buffer in tokens of hidden-size
// float32 (SGLang's 8 MiB buffer holds a few hundred to a thousand tokens of a large model).
const customTokens = 512

// customARMaxBytes is the modelled model's custom-allreduce buffer (SGLang's and vLLM's default
// max_size, 8 MiB): allreduces up to this size go one-shot.
const customARMaxBytes = 8 << 20

// graphBytesPerBSHidden: the graph reserve per captured batch-size slot is this many float32
// vectors of hidden size (SGLang reserves about 2 MB per batch size at hidden 8192).
const graphVectorsPerBS = 64

// Engine is a started reference engine (model, memory plan, scheduler), ready to serve HTTP.
type Engine struct {
	Opts    *Options
	Cfg     model.Config
	Log     *Logger
	Group   *tp.Group
	Sched   *sched.Scheduler
	Alloc   *kvcache.Allocator
	Plans   []memplan.Plan // per rank
	Backend string         // "custom" or "nccl"
	// NCCLAlgorithm is the NCCL path's allreduce algorithm (ring or tree, from NCCL_ALGO): all
	// allreduces when Backend is "nccl", the tensors too large for the custom path otherwise.
	NCCLAlgorithm collective.Algorithm
	// WeightSeed is the seed the weights were generated from (--weight-seed or the model file's).
	WeightSeed uint64
	// CustomDisabledReason is set when the custom allreduce was requested but refused with a
	// warning (TP2 over PCIe under v2 is refused silently and leaves it empty).
	CustomDisabledReason string
	// CustomARRule is the custom-allreduce implementation whose rule was applied: "v1" (SGLang
	// 0.3/0.4, vLLM, SGLang latest with SGLANG_OPT_USE_CUSTOM_ALL_REDUCE_V2=0) or "v2" (SGLang
	// latest's CustomAllReduceV2).
	CustomARRule string
	// CustomForced: REFENGINE_FORCE_CUSTOM_AR=1 put the custom allreduce where the rule refused it.
	CustomForced bool
	// FileSeed is the model file's weight seed (WeightSeed differs with --weight-seed).
	FileSeed       uint64
	CustomMaxBytes int64
	ContextLen     int
	MaxRunning     int
	GraphBytes     int64 // graph reserve, target + draft
	GraphTarget    int64
	GraphDraft     int64
	Interconnect   interconnect.Model
	// Device is the modelled device clock's timer (--clock modelled; nil on the wall clock) and
	// Pacer its pacer; Launch is the launch index its noise was drawn for.
	Device *device.Timer
	Pacer  *device.Pacer
	Launch uint64
	// sizes are rank 0's sizes as the memory plan and the logs count them: the real model's, or
	// the modelled model's with --modelled-memory.
	sizes     rankSizes
	started   time.Time
	ready     atomic.Bool
	served    atomic.Int64
	fatal     chan error
	fatalOnce sync.Once
	getenv    func(string) string
	// v is the vLLM dialect's state (stats, histograms); nil in the SGLang dialect.
	v *vllmState
	// prof is the torch profiler (/start_profile, /stop_profile).
	prof *profiler
}

// Build constructs the engine from opts, printing the start-up log to the logger.
func Build(opts *Options, lg *Logger, getenv func(string) string) (*Engine, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	e := &Engine{Opts: opts, Log: lg, started: time.Now(), fatal: make(chan error, 1), getenv: getenv}
	e.prof = newProfiler(e)
	vllm := opts.Dialect == DialectVLLM
	// sg prints the SGLang dialect's start-up lines; the vLLM dialect prints its own (vllm_log.go)
	// from the same numbers.
	sg := lg
	if vllm {
		sg = NewLogger(io.Discard, opts.TPSize)
		if err := e.vllmInit(); err != nil {
			return nil, fmt.Errorf("%w: %w", errUsage, err)
		}
	}
	if opts.Persona == nil {
		p, err := LookupPersona(opts.Dialect, "")
		if err != nil {
			return nil, err
		}
		opts.Persona = p
	}
	if err := e.setLogLevels(); err != nil {
		return nil, fmt.Errorf("%w: %w", errUsage, err)
	}
	ncclAlg, err := collective.ParseNCCLAlgo(getenv(collective.NCCLAlgoEnv))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errUsage, err)
	}
	e.NCCLAlgorithm = ncclAlg
	cfg, err := model.LoadConfig(opts.ModelPath)
	if err != nil {
		return nil, err
	}
	fileSeed := cfg.Seed
	if opts.WeightSeed != 0 {
		cfg.Seed = opts.WeightSeed
	}
	e.WeightSeed = cfg.Seed
	if err := cfg.CheckTP(opts.TPSize); err != nil {
		return nil, fmt.Errorf("%s: %w", opts.flagName("--tp-size"), err)
	}
	e.Cfg = cfg
	e.ContextLen = cfg.MaxPositions
	if opts.ContextLength > 0 && opts.ContextLength < e.ContextLen {
		e.ContextLen = opts.ContextLength
	}
	for _, w := range opts.Warnings {
		sg.Warn("%s", w)
	}
	sg.Info("%s", serverArgsLine(opts))
	if vllm {
		e.vllmHeader()
	}
	e.FileSeed = fileSeed
	topo, err := interconnect.Parse(opts.Topology)
	if err != nil {
		return nil, err
	}
	e.Interconnect = interconnect.Default(topo)
	if opts.Clock == "modelled" {
		e.Interconnect = interconnect.GPUScale(topo)
	}
	for _, o := range []struct {
		v   float64
		dst *float64
	}{{opts.LinkGBps, &e.Interconnect.LinkGBps}, {opts.BusGBps, &e.Interconnect.BusGBps},
		{opts.LatencyUs, &e.Interconnect.LatencyUs}, {opts.TransferUs, &e.Interconnect.TransferUs}} {
		if o.v > 0 {
			*o.dst = o.v
		}
	}
	if err := e.Interconnect.Validate(); err != nil {
		return nil, fmt.Errorf("--topology: %w", err)
	}
	if vllm {
		if getenv("VLLM_BATCH_INVARIANT") == "1" {
			opts.Deterministic = true // vLLM's batch invariance: every row reduced on its own
		}
	}

	// Allreduce selection, as the persona's release does it (allreduceRule).
	n := opts.TPSize
	H := cfg.Hidden
	rule := e.allreduceRule()
	custom, forced := false, false
	switch {
	case n == 1:
	case opts.DisableCustomAR:
	case topo == interconnect.PCIe && (n > 2 || rule == "v2"):
		if getenv(ForceCustomAREnv) == "1" {
			custom, forced = true, true
		} else if n > 2 {
			e.CustomDisabledReason = customARDisabledReason(rule)
		}
	default:
		custom = true
	}
	e.CustomARRule = rule
	e.CustomForced = forced
	var customARBytes int64
	largest := int64(max(opts.ChunkedPrefill, opts.MaxPrefillTokens))
	if custom {
		e.Backend = "custom"
		if forced {
			e.CustomMaxBytes = largest * int64(H) * 4
			customARBytes = e.CustomMaxBytes * 2 * int64(n)
		} else {
			e.CustomMaxBytes = customTokens * int64(H) * 4
			customARBytes = 3 * e.CustomMaxBytes
		}
	} else {
		e.Backend = "nccl"
	}
	var vm device.Model // the modelled model (device clock)
	if opts.Clock == "modelled" {
		gpu, err := device.LookupGPU(opts.ModelledGPU)
		if err != nil {
			return nil, fmt.Errorf("%w: --modelled-gpu: %w", errUsage, err)
		}
		if vm, err = device.LookupModel(opts.ModelledModel); err != nil {
			return nil, fmt.Errorf("%w: --modelled-model: %w", errUsage, err)
		}
		// The modelled model's allreduces: the same selection, at its message sizes.
		mc := device.Comm{Interconnect: e.Interconnect, Custom: custom, NCCL: ncclAlg}
		if custom {
			mc.CustomMaxBytes = customARMaxBytes
			if forced {
				mc.CustomMaxBytes = largest * int64(vm.Hidden) * int64(vm.ActBytes)
			}
		}
		e.Device = &device.Timer{GPU: gpu, Model: vm, TP: n, Comm: mc}
		if opts.ModelledMemory {
			if opts.DeviceMemoryDefault {
				opts.DeviceMemory = gpu.MemoryBytes
			}
			if custom {
				customARBytes = 3 * customARMaxBytes
				if forced {
					customARBytes = mc.CustomMaxBytes * 2 * int64(n)
				}
			}
		}
		launch, err := launchIndex(opts)
		if err != nil {
			return nil, err
		}
		e.Launch = launch
		e.Pacer = device.NewPacer(device.WallClock{}, opts.FaultSlowdown, opts.noise(launch))
		e.Pacer.CatchUp = opts.ClockCatchUp
		sg.Info("%s", e.Device.Describe())
	}

	t0 := time.Now()
	target := model.Generate(cfg)
	var draft *model.Weights
	spec := opts.SpecAlgorithm != ""
	if spec {
		draft = target.Draft()
	}
	group, err := tp.NewGroup(target, draft, tp.Options{
		TP: n, BF16: opts.DType == "bfloat16", Custom: custom, CustomMaxBytes: e.CustomMaxBytes,
		NCCLAlgorithm: ncclAlg, Interconnect: e.Interconnect, Deterministic: opts.Deterministic,
		FaultAllReduceError: opts.FaultAllReduceError, FaultAllReduceScale: opts.FaultAllReduceScale,
		FaultDropRank: opts.FaultDropRank, FaultDropRankAbove: opts.FaultDropRankAbove,
		FaultStale: opts.FaultStale, FaultStaleAbove: opts.FaultStaleAbove,
		FaultMinBatch: opts.FaultMinBatch,
	})
	if err != nil {
		return nil, err
	}
	loadElapsed := time.Since(t0).Seconds()
	e.Group = group

	dtypeName := "torch.float32"
	if opts.DType == "bfloat16" {
		dtypeName = "torch.bfloat16"
	}
	// Per-rank memory plan.
	numDraft := 1
	if spec {
		numDraft = opts.SpecNumDraftTokens
	}
	bsList := graphBatchSizes(opts.CUDAGraphMaxBS)
	phase := "decode" // the target's captured graph: decode, or verify of draft tokens
	if spec {
		phase = "verify"
	}
	var graphTarget, graphDraft int64
	graphElem := int64(H) * 4
	if opts.ModelledMemory {
		graphElem = int64(vm.Hidden) * int64(vm.ActBytes)
	}
	if !opts.DisableCUDAGraph {
		per := int64(opts.CUDAGraphMaxBS) * graphElem * graphVectorsPerBS
		graphTarget = per * int64(numDraft)
		if spec {
			graphDraft = per
		}
	}
	e.GraphBytes = graphTarget + graphDraft
	e.GraphTarget, e.GraphDraft = graphTarget, graphDraft
	minTokens := -1
	var allSizes []rankSizes
	for r := 0; r < n; r++ {
		ts := group.Shard(tp.Target, r)
		sz := rankSizes{TargetWeights: ts.Bytes(), TargetKVPerToken: kvcache.BytesPerToken(len(ts.Layers), ts.KVHeads, cfg.HeadDim())}
		if spec {
			ds := group.Shard(tp.Draft, r)
			sz.DraftWeights = 4 * ds.LayerParams()
			sz.DraftKVPerToken = kvcache.BytesPerToken(len(ds.Layers), ds.KVHeads, cfg.HeadDim())
		}
		qkvN := (ts.QHeads + 2*ts.KVHeads) * cfg.HeadDim()
		act := int64(opts.ChunkedPrefill) * int64(3*H+qkvN+ts.QHeads*cfg.HeadDim()+3*ts.FFN) * 4
		if opts.ModelledMemory {
			sz = modelledSizes(vm, n, spec)
			act = int64(opts.ChunkedPrefill) * vm.ActivationBytesPerToken
		}
		allSizes = append(allSizes, sz)
		w, dw, kvPerTok := sz.TargetWeights, sz.DraftWeights, sz.TargetKVPerToken+sz.DraftKVPerToken
		p, err := memplan.Compute(memplan.Input{
			DeviceBytes: opts.DeviceMemory, MemFractionStatic: opts.MemFractionStatic,
			Weights: w + dw, CustomAR: customARBytes, GraphReserve: graphTarget + graphDraft, Activations: act,
			FaultReserve: int64(opts.FaultReserveMB * (1 << 20)), KVBytesPerToken: kvPerTok, PageSize: opts.PageSize,
			MaxTotalTokens: opts.MaxTotalTokens,
		})
		if err != nil {
			return nil, fmt.Errorf("%w [rank TP%d]", err, r)
		}
		e.Plans = append(e.Plans, p)
		if minTokens < 0 || p.KVTokens < minTokens {
			minTokens = p.KVTokens
		}
	}
	pages := minTokens / opts.PageSize
	e.sizes = allSizes[0]
	e.sizes.Pages, e.sizes.PageSize = pages, opts.PageSize
	// Logs, rank by rank, in SGLang's order.
	for r := 0; r < n; r++ {
		p := e.Plans[r]
		sg.Rank(r, "Init torch distributed begin.")
		if e.CustomDisabledReason != "" {
			sg.RankAt(LevelWarning, r, "%s", e.CustomDisabledReason)
		}
		sg.Rank(r, "Init torch distributed ends. mem usage=%s", memplan.GiBString(customARBytes))
		avail := opts.DeviceMemory - customARBytes
		sg.Rank(r, "Load weight begin. avail mem=%s", memplan.GiBString(avail))
		sz := allSizes[r]
		tw := sz.TargetWeights
		avail -= tw
		sg.Rank(r, "Load weight end. elapsed=%.2f s, type=%s, dtype=%s, avail mem=%s, mem usage=%s.", loadElapsed, archName(cfg), dtypeName, memplan.GiBString(avail), memplan.GiBString(tw))
		if spec {
			dw := sz.DraftWeights
			sg.Rank(r, "Load weight begin. avail mem=%s", memplan.GiBString(avail))
			avail -= dw
			sg.Rank(r, "Load weight end. elapsed=%.2f s, type=RefEngineEagleDraft, dtype=%s, avail mem=%s, mem usage=%s.", 0.0, dtypeName, memplan.GiBString(avail), memplan.GiBString(dw))
		}
		kvT := int64(pages*opts.PageSize) * sz.TargetKVPerToken
		avail -= p.Activations + p.FaultReserve
		if p.FaultReserve > 0 {
			sg.Rank(r, "Fault injection: reserving %s per rank (--fault-reserve-mb %g).", memplan.GiBString(p.FaultReserve), opts.FaultReserveMB)
		}
		sg.Rank(r, "KV Cache is allocated. dtype: torch.float32, #tokens: %d, K size: %s, V size: %s", pages*opts.PageSize, memplan.GiBString(kvT/2), memplan.GiBString(kvT/2))
		avail -= kvT
		if spec {
			kvD := int64(pages*opts.PageSize) * sz.DraftKVPerToken
			sg.Rank(r, "KV Cache is allocated. dtype: torch.float32, #tokens: %d, K size: %s, V size: %s", pages*opts.PageSize, memplan.GiBString(kvD/2), memplan.GiBString(kvD/2))
			avail -= kvD
		}
		sg.Rank(r, "Memory pool end. avail mem=%s", memplan.GiBString(avail))
		if !opts.DisableCUDAGraph {
			if r == 0 && custom && rule == "v1" && opts.Persona.RegisteringLine {
				// v1 registers the captured graphs' buffers (custom_all_reduce.py
				// register_graph_buffers); v2 registers them without a word.
				sg.Rank(r, "Registering %d cuda graph addresses", 2*cfg.Layers*len(bsList))
			}
			bs := formatInts(bsList)
			sg.Rank(r, "Capture target %s CUDA graph begin. backend=full, num_tokens_per_req=%d, bs=%s, avail mem=%s", phase, numDraft, bs, memplan.GiBString(avail))
			avail -= graphTarget
			sg.Rank(r, "Capture target %s CUDA graph end. elapsed=%.2f s, mem usage=%s, avail mem=%s.", phase, 0.0, memplan.GiBString(graphTarget), memplan.GiBString(avail))
			if spec {
				sg.Rank(r, "Capture draft decode CUDA graph begin. backend=full, num_tokens_per_req=1, bs=%s, avail mem=%s", bs, memplan.GiBString(avail))
				avail -= graphDraft
				sg.Rank(r, "Capture draft decode CUDA graph end. elapsed=%.2f s, mem usage=%s, avail mem=%s.", 0.0, memplan.GiBString(graphDraft), memplan.GiBString(avail))
			}
		}
	}
	group.AttachKV(tp.Target, pages, opts.PageSize)
	if spec {
		group.AttachKV(tp.Draft, pages, opts.PageSize)
	}
	e.Alloc = kvcache.NewAllocator(pages, opts.PageSize)
	e.MaxRunning = min(opts.MaxRunning, pages)
	sg.Info("max_total_num_tokens=%d, chunked_prefill_size=%d, max_prefill_tokens=%d, max_running_requests=%d, context_len=%d, available_gpu_mem=%.4f GB",
		pages*opts.PageSize, opts.ChunkedPrefill, opts.MaxPrefillTokens, e.MaxRunning, e.ContextLen, memplan.GiB(e.available(0)))

	var sc *sched.SpecConfig
	if spec {
		sc = &sched.SpecConfig{Algorithm: strings.ToUpper(opts.SpecAlgorithm), NumSteps: opts.SpecNumSteps, TopK: opts.SpecEagleTopK, NumDraftTokens: opts.SpecNumDraftTokens}
	}
	var kvPerTok int64
	for _, m := range []tp.ModelID{tp.Target, tp.Draft} {
		if s := group.KVStore(m, 0); s != nil {
			kvPerTok += kvcache.BytesPerToken(s.Layers, s.KVHeads, s.HeadDim)
		}
	}
	e.Sched = sched.New(sched.Config{
		MaxRunning: e.MaxRunning, ChunkedPrefill: opts.ChunkedPrefill, ContextLen: e.ContextLen,
		DecodeLogEvery: opts.DecodeLogInterval, CUDAGraphMaxBS: opts.CUDAGraphMaxBS, DisableGraph: opts.DisableCUDAGraph,
		RandomSeed: opts.RandomSeed, Slowdown: opts.FaultSlowdown, LeakBytesPerReq: int64(opts.FaultLeakMBPerReq * (1 << 20)),
		KVBytesPerToken: kvPerTok, Spec: sc, Logf: sg.Info, OnStep: e.prof.onStep, Device: e.deviceClock(),
	}, group, e.Alloc)
	if vllm {
		e.vllmStartup(loadElapsed)
	}
	return e, nil
}

// CustomARV2Env switches SGLang's CustomAllReduceV2 off ("0") where it is the default.
const CustomARV2Env = "SGLANG_OPT_USE_CUSTOM_ALL_REDUCE_V2"

// allreduceRule is the custom-allreduce implementation the persona's release selects: "v2" for
// SGLang releases where CustomAllReduceV2 is the default (unless SGLANG_OPT_USE_CUSTOM_ALL_REDUCE_V2
// is 0/false), else "v1".
func (e *Engine) allreduceRule() string {
	if e.Opts.Dialect == DialectSGLang && e.Opts.Persona.CustomARV2 && !envFalse(e.getenv(CustomARV2Env)) {
		return "v2"
	}
	return "v1"
}

// customARDisabledReason is the warning every rank prints when the custom allreduce is refused
// on more than two PCIe-only GPUs; v2's names its class (custom_all_reduce_utils.py formats it
// with the implementation's name).
func customARDisabledReason(rule string) string {
	name := "Custom allreduce"
	if rule == "v2" {
		name = "CustomAllReduceV2"
	}
	return name + " is disabled because it's not supported on more than two PCIe-only GPUs. To silence this warning, specify disable_custom_all_reduce=True explicitly."
}

// setLogLevels applies the log levels: SGLang's --log-level (engine and uvicorn lines); vLLM's
// VLLM_LOGGING_LEVEL (engine lines) and --uvicorn-log-level (uvicorn's).
func (e *Engine) setLogLevels() error {
	o := e.Opts
	if o.Dialect == DialectVLLM {
		main, err := ParseLevel(e.getenv("VLLM_LOGGING_LEVEL"))
		if err != nil {
			return fmt.Errorf("VLLM_LOGGING_LEVEL: %w", err)
		}
		uv, err := ParseLevel(o.UvicornLogLevel)
		if err != nil {
			return fmt.Errorf("--uvicorn-log-level: %w", err)
		}
		e.Log.SetLevels(main, uv)
		return nil
	}
	lv, err := ParseLevel(o.LogLevel)
	if err != nil {
		return fmt.Errorf("--log-level: %w", err)
	}
	e.Log.SetLevels(lv, lv)
	return nil
}

// kvBytes is rank r's KV bytes (target + draft): really allocated, or the modelled model's with
// --modelled-memory.
func (e *Engine) kvBytes(r int) int64 {
	if e.Opts.ModelledMemory {
		return e.sizes.kvTarget() + e.sizes.kvDraft()
	}
	var b int64
	for _, m := range []tp.ModelID{tp.Target, tp.Draft} {
		if s := e.Group.KVStore(m, r); s != nil {
			b += s.Bytes()
		}
	}
	return b
}

// available is rank r's modelled free device memory after start-up.
func (e *Engine) available(r int) int64 {
	p := e.Plans[r]
	return p.DeviceBytes - p.Weights - p.CustomAR - p.GraphReserve - p.Activations - p.FaultReserve - e.kvBytes(r)
}

func archName(c model.Config) string {
	if len(c.Architectures) > 0 {
		return c.Architectures[0]
	}
	return "RefEngineForCausalLM"
}

func graphBatchSizes(maxBS int) []int {
	var out []int
	for _, b := range []int{1, 2, 4, 8, 12, 16, 24, 32} {
		if b <= maxBS {
			out = append(out, b)
		}
	}
	for b := 40; b <= maxBS; b += 8 {
		out = append(out, b)
	}
	if len(out) == 0 || out[len(out)-1] != maxBS {
		out = append(out, maxBS)
	}
	sort.Ints(out)
	return out
}

func formatInts(xs []int) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = fmt.Sprint(x)
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

func pyBool(b bool) string {
	if b {
		return "True"
	}
	return "False"
}

func serverArgsLine(o *Options) string {
	spec := "None"
	if o.SpecAlgorithm != "" {
		spec = "'" + strings.ToUpper(o.SpecAlgorithm) + "'"
	}
	return fmt.Sprintf("server_args=ServerArgs(model_path='%s', tp_size=%d, host='%s', port=%d, dtype='%s', mem_fraction_static=%g, max_running_requests=%d, chunked_prefill_size=%d, max_prefill_tokens=%d, page_size=%d, cuda_graph_max_bs=%d, disable_cuda_graph=%s, disable_custom_all_reduce=%s, enable_deterministic_inference=%s, random_seed=%d, speculative_algorithm=%s, speculative_num_steps=%d, speculative_eagle_topk=%d, speculative_num_draft_tokens=%d, device_memory=%d, topology='%s')",
		o.ModelPath, o.TPSize, o.Host, o.Port, o.DType, o.MemFractionStatic, o.MaxRunning, o.ChunkedPrefill, o.MaxPrefillTokens, o.PageSize,
		o.CUDAGraphMaxBS, pyBool(o.DisableCUDAGraph), pyBool(o.DisableCustomAR), pyBool(o.Deterministic), o.RandomSeed, spec,
		o.SpecNumSteps, o.SpecEagleTopK, o.SpecNumDraftTokens, o.DeviceMemory, o.Topology)
}

// Main is the engine's entry point: it parses args, starts the engine, serves until ctx is done
// (SIGTERM/SIGINT in cmd/refengine), and returns the process exit code: 0 after a clean
// shutdown, 1 when the engine failed or crashed (fault injection), 2 for a bad command line or a
// bad NCCL_ALGO. args in the SGLang dialect are SGLang's flags; `vllm serve MODEL ...` or
// `--dialect vllm [serve] MODEL ...` selects the vLLM dialect (vLLM's flags, logs and HTTP API).
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	dialect, rest, err := SplitDialect(args)
	if err != nil {
		fmt.Fprintf(stderr, "refengine: %v\n", err)
		return 2
	}
	if wantsVersion(rest) {
		p, _, err := personaOf(dialect, rest)
		if err != nil {
			fmt.Fprintf(stderr, "refengine: %v\n", err)
			return 2
		}
		fmt.Fprintln(stdout, p.Version)
		return 0
	}
	var opts *Options
	if dialect == DialectVLLM {
		opts, err = ParseVLLMFlags(rest, stderr)
	} else {
		opts, err = ParseFlags(rest, stderr)
	}
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		if dialect == DialectVLLM {
			msg := strings.TrimPrefix(err.Error(), "usage: ")
			if !strings.HasPrefix(msg, "vllm serve: error: ") && !strings.HasPrefix(msg, "vllm: error: ") {
				msg = "vllm serve: error: " + msg
			}
			fmt.Fprintf(stderr, "%s\n%s\n", vllmUsageLine, msg)
			return 2
		}
		fmt.Fprintf(stderr, "refengine: %v\n", strings.TrimPrefix(err.Error(), "usage: "))
		return 2
	}
	lg := NewLogger(stderr, opts.TPSize)
	e, err := Build(opts, lg, nil)
	if errors.Is(err, errUsage) {
		fmt.Fprintf(stderr, "refengine: %v\n", strings.TrimPrefix(err.Error(), "usage: "))
		return 2
	}
	if err != nil {
		if dialect == DialectVLLM {
			if errors.Is(err, memplan.ErrNotEnoughMemory) {
				// vLLM V1's words for a KV budget that holds no block.
				err = fmt.Errorf("ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing the engine. (%w)", err)
			}
			(&Engine{Log: lg}).vllmFatal("Build", err)
			return 1
		}
		// SGLang's scheduler process dies with a Python traceback; print the same shape.
		lg.Error("Scheduler hit an exception: Traceback (most recent call last):\n"+
			"  File \"refengine/server/server.go\", in Build\n"+
			"RuntimeError: %v", err)
		return 1
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(opts.Host, fmt.Sprint(opts.Port)))
	if err != nil {
		if dialect == DialectVLLM {
			lg.VLLMRaw(tagAPIServer, "ERROR:    [Errno 98] error while attempting to bind on address (%s, %d): address already in use (%v)", opts.Host, opts.Port, err)
			return 1
		}
		lg.Error("ERROR: [Errno 98] error while attempting to bind on address (%s, %d): address already in use (%v)", opts.Host, opts.Port, err)
		return 1
	}
	if err := e.Serve(ctx, ln); err != nil {
		return 1
	}
	return 0
}

// SplitDialect picks the dialect from the front of a command line: `vllm serve ...` and
// `--dialect vllm [serve] ...` (or `--dialect=vllm`) are the vLLM dialect, `--dialect sglang ...`
// and anything else the SGLang dialect. It returns the remaining arguments. Between `vllm` and
// `serve` it takes --engine-version V (kept in the remaining arguments); `vllm [--engine-version
// V] --version` needs no serve.
func SplitDialect(args []string) (Dialect, []string, error) {
	if len(args) > 0 && args[0] == "vllm" {
		var pre []string
		i := 1
		for ; i < len(args) && args[i] != "serve"; i++ {
			a := args[i]
			switch {
			case a == "--version" || a == "-version" || strings.HasPrefix(a, EngineVersionFlag+"="):
				pre = append(pre, a)
			case a == EngineVersionFlag && i+1 < len(args):
				pre = append(pre, a, args[i+1])
				i++
			default:
				if wantsVersion(pre) {
					return DialectVLLM, pre, nil
				}
				return "", nil, errors.New("vllm: expected the serve subcommand (refengine vllm [--engine-version V] serve MODEL [vLLM flags])")
			}
		}
		if i >= len(args) {
			if wantsVersion(pre) {
				return DialectVLLM, pre, nil
			}
			return "", nil, errors.New("vllm: expected the serve subcommand (refengine vllm [--engine-version V] serve MODEL [vLLM flags])")
		}
		return DialectVLLM, append(pre, args[i+1:]...), nil
	}
	if len(args) == 0 {
		return DialectSGLang, args, nil
	}
	var d string
	var rest []string
	switch {
	case args[0] == "--dialect" || args[0] == "-dialect":
		if len(args) < 2 {
			return "", nil, errors.New("--dialect: expected sglang or vllm, got nothing")
		}
		d, rest = args[1], args[2:]
	case strings.HasPrefix(args[0], "--dialect="):
		d, rest = strings.TrimPrefix(args[0], "--dialect="), args[1:]
	default:
		return DialectSGLang, args, nil
	}
	switch Dialect(strings.ToLower(d)) {
	case DialectSGLang:
		return DialectSGLang, rest, nil
	case DialectVLLM:
		if len(rest) > 0 && rest[0] == "serve" {
			rest = rest[1:]
		}
		return DialectVLLM, rest, nil
	}
	return "", nil, fmt.Errorf("--dialect %q: expected sglang or vllm", d)
}

// Serve runs the scheduler and the HTTP server on ln until ctx is done (clean shutdown, nil) or
// the engine fails (the error).
func (e *Engine) Serve(ctx context.Context, ln net.Listener) error {
	schedCtx, cancelSched := context.WithCancel(context.Background())
	defer cancelSched()
	schedDone := make(chan error, 1)
	go func() { schedDone <- e.Sched.Run(schedCtx) }()
	srv := &http.Server{Handler: e.Handler(), ReadHeaderTimeout: 10 * time.Second}
	httpDone := make(chan error, 1)
	go func() { httpDone <- srv.Serve(ln) }()
	addr := ln.Addr().(*net.TCPAddr)
	vllm := e.Opts.Dialect == DialectVLLM
	if !vllm {
		e.Log.Uvicorn("INFO:     Started server process [%d]", os.Getpid())
		e.Log.Uvicorn("INFO:     Waiting for application startup.")
		e.Log.Uvicorn("INFO:     Application startup complete.")
		e.Log.Uvicorn("INFO:     Uvicorn running on http://%s (Press CTRL+C to quit)", net.JoinHostPort(e.Opts.Host, fmt.Sprint(addr.Port)))
	}
	switch {
	case e.Opts.FaultHangStartup && vllm:
		e.vlog(tagEngineCore, levelWarning, locRefengine, "Fault injection: --fault-hang-startup: the engine will never finish initialising.")
	case e.Opts.FaultHangStartup:
		e.Log.Info("Fault injection: --fault-hang-startup: the server will never become ready.")
	case vllm:
		// The stats loop started after the warmup ends with Serve, whatever ends it.
		vctx, vcancel := context.WithCancel(ctx)
		defer vcancel()
		go e.vllmWarmup(vctx, addr)
	default:
		go e.warmup(ctx)
	}
	var failure error
	select {
	case <-ctx.Done():
		if vllm {
			e.Log.VLLMUvicorn(tagAPIServer, "INFO:     Shutting down")
		} else {
			e.Log.Info("Received shutdown signal; stopping (in-flight requests get up to 2 s to finish).")
		}
	case err := <-schedDone:
		failure = fmt.Errorf("scheduler stopped: %w", err)
		if vllm {
			e.vllmFatal("Scheduler.Run", err)
		} else {
			e.Log.Error("Scheduler hit an exception: %v", err)
		}
		schedDone <- err
	case err := <-httpDone:
		failure = fmt.Errorf("http server stopped: %w", err)
		httpDone <- err
	case err := <-e.fatal:
		failure = err
	}
	e.ready.Store(false)
	shCtx, cancel := context.WithTimeout(context.Background(), 4*time.Second)
	defer cancel()
	grace := time.AfterFunc(2*time.Second, func() { e.Sched.Close() })
	defer grace.Stop()
	if failure != nil {
		e.Sched.Close()
		srv.Close()
	} else {
		_ = srv.Shutdown(shCtx)
	}
	cancelSched()
	select {
	case <-schedDone:
	case <-shCtx.Done():
	}
	if failure == nil {
		if vllm {
			e.Log.VLLMUvicorn(tagAPIServer, "INFO:     Waiting for application shutdown.")
			e.Log.VLLMUvicorn(tagAPIServer, "INFO:     Application shutdown complete.")
			e.Log.VLLMUvicorn(tagAPIServer, "INFO:     Finished server process [%d]", os.Getpid())
		} else {
			e.Log.Info("Shutdown complete.")
		}
	}
	return failure
}

// vllmWarmup is the vLLM dialect's end of engine init: one request through the scheduler (vLLM's
// warmup run), then the API server's start-up lines, readiness and the periodic stats.
func (e *Engine) vllmWarmup(ctx context.Context, addr *net.TCPAddr) {
	if err := e.generateOne(ctx); err != nil {
		if ctx.Err() == nil {
			e.vllmFatal("warmup", err)
		}
		return
	}
	if ctx.Err() != nil {
		return
	}
	e.vllmReady(addr)
	e.ready.Store(true)
	go e.vllmStatsLoop(ctx)
}

// warmup sends one short request through the whole path, then declares the server ready.
func (e *Engine) warmup(ctx context.Context) {
	if !e.Opts.SkipWarmup {
		if err := e.generateOne(ctx); err != nil {
			e.Log.Error("Warmup failed: %v", err)
			return
		}
	}
	if ctx.Err() != nil {
		return
	}
	e.ready.Store(true)
	e.Log.Info("The server is fired up and ready to roll!")
}

// generateOne runs a one-token greedy request through the scheduler (warmup, /health_generate).
func (e *Engine) generateOne(ctx context.Context) error {
	req := &sched.Request{ID: "warmup", Prompt: model.Encode("The capital city of France is"), MaxNew: 1, Ctx: ctx}
	if err := e.Sched.Submit(req); err != nil {
		return err
	}
	var last sched.Event
	for ev := range req.Events() {
		last = ev
	}
	if last.FinishReason == "abort" {
		return errors.New("the request was aborted")
	}
	return last.Err
}

// Ready reports whether the server has finished its warmup.
func (e *Engine) Ready() bool { return e.ready.Load() }

// crashDue counts an arriving generation request and reports whether the crash fault fires:
// with --fault-crash-after N, the first N requests are served and the next one crashes the
// engine (Python-style traceback in the log, exit 1), as a scheduler exception would.
func (e *Engine) crashDue() bool {
	c := e.Opts.FaultCrashAfter
	if c <= 0 {
		return false
	}
	n := e.served.Add(1)
	if n <= int64(c) {
		return false
	}
	e.fatalOnce.Do(func() {
		if e.Opts.Dialect == DialectVLLM {
			e.vllmFatal("Engine.crashDue", fmt.Errorf("refengine fault injection: --fault-crash-after %d reached (%d requests served)", c, c))
			e.fatal <- fmt.Errorf("fault injection: crashed after %d requests", c)
			return
		}
		e.Log.Error("%s", "Scheduler hit an exception: Traceback (most recent call last):\n"+
			"  File \"refengine/server/server.go\", in Engine.crashDue\n"+
			"    fault injection\n"+
			fmt.Sprintf("RuntimeError: refengine fault injection: --fault-crash-after %d reached (%d requests served)", c, c))
		e.Log.Error("Received sigquit from a child process. It usually means the child failed.")
		e.fatal <- fmt.Errorf("fault injection: crashed after %d requests", c)
	})
	return true
}

// hangUp drops the client's connection without an answer (what a crashed server does).
func hangUp(w http.ResponseWriter) {
	if hj, ok := w.(http.Hijacker); ok {
		if conn, _, err := hj.Hijack(); err == nil {
			conn.Close()
			return
		}
	}
	writeError(w, http.StatusInternalServerError, "InternalServerError", "the engine crashed")
}

// rankSizes are one rank's weights and KV bytes per token as the memory plan counts them, and
// the KV pool's pages.
type rankSizes struct {
	TargetWeights, DraftWeights       int64
	TargetKVPerToken, DraftKVPerToken int64
	Pages, PageSize                   int
}

func (z rankSizes) kvTarget() int64 { return int64(z.Pages*z.PageSize) * z.TargetKVPerToken }
func (z rankSizes) kvDraft() int64  { return int64(z.Pages*z.PageSize) * z.DraftKVPerToken }

// modelledSizes are a rank's sizes of the modelled model m at tp ranks (--modelled-memory).
func modelledSizes(m device.Model, tp int, spec bool) rankSizes {
	z := rankSizes{TargetWeights: m.WeightBytes() / int64(tp), TargetKVPerToken: m.KVPerRank(tp)}
	if spec {
		z.DraftWeights = m.Draft.Bytes / int64(tp)
		z.DraftKVPerToken = m.Draft.KVBytesPerToken / int64(tp)
	}
	return z
}

// deviceClock is the scheduler's device clock, nil on the wall clock.
func (e *Engine) deviceClock() *sched.DeviceClock {
	if e.Device == nil {
		return nil
	}
	return &sched.DeviceClock{Timer: *e.Device, Pacer: e.Pacer}
}

// launchIndex is the device clock's launch index: --clock-launch, else the next number of
// --clock-launch-counter's file (which it advances, under an exclusive lock, so that the launches
// of one run draw 0, 1, 2, ... in launch order), else 0.
func launchIndex(o *Options) (uint64, error) {
	if o.ClockLaunch >= 0 {
		return uint64(o.ClockLaunch), nil
	}
	if o.ClockLaunchCounter == "" {
		return 0, nil
	}
	f, err := os.OpenFile(o.ClockLaunchCounter, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return 0, fmt.Errorf("--clock-launch-counter: %w", err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		return 0, fmt.Errorf("--clock-launch-counter %s: lock: %w", o.ClockLaunchCounter, err)
	}
	defer syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	data, err := io.ReadAll(f)
	if err != nil {
		return 0, fmt.Errorf("--clock-launch-counter %s: %w", o.ClockLaunchCounter, err)
	}
	var n uint64
	if t := strings.TrimSpace(string(data)); t != "" {
		if n, err = strconv.ParseUint(t, 10, 64); err != nil {
			return 0, fmt.Errorf("--clock-launch-counter %s: %q is not a launch index: %w", o.ClockLaunchCounter, t, err)
		}
	}
	if err := f.Truncate(0); err != nil {
		return 0, fmt.Errorf("--clock-launch-counter %s: %w", o.ClockLaunchCounter, err)
	}
	if _, err := f.WriteAt([]byte(strconv.FormatUint(n+1, 10)+"\n"), 0); err != nil {
		return 0, fmt.Errorf("--clock-launch-counter %s: %w", o.ClockLaunchCounter, err)
	}
	return n, nil
}
