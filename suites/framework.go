// Package suites holds reckon's Ginkgo suites. They are thin: they read a gate spec and build,
// per config, an Ordered container that launches the engine once, records what it did, measures
// it, and judges it with one spec per check; a workload's launches > 1 adds relaunch containers in
// a balanced interleaved order (launches.go); the cross-config checks run after every config. All
// launching is done by package engine, all measuring by package workload, all judging by package
// gate, and all rendering by package reporters.
package suites

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/onsi/ginkgo/v2"
	"github.com/sirupsen/logrus"

	"github.com/reckon-ci/reckon/engine"
	"github.com/reckon-ci/reckon/engine/client"
	"github.com/reckon-ci/reckon/gate"
	"github.com/reckon-ci/reckon/internal/atomicfile"
	"github.com/reckon-ci/reckon/internal/statdefault"
	"github.com/reckon-ci/reckon/spec"
	"github.com/reckon-ci/reckon/testbed"
	"github.com/reckon-ci/reckon/wire"
	"github.com/reckon-ci/reckon/workload"
)

// framework is the state of one gate run, shared by every Ginkgo node of the suite.
type framework struct {
	ctx      context.Context
	spec     *spec.Spec
	specPath string
	opts     Options
	log      logrus.FieldLogger
	adapter  engine.Adapter

	mu      sync.Mutex
	run     gate.Run
	configs map[string]*configState
	// forced holds the teacher-forced sequence of each numerics prompt (guarded by mu), taken
	// from the first config probed (forcedFrom).
	forced     map[string][]int
	forcedFrom string

	testbedKey  string
	gpus        bool // the testbed has GPUs: sample their memory during each config
	baseline    *gate.Baseline
	baselineErr error

	interrupted     bool
	interruptReason string
	suiteReport     *ginkgo.Report // Ginkgo's report of the run (ReportAfterSuite)

	// The plan (plan.go): every spec of the tree by key, which the label filter selected, which
	// reached a verdict, and the selected checks skipped under --allow-partial (key -> why).
	planned   map[string]*plannedSpec
	planOrder []string
	selected  map[string]bool
	judged    map[string]bool
	partial   map[string]string

	statOnce sync.Once
	stats    map[string]*gate.StatResult // statistical check name -> result (after Holm)
	statErrs map[string]error
	// launchNotes holds, per statistical check judged on launch units (launches > 1), the
	// launch means and variations of both sides.
	launchNotes map[string]*launchNote
	// shardSet holds the configs of this run's shard (nil: no sharding, every config).
	shardSet map[string]bool
	// historyWindows holds, per check against history, the window it was judged against.
	historyWindows map[string]*HistoryWindow
	// releases caches the engine release each version command reported ("" when it could not
	// tell), guarded by mu.
	releases map[string]string
}

// gpuReleaseSlackMiB is how much GPU memory above what was in use before a launch may remain
// after the engine stopped before the next launch proceeds.
const gpuReleaseSlackMiB = 512

// configState is what one config's container launched and measured.
type configState struct {
	name     string
	launch   spec.Launch
	logPath  string
	inst     *engine.Instance
	launchEr error
	report   *engine.Report
	// trials[workload] holds one metrics map per trial, and trialLaunch[workload] the launch
	// (1-based) that ran each of them; a relaunch (launches.go) shares both maps.
	trials      map[string][]map[string]float64
	trialLaunch map[string][]int
	// launchNo is which launch of the config this state is (0 or 1: the first).
	launchNo int
	probe    *wire.NumericsProbe
	probeErr error
	measErr  map[string]error // workload -> measurement error
	// sampler records GPU memory while the config runs (GPU testbeds only).
	sampler *testbed.Sampler
	// engineVersion is what the engine said its version is ("" when unknown).
	engineVersion string
	// allreduce is the evidence of the allreduce the engine ran (nil: not gathered).
	allreduce *gate.AllReduceEvidence
	// release is the engine release the launch's flags were built for ("" = the newest).
	release string
	// serverMemory is the memory plan the engine reported at /server_info (server_memory.go).
	serverMemory map[string]float64
	// replayed marks a config read back from a shard's results.json by reckon merge: it was
	// launched (in that shard) although this process holds no instance of it.
	replayed bool
	// baseline, when set, is the stored baseline of this config's testbed (reckon merge joins
	// shards of several testbeds); nil uses the run's.
	baseline    *gate.Baseline
	baselineErr error
	// trialWarnings[workload] are the distinct warnings of its trials' results (a cycled
	// dataset, text prompts instead of token ids, ...), shown with the measurement.
	trialWarnings map[string][]string
	// out is the config's entry in the results (gate.Config), owned here: the run's
	// Configs are derived from the states (framework.view), never kept a second time. Its
	// Engine is report as its JSON object (the keys of `reckon logs parse --json`), which floors
	// address by name. reported says whether the config belongs in this run's results (its
	// shard's; a merged shard's).
	out      gate.Config
	reported bool
}

// launched reports whether the config was launched in this run (here, or in a merged shard).
func (cs *configState) launched() bool { return cs.inst != nil || cs.launchEr != nil || cs.replayed }

// peakGPUMemGiB is the highest GPU memory use seen so far while the config ran (nil without
// GPU sampling).
func (cs *configState) peakGPUMemGiB() *float64 {
	if cs.sampler == nil {
		return nil
	}
	rep := cs.sampler.Snapshot()
	if rep.Samples == 0 {
		return nil
	}
	v := rep.PeakGiB()
	return &v
}

func newFramework(ctx context.Context, s *spec.Spec, specPath string, opts Options) (*framework, error) {
	adapter, err := engine.AdapterFor(s.Engine.Kind)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: engine.kind: %v", ErrInvalidInput, s.File, err)
	}
	fw := &framework{
		ctx:      ctx,
		spec:     s,
		specPath: specPath,
		opts:     opts,
		log:      opts.Log,
		adapter:  adapter,
		configs:  map[string]*configState{},
	}
	fw.run = gate.Run{
		Schema:        gate.ResultsSchema,
		SpecName:      s.Name,
		SpecPath:      specPath,
		SpecDigest:    s.Digest(),
		Engine:        s.Engine.Kind,
		ReckonVersion: opts.Version,
		GitCommit:     opts.GitCommit,
		LabelFilter:   opts.LabelFilter,
		Strict:        opts.Strict,
		StartedAt:     time.Now().UTC(),
	}
	fw.run.GitCommitSource = opts.GitCommitSource
	for _, c := range s.Configs {
		l, err := s.Resolved(c.Name)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrInvalidInput, err)
		}
		fw.configs[c.Name] = &configState{
			name:        c.Name,
			launch:      l,
			logPath:     launchLogFile(opts.OutDir, c.Name, 1),
			trials:      map[string][]map[string]float64{},
			trialLaunch: map[string][]int{},
			measErr:     map[string]error{},
			launchNo:    1,
			out:         gate.Config{Name: c.Name},
			reported:    true,
		}
	}

	fp, err := testbed.Detect(ctx)
	if err != nil {
		fw.log.WithError(err).Warn("testbed detection failed; baselines are keyed by what was found")
	}
	if fp != nil {
		fp.Engine = s.Engine.Kind
		fw.testbedKey = fp.Key()
		var m map[string]any
		if b, err := json.Marshal(fp); err == nil && json.Unmarshal(b, &m) == nil {
			fw.run.Testbed = m
		}
		fw.run.TestbedKey = fw.testbedKey
		fw.gpus = fp.GPUCount > 0
	}
	if len(s.StatisticalChecks()) > 0 || relativeToBaseline(s) {
		fw.baseline, fw.baselineErr = gate.LoadBaseline(opts.BaselineDir, fw.testbedKey, s.Name)
	}
	return fw, nil
}

// attachBaselineEngines copies the engine report stored with each config's baseline into the
// run (Config.BaselineEngine), so that a regression against the baseline is explained by what
// changed in the KV cache and memory plan since it was recorded. A nil baseline changes nothing.
func attachBaselineEngines(run *gate.Run, b *gate.Baseline) {
	if b == nil {
		return
	}
	for i := range run.Configs {
		if bc := b.Config(run.Configs[i].Name); bc != nil && len(bc.Engine) > 0 {
			run.Configs[i].BaselineEngine = bc.Engine
		}
	}
}

// reportConfig returns the report entry of a config, which its state owns; callers hold fw.mu.
func (fw *framework) reportConfig(name string) *gate.Config {
	if cs := fw.configs[name]; cs != nil {
		return &cs.out
	}
	return nil
}

// view is the run as the reports see it: the run with its configs derived from their states,
// in spec order, each with the engine report stored with its baseline. Callers hold fw.mu
// (or own fw alone).
func (fw *framework) view() gate.Run {
	r := fw.run
	r.Checks = slices.Clone(fw.run.Checks)
	r.Configs = make([]gate.Config, 0, len(fw.configs))
	for _, n := range fw.spec.ConfigNames() {
		if cs := fw.configs[n]; cs != nil && cs.reported {
			c := cs.out
			c.MeasurementErrors = cs.measurementErrors()
			r.Configs = append(r.Configs, c)
		}
	}
	attachBaselineEngines(&r, fw.baseline)
	return r
}

// LaunchConfig turns a config's effective settings (spec.Launch) into the engine adapter's
// launch config. The harness fills host and port when it launches; `reckon spec check` uses the
// same mapping to show each config's command line.
func LaunchConfig(l spec.Launch) engine.LaunchConfig {
	lc := engine.LaunchConfig{
		Command:                l.Command,
		Model:                  l.Model,
		TPSize:                 l.TPSize,
		DisableCustomAllReduce: l.DisableCustomAllReduce,
		EngineVersion:          l.EngineVersion,
		ExtraArgs:              l.Args,
		Env:                    l.Env,
	}
	if l.CudaGraphMaxBS != nil {
		lc.CUDAGraphMaxBS = *l.CudaGraphMaxBS
	}
	if l.MemFractionStatic != nil {
		lc.MemFractionStatic = *l.MemFractionStatic
	}
	if sp := l.Speculative; sp != nil {
		lc.Speculative = &engine.Speculative{
			Algorithm:      sp.Algorithm,
			DraftModelPath: sp.DraftModel,
			NumSteps:       sp.NumSteps,
			EagleTopK:      sp.EagleTopK,
			NumDraftTokens: sp.NumDraftTokens,
		}
	}
	return lc
}

// launchConfig starts the engine for a config. A failure is recorded, not returned: every check
// of the config then reports it as an infrastructure error, and the run goes on.
func (fw *framework) launchConfig(ctx context.Context, cs *configState) {
	lc := fw.engineLaunch(ctx, cs)
	l := cs.launch
	log := fw.log.WithField("config", cs.name)
	log.WithField("log", cs.logPath).Info("launching engine")
	fw.mu.Lock()
	rc := fw.reportConfig(cs.name)
	rc.Launches++
	rc.LogPath = cs.logPath
	fw.mu.Unlock()

	if fw.gpus {
		cs.sampler = testbed.NewSampler(200 * time.Millisecond)
		if err := cs.sampler.Start(ctx); err != nil {
			log.WithError(err).Warn("GPU memory sampling unavailable")
			cs.sampler = nil
		}
	}
	inst, err := engine.Launch(ctx, fw.adapter, engine.LaunchOptions{
		Config:       lc,
		LogPath:      cs.logPath,
		ReadyTimeout: l.ReadyTimeout.D(),
		StopGrace:    l.StopGrace.D(),
		Logger:       log,
	})
	cs.inst, cs.launchEr = inst, err
	rec := gate.LaunchRecord{Config: cs.name, Launch: 1, Of: launchesOf(fw.spec, cs.name), LogPath: cs.logPath, StartedAt: time.Now().UTC()}
	for _, w := range fw.spec.WorkloadsFor(cs.name) {
		rec.Workloads = append(rec.Workloads, w.Name)
	}
	if err != nil {
		rec.Error = err.Error()
	}
	fw.mu.Lock()
	fw.run.LaunchOrder = append(fw.run.LaunchOrder, rec)
	if inst != nil {
		rc.Args = inst.Argv()
	}
	fw.mu.Unlock()
	if err != nil {
		log.WithError(err).Error("engine did not start")
	} else {
		log.WithField("url", inst.BaseURL()).Info("engine ready")
		fw.recordEngineVersion(ctx, cs)
		fw.recordServerMemory(ctx, cs)
	}
	fw.refreshReport(cs)
	fw.gatherAllReduceEvidence(ctx, cs)
}

// refreshReport re-reads the engine log into the config's EngineReport.
func (fw *framework) refreshReport(cs *configState) {
	rep, err := engine.ParseLogFile(cs.logPath, fw.adapter.Name())
	if err != nil {
		fw.log.WithError(err).WithField("config", cs.name).Warn("could not parse engine log")
		return
	}
	cs.report = rep
	var m map[string]any
	if b, err := json.Marshal(rep); err == nil && json.Unmarshal(b, &m) == nil {
		if cs.engineVersion != "" {
			m["engine_version"] = cs.engineVersion
		}
		if cs.allreduce != nil && cs.allreduce.Effective != gate.BackendUnknown {
			m["allreduce"] = cs.allreduce.Effective // what ran, over what the log says
		}
		mergeServerMemory(m, cs.serverMemory)
		fw.mu.Lock()
		rc := fw.reportConfig(cs.name)
		rc.Engine = m
		if cs.launchEr != nil {
			rc.LaunchError = cs.launchEr.Error()
		}
		rc.LogTail = tailFile(cs.logPath, 40)
		fw.mu.Unlock()
	}
}

// stopConfig stops the config's engine (whole process group) and records the final log state.
func (fw *framework) stopConfig(ctx context.Context, cs *configState) {
	fw.snapshotOnFailure(ctx, cs)
	if cs.inst != nil {
		if err := cs.inst.Stop(ctx); err != nil {
			fw.log.WithError(err).WithField("config", cs.name).Warn("engine stop")
		}
	}
	if cs.sampler != nil {
		// Do not let the next config launch onto GPUs the previous engine still holds.
		err := engine.WaitGPUMemoryReleased(ctx, func() (int, error) {
			var held int64
			for _, g := range cs.sampler.Snapshot().GPUs {
				held += max(0, g.LastUsedMiB-g.FirstUsedMiB)
			}
			return int(held), nil
		}, gpuReleaseSlackMiB)
		if err != nil {
			fw.log.WithError(err).WithField("config", cs.name).Warn("GPU memory not released after stop")
		}
		rep, err := cs.sampler.Stop()
		if err != nil {
			fw.log.WithError(err).WithField("config", cs.name).Warn("GPU memory sampling")
		}
		fw.mu.Lock()
		rc := fw.reportConfig(cs.name)
		rc.GPUPeakMiB = nil
		for _, g := range rep.GPUs {
			rc.GPUPeakMiB = append(rc.GPUPeakMiB, float64(g.PeakUsedMiB))
		}
		fw.mu.Unlock()
	}
	fw.refreshReport(cs)
	fw.checkpoint()
}

// infraError is the error every check of a config reports when its engine is not up.
func (cs *configState) infraError() error {
	if cs.launchEr != nil {
		return fmt.Errorf("config %s: engine did not start: %w", cs.name, cs.launchEr)
	}
	if cs.inst == nil {
		if cs.replayed {
			return nil // read back from a shard's results (reckon merge): it ran there
		}
		return fmt.Errorf("config %s: engine was not launched", cs.name)
	}
	select {
	case <-cs.inst.Exited():
		return fmt.Errorf("config %s: engine exited during the run: %v", cs.name, cs.inst.ExitErr())
	default:
	}
	return nil
}

// client returns an HTTP client for the config's engine.
func (fw *framework) client(cs *configState) *client.Client {
	return client.New(cs.inst.BaseURL(), client.Options{Model: cs.launch.Model})
}

// measureNumerics runs the numerics probe against the config and saves it as JSON.
func (fw *framework) measureNumerics(ctx context.Context, cs *configState) error {
	if err := cs.infraError(); err != nil {
		cs.probeErr = err
		return err
	}
	n := fw.spec.Numerics
	if n == nil {
		cs.probeErr = fmt.Errorf("%s: an equivalence check names config %s but the spec has no numerics section", fw.spec.File, cs.name)
		return cs.probeErr
	}
	prompts, err := workload.LoadPrompts(n.Prompts)
	if err != nil {
		cs.probeErr = err
		return err
	}
	p, err := workload.RunNumericsProbe(ctx, fw.client(cs), prompts, n.MaxTokens, n.TopLogprobs)
	if err != nil {
		cs.probeErr = fmt.Errorf("numerics probe of %s: %w", cs.name, err)
		return cs.probeErr
	}
	p.Config = cs.name
	p.Engine = fw.spec.Engine.Kind
	p.DType, p.TPSize = launchDType(cs.launch), cs.launch.TPSize
	// Teacher forcing: every config scores the same sequences, the prompts followed by the
	// greedy continuations of the first config probed in this run.
	fw.mu.Lock()
	if fw.forced == nil {
		seqs, err := workload.ForcedSequences(p)
		if err != nil {
			fw.mu.Unlock()
			cs.probeErr = fmt.Errorf("numerics probe of %s: %w", cs.name, err)
			return cs.probeErr
		}
		fw.forced, fw.forcedFrom = seqs, cs.name
	}
	seqs, from := fw.forced, fw.forcedFrom
	fw.mu.Unlock()
	if err := workload.ScoreForced(ctx, fw.client(cs), p, seqs, from, n.TopLogprobs, n.BatchSize); err != nil {
		cs.probeErr = fmt.Errorf("numerics probe of %s: %w", cs.name, err)
		return cs.probeErr
	}
	cs.probe = p
	path := filepath.Join(fw.opts.OutDir, "numerics", cs.name+".json")
	if err := atomicfile.WriteJSON(path, p); err != nil {
		return err
	}
	fw.mu.Lock()
	fw.reportConfig(cs.name).NumericsFile = path
	fw.mu.Unlock()
	return nil
}

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
	res, err := workload.Run(ctx, fw.client(cs), opts)
	if err != nil {
		return fmt.Errorf("config %s workload %s trial %d: %w", cs.name, w.Name, i+1, err)
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

func (fw *framework) statOptions(c *spec.Check) gate.StatOptions {
	p := c.Stat()
	o := gate.DefaultStatOptions()
	if p.Alpha > 0 {
		o.Alpha = p.Alpha
	}
	if p.MinEffect > 0 {
		o.MinEffect = p.MinEffect
	}
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

// record adds a judged check to the run and returns it.
func (fw *framework) record(c gate.Check) {
	fw.mu.Lock()
	fw.run.Checks = append(fw.run.Checks, c)
	fw.mu.Unlock()
}

// checkpoint writes results.json as it stands, so that an interrupted or killed run still leaves
// what it measured.
func (fw *framework) checkpoint() {
	fw.mu.Lock()
	snapshot := fw.view()
	snapshot.Interrupted = true // until finish says otherwise
	snapshot.FinishedAt = time.Now().UTC()
	fw.mu.Unlock()
	err := atomicfile.Write(filepath.Join(fw.opts.OutDir, "results.json"), func(w io.Writer) error {
		return gate.WriteResults(w, &snapshot)
	})
	if err != nil {
		fw.log.WithError(err).Warn("checkpoint results.json")
	}
}

// finish closes the run: interrupted when some check the spec defines never ran to the end.
func (fw *framework) finish() *gate.Run {
	fw.mu.Lock()
	defer fw.mu.Unlock()
	fw.run.FinishedAt = time.Now().UTC()
	fw.run.Interrupted = fw.interrupted || fw.ctx.Err() != nil
	if fw.run.Interrupted {
		fw.run.InterruptReason = fw.interruptReason
		if fw.run.InterruptReason == "" {
			fw.run.InterruptReason = "SIGINT or SIGTERM"
		}
	}
	// Every selected check that never reached a verdict is listed: a run never looks more
	// complete than it was.
	fw.run.Checks = append(fw.run.Checks, fw.notRun(fw.run.Interrupted, fw.run.InterruptReason)...)
	r := fw.view()
	return &r
}

func tailFile(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	// Only the end of the file: an engine log may be gigabytes.
	const window = 256 << 10
	if st, err := f.Stat(); err == nil && st.Size() > window {
		if _, err := f.Seek(st.Size()-window, io.SeekStart); err != nil {
			return ""
		}
	}
	b, err := io.ReadAll(io.LimitReader(f, window))
	if err != nil {
		return ""
	}
	return lastLines(string(b), n)
}

// logTail is the end of the config's engine log: read from the log reckon wrote, or, for a
// config replayed by reckon merge, the tail its shard recorded (merge opens no path a shard
// names).
func (cs *configState) logTail() string {
	if cs.replayed {
		return lastLines(cs.out.LogTail, maxLogTailLines)
	}
	return tailFile(cs.logPath, maxLogTailLines)
}

// launchDType is the dtype a launch asks for with --dtype ("" when not given or "auto").
func launchDType(l spec.Launch) string {
	for i, a := range l.Args {
		v, ok := strings.CutPrefix(a, "--dtype=")
		if !ok && a == "--dtype" && i+1 < len(l.Args) {
			v, ok = l.Args[i+1], true
		}
		if ok && v != "auto" {
			return v
		}
	}
	return ""
}
