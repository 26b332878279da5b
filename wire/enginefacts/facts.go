// Package enginefacts is the one table of what reckon assumes of the real engines (SGLang,
// vLLM, and the FlashInfer kernels they launch): flags and the releases that have them, how the
// torch profiler is switched on and where it writes, the kernel names of each allreduce
// implementation, and known bugs. Each fact names its source (repository, path, commit or
// release, a short quote of the engine's own words); a fact without a source is unverified and
// must never decide a verdict alone.
//
// The harness (engine adapters, the profiler classifier, suites) and the reference engine's
// personas both read it, which is why it lives under wire/: the one package tree both sides may
// import. docs/conformance.md's facts section is generated from it (Markdown).
package enginefacts

import (
	"fmt"
	"strconv"
	"strings"
)

// Engines a fact belongs to.
const (
	SGLang     = "sglang"
	VLLM       = "vllm"
	FlashInfer = "flashinfer"
	NCCL       = "nccl"
)

// Source is where a fact was read.
type Source struct {
	// Repo is the repository ("vllm-project/vllm") or the site the text is on.
	Repo string
	// Path is the file (or the issue/PR number as "#123", or a URL path).
	Path string
	// Ref is the commit, release tag or date the text was read at.
	Ref string
	// Quote is a short piece of the source's own words that states the fact.
	Quote string
	// Secondary marks a source that reports the fact second-hand (a downstream project, a
	// third-party document) rather than the engine's own code or maintainers.
	Secondary bool
}

// Fact is one behaviour of one engine over a range of releases.
type Fact struct {
	// ID names the fact for code and docs ("vllm.profiler.config_flag").
	ID string
	// Engine is SGLang, VLLM, FlashInfer or NCCL.
	Engine string
	// Since is the first release with the behaviour ("" = every release reckon knows).
	Since string
	// Until is the first release without it ("" = still current).
	Until string
	// Says is the behaviour, one sentence.
	Says string
	// Values are the literals the behaviour is about: flag names, kernel names, file patterns.
	Values []string
	// Sources are where it was read; none means unverified.
	Sources []Source
}

// Verified reports whether the fact has at least one source.
func (f Fact) Verified() bool { return len(f.Sources) > 0 }

// Value is the first of Values ("" when none).
func (f Fact) Value() string {
	if len(f.Values) == 0 {
		return ""
	}
	return f.Values[0]
}

// SinceTriple is Since as (major, minor, patch); ok is false when Since is "".
func (f Fact) SinceTriple() (v [3]int, ok bool) { return triple(f.Since) }

// UntilTriple is Until as (major, minor, patch); ok is false when Until is "".
func (f Fact) UntilTriple() (v [3]int, ok bool) { return triple(f.Until) }

// Range words the release range: "0.13.0 and later", "before 0.16.0", "0.13.0 to before
// 0.16.0", "every release".
func (f Fact) Range() string {
	switch {
	case f.Since != "" && f.Until != "":
		return f.Since + " to before " + f.Until
	case f.Since != "":
		return f.Since + " and later"
	case f.Until != "":
		return "before " + f.Until
	}
	return "every release"
}

// triple parses "0.11.1" (a missing patch is 0; anything after the patch is ignored).
func triple(s string) (v [3]int, ok bool) {
	if s == "" {
		return v, false
	}
	parts := strings.SplitN(s, ".", 4)
	for i := 0; i < 3 && i < len(parts); i++ {
		digits := parts[i]
		for j, r := range digits {
			if r < '0' || r > '9' {
				digits = digits[:j]
				break
			}
		}
		n, err := strconv.Atoi(digits)
		if err != nil {
			return [3]int{}, false
		}
		v[i] = n
	}
	return v, true
}

// Facts reckon relies on. Each is a variable so that code names the fact it reads.
var (
	// VLLMProfilerEnv: VLLM_TORCH_PROFILER_DIR switches vLLM's torch profiler on (and registers
	// /start_profile); deprecated by --profiler-config in 0.13, removed in 0.16.
	VLLMProfilerEnv = Fact{
		ID: "vllm.profiler.env_dir", Engine: VLLM, Until: "0.16.0",
		Says:   "VLLM_TORCH_PROFILER_DIR names the torch profiler's trace directory; from 0.13 it is deprecated (read only as a fallback of --profiler-config), and 0.16 removed it: setting it there configures nothing.",
		Values: []string{"VLLM_TORCH_PROFILER_DIR"},
		Sources: []Source{
			{Repo: "vllm-project/vllm", Path: "#7451", Ref: "merged 2024-08", Quote: "Enabled and configured through env vars: `VLLM_TORCH_PROFILER_DIR=/mnt/traces/`"},
			{Repo: "vllm-project/vllm", Path: "#29912", Ref: "merged 2025-12 (v0.13.0)", Quote: "refactors all profiling control environment variables into a CLI configuration object `profiler_config`. The previous environment variables are retained as deprecated"},
			{Repo: "vllm-project/vllm", Path: "#33536", Ref: "merged 2026-02 (first in v0.16.0)", Quote: "Removed 11 deprecated environment variables: ... `VLLM_TORCH_PROFILER_DIR`"},
			{Repo: "vllm-project/vllm-omni", Path: "#6519", Ref: "comment 2026-08-23", Quote: "#33536's merge commit is an ancestor of v0.16.0 but not v0.15.1", Secondary: true},
		},
	}
	// VLLMProfilerConfig: --profiler-config (JSON) names the profiler and its trace directory.
	VLLMProfilerConfig = Fact{
		ID: "vllm.profiler.config_flag", Engine: VLLM, Since: "0.13.0",
		Says:   `--profiler-config '{"profiler": "torch", "torch_profiler_dir": DIR}' switches the torch profiler on; "torch" without a directory is refused, and a relative directory is made absolute.`,
		Values: []string{"--profiler-config", "profiler", "torch_profiler_dir"},
		Sources: []Source{
			{Repo: "vllm-project/vllm", Path: "vllm/config/profiler.py", Ref: "04b022935cd5ce0373e624e317c84f18a45a52b0", Quote: `raise ValueError("torch_profiler_dir must be set when profiler is 'torch'")`},
			{Repo: "vllm-project/vllm-ascend", Path: "#5950", Ref: "2026-01-16", Quote: "Starting from version v0.13.0 of vLLM ... they are configured using --profiler-config", Secondary: true},
		},
	}
	// VLLMStartProfileNeedsProfiler: without a configured profiler vLLM serves no /start_profile.
	VLLMStartProfileNeedsProfiler = Fact{
		ID: "vllm.profiler.start_profile_404", Engine: VLLM,
		Says:   "/start_profile and /stop_profile exist only when a profiler is configured at launch (the env var before 0.16, --profiler-config from 0.13); otherwise they answer 404.",
		Values: []string{"/start_profile", "/stop_profile"},
	}
	// VLLMFrontendTrace: the API server's own CPU trace lands beside the workers' traces.
	VLLMFrontendTrace = Fact{
		ID: "vllm.profiler.frontend_trace", Engine: VLLM, Since: "0.13.0",
		Says:   "The front end (AsyncLLM) writes a CPU-only trace named {host}_{pid}.async_llm.* into the same directory as the workers' traces, unless ignore_frontend is set; it is not a rank.",
		Values: []string{".async_llm."},
		Sources: []Source{
			{Repo: "vllm-project/vllm", Path: "vllm/config/profiler.py", Ref: "04b022935cd5ce0373e624e317c84f18a45a52b0", Quote: "Both AsyncLLM's CPU traces and worker's traces (CPU & GPU) will be saved under this directory."},
			{Repo: "vllm-project/vllm", Path: "vllm/v1/engine/async_llm.py", Ref: "2026 main (read through the code index)", Quote: `worker_name = f"{socket.gethostname()}_{os.getpid()}.async_llm"`},
		},
	}
	// VLLMMaxCaptureSize: the flag that bounds CUDA graph capture sizes.
	VLLMMaxCaptureSize = Fact{
		ID: "vllm.flag.max_cudagraph_capture_size", Engine: VLLM, Since: "0.11.1",
		Says:   "--max-cudagraph-capture-size N bounds the captured batch sizes; 0.11.0 and earlier take --cuda-graph-sizes N and reject the new flag (argparse: unrecognized arguments).",
		Values: []string{"--max-cudagraph-capture-size", "--cuda-graph-sizes"},
		Sources: []Source{
			{Repo: "verl-project/verl", Path: "#6728", Ref: "merged 2026-06", Quote: "Starting from vLLM 0.11.1, the `cuda_graph_sizes` argument can no longer be passed directly via server startup commands", Secondary: true},
			{Repo: "docs.vllm.ai", Path: "/en/v0.11.1/cli/serve/", Ref: "v0.11.1", Quote: "--max-cudagraph-capture-size (first release whose CLI reference lists it, per verl#6728)", Secondary: true},
		},
	}
	// SGLangFusionAutoEnable: SGLang turns FlashInfer allreduce fusion on by itself.
	SGLangFusionAutoEnable = Fact{
		ID: "sglang.fusion.auto_enable", Engine: SGLang,
		Says:   "SGLang enables FlashInfer allreduce fusion by itself for these model architectures on SM90/SM100 GPUs, single node, without DP attention or an MoE all-to-all backend (not on H20), whatever --disable-custom-all-reduce says.",
		Values: []string{"DeepseekV3ForCausalLM", "GptOssForCausalLM", "Glm4MoeForCausalLM", "Glm4MoeLiteForCausalLM", "Qwen3MoeForCausalLM", "KimiK25ForConditionalGeneration"},
		Sources: []Source{
			{Repo: "sgl-project/sglang", Path: "python/sglang/srt/server_args.py", Ref: "469c63e54e7d94591617ef9590c6aa26d54dc1bb", Quote: `and (is_sm90_supported() or is_sm100_supported()) and not self.enable_dp_attention and self.nnodes == 1 ... self.enable_flashinfer_allreduce_fusion = True`},
		},
	}
	// SGLangFusionDisableFlag: how to turn the fusion off.
	SGLangFusionDisableFlag = Fact{
		ID: "sglang.fusion.disable_flag", Engine: SGLang,
		Says:   "--enforce-disable-flashinfer-allreduce-fusion turns FlashInfer allreduce fusion off, winning over the auto-enable; there is no --disable-flashinfer-allreduce-fusion. Releases without the flag cannot turn the auto-enable off.",
		Values: []string{"--enforce-disable-flashinfer-allreduce-fusion"},
		Sources: []Source{
			{Repo: "sgl-project/sglang", Path: "test/registered/models/test_nvidia_nemotron_3_nano.py", Ref: "2026 main (flashinfer 0.6.14 era)", Quote: `FlashInfer trtllm allreduce fusion on flashinfer 0.6.14 degrades gsm8k ... "--enforce-disable-flashinfer-allreduce-fusion",`},
		},
	}
	// FlashInferFusionKernels: the kernels FlashInfer's allreduce fusion launches.
	FlashInferFusionKernels = Fact{
		ID: "flashinfer.kernels.allreduce_fusion", Engine: FlashInfer,
		Says:   "FlashInfer's TRT-LLM allreduce fusion (allreduce + residual + RMSNorm, and the MoE reduction variants) runs these kernels, a third allreduce implementation beside NCCL and custom allreduce.",
		Values: []string{"allreduce_fusion_kernel_oneshot_lamport", "allreduce_fusion_kernel_twoshot_sync", "moereduce_allreduce_fusion_kernel_oneshot_lamport", "moefinalize_allreduce_fusion_kernel_oneshot_lamport"},
		Sources: []Source{
			{Repo: "flashinfer-ai/flashinfer", Path: "include/flashinfer/comm/trtllm_allreduce_fusion.cuh", Ref: "fb28d7242b3506a2348265962041acc1fb56cca4", Quote: "__global__ void allreduce_fusion_kernel_oneshot_lamport(AllReduceFusionParams<T> params)"},
			{Repo: "flashinfer-ai/flashinfer", Path: "include/flashinfer/comm/trtllm_moe_allreduce_fusion.cuh", Ref: "fb28d7242b3506a2348265962041acc1fb56cca4", Quote: "__global__ void moereduce_allreduce_fusion_kernel_oneshot_lamport("},
		},
	}
	// CustomAllReduceKernels: the custom allreduce kernels of SGLang and vLLM.
	CustomAllReduceKernels = Fact{
		ID: "custom_allreduce.kernels", Engine: VLLM,
		Says:   "vLLM's custom allreduce (and SGLang's v1, a port of it) runs the one-stage and two-stage cross_device_reduce kernels.",
		Values: []string{"cross_device_reduce_1stage", "cross_device_reduce_2stage"},
		Sources: []Source{
			{Repo: "flashinfer-ai/flashinfer", Path: "include/flashinfer/comm/vllm_custom_all_reduce.cuh", Ref: "fb28d7242b3506a2348265962041acc1fb56cca4", Quote: "cross_device_reduce_1stage(RankData* _dp, RankSignals sg, Signal* self_sg,"},
		},
	}
	// NCCLKernelAlgorithm: what an NCCL kernel name tells of the algorithm.
	NCCLKernelAlgorithm = Fact{
		ID: "nccl.kernel.algorithm", Engine: NCCL,
		Says:   "NCCL allreduce kernel names tell TREE from not-TREE only: NVLS, CollNet and PAT also run in ..._RING_LL kernels, so a RING kernel does not prove the ring algorithm ran.",
		Values: []string{"ncclDevKernel_AllReduce_Sum_bf16_RING_LL", "ncclDevKernel_AllReduce_Sum_bf16_TREE_LL"},
	}
	// SGLangStopProfileEarly: old SGLang answers /stop_profile before the traces are on disk.
	SGLangStopProfileEarly = Fact{
		ID: "sglang.profiler.stop_before_written", Engine: SGLang, Until: "0.4.4",
		Says:   "/stop_profile answers before every rank's trace is written (a rank may still be flushing), so a reader must wait for the files to settle and skip a truncated one.",
		Values: []string{"/stop_profile"},
	}
	// SGLangTraceName: SGLang's per-rank trace file name.
	SGLangTraceName = Fact{
		ID: "sglang.profiler.trace_name", Engine: SGLang,
		Says:   "Each TP rank writes {profile_id}-TP-{rank}.trace.json.gz into the output directory.",
		Values: []string{"-TP-"},
	}
	// SGLangSpecV2Logprobs: speculative decoding v2 and logprobs.
	SGLangSpecV2Logprobs = Fact{
		ID: "sglang.bug.spec_v2_logprobs", Engine: SGLang,
		Says:   "With spec v2 and return_logprob, output logprobs come back for the first token only (#14046 is a closed PR, not a fix); later releases crash instead (#17349, #19761); NGRAM omits output logprobs entirely (#10660).",
		Values: []string{"SGLANG_ENABLE_SPEC_V2"},
	}
	// VLLMSpecSkipsLogprobs: old vLLM does not speculate for requests with logprobs.
	VLLMSpecSkipsLogprobs = Fact{
		ID: "vllm.spec.skip_logprobs", Engine: VLLM, Until: "0.14.0",
		Says:   "A request with logprobs or prompt_logprobs is not speculated (decoded one token per step); the check was removed around 0.14.",
		Values: []string{"logprobs", "prompt_logprobs"},
		Sources: []Source{
			{Repo: "vllm-project/vllm", Path: "vllm/v1/spec_decode/utils.py", Ref: "is_spec_decode_unsupported, before #34497", Quote: "or sampling_params.logprobs is not None"},
			{Repo: "vllm-project/vllm", Path: "#34497", Ref: "≈ v0.14.0 (boundary inferred, not from a tag)", Quote: "is_spec_decode_unsupported removal"},
		},
	}
	// SGLangGraphMaxBSDecode: the decode spelling of the CUDA graph batch flag.
	SGLangGraphMaxBSDecode = Fact{
		ID: "sglang.flag.cuda_graph_max_bs_decode", Engine: SGLang, Since: "0.5.15",
		Says:   "--cuda-graph-max-bs-decode replaces --cuda-graph-max-bs, which still works with a deprecation warning; v0.5.15 is the earliest release seen launched with it.",
		Values: []string{"--cuda-graph-max-bs-decode", "--cuda-graph-max-bs"},
		Sources: []Source{
			{Repo: "sgl-project/sglang", Path: "#29591", Ref: "2026-06-29", Quote: "'--cuda-graph-max-bs is deprecated, use --cuda-graph-max-bs-decode'"},
			{Repo: "docker image lmsysorg/sglang", Path: "v0.5.15-cu129", Ref: "third-party report of 2026-07", Quote: "launched with --cuda-graph-max-bs-decode", Secondary: true},
		},
	}
	// SGLangCustomARV2: current SGLang's custom allreduce needs full NVLink.
	SGLangCustomARV2 = Fact{
		ID: "sglang.custom_allreduce.v2_nvlink_only", Engine: SGLang,
		Says:   "CustomAllReduceV2 (the default in current SGLang; SGLANG_OPT_USE_CUSTOM_ALL_REDUCE_V2=0 falls back to v1) runs only with full NVLink: at TP2 over PCIe it is silently NCCL, and it logs nothing when on.",
		Values: []string{"SGLANG_OPT_USE_CUSTOM_ALL_REDUCE_V2"},
		Sources: []Source{
			{Repo: "sgl-project/sglang", Path: "python/sglang/srt/distributed/device_communicators/custom_all_reduce_v2.py", Ref: "2026 main (can_use_custom_all_reduce_v2)", Quote: "return full_nvlink is True"},
			{Repo: "sgl-project/sglang", Path: "#29562", Ref: "2026-06-28 (real log)", Quote: "CustomAllReduceV2 is disabled because"},
		},
	}
	// VLLMRegisteringDebug: the custom allreduce's graph-registration line.
	VLLMRegisteringDebug = Fact{
		ID: "vllm.log.registering_graph_addresses", Engine: VLLM,
		Says:   `Some releases log "Registering N cuda graph addresses" at DEBUG only, so its absence at INFO does not mean custom allreduce was off.`,
		Values: []string{"Registering", "cuda graph addresses"},
	}
)

// all is every fact, in the order the docs list them.
var all = []*Fact{
	&VLLMProfilerEnv, &VLLMProfilerConfig, &VLLMStartProfileNeedsProfiler, &VLLMFrontendTrace, &VLLMMaxCaptureSize,
	&VLLMRegisteringDebug, &VLLMSpecSkipsLogprobs,
	&SGLangGraphMaxBSDecode, &SGLangCustomARV2,
	&SGLangFusionAutoEnable, &SGLangFusionDisableFlag, &SGLangStopProfileEarly, &SGLangTraceName, &SGLangSpecV2Logprobs,
	&FlashInferFusionKernels, &CustomAllReduceKernels, &NCCLKernelAlgorithm,
}

// All returns every fact (copies), in the docs' order.
func All() []Fact {
	out := make([]Fact, len(all))
	for i, f := range all {
		out[i] = *f
	}
	return out
}

// Lookup returns the fact named id.
func Lookup(id string) (Fact, bool) {
	for _, f := range all {
		if f.ID == id {
			return *f, true
		}
	}
	return Fact{}, false
}

// Counts are the table's size: facts, sources, and facts without a source.
func Counts() (facts, sources, unverified int) {
	for _, f := range all {
		facts++
		sources += len(f.Sources)
		if !f.Verified() {
			unverified++
		}
	}
	return facts, sources, unverified
}

// InRange reports whether release (major, minor, patch) lies in the fact's range; newest (a
// main-branch build or no version given) counts as the newest release.
func (f Fact) InRange(v [3]int, newest bool) bool {
	if s, ok := f.SinceTriple(); ok && !newest && less(v, s) {
		return false
	}
	if u, ok := f.UntilTriple(); ok && (newest || !less(v, u)) {
		return false
	}
	return true
}

func less(a, b [3]int) bool {
	for i := 0; i < 3; i++ {
		if a[i] != b[i] {
			return a[i] < b[i]
		}
	}
	return false
}

// String is "ID (engine, range)".
func (f Fact) String() string { return fmt.Sprintf("%s (%s, %s)", f.ID, f.Engine, f.Range()) }
