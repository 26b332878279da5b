package suites

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/onsi/ginkgo/v2"

	"github.com/reckon-ci/reckon/engine"
	"github.com/reckon-ci/reckon/gate"
	"github.com/reckon-ci/reckon/internal/num"
	"github.com/reckon-ci/reckon/spec"
	"github.com/reckon-ci/reckon/testbed"
)

// Relaunches (a workload's launches > 1). The first launch of every config is its own container
// (defineConfig): every check of the config is judged there, and it runs the first launch's
// trials. The later launches follow in rounds, the configs in spec order in even rounds and in
// reverse order in odd ones, so that two configs run A B | B A | A B ...: a drift during the
// run (thermal, a noisy neighbour) lands on both sides alike, and with an even number of
// launches each config's mean position in the run is the same. A relaunch runs only the trials
// of the workloads that ask for that many launches, and judges its own readiness and log.

// launchStep is one relaunch: the config, which of its launches (2..of), and what it runs.
type launchStep struct {
	config    string
	launch    int
	of        int
	workloads []*spec.Workload
}

// launchesOf is the number of launches of a config: the most any workload it runs asks for.
func launchesOf(s *spec.Spec, config string) int {
	n := 1
	for _, w := range s.WorkloadsFor(config) {
		n = max(n, w.LaunchCount())
	}
	return n
}

// relaunchSchedule returns the relaunches of the spec's configs, restricted to configs, in run
// order (after the first launch of every config, which runs in spec order).
func relaunchSchedule(s *spec.Spec, configs []string) []launchStep {
	rounds := 1
	for _, c := range configs {
		rounds = max(rounds, launchesOf(s, c))
	}
	var out []launchStep
	for r := 1; r < rounds; r++ {
		order := slices.Clone(configs)
		if r%2 == 1 {
			slices.Reverse(order)
		}
		for _, c := range order {
			of := launchesOf(s, c)
			if of <= r {
				continue
			}
			st := launchStep{config: c, launch: r + 1, of: of}
			for _, w := range s.WorkloadsFor(c) {
				if w.LaunchCount() > r {
					st.workloads = append(st.workloads, w)
				}
			}
			out = append(out, st)
		}
	}
	return out
}

func relaunchContainer(config string, launch, of int) string {
	return fmt.Sprintf("config %s, launch %d of %d", config, launch, of)
}

func relaunchTrialsSpecName(config, workload string, launch, of int) string {
	return fmt.Sprintf("%s: throughput trials (%s), launch %d of %d", config, workload, launch, of)
}

// defineRelaunches adds one container per relaunch, in the schedule's order.
func defineRelaunches(fw *framework, configs []string) {
	for _, st := range relaunchSchedule(fw.spec, configs) {
		defineRelaunch(fw, fw.configs[st.config], st)
		if st.launch == st.of {
			defineJudged(fw, fw.configs[st.config]) // its checks on traffic see every launch's trials
		}
	}
}

func defineRelaunch(fw *framework, base *configState, st launchStep) {
	s := fw.spec
	labels := append([]string{base.name}, s.Labels(base.name)...)
	cfgLine := fw.configLine(base.name)
	// The relaunch shares the first launch's trials (and their errors): its trials are the same
	// config's samples, tagged with their launch.
	rs := &configState{
		name:        base.name,
		launch:      base.launch,
		logPath:     launchLogFile(fw.opts.OutDir, base.name, st.launch),
		trials:      base.trials,
		trialLaunch: base.trialLaunch,
		measErr:     base.measErr,
		launchNo:    st.launch,
	}
	container := relaunchContainer(base.name, st.launch, st.of)
	grace := base.launch.StopGrace.D() + 30*time.Second
	suffix := fmt.Sprintf(" (launch %d of %d)", st.launch, st.of)
	ginkgo.Describe(container, ginkgo.Label(sanitizeLabels(labels)...), func() {
		ginkgo.BeforeAll(func(ctx ginkgo.SpecContext) {
			ginkgo.DeferCleanup(func(ctx ginkgo.SpecContext) {
				fw.stopRelaunch(ctx, rs)
			}, ginkgo.NodeTimeout(grace))
			fw.relaunch(fw.ctx, rs, st)
		}, ginkgo.NodeTimeout(launchNodeTimeout(base.launch, false)))

		readyName := base.name + ": launch and readiness" + suffix
		ready := gate.Check{Verdict: gate.Verdict{Name: readyName, Kind: gate.KindHealth, Config: base.name}, Labels: labels, Line: cfgLine}
		fw.plan(container, readyName, ready)
		ginkgo.It(readyName, fw.at(cfgLine), ginkgo.Label(labelHealth, labelThroughput), func() {
			v := healthVerdict(rs)
			v.Name = readyName
			fw.judge(ready, v)
		})
		for _, w := range st.workloads {
			w := w
			name := relaunchTrialsSpecName(base.name, w.Name, st.launch, st.of)
			entry := gate.Check{Verdict: gate.Verdict{Name: name, Kind: gate.KindMeasurement, Config: base.name}, Labels: labels, Line: cfgLine}
			fw.plan(container, name, entry)
			timeout := time.Duration(max(w.Trials, 1)) * (w.RequestTimeout.D()*2 + 10*time.Minute)
			ginkgo.It(name, fw.at(cfgLine), ginkgo.Label(labelThroughput), func(ctx ginkgo.SpecContext) {
				err := fw.measureLaunch(ctx, rs, w)
				fw.judge(entry, measureVerdict(name, rs, err, func() string {
					xs := launchSamples(rs.trials[w.Name], rs.trialLaunch[w.Name], st.launch, "output_throughput")
					return fmt.Sprintf("%s: %d trials of %s in launch %d of %d, output throughput %s tok/s", base.name, len(xs), w.Name, st.launch, st.of, fmtSamples(xs)) + trialNote(rs, w.Name)
				}))
			}, ginkgo.NodeTimeout(timeout))
		}
		logName := base.name + ": engine log shows no errors" + suffix
		logEntry := gate.Check{Verdict: gate.Verdict{Name: logName, Kind: gate.KindHealth, Config: base.name}, Labels: labels, Line: cfgLine}
		fw.plan(container, logName, logEntry)
		ginkgo.It(logName, fw.at(cfgLine), ginkgo.Label(labelHealth, labelThroughput), func() {
			rs.settle()
			rs.report, _ = engine.ParseEngineLog(rs.logPath, fw.adapter.Name())
			v := logVerdict(logName, rs)
			fw.judge(logEntry, v)
		})
	})
}

// relaunch starts the engine again for a later launch of a config. Like launchConfig it records
// a failure rather than returning it; unlike it, it leaves the config's report entry (log path,
// argv, engine report) as the first launch recorded it, and adds the launch to the run order.
func (fw *framework) relaunch(ctx context.Context, rs *configState, st launchStep) {
	lc := fw.engineLaunch(ctx, rs)
	log := fw.log.WithFields(map[string]any{"config": rs.name, "launch": fmt.Sprintf("%d/%d", st.launch, st.of)})
	log.WithField("log", rs.logPath).Info("relaunching engine")
	rec := gate.LaunchRecord{Config: rs.name, Launch: st.launch, Of: st.of, LogPath: rs.logPath, StartedAt: time.Now().UTC()}
	for _, w := range st.workloads {
		rec.Workloads = append(rec.Workloads, w.Name)
	}
	if fw.gpus {
		rs.sampler = testbed.NewSampler(200 * time.Millisecond)
		if err := rs.sampler.Start(ctx); err != nil {
			log.WithError(err).Warn("GPU memory sampling unavailable")
			rs.sampler = nil
		}
	}
	inst, err := engine.Launch(ctx, fw.adapter, engine.LaunchOptions{
		Config:       lc,
		LogPath:      rs.logPath,
		ReadyTimeout: rs.launch.ReadyTimeout.D(),
		StopGrace:    rs.launch.StopGrace.D(),
		Logger:       log,
	})
	rs.inst, rs.launchEr = inst, err
	if err != nil {
		rec.Error = err.Error()
		log.WithError(err).Error("engine did not start")
	}
	fw.mu.Lock()
	fw.reportConfig(rs.name).Launches++
	fw.run.LaunchOrder = append(fw.run.LaunchOrder, rec)
	fw.mu.Unlock()
	rs.report, _ = engine.ParseEngineLog(rs.logPath, fw.adapter.Name())
}

// stopRelaunch stops a relaunch's engine and, on a GPU testbed, waits until its GPU memory is
// released before the next launch proceeds (as stopConfig does for a first launch).
func (fw *framework) stopRelaunch(ctx context.Context, rs *configState) {
	rs.recordStop()
	if rs.inst != nil {
		if err := rs.inst.Stop(ctx); err != nil {
			fw.log.WithError(err).WithField("config", rs.name).Warn("engine stop")
		}
	}
	if rs.sampler != nil {
		err := engine.WaitGPUMemoryReleased(ctx, func() (int, error) {
			var held int64
			for _, g := range rs.sampler.Snapshot().GPUs {
				held += max(0, g.LastUsedMiB-g.FirstUsedMiB)
			}
			return int(held), nil
		}, gpuReleaseSlackMiB)
		if err != nil {
			fw.log.WithError(err).WithField("config", rs.name).Warn("GPU memory not released after stop")
		}
		if _, err := rs.sampler.Stop(); err != nil {
			fw.log.WithError(err).WithField("config", rs.name).Warn("GPU memory sampling")
		}
	}
	rs.report, _ = engine.ParseEngineLog(rs.logPath, fw.adapter.Name())
}

// measureLaunch runs one launch's trials of a workload (the workload's trials; no sequential
// additions: with relaunches the unit is a launch).
func (fw *framework) measureLaunch(ctx context.Context, rs *configState, w *spec.Workload) error {
	if err := rs.infraError(); err != nil {
		rs.measErr[w.Name] = err
		return err
	}
	for k := 0; k < max(w.Trials, 1); k++ {
		if err := fw.runTrial(ctx, rs, w, len(rs.trials[w.Name])); err != nil {
			rs.measErr[w.Name] = err
			return err
		}
	}
	return nil
}

// launchSamples are the values of metric in the trials of one launch.
func launchSamples(trials []map[string]float64, launchOf []int, launch int, metric string) []float64 {
	var out []float64
	for i, t := range trials {
		if i < len(launchOf) && launchOf[i] == launch {
			if v, ok := t[metric]; ok {
				out = append(out, v)
			}
		}
	}
	return out
}

// launchVariation is how a config's samples of one metric vary over its launches: the unit
// values (one mean per launch) that the statistics compare, and the two components of the
// variation, both as coefficients of variation of the grand mean.
type launchVariation struct {
	// Means holds one mean per launch, in launch order.
	Means []float64
	// Trials is the number of trials in each launch.
	Trials []int
	// Between is the standard deviation of the launch means over the grand mean; Within is the
	// pooled standard deviation of the trials around their launch's mean over the grand mean
	// (NaN with one trial per launch).
	Between, Within float64
}

// launchUnits groups a config's samples of metric by launch.
func launchUnits(trials []map[string]float64, launchOf []int, metric string) launchVariation {
	var v launchVariation
	maxLaunch := 0
	for _, l := range launchOf {
		maxLaunch = max(maxLaunch, l)
	}
	var grand, ss float64
	var nAll, df int
	for l := 1; l <= maxLaunch; l++ {
		xs := launchSamples(trials, launchOf, l, metric)
		if len(xs) == 0 {
			continue
		}
		mean := 0.0
		for _, x := range xs {
			mean += x
		}
		mean /= float64(len(xs))
		for _, x := range xs {
			ss += (x - mean) * (x - mean)
			grand += x
		}
		nAll += len(xs)
		df += len(xs) - 1
		v.Means = append(v.Means, mean)
		v.Trials = append(v.Trials, len(xs))
	}
	v.Between, v.Within = math.NaN(), math.NaN()
	if nAll == 0 {
		return v
	}
	grand /= float64(nAll)
	if df > 0 && grand != 0 {
		v.Within = math.Sqrt(ss/float64(df)) / math.Abs(grand)
	}
	if k := len(v.Means); k > 1 && grand != 0 {
		m := 0.0
		for _, x := range v.Means {
			m += x
		}
		m /= float64(k)
		var s2 float64
		for _, x := range v.Means {
			s2 += (x - m) * (x - m)
		}
		v.Between = math.Sqrt(s2/float64(k-1)) / math.Abs(grand)
	}
	return v
}

// launchGroups are a config's samples of metric grouped by launch, in launch order.
func launchGroups(trials []map[string]float64, launchOf []int, metric string) [][]float64 {
	var vals []float64
	var ls []int
	for i, t := range trials {
		if v, ok := t[metric]; ok {
			vals = append(vals, v)
			l := 1
			if i < len(launchOf) {
				l = launchOf[i]
			}
			ls = append(ls, l)
		}
	}
	return gate.GroupByLaunch(vals, ls)
}

// groupUnits is launchUnits of samples already grouped by launch (a baseline's, the history's).
func groupUnits(groups [][]float64) launchVariation {
	var trials []map[string]float64
	var of []int
	for i, g := range groups {
		for _, x := range g {
			trials = append(trials, map[string]float64{"v": x})
			of = append(of, i+1)
		}
	}
	return launchUnits(trials, of, "v")
}

// launchNote is what a statistical verdict adds about its launches: each side's launch means
// in the details and, when either side has several launches, the launch counts and both sides'
// within- and between-launch CV (the gate's estimates, on the log scale) in the message.
type launchNote struct {
	head, base         launchVariation
	headName, baseName string
}

// apply adds the launch units of the comparison st to a statistical verdict.
func (n *launchNote) apply(v *gate.Verdict, st *gate.StatResult) {
	if st == nil || st.Launch == nil {
		return
	}
	ls := st.Launch
	trialsPer := func(lv launchVariation) string {
		if len(lv.Trials) == 0 {
			return "0"
		}
		lo, hi := slices.Min(lv.Trials), slices.Max(lv.Trials)
		if lo == hi {
			return fmt.Sprint(lo)
		}
		return fmt.Sprintf("%d-%d", lo, hi)
	}
	if ls.LaunchesHead > 1 || ls.LaunchesBase > 1 {
		v.Message += fmt.Sprintf(" [unit: launch, %d vs %d launches of %s trials; between-launch CV %s %s, %s %s; within-launch CV %s %s, %s %s]",
			ls.LaunchesHead, ls.LaunchesBase, trialsPer(n.head),
			n.headName, fmtCV(ls.Head.BetweenCV), n.baseName, fmtCV(ls.Base.BetweenCV),
			n.headName, fmtCV(ls.Head.WithinCV), n.baseName, fmtCV(ls.Base.WithinCV))
	}
	var b strings.Builder
	fmt.Fprintf(&b, "launches are the statistical unit: each side's value per launch is the mean of that launch's trials\n")
	for _, side := range []struct {
		name string
		lv   launchVariation
		e    gate.NoiseEstimate
	}{{n.headName, n.head, ls.Head}, {n.baseName, n.base, ls.Base}} {
		parts := make([]string, len(side.lv.Means))
		for i, m := range side.lv.Means {
			parts[i] = fmt.Sprintf("%s (%d trials)", num.Format(m), side.lv.Trials[i])
		}
		fmt.Fprintf(&b, "%s launch means: %s; between-launch CV %s, within-launch CV %s\n", side.name, strings.Join(parts, ", "), fmtCV(side.e.BetweenCV), fmtCV(side.e.WithinCV))
	}
	v.Details = b.String() + v.Details
}

func fmtCV(x float64) string {
	if math.IsNaN(x) {
		return "n/a"
	}
	return fmt.Sprintf("%.1f%%", 100*x)
}
