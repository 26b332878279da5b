package suites

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/sirupsen/logrus"

	"github.com/reckon-ci/reckon/engine"
	"github.com/reckon-ci/reckon/gate"
	"github.com/reckon-ci/reckon/internal/safefile"
	"github.com/reckon-ci/reckon/internal/strictjson"
	"github.com/reckon-ci/reckon/reporters"
	"github.com/reckon-ci/reckon/spec"
	"github.com/reckon-ci/reckon/wire"
)

// MergeOptions configure reckon merge.
type MergeOptions struct {
	// Dirs are the shards' output directories (each holds a results.json of reckon gate --shard).
	Dirs []string
	// OutDir receives the merged reports.
	OutDir string
	// SpecPath overrides the spec file the shards recorded (a merge job may run in another
	// checkout); the spec names the cross-config checks to judge.
	SpecPath string
	// BaselineDir holds stored baselines, for statistical checks against the baseline (their
	// Holm-Bonferroni family now spans every shard).
	BaselineDir string
	// Strict and RequireBaseline are the gate's policies for the checks merge judges; Strict is
	// also on when every shard ran under --strict.
	Strict, RequireBaseline bool
	// AllowMixed merges shards of different commits instead of refusing them; the merged run
	// is red (a check of kind merge says which shards ran which commit).
	AllowMixed bool
	Version    string
	Log        logrus.FieldLogger
}

// shardRun is one shard's results read back.
type shardRun struct {
	dir string
	run *gate.Run
}

// Merge joins the outputs of reckon gate --shard 1/N ... N/N into one run and writes its
// reports to opts.OutDir. The checks a shard judged alone are kept as it judged them; the
// statistical checks are judged again over the whole run (one Holm-Bonferroni family, as an
// unsharded run has), and the cross-config checks a shard deferred (their configs ran on
// different shards) are judged here when those shards share a testbed key, and refused (an
// error) when they do not: throughput, memory and numerics of different machines are not
// compared. Bad input (a directory that is not a shard run, shards of other specs, a missing or
// repeated shard) is an error wrapping ErrInvalidInput.
func Merge(opts MergeOptions) (*gate.Run, error) {
	if opts.Log == nil {
		opts.Log = logrus.StandardLogger()
	}
	if opts.BaselineDir == "" {
		opts.BaselineDir = "baselines"
	}
	shards, err := readShards(opts.Dirs)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidInput, err)
	}
	// The merged reports replace reckon's own only: another tool's results.json is not overwritten.
	if why := foreignResults(opts.OutDir); why != "" {
		return nil, fmt.Errorf("%w: --out %s: %s; reckon would overwrite it: choose a new or empty --out", ErrInvalidInput, opts.OutDir, why)
	}
	first := shards[0].run
	specPath := opts.SpecPath
	if specPath == "" {
		specPath = first.SpecPath
	}
	s, err := spec.Load(specPath)
	if err != nil {
		return nil, fmt.Errorf("%w: %w (pass --spec when the shards ran in another checkout)", ErrInvalidInput, err)
	}
	if s.Name != first.SpecName {
		return nil, fmt.Errorf("%w: %s is spec %q, the shards ran spec %q", ErrInvalidInput, specPath, s.Name, first.SpecName)
	}
	mixed, err := verifyShards(s, shards, opts.AllowMixed)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidInput, err)
	}
	strict := opts.Strict
	if !strict {
		strict = true
		for _, sh := range shards {
			strict = strict && sh.run.Strict
		}
	}
	adapter, err := engine.AdapterFor(s.Engine.Kind)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: engine.kind: %v", ErrInvalidInput, s.File, err)
	}
	fw := &framework{
		ctx:      context.Background(),
		spec:     s,
		specPath: specPath,
		opts:     Options{OutDir: opts.OutDir, BaselineDir: opts.BaselineDir, Strict: strict, RequireBaseline: opts.RequireBaseline, Version: opts.Version},
		log:      opts.Log,
		adapter:  adapter,
		configs:  map[string]*configState{},
	}
	fw.run = mergedRun(s, shards, strict, opts.Version)

	// Every config of the spec gets a state; those a shard ran are replayed from its results.
	shardOf := map[string]*shardRun{}
	for i := range shards {
		for _, c := range shards[i].run.Configs {
			shardOf[c.Name] = &shards[i]
		}
	}
	baselines := map[string]*baselineEntry{}
	for _, c := range s.Configs {
		l, err := s.Resolved(c.Name)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrInvalidInput, err)
		}
		cs := &configState{name: c.Name, launch: l, trials: map[string][]map[string]float64{}, trialLaunch: map[string][]int{}, measErr: map[string]error{}, launchNo: 1}
		fw.configs[c.Name] = cs
		sh := shardOf[c.Name]
		if sh == nil {
			continue
		}
		replay(cs, sh, s)
		if len(s.StatisticalChecks()) > 0 {
			key := sh.run.TestbedKey
			be := baselines[key]
			if be == nil {
				be = &baselineEntry{}
				be.b, be.err = gate.LoadBaseline(opts.BaselineDir, key, s.Name)
				baselines[key] = be
			}
			cs.baseline, cs.baselineErr = be.b, be.err
			if be.b == nil && be.err == nil {
				cs.baselineErr = fmt.Errorf("no baseline for testbed %s", key)
			}
		}
	}
	if len(baselines) == 1 {
		for key, be := range baselines {
			fw.testbedKey, fw.baseline, fw.baselineErr = key, be.b, be.err
		}
	}

	// Checks: each shard's own, config by config in spec order, then the cross-config checks.
	cross := map[string]*spec.Check{}
	for _, c := range s.Checks {
		if crossEntry(c) != nil {
			cross[c.Name] = c
		}
	}
	byName := map[string][]*gate.Check{}
	var own []gate.Check
	for i := range shards {
		for j := range shards[i].run.Checks {
			e := &shards[i].run.Checks[j]
			if cross[e.Name] != nil {
				byName[e.Name] = append(byName[e.Name], e)
				continue
			}
			own = append(own, *e)
		}
	}
	cfgIndex := map[string]int{}
	for i, n := range s.ConfigNames() {
		cfgIndex[n] = i
	}
	sort.SliceStable(own, func(a, b int) bool { return cfgIndex[own[a].Config] < cfgIndex[own[b].Config] })
	own, disagree := fw.judgeOwn(own)
	fw.run.Checks = own
	for _, c := range s.Checks {
		entries := byName[c.Name]
		if cross[c.Name] == nil || len(entries) == 0 {
			continue // not a cross-config check, or no shard selected it (--label-filter; verifyShards)
		}
		e, d := fw.mergeCheck(c, entries, shardOf)
		fw.run.Checks = append(fw.run.Checks, e)
		if d != "" {
			disagree = append(disagree, d)
		}
	}
	if len(mixed) > 0 {
		fw.run.Checks = append(fw.run.Checks, mergeProblemCheck("merge: every shard ran one commit", mixed))
	}
	if len(disagree) > 0 {
		fw.run.Checks = append(fw.run.Checks, mergeProblemCheck("merge: the shards' stated outcomes agree with their evidence", disagree))
	}
	run := fw.view()
	if err := reporters.WriteAll(opts.OutDir, &run); err != nil {
		return &run, fmt.Errorf("write reports: %w", err)
	}
	return &run, nil
}

type baselineEntry struct {
	b   *gate.Baseline
	err error
}

// mergeCheck returns the merged entry of a cross-config (or statistical) check from what the
// shards recorded for it, and a line when the outcome a shard stated disagrees with the verdict
// its evidence gives.
func (fw *framework) mergeCheck(c *spec.Check, entries []*gate.Check, shardOf map[string]*shardRun) (gate.Check, string) {
	var judged *gate.Check
	for _, e := range entries {
		if e.Outcome != gate.OutcomeDeferred {
			judged = e
		}
	}
	e := *crossEntry(c)
	e.Labels = entries[0].Labels
	if judged != nil {
		e.Labels, e.Duration = judged.Labels, judged.Duration
	}
	// The testbeds of the configs it compares: one key, or a refusal.
	keys := map[string][]string{}
	for _, n := range crossConfigs(c) {
		if sh := shardOf[n]; sh != nil {
			keys[sh.run.TestbedKey] = append(keys[sh.run.TestbedKey], n)
		}
	}
	if len(keys) > 1 {
		var parts []string
		for k, cfgs := range keys {
			parts = append(parts, fmt.Sprintf("%s on %s", strings.Join(cfgs, ", "), k))
		}
		sort.Strings(parts)
		v := gate.Verdict{Name: c.Name, Kind: string(c.Kind), Config: e.Config, Outcome: gate.Error, Category: gate.CategoryInfrastructure,
			Message: fmt.Sprintf("%s: not judged: its configs ran on different testbeds (%s); reckon merge compares configs only within one testbed key (run them on identical runners, or keep them in one shard with --shard-by group)", e.Config, strings.Join(parts, "; "))}
		out := fw.entryOf(e, v, false, "")
		return out, ""
	}
	k := crossKindOf(c)
	switch {
	case judged == nil:
		// No shard could judge it (its configs ran on different shards of one testbed): judged
		// here from the shards' results, as one run would have.
		out := fw.entryOf(e, k.judge(fw, c), false, "")
		out.Details = strings.TrimSpace(out.Details + "\n\njudged by reckon merge from the shards' results (its configs ran on different shards of testbed " + onlyKey(keys) + ")")
		return out, ""
	case k.merged(c) == mergeFamily:
		// A statistical family is the whole run's, as without shards.
		return fw.entryOf(e, k.judge(fw, c), false, ""), ""
	case k.merged(c) == mergeVerify && judged.Outcome != gate.OutcomeNotRun && judged.Outcome != gate.OutcomePartial:
		// Judged from the evidence the results carry, like a live run; a shard whose stated
		// outcome disagrees turns the merge red.
		if v := k.judge(fw, c); v.Outcome != judged.Outcome {
			return disagreed(fw.entryOf(e, v, false, ""), judged.Outcome), fmt.Sprintf("%q: the shard says %s, its evidence says %s", c.Name, judged.Outcome, v.Outcome)
		}
	}
	return keptStatus(*judged, false)
}

// disagreed is the entry of a check whose shard stated another outcome than its evidence gives.
func disagreed(e gate.Check, stated gate.Outcome) gate.Check {
	e.Message = strings.TrimSpace(e.Message + " (judged again by reckon merge: the shard recorded " + string(stated) + ")")
	return e
}

// keptStatus is a shard's entry kept as it judged it, its status no milder than its outcome
// (and a line when the shard's status was milder). perConfig names the config in the line.
func keptStatus(e gate.Check, perConfig bool) (gate.Check, string) {
	st, _ := (gate.Policy{}).Status(e.Outcome)
	if !red(st) || red(e.Status) {
		return e, ""
	}
	d := fmt.Sprintf("%q: status %s for outcome %s", e.Name, e.Status, e.Outcome)
	if perConfig {
		d = fmt.Sprintf("%q (config %s): status %s for outcome %s", e.Name, e.Config, e.Status, e.Outcome)
	}
	e.Status = st
	return e, d
}

func onlyKey(keys map[string][]string) string {
	for k := range keys {
		return k
	}
	return ""
}

// readShards reads and cross-checks the shards' results: one spec, one shard count, every
// index exactly once.
func readShards(dirs []string) ([]shardRun, error) {
	if len(dirs) == 0 {
		return nil, errors.New("no shard directories given (reckon merge DIR...)")
	}
	var out []shardRun
	for _, d := range dirs {
		p := filepath.Join(d, reporters.JSONFile)
		// The shard job wrote this directory: its results.json is opened following no link and
		// never blocking (a FIFO is refused), like every file merge reads from a shard.
		data, err := safefile.ReadFileIn(d, reporters.JSONFile, gate.MaxResultsBytes)
		if err != nil {
			return nil, fmt.Errorf("shard %s: %w", d, err)
		}
		r, err := gate.DecodeResults(data)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		if r.Shard == nil {
			return nil, fmt.Errorf("%s: not the output of a shard (no \"shard\" field); run each part with reckon gate --shard I/N", p)
		}
		if err := checkShardNumbers(r.Shard.Index, r.Shard.Count); err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		out = append(out, shardRun{dir: d, run: r})
	}
	sort.SliceStable(out, func(a, b int) bool { return out[a].run.Shard.Index < out[b].run.Shard.Index })
	f := out[0].run
	seen := map[int]string{}
	for _, sh := range out {
		r, p := sh.run, filepath.Join(sh.dir, reporters.JSONFile)
		switch {
		case r.SpecName != f.SpecName:
			return nil, fmt.Errorf("%s: spec %q, but %s is spec %q: merge the shards of one spec", p, r.SpecName, filepath.Join(out[0].dir, reporters.JSONFile), f.SpecName)
		case r.Shard.Count != f.Shard.Count || r.Shard.By != f.Shard.By:
			return nil, fmt.Errorf("%s: shard %d/%d by %s, but the first is %d/%d by %s: every shard must come from the same --shard N and --shard-by", p, r.Shard.Index, r.Shard.Count, r.Shard.By, f.Shard.Index, f.Shard.Count, f.Shard.By)
		case seen[r.Shard.Index] != "":
			return nil, fmt.Errorf("%s: shard %d/%d given twice (also %s)", p, r.Shard.Index, r.Shard.Count, seen[r.Shard.Index])
		}
		seen[r.Shard.Index] = p
	}
	var missing []string
	for i := 1; i <= f.Shard.Count; i++ {
		if seen[i] == "" {
			missing = append(missing, fmt.Sprintf("%d/%d", i, f.Shard.Count))
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("missing shard %s of spec %q: a merge of some shards would look complete; give every shard's output directory", strings.Join(missing, ", "), f.SpecName)
	}
	return out, nil
}

// mergedRun is the run header of the merged shards (their checks and configs follow).
func mergedRun(s *spec.Spec, shards []shardRun, strict bool, version string) gate.Run {
	f := shards[0].run
	r := gate.Run{
		Schema: gate.ResultsSchema, SpecName: f.SpecName, SpecPath: f.SpecPath, SpecDigest: f.SpecDigest, Engine: f.Engine,
		ReckonVersion: f.ReckonVersion, GitCommit: f.GitCommit, GitCommitSource: f.GitCommitSource,
		EngineVersion: f.EngineVersion, LabelFilter: f.LabelFilter, Strict: strict,
		StartedAt: f.StartedAt, FinishedAt: f.FinishedAt,
	}
	if version != "" && r.ReckonVersion == "" {
		r.ReckonVersion = version
	}
	keys := map[string]bool{}
	var reasons []string
	for _, sh := range shards {
		x := sh.run
		keys[x.TestbedKey] = true
		if x.StartedAt.Before(r.StartedAt) || r.StartedAt.IsZero() {
			r.StartedAt = x.StartedAt
		}
		if x.FinishedAt.After(r.FinishedAt) {
			r.FinishedAt = x.FinishedAt
		}
		if r.EngineVersion == "" {
			r.EngineVersion = x.EngineVersion
		}
		if x.Interrupted {
			r.Interrupted = true
			reasons = append(reasons, fmt.Sprintf("shard %d/%d: %s", x.Shard.Index, x.Shard.Count, x.InterruptReason))
		}
		r.MergedFrom = append(r.MergedFrom, gate.MergedShard{Dir: sh.dir, Index: x.Shard.Index, Count: x.Shard.Count, TestbedKey: x.TestbedKey, Configs: x.Shard.Configs, GitCommit: x.GitCommit})
		r.LaunchOrder = append(r.LaunchOrder, x.LaunchOrder...)
	}
	r.InterruptReason = strings.Join(reasons, "; ")
	if len(keys) == 1 {
		r.TestbedKey, r.Testbed = f.TestbedKey, f.Testbed
	} else {
		ks := make([]string, 0, len(keys))
		for k := range keys {
			ks = append(ks, k)
		}
		sort.Strings(ks)
		r.TestbedKey = "mixed: " + strings.Join(ks, ", ")
	}
	return r // its configs are the replayed states' (replay, framework.view)
}

// replay fills a config's state from its shard's results: the engine report, the trials with
// their launches, the numerics probe and the errors of its measurements (the evidence the
// config recorded, never the names of its checks).
func replay(cs *configState, sh *shardRun, s *spec.Spec) {
	cs.replayed = true
	var c *gate.Config
	for i := range sh.run.Configs {
		if sh.run.Configs[i].Name == cs.name {
			c = &sh.run.Configs[i]
		}
	}
	cs.out, cs.reported = *c, true
	// The log is shown from the tail the shard recorded; the path it names is never opened.
	cs.logPath = launchLogFile(sh.dir, cs.name, 1)
	cs.allreduce = c.AllReduce // judged again as recorded, never re-derived from text
	if c.LaunchError != "" {
		cs.launchEr = errors.New(c.LaunchError)
	}
	trials := slices.Clone(c.Trials)
	sort.SliceStable(trials, func(a, b int) bool { return trials[a].Index < trials[b].Index })
	for _, t := range trials {
		cs.trials[t.Workload] = append(cs.trials[t.Workload], t.Metrics)
		cs.trialLaunch[t.Workload] = append(cs.trialLaunch[t.Workload], max(1, t.Launch))
	}
	restoreMeasurements(cs, c, sh.run.Checks, s)
	if c.NumericsFile != "" {
		// Only the shard's own numerics/CONFIG.json, never the path the results name (a shard's
		// results are data, not instructions: readShardFile).
		rel := filepath.Join("numerics", cs.name+".json")
		b, err := readShardFile(sh.dir, rel, maxShardFileBytes)
		var probe wire.NumericsProbe
		if err == nil {
			err = json.Unmarshal(b, &probe)
		}
		if err == nil {
			// Last-wins would let a shard overwrite what it measured with a second key.
			if p, dup := strictjson.DuplicateKey(b, nil); dup {
				err = fmt.Errorf("line %d, column %d: field %q: %s", p.Line, p.Column, p.Path, p.Msg)
			}
		}
		if err != nil {
			cs.probeErr = fmt.Errorf("config %s: numerics probe of shard %d (%s): %w", cs.name, sh.run.Shard.Index, filepath.Join(sh.dir, rel), err)
		} else {
			cs.probe = &probe
		}
	}
}
