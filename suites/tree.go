package suites

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/onsi/ginkgo/v2"

	"github.com/reckon-ci/reckon/gate"
	"github.com/reckon-ci/reckon/reporters"
	"github.com/reckon-ci/reckon/spec"
	"github.com/reckon-ci/reckon/wire"
)

// Label names of check kinds (besides config names and the spec's tags).
const (
	labelHealth     = "health"
	labelMemory     = "memory"
	labelNumerics   = "numerics"
	labelThroughput = "throughput"
)

// define builds the Ginkgo tree for the spec: one outer Ordered container (so that the
// cross-config checks run after every config) that keeps going after failures; inside it one
// container per config whose BeforeAll launches the engine once and whose DeferCleanup stops it.
func define(fw *framework) {
	s := fw.spec
	ginkgo.ReportAfterSuite("reckon interrupt detection", func(r ginkgo.Report) {
		// An interrupt (SIGINT/SIGTERM) and the suite timeout (--timeout) both stop the run
		// before every check ran: the run is interrupted, never green.
		fw.mu.Lock()
		fw.suiteReport = &r
		fw.mu.Unlock()
		if reason := fw.reasonOf(r.SpecialSuiteFailureReasons); reason != "" {
			fw.interrupted = true
			fw.interruptReason = reason
		}
	})
	ginkgo.Describe("gate "+s.Name, ginkgo.Ordered, ginkgo.ContinueOnFailure, ginkgo.Label(sanitizeLabels(s.Tags)...), func() {
		names := fw.shardConfigNames(s.ConfigNames())
		for _, n := range names {
			defineConfig(fw, fw.configs[n])
		}
		defineRelaunches(fw, names)
		defineCross(fw)
	})
}

func defineConfig(fw *framework, cs *configState) {
	s := fw.spec
	labels := append([]string{cs.name}, s.Labels(cs.name)...)
	grace := cs.launch.StopGrace.D() + 30*time.Second
	cfgLine := fw.configLine(cs.name)
	ginkgo.Describe("config "+cs.name, ginkgo.Label(sanitizeLabels(labels)...), func() {
		ginkgo.BeforeAll(func(ctx ginkgo.SpecContext) {
			// Cleanup first: it then runs however the launch ends (a panic, a node timeout).
			ginkgo.DeferCleanup(func(ctx ginkgo.SpecContext) {
				fw.stopConfig(ctx, cs)
			}, ginkgo.NodeTimeout(grace))
			// The engine must outlive this node's context: it serves every spec of the config.
			fw.launchConfig(fw.ctx, cs)
		}, ginkgo.NodeTimeout(cs.launch.ReadyTimeout.D()+grace))

		healthCheck := reporters.Check{Name: cs.name + ": launch and readiness", Kind: reporters.KindHealth, Config: cs.name, Labels: labels, Line: cfgLine}
		fw.plan(configContainer(cs.name), "launches and becomes ready", healthCheck)
		ginkgo.It("launches and becomes ready", fw.at(cfgLine), ginkgo.Label(labelHealth), func() {
			fw.judge(healthCheck, healthVerdict(cs))
		})
		// Checks on what the engine did at start-up run first; metrics that only exist after
		// traffic (peak GPU memory, speculative accept length) are judged after the measurements.
		var late []*spec.Check
		for _, c := range s.ChecksFor(cs.name) {
			if lateMetrics[c.Metric] || c.IsResultFloor() {
				late = append(late, c)
				continue
			}
			defineConfigCheck(fw, cs, c, labels, false)
		}
		if s.NeedsNumerics(cs.name) {
			name := probeSpecName(cs.name)
			fw.plan(configContainer(cs.name), name, reporters.Check{Name: name, Kind: kindMeasure, Config: cs.name, Labels: labels, Line: cfgLine})
			ginkgo.It(name, fw.at(cfgLine), ginkgo.Label(labelNumerics), func(ctx ginkgo.SpecContext) {
				err := fw.measureNumerics(ctx, cs)
				fw.judge(reporters.Check{Name: name, Kind: kindMeasure, Config: cs.name, Labels: labels, Line: cfgLine}, measureVerdict(name, cs, err, func() string {
					return fmt.Sprintf("%s: probed %d prompts", cs.name, len(cs.probe.Prompts))
				}))
			}, ginkgo.NodeTimeout(30*time.Minute))
		}
		for _, w := range s.WorkloadsFor(cs.name) {
			w := w
			name := trialsSpecName(cs.name, w.Name)
			fw.plan(configContainer(cs.name), name, reporters.Check{Name: name, Kind: kindMeasure, Config: cs.name, Labels: labels, Line: cfgLine})
			timeout := time.Duration(max(w.MaxTrials, w.Trials, 1)) * (w.RequestTimeout.D()*2 + 10*time.Minute)
			ginkgo.It(name, fw.at(cfgLine), ginkgo.Label(labelThroughput), func(ctx ginkgo.SpecContext) {
				err := fw.measureWorkload(ctx, cs, w)
				fw.judge(reporters.Check{Name: name, Kind: kindMeasure, Config: cs.name, Labels: labels, Line: cfgLine}, measureVerdict(name, cs, err, func() string {
					xs := metricSamples(cs.trials[w.Name], "output_throughput")
					return fmt.Sprintf("%s: %d trials of %s, output throughput %s tok/s", cs.name, len(xs), w.Name, fmtSamples(xs)) + trialNote(cs, w.Name)
				}))
			}, ginkgo.NodeTimeout(timeout))
		}
		for _, c := range late {
			defineConfigCheck(fw, cs, c, labels, true)
		}
		// Last: what the engine logged while it was measured (crashes, leaks, CUDA/NCCL errors).
		logName := cs.name + ": engine log shows no errors"
		fw.plan(configContainer(cs.name), logName, reporters.Check{Name: logName, Kind: reporters.KindHealth, Config: cs.name, Labels: labels, Line: cfgLine})
		ginkgo.It(logName, fw.at(cfgLine), ginkgo.Label(labelHealth), func() {
			cs.settle()
			fw.refreshReport(cs)
			fw.judge(reporters.Check{Name: logName, Kind: reporters.KindHealth, Config: cs.name, Labels: labels, Line: cfgLine}, logVerdict(logName, cs))
		})
	})
}

// metricPeakGPUMem is the floor metric measured by GPU memory sampling rather than read from the
// engine log.
const metricPeakGPUMem = "peak_gpu_mem_gib"

// lateMetrics are judged after a config's measurements, from a fresh read of its log.
var lateMetrics = map[string]bool{metricPeakGPUMem: true, "spec_accept_length": true}

func defineConfigCheck(fw *framework, cs *configState, c *spec.Check, labels []string, late bool) {
	kindLabel := labelMemory
	if c.Kind == spec.KindExpect {
		kindLabel = labelHealth
	}
	var needs []need
	if late && c.Metric != metricPeakGPUMem {
		needs = trafficNeed(fw.spec, cs.name)
	}
	fw.plan(configContainer(cs.name), c.Name, checkEntry(c, cs.name, labels), needs...)
	ginkgo.It(c.Name, fw.at(c.Line), ginkgo.Label(sanitizeLabels(append([]string{kindLabel}, c.Tags...))...), func() {
		if late {
			fw.refreshReport(cs)
		}
		fw.judge(checkEntry(c, cs.name, labels), configVerdict(cs, c))
	})
}

func defineCross(fw *framework) {
	s := fw.spec
	ginkgo.Describe(crossContainer, func() {
		for _, c := range s.Checks {
			c := c
			if !fw.inShard(c) {
				continue // another shard's, or left to reckon merge (applyShard)
			}
			if cross := crossEntry(c); cross != nil {
				fw.plan(crossContainer, c.Name, *cross, needsOf(s, c)...)
			}
			switch {
			case c.Kind == spec.KindRelative:
				ginkgo.It(c.Name, fw.at(c.Line), ginkgo.Label(sanitizeLabels(append([]string{labelMemory, c.Config, c.Of}, c.Tags...))...), func() {
					e := checkEntry(c, c.Config, nil)
					e.Against = c.Of
					fw.judge(e, relativeVerdict(fw, c))
				})
			case c.Kind == spec.KindEquivalence:
				ginkgo.It(c.Name, fw.at(c.Line), ginkgo.Label(sanitizeLabels(append([]string{labelNumerics, c.Base, c.Head}, c.Tags...))...), func() {
					e := checkEntry(c, c.Head, nil)
					e.Against = c.Base
					fw.judge(e, equivalenceVerdict(fw, c))
				})
			case c.Kind == spec.KindAllReduceProbe:
				ginkgo.It(c.Name, fw.at(c.Line), ginkgo.Label(sanitizeLabels(append([]string{labelNumerics}, c.Tags...))...), func() {
					fw.judge(checkEntry(c, "", nil), probeVerdict(fw, c))
				})
			case c.IsStatistical():
				names := []string{labelThroughput, c.Config}
				if c.Against == spec.AgainstConfig {
					names = append(names, c.AgainstConfig)
				}
				ginkgo.It(c.Name, fw.at(c.Line), ginkgo.Label(sanitizeLabels(append(names, c.Tags...))...), func() {
					e := checkEntry(c, c.Config, nil)
					if c.Against == spec.AgainstConfig {
						e.Against = c.AgainstConfig
					}
					fw.judge(e, fw.statVerdict(c))
				})
			}
		}
	})
}

// judge records a verdict as a report check and turns it into the spec's Ginkgo outcome.
func (fw *framework) judge(e reporters.Check, v gate.Verdict) {
	key := fw.markJudged()
	if start := ginkgo.CurrentSpecReport().StartTime; !start.IsZero() {
		e.Duration = time.Since(start)
	}
	why, partial := fw.partial[key]
	e, v = fw.entryOf(e, v, partial, why)
	fw.record(e)
	switch e.Status {
	case reporters.StatusFailed, reporters.StatusError:
		// Ginkgo reports where Fail was called (here); the message leads with the check's line
		// in the spec, which the spec's node location (fw.at) also shows.
		ginkgo.Fail(fw.at(e.Line).String() + ": " + v.Message)
	case reporters.StatusSkipped:
		ginkgo.Skip(v.Message)
	}
}

// entryOf turns a verdict into its report entry under the run's policy (--strict,
// --require-baseline), with the explanation of a failed statistical check. filtered says that
// --allow-partial skips the check because the label filter removed an input (why). It returns
// the entry and the verdict with its final message. reckon merge judges with it too.
func (fw *framework) entryOf(e reporters.Check, v gate.Verdict, filtered bool, why string) (reporters.Check, gate.Verdict) {
	partial := v.Outcome == gate.Skip // a config it compares was not launched
	if filtered {
		// --allow-partial: the label filter removed an input of this check (see preflight).
		v = gate.Verdict{Check: e.Name, Kind: e.Kind, Config: e.Config, Outcome: gate.Skip, Message: why}
		partial = true
	}
	e.Outcome = string(v.Outcome)
	e.Message = v.Message
	e.Details = v.Details
	e.Metrics = v.Metrics
	if v.Stat != nil {
		st := v.Stat
		e.Outcome = string(st.Outcome)
		e.Metric = st.Metric
		e.BaseMedian, e.HeadMedian, e.Ratio = ptr(st.BaseMedian), ptr(st.HeadMedian), ptr(st.Ratio)
		e.CILow, e.CIHigh, e.PValue = ptr(st.CILow), ptr(st.CIHigh), ptr(st.PValue)
	}
	if partial {
		e.Outcome = reporters.OutcomePartial
	}
	switch v.Outcome {
	case gate.Pass:
		e.Status = reporters.StatusPassed
	case gate.Fail:
		e.Status = reporters.StatusFailed
	case gate.Error:
		e.Status = reporters.StatusError
	case gate.NoBaseline:
		e.Status = reporters.StatusSkipped
		if fw.opts.RequireBaseline || fw.opts.Strict {
			e.Status = reporters.StatusFailed
		}
	case gate.Inconclusive, gate.Skip:
		e.Status = reporters.StatusSkipped
		if fw.opts.Strict {
			e.Status = reporters.StatusFailed
		}
	default:
		e.Status = reporters.StatusError
	}
	if e.Status == reporters.StatusFailed && v.Outcome != gate.Fail && v.Outcome != gate.Pass {
		// Failed by policy, not by a measured regression: say which.
		flag := "--strict"
		if v.Outcome == gate.NoBaseline && fw.opts.RequireBaseline {
			flag = "--require-baseline"
		}
		e.Message = strings.TrimSpace(e.Message + " (fails under " + flag + ")")
		v.Message = e.Message
	}
	if e.Status == reporters.StatusFailed && (e.Kind == reporters.KindThroughput || e.Kind == reporters.KindLatency) {
		// The one-line verdict carries the correlated evidence, e.g. "custom-ar: output_throughput
		// -57% vs nccl (...): regression; KV cache -91% (10.42 -> 0.90 GiB ...)".
		fw.mu.Lock()
		e.Explanation = reporters.Explain(&fw.run, &e)
		fw.mu.Unlock()
		if first, _, _ := strings.Cut(e.Explanation, "; "); first != "" && !strings.Contains(e.Message, first) {
			e.Message += "; " + first
		}
	}
	if e.Status == reporters.StatusError {
		if cs, ok := fw.configs[e.Config]; ok && cs.launchEr != nil {
			e.Details = strings.TrimSpace(e.Details + "\n\nengine log tail (" + cs.logPath + "):\n" + tailFile(cs.logPath, 40))
		}
	}
	return e, v
}

// crossEntry is the report entry of a cross-config check, as defineCross records it (nil for a
// check that is judged per config).
func crossEntry(c *spec.Check) *reporters.Check {
	var e reporters.Check
	switch {
	case c.Kind == spec.KindRelative:
		e = checkEntry(c, c.Config, nil)
		e.Against = c.Of
	case c.Kind == spec.KindEquivalence:
		e = checkEntry(c, c.Head, nil)
		e.Against = c.Base
	case c.Kind == spec.KindAllReduceProbe:
		e = checkEntry(c, "", nil)
	case c.IsStatistical():
		e = checkEntry(c, c.Config, nil)
		if c.Against == spec.AgainstConfig {
			e.Against = c.AgainstConfig
		}
	default:
		return nil
	}
	return &e
}

func checkEntry(c *spec.Check, config string, labels []string) reporters.Check {
	return reporters.Check{
		Name:   c.Name,
		Kind:   string(c.Kind),
		Config: config,
		Labels: append(append([]string(nil), labels...), c.Tags...),
		Line:   c.Line,
	}
}

func errVerdict(c *spec.Check, config string, err error) gate.Verdict {
	return gate.Verdict{Check: c.Name, Kind: string(c.Kind), Config: config, Outcome: gate.Error, Message: err.Error()}
}

func healthVerdict(cs *configState) gate.Verdict {
	v := gate.Verdict{Check: cs.name + ": launch and readiness", Kind: reporters.KindHealth, Config: cs.name}
	if err := cs.infraError(); err != nil {
		v.Outcome, v.Message = gate.Error, err.Error()
		return v
	}
	v.Outcome = gate.Pass
	v.Message = fmt.Sprintf("%s: engine ready at %s", cs.name, cs.inst.BaseURL())
	if r := cs.report; r != nil {
		v.Message += fmt.Sprintf(", allreduce %s", r.AllReduce)
		if r.KVCacheTokens != nil {
			v.Message += fmt.Sprintf(", KV cache %d tokens", *r.KVCacheTokens)
		}
		if len(r.Errors) > 0 {
			v.Details = fmt.Sprintf("the engine log shows %d error record(s); first: line %d: %s", len(r.Errors), r.Errors[0].Line, r.Errors[0].Text)
		}
	}
	return v
}

// reportValue reads a numeric EngineReport field by its JSON key.
func reportValue(cs *configState, metric string) (*float64, error) {
	if metric == metricPeakGPUMem {
		if v := cs.peakGPUMemGiB(); v != nil {
			return v, nil
		}
		return nil, fmt.Errorf("config %s: %s needs GPU memory sampling (nvidia-smi), which this testbed does not have", cs.name, metric)
	}
	if cs.reportFields == nil {
		return nil, fmt.Errorf("config %s: no engine report (log %s unreadable)", cs.name, cs.logPath)
	}
	raw, ok := cs.reportFields[metric]
	if !ok {
		return nil, fmt.Errorf("config %s: the engine report has no field %q", cs.name, metric)
	}
	if raw == nil {
		return nil, nil
	}
	f, ok := raw.(float64)
	if !ok {
		return nil, fmt.Errorf("config %s: engine report field %q is %v, not a number", cs.name, metric, raw)
	}
	return &f, nil
}

func configVerdict(cs *configState, c *spec.Check) gate.Verdict {
	// An engine that never became ready is not judged on the partial log it left: its checks
	// are errors, never passes. One that became ready and exited later was judged at start-up.
	if err := cs.infraError(); err != nil && (cs.report == nil || cs.launchEr != nil || cs.inst == nil) {
		return errVerdict(c, cs.name, err)
	}
	switch c.Kind {
	case spec.KindFloor:
		if c.IsResultFloor() {
			return resultFloorVerdict(cs, c)
		}
		v, err := reportValue(cs, c.Metric)
		if err != nil {
			return errVerdict(c, cs.name, err)
		}
		if v == nil {
			if err := cs.infraError(); err != nil {
				return errVerdict(c, cs.name, err)
			}
		}
		out := gate.Floor(c.Name, c.Metric, v, c.Min, c.Max)
		out.Config = cs.name
		out.Message = cs.name + ": " + strings.TrimPrefix(out.Message, c.Name+": ")
		return out
	case spec.KindExpect:
		if err := cs.infraError(); err != nil {
			return errVerdict(c, cs.name, err)
		}
		got := "unknown"
		if cs.report != nil && cs.report.AllReduce != "" {
			got = cs.report.AllReduce
		}
		out := gate.ExpectEqual(c.Name, "allreduce", got, c.Expect.AllReduce)
		out.Config = cs.name
		out.Message = cs.name + ": " + strings.TrimPrefix(out.Message, c.Name+": ")
		if cs.report != nil && cs.report.CustomAllReduceDisabledReason != nil && got != c.Expect.AllReduce {
			out.Details = strings.TrimSpace(out.Details + "\nengine said: " + *cs.report.CustomAllReduceDisabledReason)
		}
		return out
	}
	return errVerdict(c, cs.name, fmt.Errorf("check kind %s cannot judge one config", c.Kind))
}

func relativeVerdict(fw *framework, c *spec.Check) gate.Verdict {
	if c.Of == spec.OfBaseline {
		return baselineRelativeVerdict(fw, c)
	}
	head, base := fw.configs[c.Config], fw.configs[c.Of]
	if v, skip := skipUnlaunched(c, c.Config, head, base); skip {
		return v
	}
	hv, err := reportValue(head, c.Metric)
	if err != nil {
		return errVerdict(c, c.Config, err)
	}
	bv, err := reportValue(base, c.Metric)
	if err != nil {
		return errVerdict(c, c.Config, err)
	}
	for _, cs := range []*configState{head, base} {
		if cs.launchEr != nil && (hv == nil || bv == nil) {
			return errVerdict(c, c.Config, cs.infraError())
		}
	}
	out := gate.Relative(c.Name, c.Metric, hv, bv, c.Of, c.MinRatio, c.MaxRatio)
	out.Config = c.Config
	out.Message = c.Config + ": " + strings.TrimPrefix(out.Message, c.Name+": ")
	return out
}

func equivalenceVerdict(fw *framework, c *spec.Check) gate.Verdict {
	names := []string{c.Base, c.Head}
	for _, n := range []string{c.Twin, c.Oracle} {
		if n != "" {
			names = append(names, n)
		}
	}
	probes := map[string]*wire.NumericsProbe{}
	for _, n := range names {
		cs := fw.configs[n]
		if cs.probe == nil {
			err := cs.probeErr
			if err == nil {
				if v, skip := skipUnlaunched(c, c.Head, cs); skip {
					return v
				}
				err = fmt.Errorf("config %s: numerics were not measured (filtered out or interrupted)", cs.name)
			}
			return errVerdict(c, c.Head, err)
		}
		probes[n] = cs.probe
	}
	chk := gate.EquivalenceCheck{
		TopK:             c.TopK,
		MaxRatio:         c.MaxRatio,
		BitwiseTolerance: c.BitwiseTolerance,
		MaxDistance:      c.MaxDistance,
		MaxAbsLogprob:    c.MaxAbsLogprobDelta,
		MeanAbsLogprob:   c.MeanAbsLogprobDelta,
		MinExactMatch:    c.MinExactMatch,
		DType:            probes[c.Head].DType,
		TP:               probes[c.Head].TPSize,
	}
	if chk.TopK == 0 && fw.spec.Numerics != nil {
		chk.TopK = fw.spec.Numerics.TopLogprobs
	}
	out := gate.Equivalence(gate.EquivalenceProbes{Base: probes[c.Base], Head: probes[c.Head], Twin: probes[c.Twin], Oracle: probes[c.Oracle]}, chk)
	out.Check = c.Name
	out.Config = c.Head
	return out
}

func probeVerdict(fw *framework, c *spec.Check) gate.Verdict {
	// The same strict reader as `reckon probe check`: a file that breaks the probe contract
	// (a missing max_rel_err, an unknown field) is an error here too, never a pass.
	p, err := wire.ReadAllReduceProbe(c.File)
	if err != nil {
		return errVerdict(c, "", fmt.Errorf("allreduce probe: %w", err))
	}
	out := gate.AllReduceProbeCheckOf(p, probeTolerances(p.WorldSize, c), c.Algorithms)
	out.Check = c.Name
	return out
}

// probeTolerances are the gate's per-dtype defaults for worldSize ranks with the check's
// max_rel_err and max_abs_err applied on top (each replaces only its own bound).
func probeTolerances(worldSize int, c *spec.Check) map[string]gate.Tolerance {
	tol := gate.DefaultAllReduceTolerances(worldSize)
	for dt, v := range c.MaxRelErr {
		t := tol[dt]
		t.MaxRelErr = v
		tol[dt] = t
	}
	for dt, v := range c.MaxAbsErr {
		t, ok := tol[dt]
		if !ok {
			// A dtype the defaults do not know: bound only its absolute error.
			t.MaxRelErr = math.Inf(1)
		}
		t.MaxAbsErr = v
		tol[dt] = t
	}
	return tol
}

// statVerdict returns the verdict of a statistical check, computing every statistical check of
// the run once (the first time one is asked for) so that Holm-Bonferroni runs over the family.
func (fw *framework) statVerdict(c *spec.Check) gate.Verdict {
	fw.statOnce.Do(fw.computeStats)
	if err := fw.statErrs[c.Name]; err != nil {
		var sk errSkipped
		if errors.As(err, &sk) {
			return gate.Verdict{Check: c.Name, Kind: string(c.Kind), Config: c.Config, Outcome: gate.Skip, Message: sk.msg}
		}
		if gate.IsNoBaseline(err) || errors.Is(err, ErrNoHistory) {
			return gate.Verdict{Check: c.Name, Kind: string(c.Kind), Config: c.Config, Outcome: gate.NoBaseline, Message: err.Error()}
		}
		return errVerdict(c, c.Config, err)
	}
	st := fw.stats[c.Name]
	against := "baseline"
	if c.Against == spec.AgainstConfig {
		against = c.AgainstConfig
	} else if c.Against == spec.AgainstHistory {
		against = spec.AgainstHistory
	}
	v := st.Verdict(c.Name, c.Config, against)
	fw.annotateHistory(c, &v)
	if n := fw.launchNotes[c.Name]; n != nil {
		n.apply(&v)
	}
	return v
}

func (fw *framework) computeStats() {
	fw.stats = map[string]*gate.StatResult{}
	fw.statErrs = map[string]error{}
	fw.launchNotes = map[string]*launchNote{}
	var family []*gate.StatResult
	for _, c := range fw.spec.StatisticalChecks() {
		head := fw.configs[c.Config]
		if err := head.measErr[c.Workload]; err != nil {
			fw.statErrs[c.Name] = err
			continue
		}
		hs := metricSamples(head.trials[c.Workload], c.Metric)
		var bs []float64
		if c.Against == spec.AgainstConfig {
			base := fw.configs[c.AgainstConfig]
			if !base.launched() {
				fw.statErrs[c.Name] = errSkipped{fmt.Sprintf("config %s was not launched in this run (--label-filter); check not judged", base.name)}
				continue
			}
			if err := base.measErr[c.Workload]; err != nil {
				fw.statErrs[c.Name] = err
				continue
			}
			bs = metricSamples(base.trials[c.Workload], c.Metric)
			if msg := absentMetric(base, c); msg != "" {
				fw.statErrs[c.Name] = errSkipped{msg}
				continue
			}
		} else if c.Against == spec.AgainstHistory {
			var err error
			if bs, err = fw.historySamples(c); err != nil {
				fw.statErrs[c.Name] = err
				continue
			}
		} else {
			baseline, baselineErr, key := fw.baseline, fw.baselineErr, fw.testbedKey
			if head.baseline != nil || head.baselineErr != nil {
				baseline, baselineErr = head.baseline, head.baselineErr
			}
			if baselineErr != nil {
				fw.statErrs[c.Name] = baselineErr
				continue
			}
			bs = baseline.Samples(c.Config, c.Workload, c.Metric)
			if msg := absentInBaseline(baseline, key, c); len(bs) == 0 && msg != "" {
				fw.statErrs[c.Name] = errSkipped{msg}
				continue
			}
			if len(bs) == 0 {
				fw.statErrs[c.Name] = fmt.Errorf("baseline for testbed %s has no samples of %s/%s/%s; re-record it with reckon baseline record --from %s/results.json", key, c.Config, c.Workload, c.Metric, fw.opts.OutDir)
				continue
			}
		}
		if len(hs) == 0 && !head.launched() {
			fw.statErrs[c.Name] = errSkipped{fmt.Sprintf("config %s was not launched in this run (--label-filter); check not judged", c.Config)}
			continue
		}
		if msg := absentMetric(head, c); msg != "" {
			fw.statErrs[c.Name] = errSkipped{msg}
			continue
		}
		if len(hs) == 0 {
			fw.statErrs[c.Name] = fmt.Errorf("config %s: no %s samples for workload %s (measurement filtered out or interrupted)", c.Config, c.Metric, c.Workload)
			continue
		}
		m, ok := gate.MetricFor(c.Metric)
		if !ok {
			fw.statErrs[c.Name] = fmt.Errorf("%s: metric %q: direction unknown", fw.spec.File, c.Metric)
			continue
		}
		// Each result is decided at its own level (the check's alpha, or the sequential plan's
		// per-look level when the workload may add trials against a stored baseline), and Holm
		// then corrects across the family of gated checks keeping those levels.
		opts := fw.statOptions(c)
		if w, _ := fw.spec.Workload(c.Workload); c.Against == spec.AgainstBaseline {
			if plan, ok := sequentialPlan(w, c); ok {
				opts = plan.Options(opts)
			}
		}
		if w, _ := fw.spec.Workload(c.Workload); w != nil && w.LaunchCount() > 1 && c.Against == spec.AgainstConfig {
			// Launches are the unit: the variation between restarts is in every unit, so the
			// comparison is not fooled by trials of one launch that agree with each other.
			base := fw.configs[c.AgainstConfig]
			note := &launchNote{
				head: launchUnits(head.trials[c.Workload], head.trialLaunch[c.Workload], c.Metric), headName: c.Config,
				base: launchUnits(base.trials[c.Workload], base.trialLaunch[c.Workload], c.Metric), baseName: c.AgainstConfig,
			}
			fw.launchNotes[c.Name] = note
			hs, bs = note.head.Means, note.base.Means
		}
		r := gate.Compare(bs, hs, m, opts)
		fw.stats[c.Name] = &r
		family = append(family, &r)
	}
	gate.Holm(family, 0)
}

// kindMeasure is the report kind of a measurement step (numerics probe, throughput trials): it
// passes when the measurement completed and is an infrastructure error otherwise.
const kindMeasure = "measurement"

func measureVerdict(name string, cs *configState, err error, ok func() string) gate.Verdict {
	if err != nil {
		return gate.Verdict{Check: name, Kind: kindMeasure, Config: cs.name, Outcome: gate.Error, Message: err.Error()}
	}
	return gate.Verdict{Check: name, Kind: kindMeasure, Config: cs.name, Outcome: gate.Pass, Message: ok()}
}

func logVerdict(name string, cs *configState) gate.Verdict {
	v := gate.Verdict{Check: name, Kind: reporters.KindHealth, Config: cs.name, Outcome: gate.Pass}
	if err := cs.infraError(); err != nil {
		// An engine that did not start or that died is an infrastructure error, not a verdict
		// on its log: the log's error records (often the crash itself) go into the details.
		v.Outcome, v.Message = gate.Error, err.Error()
		if cs.report != nil {
			for _, e := range cs.report.Errors {
				v.Details += fmt.Sprintf("line %d [%s]: %s\n", e.Line, e.Kind, e.Text)
			}
		}
		return v
	}
	if cs.report == nil {
		v.Outcome, v.Message = gate.Error, fmt.Sprintf("%s: engine log %s could not be read", cs.name, cs.logPath)
		return v
	}
	if len(cs.report.Errors) == 0 {
		v.Message = fmt.Sprintf("%s: no error records in %s", cs.name, cs.logPath)
		return v
	}
	kinds := map[string]int{}
	var lines []string
	for _, e := range cs.report.Errors {
		kinds[e.Kind]++
		lines = append(lines, fmt.Sprintf("line %d [%s]: %s", e.Line, e.Kind, e.Text))
	}
	first := cs.report.Errors[0]
	v.Outcome = gate.Fail
	v.Message = fmt.Sprintf("%s: engine log shows %d error record(s), first %s at line %d: %s", cs.name, len(cs.report.Errors), first.Kind, first.Line, first.Text)
	v.Details = strings.Join(lines, "\n")
	return v
}

func fmtSamples(xs []float64) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = fmt.Sprintf("%.0f", x)
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// errSkipped marks a statistical check that was not judged because its data were never meant to
// be measured in this run.
type errSkipped struct{ msg string }

func (e errSkipped) Error() string { return e.msg }

// skipUnlaunched returns a skip verdict when one of the configs a cross-config check needs was
// never launched in this run (the label filter left it out): a filtered run is not a failure.
func skipUnlaunched(c *spec.Check, config string, states ...*configState) (gate.Verdict, bool) {
	for _, cs := range states {
		if !cs.launched() {
			return gate.Verdict{Check: c.Name, Kind: string(c.Kind), Config: config, Outcome: gate.Skip,
				Message: fmt.Sprintf("config %s was not launched in this run (--label-filter); check not judged", cs.name)}, true
		}
	}
	return gate.Verdict{}, false
}

func ptr(f float64) *float64 { return &f }

// sanitizeLabels drops characters Ginkgo does not allow in labels.
func sanitizeLabels(in []string) []string {
	out := make([]string, 0, len(in))
	for _, l := range in {
		l = strings.Map(func(r rune) rune {
			if strings.ContainsRune("&|!,()/", r) {
				return '_'
			}
			return r
		}, strings.TrimSpace(l))
		if l != "" {
			out = append(out, l)
		}
	}
	return out
}
