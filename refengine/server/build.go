// build.go holds Build, which starts the engine: the allreduce selection, the modelled device
// clock, the per-rank memory plan and the KV pool, with the sizes they count.

package server

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
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

// customTokens is the size of the standard custom-allreduce buffer in tokens of hidden-size
// float32 (SGLang's 8 MiB buffer holds a few hundred to a thousand tokens of a large model).
const customTokens = 512

// customARMaxBytes is the modelled model's custom-allreduce buffer (SGLang's and vLLM's default
// max_size, 8 MiB): allreduces up to this size go one-shot.
const customARMaxBytes = 8 << 20

// graphBytesPerBSHidden: the graph reserve per captured batch-size slot is this many float32
// vectors of hidden size (SGLang reserves about 2 MB per batch size at hidden 8192).
const graphVectorsPerBS = 64

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
