// build.go holds Build, which starts the engine: the allreduce selection, the modelled device
// clock, the per-rank memory plan and the KV pool, with the sizes they count.

package server

import (
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/reckon-ci/reckon/refengine/collective"
	"github.com/reckon-ci/reckon/refengine/device"
	"github.com/reckon-ci/reckon/refengine/interconnect"
	"github.com/reckon-ci/reckon/refengine/kvcache"
	"github.com/reckon-ci/reckon/refengine/memplan"
	"github.com/reckon-ci/reckon/refengine/model"
	"github.com/reckon-ci/reckon/refengine/sched"
	"github.com/reckon-ci/reckon/refengine/tp"
	"github.com/reckon-ci/reckon/wire/enginefacts"
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
	if err := e.loadConfig(sg); err != nil {
		return nil, err
	}
	topo, err := e.setupInterconnect()
	if err != nil {
		return nil, err
	}
	if vllm {
		if getenv("VLLM_BATCH_INVARIANT") == "1" {
			opts.Deterministic = true // vLLM's batch invariance: every row reduced on its own
		}
	}

	s := &startup{sg: sg}
	e.selectAllreduce(s, topo)
	if opts.Clock == "modelled" {
		if err := e.setupDeviceClock(s); err != nil {
			return nil, err
		}
	} else if opts.FaultFailLaunch >= 0 {
		// The failure fault is keyed by the launch index, which the wall clock draws no noise for.
		launch, err := launchIndex(opts)
		if err != nil {
			return nil, err
		}
		e.Launch = launch
	}
	if err := e.loadGroup(s); err != nil {
		return nil, err
	}
	if err := e.planMemory(s); err != nil {
		return nil, err
	}
	e.logRanks(s)
	e.startScheduler(s)
	if vllm {
		e.vllmStartup(s.loadElapsed)
	}
	return e, nil
}

// startup is what Build's stages hand each other: the allreduce selection, the modelled model,
// the CUDA-graph reserve and the per-rank sizes of the memory plan.
type startup struct {
	sg             *Logger // the SGLang dialect's start-up lines (discarded in the vLLM dialect)
	custom, forced bool
	rule           string
	customARBytes  int64
	largest        int64        // the largest prefill chunk, in tokens
	vm             device.Model // the modelled model (device clock)
	spec           bool
	loadElapsed    float64
	numDraft       int
	bsList         []int
	phase          string // the target's captured graph: decode, or verify of draft tokens
	graphTarget    int64
	graphDraft     int64
	allSizes       []rankSizes
	pages          int
}

// loadConfig settles the persona, the log levels and the NCCL algorithm, loads the model config
// (with --weight-seed and --context-length applied) and prints the first start-up lines.
func (e *Engine) loadConfig(sg *Logger) error {
	opts := e.Opts
	if opts.Persona == nil {
		p, err := LookupPersona(opts.Dialect, "")
		if err != nil {
			return err
		}
		opts.Persona = p
	}
	if err := e.setLogLevels(); err != nil {
		return fmt.Errorf("%w: %w", errUsage, err)
	}
	ncclAlg, err := collective.ParseNCCLAlgo(e.getenv(collective.NCCLAlgoEnv))
	if err != nil {
		return fmt.Errorf("%w: %w", errUsage, err)
	}
	e.NCCLAlgorithm = ncclAlg
	cfg, err := model.LoadConfig(opts.ModelPath)
	if err != nil {
		return err
	}
	fileSeed := cfg.Seed
	if opts.WeightSeed != 0 {
		cfg.Seed = opts.WeightSeed
	}
	e.WeightSeed = cfg.Seed
	if err := cfg.CheckTP(opts.TPSize); err != nil {
		return fmt.Errorf("%s: %w", opts.flagName("--tp-size"), err)
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
	if opts.Dialect == DialectVLLM {
		e.vllmHeader()
	}
	e.FileSeed = fileSeed
	return nil
}

// setupInterconnect sets the interconnect model from --topology and the link overrides.
func (e *Engine) setupInterconnect() (interconnect.Topology, error) {
	opts := e.Opts
	topo, err := interconnect.Parse(opts.Topology)
	if err != nil {
		return topo, err
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
		return topo, fmt.Errorf("--topology: %w", err)
	}
	return topo, nil
}

// selectAllreduce is the allreduce selection, as the persona's release does it (allreduceRule):
// the custom path or NCCL, and the custom path's buffer.
func (e *Engine) selectAllreduce(s *startup, topo interconnect.Topology) {
	opts := e.Opts
	n := opts.TPSize
	H := e.Cfg.Hidden
	rule := e.allreduceRule()
	custom, forced := false, false
	switch {
	case n == 1:
	case opts.DisableCustomAR:
	case topo == interconnect.PCIe && (n > 2 || rule == "v2"):
		if e.getenv(ForceCustomAREnv) == "1" {
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
	s.custom, s.forced, s.rule = custom, forced, rule
	s.customARBytes, s.largest = customARBytes, largest
	if n > 1 && !opts.EnforceDisableFusion && (opts.EnableFusion || e.fusionAutoEnabled()) {
		e.Fused = true
		e.FusedMaxBytes = customTokens * int64(H) * 4
	}
}

// fusionAutoEnabled is SGLang's auto-enable of FlashInfer allreduce fusion (server_args.py,
// wire/enginefacts.SGLangFusionAutoEnable): a persona that has it, a model architecture of the
// list, and an SM90 or SM100 modelled GPU (the reference engine is always single-node, without
// DP attention or an MoE all-to-all backend).
func (e *Engine) fusionAutoEnabled() bool {
	if e.Opts.Persona == nil || !e.Opts.Persona.FusionAutoEnable || !slices.Contains(enginefacts.SGLangFusionAutoEnable.Values, archName(e.Cfg)) {
		return false
	}
	gpu, err := device.LookupGPU(e.Opts.ModelledGPU)
	return err == nil && (gpu.SM == 90 || gpu.SM == 100)
}

// reasonSuffix is "; REASON" for a non-empty reason.
func reasonSuffix(reason string) string {
	if reason == "" {
		return ""
	}
	return "; " + reason
}

// loadGroup generates the weights (and the draft's) and shards them over the tensor-parallel
// group.
func (e *Engine) loadGroup(s *startup) error {
	opts := e.Opts
	t0 := time.Now()
	target := model.Generate(e.Cfg)
	var draft *model.Weights
	s.spec = opts.SpecAlgorithm != ""
	if s.spec {
		draft = target.Draft()
	}
	var oracle *collective.SumOrder
	if opts.AllReduceOracle != "" {
		if !s.custom {
			return fmt.Errorf("--allreduce-oracle %s acts on the custom allreduce, which this engine does not use (backend %s%s): the oracle would be NCCL's",
				opts.AllReduceOracle, e.Backend, reasonSuffix(e.CustomDisabledReason))
		}
		o := collective.OrderForward
		if opts.AllReduceOracle == "reverse" {
			o = collective.OrderReverse
		}
		oracle = &o
	}
	group, err := tp.NewGroup(target, draft, tp.Options{
		TP: opts.TPSize, BF16: opts.DType == "bfloat16", Custom: s.custom, CustomMaxBytes: e.CustomMaxBytes,
		Fused: e.Fused, FusedMaxBytes: e.FusedMaxBytes,
		NCCLAlgorithm: e.NCCLAlgorithm, Interconnect: e.Interconnect, Deterministic: opts.Deterministic,
		FaultAllReduceError: opts.FaultAllReduceError, FaultAllReduceScale: opts.FaultAllReduceScale,
		FaultDropRank: opts.FaultDropRank, FaultDropRankAbove: opts.FaultDropRankAbove,
		FaultStale: opts.FaultStale, FaultStaleAbove: opts.FaultStaleAbove,
		FaultMinBatch: opts.FaultMinBatch, FaultAccumulateBF16: opts.FaultAccumulate == "bfloat16",
		FaultRankOrder: opts.FaultRankOrder, Oracle: oracle,
	})
	if err != nil {
		return err
	}
	s.loadElapsed = time.Since(t0).Seconds()
	e.Group = group
	return nil
}

// planMemory computes the CUDA-graph reserve and each rank's memory plan; the KV pool's pages
// are the smallest rank's.
func (e *Engine) planMemory(s *startup) error {
	opts := e.Opts
	cfg, group, spec, vm := e.Cfg, e.Group, s.spec, s.vm
	n, H := opts.TPSize, cfg.Hidden
	s.numDraft = 1
	if spec {
		s.numDraft = opts.SpecNumDraftTokens
	}
	s.bsList = graphBatchSizes(opts.CUDAGraphMaxBS)
	s.phase = "decode"
	if spec {
		s.phase = "verify"
	}
	var graphTarget, graphDraft int64
	graphElem := int64(H) * 4
	if opts.ModelledMemory {
		graphElem = int64(vm.Hidden) * int64(vm.ActBytes)
	}
	if !opts.DisableCUDAGraph {
		per := int64(opts.CUDAGraphMaxBS) * graphElem * graphVectorsPerBS
		graphTarget = per * int64(s.numDraft)
		if spec {
			graphDraft = per
		}
	}
	e.GraphBytes = graphTarget + graphDraft
	e.GraphTarget, e.GraphDraft = graphTarget, graphDraft
	s.graphTarget, s.graphDraft = graphTarget, graphDraft
	minTokens := -1
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
		s.allSizes = append(s.allSizes, sz)
		w, dw, kvPerTok := sz.TargetWeights, sz.DraftWeights, sz.TargetKVPerToken+sz.DraftKVPerToken
		p, err := memplan.Compute(memplan.Input{
			DeviceBytes: opts.DeviceMemory, MemFractionStatic: opts.MemFractionStatic,
			Weights: w + dw, CustomAR: s.customARBytes, GraphReserve: graphTarget + graphDraft, Activations: act,
			FaultReserve: int64(opts.FaultReserveMB * (1 << 20)), KVBytesPerToken: kvPerTok, PageSize: opts.PageSize,
			MaxTotalTokens: opts.MaxTotalTokens,
		})
		if err != nil {
			return fmt.Errorf("%w [rank TP%d]", err, r)
		}
		e.Plans = append(e.Plans, p)
		if minTokens < 0 || p.KVTokens < minTokens {
			minTokens = p.KVTokens
		}
	}
	s.pages = minTokens / opts.PageSize
	e.sizes = s.allSizes[0]
	e.sizes.Pages, e.sizes.PageSize = s.pages, opts.PageSize
	return nil
}

// startScheduler attaches the KV pool to the group, prints the pool's summary line and starts
// the scheduler.
func (e *Engine) startScheduler(s *startup) {
	opts, group, pages, sg := e.Opts, e.Group, s.pages, s.sg
	group.AttachKV(tp.Target, pages, opts.PageSize)
	if s.spec {
		group.AttachKV(tp.Draft, pages, opts.PageSize)
	}
	e.Alloc = kvcache.NewAllocator(pages, opts.PageSize)
	e.MaxRunning = min(opts.MaxRunning, pages)
	sg.Info("max_total_num_tokens=%d, chunked_prefill_size=%d, max_prefill_tokens=%d, max_running_requests=%d, context_len=%d, available_gpu_mem=%.4f GB",
		pages*opts.PageSize, opts.ChunkedPrefill, opts.MaxPrefillTokens, e.MaxRunning, e.ContextLen, memplan.GiB(e.available(0)))

	var sc *sched.SpecConfig
	if s.spec {
		sc = &sched.SpecConfig{Algorithm: strings.ToUpper(opts.SpecAlgorithm), NumSteps: opts.SpecNumSteps, TopK: opts.SpecEagleTopK, NumDraftTokens: opts.SpecNumDraftTokens}
	}
	var kvPerTok int64
	for _, m := range []tp.ModelID{tp.Target, tp.Draft} {
		if kv := group.KVStore(m, 0); kv != nil {
			kvPerTok += kvcache.BytesPerToken(kv.Layers, kv.KVHeads, kv.HeadDim)
		}
	}
	e.Sched = sched.New(sched.Config{
		MaxRunning: e.MaxRunning, ChunkedPrefill: opts.ChunkedPrefill, ContextLen: e.ContextLen,
		DecodeLogEvery: opts.DecodeLogInterval, CUDAGraphMaxBS: opts.CUDAGraphMaxBS, DisableGraph: opts.DisableCUDAGraph,
		RandomSeed: opts.RandomSeed, Slowdown: opts.FaultSlowdown, LeakBytesPerReq: int64(opts.FaultLeakMBPerReq * (1 << 20)),
		KVBytesPerToken: kvPerTok, Spec: sc, Logf: sg.Info, OnStep: e.prof.onStep, Device: e.deviceClock(),
	}, group, e.Alloc)
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
