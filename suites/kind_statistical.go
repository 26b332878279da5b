package suites

import (
	"errors"
	"fmt"
	"strings"

	"github.com/reckon-ci/reckon/gate"
	"github.com/reckon-ci/reckon/spec"
)

// statisticalKind: a throughput or latency comparison over trials, against the stored
// baseline, another config of the run, or the results history; every statistical check of the
// run is one Holm-Bonferroni family.
type statisticalKind struct{ crossScoped }

func (statisticalKind) is(c *spec.Check) bool { return c.IsStatistical() }

func (statisticalKind) entry(c *spec.Check, _ string, _ []string) gate.Check {
	e := checkEntry(c, c.Config, nil)
	if c.Against == spec.AgainstConfig {
		e.Against = c.AgainstConfig
	}
	return e
}

func (statisticalKind) labels(c *spec.Check) []string {
	names := []string{labelThroughput, c.Config}
	if c.Against == spec.AgainstConfig {
		names = append(names, c.AgainstConfig)
	}
	return names
}

func (statisticalKind) compares(c *spec.Check) []string {
	if c.Against == spec.AgainstConfig {
		return []string{c.Config, c.AgainstConfig}
	}
	return nil
}

func (statisticalKind) needs(_ *spec.Spec, c *spec.Check, _ string) []need {
	out := []need{trialsNeed(c.Config, c.Workload)}
	if c.Against == spec.AgainstConfig {
		out = append(out, trialsNeed(c.AgainstConfig, c.Workload))
	}
	return out
}

// inShard: a comparison with another config is defined where both run; one against the
// baseline or the history where its config runs.
func (k statisticalKind) inShard(c *spec.Check, here func(string) bool, _ bool) bool {
	if cfgs := k.compares(c); cfgs != nil {
		return allHere(cfgs, here)
	}
	return here(c.Config)
}

func (statisticalKind) judge(fw *framework, _ *configState, c *spec.Check) gate.Verdict {
	return fw.statVerdict(c)
}

// rejudge: merge judges the whole family again (Holm runs over the run's checks, as without
// shards), except a check against the history store, which merge does not read.
func (statisticalKind) rejudge(c *spec.Check, judged bool) bool {
	return !(c.Against == spec.AgainstHistory && judged)
}

// statVerdict returns the verdict of a statistical check, computing every statistical check of
// the run once (the first time one is asked for) so that Holm-Bonferroni runs over the family.
func (fw *framework) statVerdict(c *spec.Check) gate.Verdict {
	fw.statOnce.Do(fw.computeStats)
	if err := fw.statErrs[c.Name]; err != nil {
		var sk errSkipped
		if errors.As(err, &sk) {
			return gate.Verdict{Name: c.Name, Kind: string(c.Kind), Config: c.Config, Outcome: gate.Skip, Message: sk.msg}
		}
		if gate.IsNoBaseline(err) || errors.Is(err, ErrNoHistory) {
			return gate.Verdict{Name: c.Name, Kind: string(c.Kind), Config: c.Config, Outcome: gate.NoBaseline, Message: err.Error()}
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
		n.apply(&v, st)
	}
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
		head := fw.configs[c.Config]
		if err := head.measErr[c.Workload]; err != nil {
			fw.statErrs[c.Name] = err
			continue
		}
		hs := metricSamples(head.trials[c.Workload], c.Metric)
		hg := launchGroups(head.trials[c.Workload], head.trialLaunch[c.Workload], c.Metric)
		var bs []float64
		var bg [][]float64
		baseName := "baseline"
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
			bg = launchGroups(base.trials[c.Workload], base.trialLaunch[c.Workload], c.Metric)
			baseName = c.AgainstConfig
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
			bs = baseline.Samples(c.Config, c.Workload, c.Metric)
			bg = baseline.LaunchGroups(c.Config, c.Workload, c.Metric)
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
		// Launches are the unit of replication in every verdict: the variation between
		// restarts is in every unit, so the comparison is not fooled by trials of one launch
		// that agree with each other. Where neither side has several launches, the
		// between-launch variation comes from elsewhere (betweenLaunch).
		r := gate.CompareLaunches(bg, hg, m, opts, fw.betweenLaunch(c, prior))
		fw.launchNotes[c.Name] = &launchNote{
			head: launchUnits(head.trials[c.Workload], head.trialLaunch[c.Workload], c.Metric), headName: c.Config,
			base: groupUnits(bg), baseName: baseName,
		}
		fw.stats[c.Name] = &r
		family = append(family, &r)
	}
	gate.Holm(family, 0)
}

// betweenLaunch is the between-launch variation a check uses when neither of its sides has
// several launches: measured by a baseline recorded with launches >= 2 of the check's configs
// (pooled), else by the history of the check's config (its runs since the last change point,
// each a launch), else the testbed's prior. A check whose own launches measure it ignores this.
func (fw *framework) betweenLaunch(c *spec.Check, prior gate.LaunchNoise) gate.LaunchNoise {
	cfgs := []string{c.Config}
	if c.Against == spec.AgainstConfig {
		cfgs = append(cfgs, c.AgainstConfig)
	}
	var es []gate.NoiseEstimate
	var from []string
	for _, name := range cfgs {
		b := fw.baseline
		if cs := fw.configs[name]; cs != nil && (cs.baseline != nil || cs.baselineErr != nil) {
			b = cs.baseline
		}
		if b == nil {
			continue
		}
		if g := b.LaunchGroups(name, c.Workload, c.Metric); len(g) >= 2 {
			es = append(es, gate.EstimateNoise(g))
			from = append(from, fmt.Sprintf("%s's %d launches", name, len(g)))
		}
	}
	if n, ok := gate.PoolNoise("measured by the baseline ("+strings.Join(from, ", ")+")", es...); ok {
		return n
	}
	if fw.opts.History != nil && c.Against != spec.AgainstHistory {
		if g, desc := fw.historyLaunches(c); len(g) >= 2 {
			if n, ok := gate.PoolNoise("measured by the history of "+c.Config+" ("+desc+")", gate.EstimateNoise(g)); ok {
				return n
			}
		}
	}
	return prior
}
