package suites

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/reckon-ci/reckon/gate"
	"github.com/reckon-ci/reckon/spec"
)

// statisticalKind: a throughput or latency comparison over trials, against the stored
// baseline, another config of the run, or the results history; every statistical check of the
// run is one Holm-Bonferroni family.
type statisticalKind struct{ crossScoped }

func init() { registerCrossKind(statisticalKind{}, spec.KindThroughput, spec.KindLatency) }

func (statisticalKind) entry(c *spec.Check, _ string, _ []string) gate.Check {
	p := c.Stat()
	e := checkEntry(c, p.Config, nil)
	if p.Against == spec.AgainstConfig {
		e.Against = p.AgainstConfig
	}
	return e
}

func (statisticalKind) labels(c *spec.Check) []string {
	p := c.Stat()
	names := []string{labelThroughput, p.Config}
	if p.Against == spec.AgainstConfig {
		names = append(names, p.AgainstConfig)
	}
	return names
}

func (statisticalKind) compares(c *spec.Check) []string {
	p := c.Stat()
	if p.Against == spec.AgainstConfig {
		return []string{p.Config, p.AgainstConfig}
	}
	return nil
}

func (statisticalKind) needs(_ *spec.Spec, c *spec.Check, _ string) []need {
	p := c.Stat()
	out := []need{trialsNeed(p.Config, p.Workload)}
	if p.Against == spec.AgainstConfig {
		out = append(out, trialsNeed(p.AgainstConfig, p.Workload))
	}
	return out
}

// inShard: a comparison with another config is defined where both run; one against the
// baseline or the history where its config runs.
func (k statisticalKind) inShard(c *spec.Check, here func(string) bool, _ bool) bool {
	p := c.Stat()
	if cfgs := k.compares(c); cfgs != nil {
		return allHere(cfgs, here)
	}
	return here(p.Config)
}

func (statisticalKind) judge(fw *framework, c *spec.Check) gate.Verdict {
	return fw.statVerdict(c)
}

// merged: merge judges the whole family again (Holm runs over the run's checks, as without
// shards), except a check against the history store, which merge does not read.
func (statisticalKind) merged(c *spec.Check) mergeRule {
	if c.Stat().Against == spec.AgainstHistory {
		return mergeKeep
	}
	return mergeFamily
}

// statVerdict returns the verdict of a statistical check, computing every statistical check of
// the run once (the first time one is asked for) so that Holm-Bonferroni runs over the family.
func (fw *framework) statVerdict(c *spec.Check) gate.Verdict {
	p := c.Stat()
	fw.statOnce.Do(fw.computeStats)
	if err := fw.statErrs[c.Name]; err != nil {
		var sk errSkipped
		if errors.As(err, &sk) {
			return gate.Verdict{Name: c.Name, Kind: string(c.Kind), Config: p.Config, Outcome: gate.Skip, Message: sk.msg}
		}
		if gate.IsNoBaseline(err) || errors.Is(err, ErrNoHistory) {
			return gate.Verdict{Name: c.Name, Kind: string(c.Kind), Config: p.Config, Outcome: gate.NoBaseline, Message: err.Error()}
		}
		return errVerdict(c, p.Config, err)
	}
	st := fw.stats[c.Name]
	fw.costPlan(c, st)
	v := st.Verdict(c.Name, p.Config, p.Vs())
	fw.annotateHistory(c, &v)
	if n := fw.launchNotes[c.Name]; n != nil {
		n.apply(&v, st)
	}
	fw.noteClockOverruns(c, &v)
	return v
}
func (fw *framework) computeStats() {
	fw.stats = map[string]*gate.StatResult{}
	fw.statErrs = map[string]error{}
	fw.launchNotes = map[string]*launchNote{}
	prior, perr := gate.TestbedPrior(fw.opts.BetweenLaunchCV)
	if perr != nil {
		fw.log.WithError(perr).Warn("between-launch prior: using the default")
	}
	var family []*gate.StatResult
	for _, c := range fw.spec.StatisticalChecks() {
		p := c.Stat()
		head := fw.configs[p.Config]
		if err := head.measErr[p.Workload]; err != nil {
			fw.statErrs[c.Name] = err
			continue
		}
		hs := metricSamples(head.trials[p.Workload], p.Metric)
		hg := launchGroups(head.trials[p.Workload], head.trialLaunch[p.Workload], p.Metric)
		var bs []float64
		var bg [][]float64
		baseName := "baseline"
		if p.Against == spec.AgainstConfig {
			base := fw.configs[p.AgainstConfig]
			if !base.launched() {
				fw.statErrs[c.Name] = errSkipped{fmt.Sprintf("config %s was not launched in this run (--label-filter); check not judged", base.name)}
				continue
			}
			if err := base.measErr[p.Workload]; err != nil {
				fw.statErrs[c.Name] = err
				continue
			}
			bs = metricSamples(base.trials[p.Workload], p.Metric)
			bg = launchGroups(base.trials[p.Workload], base.trialLaunch[p.Workload], p.Metric)
			baseName = p.AgainstConfig
			if msg := absentMetric(base, c); msg != "" {
				fw.statErrs[c.Name] = errSkipped{msg}
				continue
			}
		} else if p.Against == spec.AgainstHistory {
			var err error
			if bs, err = fw.historySamples(c); err != nil {
				fw.statErrs[c.Name] = err
				continue
			}
			bg = fw.historyGroups(c)
			baseName = "history"
		} else {
			baseline, baselineErr, key := fw.baseline, fw.baselineErr, fw.testbedKey
			if head.baseline != nil || head.baselineErr != nil {
				baseline, baselineErr = head.baseline, head.baselineErr
			}
			if baselineErr != nil {
				fw.statErrs[c.Name] = baselineErr
				continue
			}
			bs = baseline.Samples(p.Config, p.Workload, p.Metric)
			bg = baseline.LaunchGroups(p.Config, p.Workload, p.Metric)
			if msg := absentInBaseline(baseline, key, c); len(bs) == 0 && msg != "" {
				fw.statErrs[c.Name] = errSkipped{msg}
				continue
			}
			if len(bs) == 0 {
				fw.statErrs[c.Name] = fmt.Errorf("baseline for testbed %s has no samples of %s/%s/%s; re-record it with reckon baseline record --from %s/results.json", key, p.Config, p.Workload, p.Metric, fw.opts.OutDir)
				continue
			}
		}
		if len(hs) == 0 && !head.launched() {
			fw.statErrs[c.Name] = errSkipped{fmt.Sprintf("config %s was not launched in this run (--label-filter); check not judged", p.Config)}
			continue
		}
		if msg := absentMetric(head, c); msg != "" {
			fw.statErrs[c.Name] = errSkipped{msg}
			continue
		}
		if len(hs) == 0 {
			fw.statErrs[c.Name] = fmt.Errorf("config %s: no %s samples for workload %s (measurement filtered out or interrupted)", p.Config, p.Metric, p.Workload)
			continue
		}
		m, ok := gate.MetricFor(p.Metric)
		if !ok {
			fw.statErrs[c.Name] = fmt.Errorf("%s: metric %q: direction unknown", fw.spec.File, p.Metric)
			continue
		}
		// Each result is decided at its own level (the check's alpha, or the sequential plan's
		// per-look level when the workload may add trials against a stored baseline), and Holm
		// then corrects across the family of gated checks keeping those levels.
		opts := fw.statOptions(c)
		if w, _ := fw.spec.Workload(p.Workload); p.Against == spec.AgainstBaseline {
			if plan, ok := sequentialPlan(w, c); ok {
				opts = plan.Options(opts)
			}
		}
		// Launches are the unit of replication in every verdict: the variation between
		// restarts is in every unit, so the comparison is not fooled by trials of one launch
		// that agree with each other. Where neither side has several launches, the
		// between-launch variation comes from elsewhere (betweenLaunch).
		var r gate.StatResult
		if p.Against == spec.AgainstHistory {
			r = fw.compareNights(c, hg, m, opts, prior)
		} else {
			r = gate.CompareLaunches(bg, hg, m, opts, fw.betweenLaunch(c, prior))
		}
		fw.launchNotes[c.Name] = &launchNote{
			head: launchUnits(head.trials[p.Workload], head.trialLaunch[p.Workload], p.Metric), headName: p.Config,
			base: groupUnits(bg), baseName: baseName,
		}
		fw.stats[c.Name] = &r
		family = append(family, &r)
	}
	gate.Holm(family, 0)
}

// betweenLaunch is the between-launch variation a check learns from outside its own launches
// (docs/statistics.md, "Variance learned once"): measured by a baseline recorded with launches >=
// 2 of the check's configs (not for a check against that baseline, whose launches are its base
// side) and by the history of the check's configs (historyNoise), pooled with their degrees of
// freedom; else the testbed's prior, which says so. A check whose own launches measure the
// variation pools this with them (gate.CompareLaunches); one whose launches do not uses it alone.
func (fw *framework) betweenLaunch(c *spec.Check, prior gate.LaunchNoise) gate.LaunchNoise {
	p := c.Stat()
	cfgs := []string{p.Config}
	if p.Against == spec.AgainstConfig {
		cfgs = append(cfgs, p.AgainstConfig)
	}
	var es []gate.NoiseEstimate
	var from []string
	for _, name := range cfgs {
		if p.Against == spec.AgainstBaseline {
			break
		}
		b := fw.baseline
		if cs := fw.configs[name]; cs != nil && (cs.baseline != nil || cs.baselineErr != nil) {
			b = cs.baseline
		}
		if b == nil {
			continue
		}
		if g := b.LaunchGroups(name, p.Workload, p.Metric); len(g) >= 2 {
			es = append(es, gate.EstimateNoise(g))
			from = append(from, fmt.Sprintf("the baseline's %d launches of %s", len(g), name))
		}
	}
	if fw.opts.History != nil && p.Against != spec.AgainstHistory {
		for _, name := range cfgs {
			if e, desc, ok := fw.historyNoise(c, name); ok {
				es = append(es, e)
				from = append(from, "the history of "+desc)
			}
		}
	}
	if n, ok := gate.PoolNoise("measured by "+strings.Join(from, ", "), es...); ok {
		return n
	}
	return prior
}

// costPlan adds to an undecided verdict's one next step what it costs: the planned launches x
// trials per side in wall time, from this run's launch (launch and readiness) and trial
// (duration) times of the check's configs, and whether it fits the run's --timeout.
func (fw *framework) costPlan(c *spec.Check, st *gate.StatResult) {
	if st == nil || st.Outcome != gate.Undecided || st.Launch == nil || st.Launch.Plan == nil || st.Launch.Plan.Launches <= 0 ||
		strings.Contains(st.Launch.Decide, "wall time") {
		return
	}
	p := c.Stat()
	cfgs := []string{p.Config}
	if p.Against == spec.AgainstConfig {
		cfgs = append(cfgs, p.AgainstConfig)
	}
	var launchS, trialS []float64
	fw.mu.Lock()
	for _, ch := range fw.run.Checks {
		for _, name := range cfgs {
			if strings.HasPrefix(ch.Name, name+": launch and readiness") && ch.Duration > 0 {
				launchS = append(launchS, ch.Duration.Seconds())
			}
		}
	}
	fw.mu.Unlock()
	for _, name := range cfgs {
		if cs := fw.configs[name]; cs != nil {
			trialS = append(trialS, metricSamples(cs.trials[p.Workload], "duration")...)
		}
	}
	if len(launchS) == 0 || len(trialS) == 0 {
		return
	}
	mean := func(xs []float64) float64 {
		t := 0.0
		for _, x := range xs {
			t += x
		}
		return t / float64(len(xs))
	}
	plan := st.Launch.Plan
	perSide := time.Duration(float64(plan.Launches) * (mean(launchS) + float64(plan.Trials)*mean(trialS)) * float64(time.Second))
	sides := 2
	if p.Against != spec.AgainstConfig {
		sides = 1 // the base side is stored (baseline or history)
	}
	total := perSide * time.Duration(sides)
	cost := fmt.Sprintf("; about %s of wall time (%d side(s) x %d launch(es) of %.0f s + %d trials of %.0f s, this run's times)",
		total.Round(time.Minute/10), sides, plan.Launches, mean(launchS), plan.Trials, mean(trialS))
	if t := fw.opts.Timeout; t > 0 {
		if total <= t {
			cost += fmt.Sprintf(", within --timeout %s", t)
		} else {
			cost += fmt.Sprintf(", more than --timeout %s allows", t)
		}
	}
	st.Launch.Decide += cost
}
