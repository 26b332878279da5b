package suites

import (
	"fmt"
	"strings"
	"time"

	"github.com/onsi/ginkgo/v2"

	"github.com/reckon-ci/reckon/gate"
	"github.com/reckon-ci/reckon/reporters"
	"github.com/reckon-ci/reckon/spec"
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
			if launchesOf(s, n) == 1 {
				defineJudged(fw, fw.configs[n])
			}
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
		}, ginkgo.NodeTimeout(launchNodeTimeout(cs.launch, true)))

		healthCheck := gate.Check{Verdict: gate.Verdict{Name: cs.name + ": launch and readiness", Kind: gate.KindHealth, Config: cs.name}, Labels: labels, Line: cfgLine}
		fw.plan(configContainer(cs.name), "launches and becomes ready", healthCheck)
		ginkgo.It("launches and becomes ready", fw.at(cfgLine), ginkgo.Label(labelHealth), func() {
			fw.judge(healthCheck, healthVerdict(cs))
		})
		// Checks on what the engine did at start-up run here; those on metrics that exist only
		// after traffic (peak GPU memory, speculative accept length, trials) are judged after
		// the config's last launch (defineJudged).
		for _, c := range s.ChecksFor(cs.name) {
			if k := configKindOf(c); k != nil && !k.late(c) {
				defineConfigCheck(fw, cs, c, labels, configContainer(cs.name))
			}
		}
		if s.NeedsNumerics(cs.name) {
			name := probeSpecName(cs.name)
			fw.plan(configContainer(cs.name), name, gate.Check{Verdict: gate.Verdict{Name: name, Kind: gate.KindMeasurement, Config: cs.name}, Labels: labels, Line: cfgLine})
			ginkgo.It(name, fw.at(cfgLine), ginkgo.Label(labelNumerics), func(ctx ginkgo.SpecContext) {
				err := fw.measureNumerics(ctx, cs)
				fw.judge(gate.Check{Verdict: gate.Verdict{Name: name, Kind: gate.KindMeasurement, Config: cs.name}, Labels: labels, Line: cfgLine}, measureVerdict(name, cs, err, func() string {
					return fmt.Sprintf("%s: probed %d prompts", cs.name, len(cs.probe.Prompts))
				}))
			}, ginkgo.NodeTimeout(30*time.Minute))
		}
		for _, w := range s.WorkloadsFor(cs.name) {
			w := w
			name := trialsSpecName(cs.name, w.Name)
			fw.plan(configContainer(cs.name), name, gate.Check{Verdict: gate.Verdict{Name: name, Kind: gate.KindMeasurement, Config: cs.name}, Labels: labels, Line: cfgLine})
			timeout := time.Duration(max(w.MaxTrials, w.Trials, 1)) * (w.RequestTimeout.D()*2 + 10*time.Minute)
			ginkgo.It(name, fw.at(cfgLine), ginkgo.Label(labelThroughput), func(ctx ginkgo.SpecContext) {
				err := fw.measureWorkload(ctx, cs, w)
				fw.judge(gate.Check{Verdict: gate.Verdict{Name: name, Kind: gate.KindMeasurement, Config: cs.name}, Labels: labels, Line: cfgLine}, measureVerdict(name, cs, err, func() string {
					xs := metricSamples(cs.trials[w.Name], "output_throughput")
					return fmt.Sprintf("%s: %d trials of %s, output throughput %s tok/s", cs.name, len(xs), w.Name, fmtSamples(xs)) + trialNote(cs, w.Name)
				}))
			}, ginkgo.NodeTimeout(timeout))
		}
		// Last: what the engine logged while it was measured (crashes, leaks, CUDA/NCCL errors).
		logName := cs.name + ": engine log shows no errors"
		fw.plan(configContainer(cs.name), logName, gate.Check{Verdict: gate.Verdict{Name: logName, Kind: gate.KindHealth, Config: cs.name}, Labels: labels, Line: cfgLine})
		ginkgo.It(logName, fw.at(cfgLine), ginkgo.Label(labelHealth), func() {
			cs.settle()
			fw.refreshReport(cs)
			fw.judge(gate.Check{Verdict: gate.Verdict{Name: logName, Kind: gate.KindHealth, Config: cs.name}, Labels: labels, Line: cfgLine}, logVerdict(logName, cs))
		})
	})
}

// judgedContainer is the container of the checks judged after a config's last launch.
func judgedContainer(config string) string { return "config " + config + ", after its last launch" }

// defineJudged adds, after the config's last launch has stopped, the container of its late
// checks (those on metrics that exist only after traffic): they judge the evidence the config
// recorded over every launch (every trial, the log, the GPU memory peak), as reckon merge does.
func defineJudged(fw *framework, cs *configState) {
	var late []*spec.Check
	for _, c := range fw.spec.ChecksFor(cs.name) {
		if k := configKindOf(c); k != nil && k.late(c) {
			late = append(late, c)
		}
	}
	if len(late) == 0 {
		return
	}
	labels := append([]string{cs.name}, fw.spec.Labels(cs.name)...)
	container := judgedContainer(cs.name)
	ginkgo.Describe(container, ginkgo.Label(sanitizeLabels(labels)...), func() {
		for _, c := range late {
			defineConfigCheck(fw, cs, c, labels, container)
		}
	})
}

// defineConfigCheck adds, in container, the spec of a check judged on cs alone, over cs's
// evidence as recorded when the spec runs.
func defineConfigCheck(fw *framework, cs *configState, c *spec.Check, labels []string, container string) {
	k := configKindOf(c)
	if k == nil {
		return // spec validation admits only per-config kinds here (spec.ChecksFor)
	}
	entry := k.entry(c, cs.name, labels)
	fw.plan(container, c.Name, entry, k.needs(fw.spec, c, cs.name)...)
	ginkgo.It(c.Name, fw.at(c.Line), ginkgo.Label(sanitizeLabels(append(k.labels(c), c.Tags...))...), func() {
		fw.judge(entry, configVerdict(k, cs.evidence(), c))
	})
}

// defineCross adds the cross-config container: every check of this shard judged once after
// every config, through its kind.
func defineCross(fw *framework) {
	s := fw.spec
	ginkgo.Describe(crossContainer, func() {
		for _, c := range s.Checks {
			c := c
			k := crossKindOf(c)
			if k == nil || !fw.inShard(c) {
				continue // judged per config; another shard's, or left to reckon merge (applyShard)
			}
			entry := k.entry(c, "", nil)
			fw.plan(crossContainer, c.Name, entry, k.needs(s, c, "")...)
			ginkgo.It(c.Name, fw.at(c.Line), ginkgo.Label(sanitizeLabels(append(k.labels(c), c.Tags...))...), func() {
				fw.judge(entry, k.judge(fw, c))
			})
		}
	})
}

// judge records a verdict as a report check and turns it into the spec's Ginkgo outcome.
func (fw *framework) judge(e gate.Check, v gate.Verdict) {
	key := fw.markJudged()
	if start := ginkgo.CurrentSpecReport().StartTime; !start.IsZero() {
		e.Duration = time.Since(start)
	}
	why, partial := fw.partial[key]
	e = fw.entryOf(e, v, partial, why)
	fw.record(e)
	switch e.Status {
	case gate.StatusFailed, gate.StatusError:
		// Ginkgo reports where Fail was called (here); the message leads with the check's line
		// in the spec, which the spec's node location (fw.at) also shows.
		ginkgo.Fail(fw.at(e.Line).String() + ": " + e.Message)
	case gate.StatusSkipped:
		ginkgo.Skip(e.Message)
	}
}

// policy is the run's policy for checks that decided nothing (--strict, --require-baseline).
func (fw *framework) policy() gate.Policy {
	return gate.Policy{Strict: fw.opts.Strict, RequireBaseline: fw.opts.RequireBaseline}
}

// policyFor is the policy of the check named name: --require-baseline concerns the stored
// baselines only, so a check against the history with too few stored nights (no_baseline) is
// failed by --strict alone, and the nightly's bootstrap (no --strict) can keep
// --require-baseline for its baseline checks.
func (fw *framework) policyFor(name string) gate.Policy {
	p := fw.policy()
	for _, c := range fw.spec.Checks {
		if c.Name == name && c.Stat() != nil && c.Stat().Against == spec.AgainstHistory {
			p.RequireBaseline = false
		}
	}
	return p
}

// entryOf turns a verdict into its report entry under the run's policy, with the explanation of
// a failed statistical check: the entry keeps its identity (name, kind, config) and takes the
// verdict whole. filtered says that --allow-partial skips the check because the label filter
// removed an input (why). reckon merge judges with it too.
func (fw *framework) entryOf(e gate.Check, v gate.Verdict, filtered bool, why string) gate.Check {
	partial := v.Outcome == gate.Skip // a config it compares was not launched
	if filtered {
		// --allow-partial: the label filter removed an input of this check (see preflight).
		v = gate.Verdict{Outcome: gate.Skip, Message: why}
		partial = true
	}
	v.Name, v.Kind, v.Config = e.Name, e.Kind, e.Config
	if v.Against == "" {
		v.Against = e.Against // what the plan says the check compares with
	}
	e.Verdict = v.Classified()
	var flag string
	e.Status, flag = fw.policyFor(e.Name).Status(v.Outcome)
	if partial {
		e.Outcome = gate.OutcomePartial
	}
	if flag != "" {
		// Failed by policy, not by a measured regression (Sentence says which flag).
		e.Category = gate.CategoryPolicy
	}
	if e.Status == gate.StatusFailed && (e.Kind == string(spec.KindThroughput) || e.Kind == string(spec.KindLatency)) {
		// The one-line verdict carries the correlated evidence, e.g. "custom-ar: output_throughput
		// -57% vs nccl (...): regression; KV cache -91% (10.42 -> 0.90 GiB ...)" (Sentence).
		fw.mu.Lock()
		run := fw.view()
		fw.mu.Unlock()
		e.Explanation = reporters.Explain(&run, &e)
	}
	e.Message = reporters.Sentence(e, flag)
	if e.Status == gate.StatusError {
		if cs, ok := fw.configs[e.Config]; ok && cs.launchEr != nil {
			e.Details = strings.TrimSpace(e.Details + "\n\nengine log tail (" + cs.logPath + "):\n" + cs.logTail())
		}
	}
	return e
}

func checkEntry(c *spec.Check, config string, labels []string) gate.Check {
	return gate.Check{Verdict: gate.Verdict{Name: c.Name, Kind: string(c.Kind), Config: config}, Labels: append(append([]string(nil), labels...), c.Tags...), Line: c.Line}
}

// errVerdict is the error verdict of a check that could not be judged: unverified when err
// says the check could not prove its subject (gate.ErrUnverified), else infrastructure.
func errVerdict(c *spec.Check, config string, err error) gate.Verdict {
	return gate.Verdict{Name: c.Name, Kind: string(c.Kind), Config: config, Outcome: gate.Error, Category: gate.CategoryOf(err), Message: err.Error()}
}

func healthVerdict(cs *configState) gate.Verdict {
	v := gate.Verdict{Name: cs.name + ": launch and readiness", Kind: gate.KindHealth, Config: cs.name}
	if err := cs.infraError(); err != nil {
		v.Outcome, v.Category, v.Message = gate.Error, gate.CategoryInfrastructure, err.Error()
		return v
	}
	v.Outcome = gate.Pass
	v.Message = fmt.Sprintf("%s: engine ready at %s", cs.name, cs.inst.BaseURL())
	if ev := cs.allreduce; ev != nil {
		v.Message += ", allreduce " + ev.Effective
	} else if r := cs.report; r != nil {
		v.Message += ", allreduce " + r.AllReduce
	}
	if r := cs.report; r != nil && r.KVCacheTokens != nil {
		v.Message += fmt.Sprintf(", KV cache %d tokens", *r.KVCacheTokens)
	}
	v.Details = healthDetails(cs)
	return v
}

// healthDetails is what a launch's health check adds to its message: error records in the log,
// a release mismatch, a release that could not be asked before the launch, and evidence that
// ran out of its budget after readiness.
func healthDetails(cs *configState) string {
	var details []string
	if r := cs.report; r != nil && len(r.Errors) > 0 {
		details = append(details, fmt.Sprintf("the engine log shows %d error record(s); first: line %d: %s", len(r.Errors), r.Errors[0].Line, r.Errors[0].Text))
	}
	if m := releaseMismatch(cs.release, cs.engineVersion); m != "" {
		details = append(details, m)
	}
	if cs.releaseErr != nil {
		details = append(details, "engine release unknown before the launch (flags built for the newest; set engine.version): "+cs.releaseErr.Error())
	}
	if cs.evidenceErr != nil {
		details = append(details, "evidence incomplete: "+cs.evidenceErr.Error())
	}
	return strings.Join(details, "\n")
}

// reportValue reads a numeric engine-report field of a config's recorded evidence by its JSON
// key (engineValue).
func reportValue(cs *configState, metric string) (*float64, error) {
	return engineValue(cs.evidence(), metric)
}

func measureVerdict(name string, cs *configState, err error, ok func() string) gate.Verdict {
	if err != nil {
		return gate.Verdict{Name: name, Kind: gate.KindMeasurement, Config: cs.name, Outcome: gate.Error, Category: gate.CategoryMeasurement, Message: err.Error()}
	}
	return gate.Verdict{Name: name, Kind: gate.KindMeasurement, Config: cs.name, Outcome: gate.Pass, Message: ok()}
}

func logVerdict(name string, cs *configState) gate.Verdict {
	v := gate.Verdict{Name: name, Kind: gate.KindHealth, Config: cs.name, Outcome: gate.Pass}
	if err := cs.infraError(); err != nil {
		// An engine that did not start or that died is an infrastructure error, not a verdict
		// on its log: the log's error records (often the crash itself) go into the details.
		v.Outcome, v.Category, v.Message = gate.Error, gate.CategoryInfrastructure, err.Error()
		if cs.report != nil {
			for _, e := range cs.report.Errors {
				v.Details += fmt.Sprintf("line %d [%s]: %s\n", e.Line, e.Kind, e.Text)
			}
		}
		return v
	}
	if cs.report == nil {
		v.Outcome, v.Category, v.Message = gate.Error, gate.CategoryInfrastructure, fmt.Sprintf("%s: engine log %s could not be read", cs.name, cs.logPath)
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
	v.Outcome, v.Category = gate.Fail, gate.CategoryBrokenInvariant
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
			return gate.Verdict{Name: c.Name, Kind: string(c.Kind), Config: config, Outcome: gate.Skip,
				Message: fmt.Sprintf("config %s was not launched in this run (--label-filter); check not judged", cs.name)}, true
		}
	}
	return gate.Verdict{}, false
}

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
