package suites

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/reckon-ci/reckon/engine"
	"github.com/reckon-ci/reckon/engine/client"
	"github.com/reckon-ci/reckon/engine/profile"
	"github.com/reckon-ci/reckon/engine/vllm"
	"github.com/reckon-ci/reckon/gate"
	"github.com/reckon-ci/reckon/spec"
	"github.com/reckon-ci/reckon/wire"
	"github.com/reckon-ci/reckon/wire/enginefacts"
	"github.com/reckon-ci/reckon/workload"
)

// traceSettleTimeout bounds the wait for a profiling window's traces to settle after
// /stop_profile: an engine may answer before every rank has written its trace (reported of
// SGLang before about 0.4.4; wire/enginefacts sglang.profiler.stop_before_written, unverified).
const traceSettleTimeout = 30 * time.Second

// profileWindowTokens is the length of the one greedy request run under the profiler: a prefill
// and a few decode steps, enough for every allreduce path the engine takes at batch 1.
const profileWindowTokens = 16

// traceParseTimeout bounds the parsing of one profile window's traces (at most
// profile.MaxTotalTraceBytes, uncompressed, about 20 s of JSON): the CPU an engine's traces can
// cost the gate.
const traceParseTimeout = 2 * time.Minute

// profileDir is where a config's profiler traces go.
func (fw *framework) profileDir(name string) string {
	return filepath.Join(fw.opts.OutDir, "profiles", name)
}

// profilerSetup adds what an engine needs at launch to serve /start_profile and records where
// its traces will land (cs.traceDir): vLLM's --profiler-config from 0.13, its
// VLLM_TORCH_PROFILER_DIR before, a user's own setting kept and collected
// (vllm.ProfilerLaunch). SGLang is told the directory per request.
func (fw *framework) profilerSetup(lc *engine.LaunchConfig, cs *configState) {
	cs.traceDir = ""
	if fw.adapter.Name() != spec.EngineVLLM {
		return
	}
	dir, err := filepath.Abs(fw.profileDir(cs.name))
	if err != nil {
		dir = fw.profileDir(cs.name)
	}
	ps, err := vllm.ProfilerLaunch(lc.EngineVersion, lc.Env, lc.ExtraArgs, dir)
	log := fw.log.WithField("config", cs.name)
	if err != nil {
		// The launch itself will fail on the same argument; the profiler source says why.
		log.WithError(err).Warn("profiler setup")
		cs.traceDir = dir
		return
	}
	lc.Env = ps.Env
	if len(ps.Args) > 0 {
		lc.ExtraArgs = append(slices.Clone(lc.ExtraArgs), ps.Args...)
	}
	cs.traceDir = ps.TraceDir
	if ps.Note != "" {
		log.WithField("traces", ps.TraceDir).Info("profiler: " + ps.Note)
	}
}

// needsAllReduceEvidence reports whether any selected check of the spec judges what allreduce the
// config ran: an expect check of it, or an equivalence check naming it.
func needsAllReduceEvidence(s *spec.Spec, name string) bool {
	for _, c := range s.Checks {
		if x := c.Expectation(); x != nil && slices.Contains(x.Configs, name) && x.Expect.AllReduce != "" {
			return true
		}
		if e := c.Equivalence(); e != nil && e.Involves(name) {
			return true
		}
	}
	return false
}

// gatherAllReduceEvidence learns which allreduce the config's engine runs, from every source:
// the allreduce kernels in a torch-profiler window around one short greedy request, the
// engine's log, and its /server_info. Failures of a source are evidence too (what was tried).
func (fw *framework) gatherAllReduceEvidence(ctx context.Context, cs *configState) {
	if cs.inst == nil || cs.launch.TPSize < 2 || !needsAllReduceEvidence(fw.spec, cs.name) {
		return
	}
	sources := []gate.AllReduceSource{fw.profiledAllReduce(ctx, cs), logAllReduce(cs.report)}
	if s, ok := fw.serverInfoAllReduce(ctx, cs); ok {
		sources = append(sources, s)
	}
	ev := gate.CombineAllReduce(sources)
	if ev.Effective == gate.BackendFused && fw.adapter.Name() == spec.EngineSGLang {
		ev.TurnOff = enginefacts.SGLangFusionDisableFlag.Value()
	}
	cs.allreduce = &ev
	log := fw.log.WithField("config", cs.name).WithField("allreduce", ev.Summary())
	if ev.Disagreement != "" {
		log = log.WithField("disagreement", ev.Disagreement)
	}
	log.Info("effective allreduce")
	fw.mu.Lock()
	rc := fw.reportConfig(cs.name)
	rc.AllReduce = &ev
	if rc.Engine != nil && ev.Effective != gate.BackendUnknown {
		rc.Engine["allreduce"] = ev.Effective
	}
	fw.mu.Unlock()
}

// profiledAllReduce runs one greedy request of profileWindowTokens tokens between
// /start_profile and /stop_profile and counts the allreduce kernels in the traces the engine
// wrote.
func (fw *framework) profiledAllReduce(ctx context.Context, cs *configState) (src gate.AllReduceSource) {
	src = gate.AllReduceSource{Source: gate.SourceProfiler, Says: gate.BackendUnknown}
	defer func() {
		// Name the budget that ended the window (launchConfig's evidenceBudget), not only
		// "context deadline exceeded".
		if ctx.Err() != nil && src.Says == gate.BackendUnknown {
			src.Detail += " (" + context.Cause(ctx).Error() + ")"
		}
	}()
	dir, err := filepath.Abs(fw.profileDir(cs.name))
	if fw.adapter.Name() == spec.EngineVLLM {
		// vLLM's directory is fixed at launch (profilerSetup).
		if cs.traceDir == "" {
			src.Detail = "the config's own --profiler-config names no torch profiler: no torch traces to count"
			return src
		}
		dir, err = cs.traceDir, nil
	}
	if err == nil {
		err = os.MkdirAll(dir, 0o755)
	}
	if err != nil {
		src.Detail = fmt.Sprintf("trace directory: %v", err)
		return src
	}
	c := fw.client(cs)
	since := time.Now().Add(-time.Second) // file systems with coarse modification times
	before := profile.Snapshot(dir)       // a shared directory: earlier windows' traces are not this one's
	if err := c.StartProfile(ctx, dir); err != nil {
		src.Detail = profileUnavailable(err)
		return src
	}
	prompt := "The quick brown fox"
	if fw.spec.Numerics != nil {
		if ps, err := workload.LoadPrompts(fw.spec.Numerics.Prompts); err == nil && len(ps) > 0 && ps[0].Text != "" {
			prompt = ps[0].Text
		}
	}
	mt, temp := profileWindowTokens, 0.0
	rctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	resp, reqErr := c.Complete(rctx, wire.CompletionRequest{Prompt: client.PromptText(prompt), MaxTokens: &mt, Temperature: &temp})
	cancel()
	if err := c.StopProfile(ctx); err != nil {
		src.Detail = fmt.Sprintf("stop profile: %v", err)
		return src
	}
	if reqErr != nil {
		src.Detail = fmt.Sprintf("the profiled request failed: %v", reqErr)
		return src
	}
	// Wait for every rank's trace to be written and stop growing (bounded), then count the
	// readable ones: a rank still flushing is skipped and named, not fatal to the others.
	wctx, wcancel := context.WithTimeout(ctx, traceSettleTimeout)
	files, settled, err := profile.WaitTraces(wctx, dir, since, profile.SettleOptions{Ranks: cs.launch.TPSize, Existing: before})
	wcancel()
	if err == nil && len(files) == 0 {
		err = errors.New("the engine wrote no trace file")
	}
	if err != nil {
		src.Detail = fmt.Sprintf("traces in %s: %v", dir, err)
		return src
	}
	pctx, pcancel := context.WithTimeoutCause(ctx, traceParseTimeout, fmt.Errorf("parsing the traces took longer than %s", traceParseTimeout))
	sum, err := profile.ParseTraces(pctx, files)
	pcancel()
	if err != nil {
		src.Detail = fmt.Sprintf("traces in %s: %v", dir, err)
		return src
	}
	src.Says, src.Detail = sum.Verdict(), sum.String()
	if !settled {
		src.Detail += fmt.Sprintf(" (traces had not settled after %s: %d file(s) for %d rank(s))", traceSettleTimeout, len(files), cs.launch.TPSize)
	}
	if r, steps := sum.Ranks(), completionTokens(resp); r > 0 && steps > 0 && sum.CustomAllReduce+sum.NCCLAllReduce > 0 {
		// One forward step per generated token: the prefill, then the decode steps.
		src.Detail += fmt.Sprintf(" (%.1f per rank per step over %d steps)", float64(sum.CustomAllReduce+sum.NCCLAllReduce)/float64(r*steps), steps)
	}
	if src.Says == profile.VerdictFused {
		src.Says = gate.BackendFused
	}
	if src.Says == profile.VerdictUnknown {
		src.Says = gate.BackendUnknown
		src.Detail += ": no allreduce kernel ran in the profiled window"
	}
	src.NCCLAlgorithms = ncclAlgorithms(sum)
	return src
}

// profileUnavailable words a failed /start_profile.
func profileUnavailable(err error) string {
	var ae *client.APIError
	if errors.As(err, &ae) && ae.StatusCode == 404 {
		return fmt.Sprintf("the engine serves no /start_profile (vLLM needs %s at launch; %s only before %s)",
			enginefacts.VLLMProfilerConfig.Value(), enginefacts.VLLMProfilerEnv.Value(), enginefacts.VLLMProfilerEnv.Until)
	}
	return fmt.Sprintf("start profile: %v", err)
}

// ncclKernelAlgoRE finds the algorithm in an NCCL kernel name:
// ncclDevKernel_AllReduce_Sum_bf16_RING_LL, ncclKernel_AllReduce_TREE_LL128_Sum_half.
var ncclKernelAlgoRE = regexp.MustCompile(`_(RING|TREE|NVLS_TREE|NVLS|COLLNET_DIRECT|COLLNET_CHAIN|PAT)_`)

// ncclAlgorithms are the algorithms of the NCCL allreduce kernels seen, sorted.
func ncclAlgorithms(sum *profile.Summary) []string {
	seen := map[string]bool{}
	for _, f := range sum.Files {
		for _, k := range f.Kernels {
			if profile.Classify(k) != profile.NCCLAllReduce {
				continue
			}
			if m := ncclKernelAlgoRE.FindStringSubmatch(k); m != nil {
				seen[m[1]] = true
			}
		}
	}
	out := make([]string, 0, len(seen))
	for a := range seen {
		out = append(out, a)
	}
	slices.Sort(out)
	return out
}

// logAllReduce is what the engine's log says.
func logAllReduce(r *engine.Report) gate.AllReduceSource {
	src := gate.AllReduceSource{Source: gate.SourceLog, Says: gate.BackendUnknown, Detail: "no record of the allreduce backend in the log"}
	if r == nil {
		src.Detail = "the log could not be read"
		return src
	}
	switch r.AllReduce {
	case engine.AllReduceCustom:
		src.Says, src.Detail = gate.BackendCustom, "custom allreduce set up"
	case engine.AllReduceNCCL:
		src.Says, src.Detail = gate.BackendNCCL, "custom allreduce not used"
		if r.CustomAllReduceDisabledReason != nil {
			src.Detail = *r.CustomAllReduceDisabledReason
		}
	}
	return src
}

// serverInfoAllReduce is what /server_info says: disable_custom_all_reduce true means NCCL;
// false proves nothing (the engine may still decline custom allreduce on this topology).
func (fw *framework) serverInfoAllReduce(ctx context.Context, cs *configState) (gate.AllReduceSource, bool) {
	if fw.adapter.Name() != spec.EngineSGLang {
		return gate.AllReduceSource{}, false
	}
	info, err := fw.client(cs).ServerInfo(ctx)
	if err != nil {
		return gate.AllReduceSource{Source: gate.SourceServerInfo, Says: gate.BackendUnknown, Detail: err.Error()}, true
	}
	if info.DisableCustomAR {
		return gate.AllReduceSource{Source: gate.SourceServerInfo, Says: gate.BackendNCCL, Detail: "disable_custom_all_reduce is true"}, true
	}
	return gate.AllReduceSource{Source: gate.SourceServerInfo, Says: gate.BackendUnknown, Detail: "disable_custom_all_reduce is false (custom allreduce allowed, not proven used)"}, true
}

// requestedAllReduce is the allreduce a config asks for.
func requestedAllReduce(l spec.Launch) string {
	if l.DisableCustomAllReduce {
		return gate.BackendNCCL
	}
	return gate.BackendCustom
}

// ncclAlgoOf is the NCCL_ALGO a config sets, trimmed.
func ncclAlgoOf(l spec.Launch) string { return strings.TrimSpace(l.Env["NCCL_ALGO"]) }

// completionTokens is the number of tokens a completion generated (0 when it does not say).
func completionTokens(r *wire.CompletionResponse) int {
	if r == nil || r.Usage == nil {
		return 0
	}
	return r.Usage.CompletionTokens
}

// reportAllReduce is what the recorded engine report says of the allreduce backend (its
// "allreduce" and "custom_allreduce_disabled_reason" keys): the log's word, as the results keep it.
func reportAllReduce(engineReport map[string]any) gate.AllReduceSource {
	src := gate.AllReduceSource{Source: gate.SourceLog, Says: gate.BackendUnknown, Detail: "no record of the allreduce backend in the log"}
	if engineReport == nil {
		src.Detail = "the log could not be read"
		return src
	}
	switch ar, _ := engineReport["allreduce"].(string); ar {
	case engine.AllReduceCustom:
		src.Says, src.Detail = gate.BackendCustom, "custom allreduce set up"
	case engine.AllReduceNCCL:
		src.Says, src.Detail = gate.BackendNCCL, "custom allreduce not used"
		if why, ok := engineReport["custom_allreduce_disabled_reason"].(string); ok && why != "" {
			src.Detail = why
		}
	}
	return src
}
