package suites

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/reckon-ci/reckon/gate"
	"github.com/reckon-ci/reckon/spec"
)

// noteTrialWarning keeps a trial result's warning (once per workload).
func (cs *configState) noteTrialWarning(workload, warning string) {
	if cs.trialWarnings == nil {
		cs.trialWarnings = map[string][]string{}
	}
	// Counts differ from trial to trial; keep the first wording of each kind of warning.
	key := warningKind(warning)
	for _, w := range cs.trialWarnings[workload] {
		if warningKind(w) == key {
			return
		}
	}
	cs.trialWarnings[workload] = append(cs.trialWarnings[workload], warning)
}

// warningKind is a warning without its digits, so that "3 requests ..." and "5 requests ..."
// are one kind.
func warningKind(w string) string {
	return strings.Map(func(r rune) rune {
		if r >= '0' && r <= '9' {
			return -1
		}
		return r
	}, w)
}

// trialNote is what the measurement step says besides its numbers: the trials' warnings.
func trialNote(cs *configState, workload string) string {
	ws := cs.trialWarnings[workload]
	if len(ws) == 0 {
		return ""
	}
	return "; warnings: " + strings.Join(ws, "; ")
}

// resultFloorVerdict judges a floor on a result metric: the median over the config's trials of
// the check's workload must lie within [min, max]. A metric the trials do not have (the source
// left it out, e.g. request_goodput without SLOs) is an error naming it, never a 0.
func resultFloorVerdict(ev *evidence, c *spec.Check) gate.Verdict {
	p := c.Floor()
	if err := ev.measErr[p.Workload]; err != nil {
		return errVerdict(c, ev.name, err)
	}
	trials := ev.trials[p.Workload]
	if len(trials) == 0 {
		if err := ev.infraError(); err != nil {
			return errVerdict(c, ev.name, err)
		}
		return errVerdict(c, ev.name, fmt.Errorf("config %s: no trials of workload %s (measurement filtered out or interrupted)", ev.name, p.Workload))
	}
	xs := metricSamples(trials, p.Metric)
	if len(xs) == 0 {
		return errVerdict(c, ev.name, fmt.Errorf("config %s: the %d trials of workload %s have no %s (not measured; never taken as 0)", ev.name, len(trials), p.Workload, p.Metric))
	}
	sorted := slices.Clone(xs)
	sort.Float64s(sorted)
	med := sorted[len(sorted)/2]
	if len(sorted)%2 == 0 {
		med = (sorted[len(sorted)/2-1] + sorted[len(sorted)/2]) / 2
	}
	out := gate.Floor(c.Name, p.Metric, &med, p.Min, p.Max)
	out.Config = ev.name
	out.Message = fmt.Sprintf("%s (median of %d trials of %s: %s)", strings.TrimPrefix(out.Message, c.Name+": "), len(xs), p.Workload, fmtSamples(xs))
	return out
}

// baselineRelativeVerdict judges a relative check against the stored baseline: the config's
// engine-report value over the same config's value in this testbed's baseline.
func baselineRelativeVerdict(fw *framework, c *spec.Check) gate.Verdict {
	p := c.Relative()
	head := fw.configs[p.Config]
	if v, skip := skipUnlaunched(c, p.Config, head); skip {
		return v
	}
	hv, err := reportValue(head, p.Metric)
	if err != nil {
		return errVerdict(c, p.Config, err)
	}
	if head.launchEr != nil && hv == nil {
		return errVerdict(c, p.Config, head.infraError())
	}
	if fw.baselineErr != nil {
		return gate.NoBaselineVerdict(c.Name, p.Config, string(c.Kind), fw.baselineErr)
	}
	var bc map[string]any
	if fw.baseline != nil {
		if cfg := fw.baseline.Config(p.Config); cfg != nil {
			bc = cfg.Engine
		}
	}
	if bc == nil {
		return gate.Verdict{Name: c.Name, Kind: string(c.Kind), Config: p.Config, Outcome: gate.NoBaseline,
			Message: fmt.Sprintf("%s: the baseline for testbed %s holds no engine report of config %s; record one with reckon baseline record --from %s/results.json", p.Config, fw.testbedKey, p.Config, fw.opts.OutDir)}
	}
	raw, ok := bc[p.Metric]
	f, isNum := raw.(float64)
	if !ok || raw == nil || !isNum {
		return gate.Verdict{Name: c.Name, Kind: string(c.Kind), Config: p.Config, Outcome: gate.Skip,
			Message: fmt.Sprintf("%s: the baseline's engine report has no %s (absent, never taken as 0); not judged", p.Config, p.Metric)}
	}
	out := gate.Relative(c.Name, p.Metric, hv, &f, "baseline", p.MinRatio, p.MaxRatio)
	out.Config = p.Config
	out.Message = p.Config + ": " + strings.TrimPrefix(out.Message, c.Name+": ")
	return out
}

// absentMetric says why a statistical check is skipped when the config measured the workload
// but none of its trials has the metric (the run did not measure it, e.g. request_goodput
// without SLOs): "" when some trial has it or there are no trials at all.
func absentMetric(cs *configState, c *spec.Check) string {
	p := c.Stat()
	trials := cs.trials[p.Workload]
	if len(trials) == 0 || len(metricSamples(trials, p.Metric)) > 0 {
		return ""
	}
	return fmt.Sprintf("config %s: its %d trials of %s have no %s (not measured; absent, never taken as 0): check not judged", cs.name, len(trials), p.Workload, p.Metric)
}

// absentInBaseline says why a statistical check against the baseline is skipped when the
// baseline holds the config's trials of the workload but not the metric; "" otherwise.
func absentInBaseline(b *gate.Baseline, testbed string, c *spec.Check) string {
	p := c.Stat()
	if b == nil {
		return ""
	}
	bc := b.Config(p.Config)
	if bc == nil {
		return ""
	}
	for _, w := range bc.Workloads {
		if w.Name == p.Workload && len(w.Metrics) > 0 {
			return fmt.Sprintf("the baseline for testbed %s holds trials of %s/%s but no %s (absent, never taken as 0): check not judged", testbed, p.Config, p.Workload, p.Metric)
		}
	}
	return ""
}

// relativeToBaseline reports whether a relative check compares with the stored baseline (which
// must then be loaded even without statistical checks).
func relativeToBaseline(s *spec.Spec) bool {
	for _, c := range s.Checks {
		if r := c.Relative(); r != nil && r.Of == spec.OfBaseline {
			return true
		}
	}
	return false
}

// measurementErrors is the config's failed measurements as its results record them (numerics
// probe first, then workloads by name): the evidence reckon merge reads back (restoreMeasurements).
func (cs *configState) measurementErrors() []gate.MeasurementError {
	var out []gate.MeasurementError
	if cs.probeErr != nil {
		out = append(out, gate.MeasurementError{Error: cs.probeErr.Error()})
	}
	ws := make([]string, 0, len(cs.measErr))
	for w, err := range cs.measErr {
		if err != nil {
			ws = append(ws, w)
		}
	}
	sort.Strings(ws)
	for _, w := range ws {
		out = append(out, gate.MeasurementError{Workload: w, Error: cs.measErr[w].Error()})
	}
	return out
}

// restoreMeasurements sets a replayed config's measurement errors from its shard's results: the
// errors the config recorded (gate.Config.MeasurementErrors), found by workload. Results written
// before those were recorded say only that a measurement check of the config (kind measurement,
// category measurement) did not pass: its error then goes to the measurements that left no
// evidence (the probe without a numerics file, a workload without trials), or, when every one
// left some, to each workload of the config, so that no check is judged on trials its shard
// said were incomplete.
func restoreMeasurements(cs *configState, c *gate.Config, checks []gate.Check, s *spec.Spec) {
	for _, m := range c.MeasurementErrors {
		err := errors.New(m.Error)
		if m.Workload == "" {
			cs.probeErr = err
			continue
		}
		cs.measErr[m.Workload] = err
	}
	if len(c.MeasurementErrors) > 0 {
		return
	}
	var failed error
	for _, e := range checks {
		v := e.Classified()
		if e.Config == cs.name && e.Kind == gate.KindMeasurement && v.Category == gate.CategoryMeasurement && e.Status != gate.StatusPassed {
			failed = errors.New(e.Message)
			break
		}
	}
	if failed == nil {
		return
	}
	var ws []string
	for _, w := range s.WorkloadsFor(cs.name) {
		ws = append(ws, w.Name)
	}
	attributed := false
	if s.NeedsNumerics(cs.name) && c.NumericsFile == "" {
		cs.probeErr, attributed = failed, true
	}
	for _, w := range ws {
		if len(cs.trials[w]) == 0 {
			cs.measErr[w], attributed = failed, true
		}
	}
	if !attributed {
		for _, w := range ws {
			cs.measErr[w] = failed
		}
	}
}
