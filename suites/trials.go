// A workload's trials against a config: running them, recording each one, and adding trials while a
// sequential statistical check is undecided.

package suites

import (
	"context"
	"fmt"

	"github.com/reckon-ci/reckon/gate"
	"github.com/reckon-ci/reckon/internal/statdefault"
	"github.com/reckon-ci/reckon/spec"
	"github.com/reckon-ci/reckon/workload"
	"github.com/sirupsen/logrus"
)

// measureWorkload runs a workload's trials against the config. Trials beyond the workload's
// fixed count are added while a statistical check on this config is inconclusive against its
// stored baseline (sequential testing), up to max_trials.
func (fw *framework) measureWorkload(ctx context.Context, cs *configState, w *spec.Workload) error {
	if err := cs.infraError(); err != nil {
		cs.measErr[w.Name] = err
		return err
	}
	trials := w.Trials
	if trials <= 0 {
		trials = 1
	}
	maxTrials := w.MaxTrials
	if maxTrials < trials {
		maxTrials = trials
	}
	for i := 0; i < maxTrials; i++ {
		if i >= trials && !fw.wantsMoreTrials(cs, w, i) {
			break
		}
		if err := fw.runTrial(ctx, cs, w, i); err != nil {
			cs.measErr[w.Name] = err
			return err
		}
	}
	return nil
}

func (fw *framework) runTrial(ctx context.Context, cs *configState, w *spec.Workload, i int) error {
	log := fw.log.WithFields(logrus.Fields{"config": cs.name, "workload": w.Name, "trial": i + 1})
	opts := workload.Options{
		Concurrency:    w.Concurrency,
		RequestRate:    w.RequestRate,
		Burstiness:     w.Burstiness,
		NumPrompts:     w.NumPrompts,
		InputLen:       w.InputLen,
		OutputLen:      w.OutputLen,
		Dataset:        w.Dataset,
		Warmup:         w.Warmup,
		Seed:           w.Seed + int64(i),
		RequestTimeout: w.RequestTimeout.D(),
		IgnoreEOS:      w.IgnoreEOS,
		Goodput:        w.Goodput,
		Temperature:    w.Temperature,
		TopP:           w.TopP,
		Chat:           w.Endpoint == spec.EndpointChat,
		Model:          cs.launch.Model,
		Metadata: workload.Metadata{
			Engine:   fw.spec.Engine.Kind,
			Config:   cs.name,
			Testbed:  fw.testbedKey,
			Workload: workload.Workload{Name: w.Name},
		},
	}
	clockBefore, clocked := fw.readDeviceClock(ctx, cs)
	res, err := workload.Run(ctx, fw.client(cs), opts)
	if err != nil {
		return fmt.Errorf("config %s workload %s trial %d: %w", cs.name, w.Name, i+1, err)
	}
	if clocked {
		if after, ok := fw.readDeviceClock(ctx, cs); ok {
			if wn := overrunWarning(clockBefore, after); wn != "" {
				res.Warnings = append(res.Warnings, wn)
			}
		}
	}
	if err := cs.infraError(); err != nil {
		return err
	}
	path := trialFile(fw.opts.OutDir, cs.name, w.Name, i+1)
	if err := workload.WriteResult(path, res); err != nil {
		return err
	}
	if err := trialFailed(res); err != nil {
		// Its result file stays as evidence; its zeros never reach a statistic or a baseline.
		return fmt.Errorf("config %s workload %s trial %d (%s): %w", cs.name, w.Name, i+1, path, err)
	}
	m := res.Metrics()
	cs.trials[w.Name] = append(cs.trials[w.Name], m)
	launchNo := max(cs.launchNo, 1)
	cs.trialLaunch[w.Name] = append(cs.trialLaunch[w.Name], launchNo)
	log.WithFields(logrus.Fields{
		"output_throughput": fmt.Sprintf("%.1f", m["output_throughput"]),
		"failed":            m["failed"],
	}).Info("trial done")
	for _, wn := range res.Warnings {
		log.Warn(wn)
		cs.noteTrialWarning(w.Name, wn)
	}
	fw.mu.Lock()
	rc := fw.reportConfig(cs.name)
	rc.Trials = append(rc.Trials, gate.Trial{Workload: w.Name, Index: i, Launch: launchNo, Metrics: m})
	fw.mu.Unlock()
	fw.checkpoint()
	return nil
}

// wantsMoreTrials reports whether a statistical check of this config against its baseline is
// still undecided after n trials and the workload's sequential plan has a later look.
func (fw *framework) wantsMoreTrials(cs *configState, w *spec.Workload, n int) bool {
	if fw.baseline == nil {
		return false
	}
	for _, c := range fw.spec.StatisticalChecks() {
		p := c.Stat()
		if p.Config != cs.name || p.Workload != w.Name || p.Against != spec.AgainstBaseline {
			continue
		}
		plan, ok := sequentialPlan(w, c)
		base := fw.baseline.LaunchGroups(cs.name, w.Name, p.Metric)
		head := launchGroups(cs.trials[w.Name], cs.trialLaunch[w.Name], p.Metric)
		m, known := gate.MetricFor(p.Metric)
		if !ok || !known || len(base) == 0 {
			continue
		}
		prior, _ := gate.TestbedPrior(fw.opts.BetweenLaunchCV)
		d, err := plan.DecideLaunches(base, head, m, fw.statOptions(c), fw.betweenLaunch(c, prior))
		if err == nil && d.NeedMore {
			return true
		}
	}
	return false
}

// sequentialPlan is the plan of a check whose workload may add trials (max_trials > trials):
// looks at trials and max_trials, false alarms bounded by the check's alpha over both looks.
func sequentialPlan(w *spec.Workload, c *spec.Check) (gate.SequentialPlan, bool) {
	p := c.Stat()
	if w == nil || w.MaxTrials <= w.Trials || w.Trials < 2 {
		return gate.SequentialPlan{}, false
	}
	alpha := p.Alpha
	if alpha <= 0 {
		alpha = statdefault.Alpha
	}
	return gate.SequentialPlan{Looks: []int{w.Trials, w.MaxTrials}, Alpha: alpha}, true
}

func (fw *framework) statOptions(c *spec.Check) gate.StatOptions { return StatOptionsFor(c.Stat()) }

// StatOptionsFor is the gate's options for a statistical check's spec fields (alpha, min_effect,
// power, test) over the gate's defaults: the one translation, used by the gate and by reckon
// spec check's plans.
func StatOptionsFor(p *spec.StatParams) gate.StatOptions {
	o := gate.DefaultStatOptions()
	if p.Alpha > 0 {
		o.Alpha = p.Alpha
	}
	if p.MinEffect > 0 {
		o.MinEffect = p.MinEffect
	}
	if p.Power > 0 {
		o.Power = p.Power
	}
	o.Detect = p.Test == spec.TestDetect
	return o
}

func metricSamples(trials []map[string]float64, metric string) []float64 {
	var out []float64
	for _, t := range trials {
		if v, ok := t[metric]; ok {
			out = append(out, v)
		}
	}
	return out
}
