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
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/onsi/ginkgo/v2"
	"github.com/sirupsen/logrus"

	"github.com/reckon-ci/reckon/engine"
	"github.com/reckon-ci/reckon/gate"
	"github.com/reckon-ci/reckon/internal/atomicfile"
	"github.com/reckon-ci/reckon/spec"
	"github.com/reckon-ci/reckon/testbed"
	"github.com/reckon-ci/reckon/wire"
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
	// nightsNotes holds, per check against history, what the nightly detector tested.
	nightsNotes map[string]string
	// nightsSpan holds, per check against history, how many nights its verdict's head holds.
	nightsSpan map[string]int
	// releases caches the engine release each version command reported ("" when it could not
	// tell), guarded by mu.
	releases map[string]string
	// releaseErrs holds why a version command could not tell (logged, and shown in the
	// launch's health check).
	releaseErrs map[string]error
}

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
	// traceDir is where a vLLM launch's profiler traces land (profilerSetup; "" when the
	// config's own --profiler-config names no torch profiler).
	traceDir string
	// releaseErr is why the release could not be asked of the engine's command before the
	// launch (nil: asked, or engine.version set).
	releaseErr error
	// evidenceErr is why the evidence gathered after readiness (version, memory plan,
	// allreduce profile) is incomplete: it ran past evidenceBudget (nil: it did not).
	evidenceErr error
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
	// stopped says the run stopped the engine (recordStop); exitedErr is then why it was not up
	// at that moment (nil: it was).
	stopped   bool
	exitedErr error
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
