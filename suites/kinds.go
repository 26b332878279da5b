package suites

import (
	"slices"

	"github.com/reckon-ci/reckon/gate"
	"github.com/reckon-ci/reckon/spec"
)

// A check kind is its spec.Params type in spec (decoding and validation of its fields, the
// defaults that depend on other sections, its scope, its configs, what it needs measured
// (workloadFor), its generated name) and its runner here: a configKind or a crossKind,
// registered from its own file (kind_KIND.go). Every method of both is required, so a kind that
// lacks one does not compile; the runner (tree.go: the Ginkgo tree; plan.go: what each check
// needs; shard.go and merge.go: sharding and reckon merge) only calls these methods. Where a
// check is judged is its spec.Check.Scope, the one definition spec, sharding and merge share:
// kinds of spec.ScopePerConfig embed configScoped and register with registerConfigKind, kinds of
// spec.ScopeCross embed crossScoped and register with registerCrossKind
// (TestEveryKindHasARunner checks that both registries agree with spec's).
type checkKind interface {
	// entry is c's report entry before it is judged: its name, kind, subject config, the config
	// it compares with, labels and line. config is the container's config of a per-config
	// check. The entry's kind is the one place a verdict's kind comes from (entryOf).
	entry(c *spec.Check, config string, labels []string) gate.Check
	// labels are the Ginkgo labels of c's spec besides the spec's tags: its kind's label and the
	// configs it compares (so that a --label-filter on a config selects its comparisons).
	labels(c *spec.Check) []string
	// compares lists the configs a cross-config check compares, its subject first (nil when it
	// compares none of this run's configs with another); sharding keeps them together.
	compares(c *spec.Check) []string
	// inShard reports whether the shard that holds the configs here defines c (first: it is
	// shard 1, which takes the checks that compare no config).
	inShard(c *spec.Check, here func(config string) bool, first bool) bool
	// together reports whether c's configs share a shard even under --shard-by config.
	together(c *spec.Check) bool
	// needs are the specs of the tree c's verdict needs (the configs launched, their
	// measurements), which the label filter must not remove (plan.go); config is the
	// container's config of a per-config check.
	needs(s *spec.Spec, c *spec.Check, config string) []need
	// merged says how reckon merge treats c's verdict (mergeRule).
	merged(c *spec.Check) mergeRule
}

// configKind is the runner of a kind judged on each config alone (spec.ScopePerConfig).
type configKind interface {
	checkKind
	// late reports whether c is judged after the config's measurements (a metric that exists
	// only after traffic): then after the config's last launch, so that it sees every trial.
	late(c *spec.Check) bool
	// judge returns c's verdict over one config's recorded evidence; it reads nothing else.
	judge(ev *evidence, c *spec.Check) gate.Verdict
}

// crossKind is the runner of a kind judged once after every config (spec.ScopeCross).
type crossKind interface {
	checkKind
	// judge returns c's verdict over the run's evidence (every config's, the baseline, the
	// history, a probe file).
	judge(fw *framework, c *spec.Check) gate.Verdict
}

// mergeRule is how reckon merge treats the verdict a shard recorded for a check.
type mergeRule int

const (
	// mergeVerify: merge judges the check again from the evidence the results carry, as a live
	// run does; a shard whose stated outcome disagrees turns the merge red.
	mergeVerify mergeRule = iota + 1
	// mergeFamily: merge judges the check again over the whole run, superseding the shard's
	// provisional verdict (a statistical family: Holm runs over every shard's checks).
	mergeFamily
	// mergeKeep: the results do not carry all of the check's evidence (a probe file, the
	// history store, teacher-forced sequences): the shard's verdict is kept (its status no milder
	// than its outcome), and merge judges it only when no shard could (deferred).
	mergeKeep
)

// checkKinds maps each spec.CheckKind to its runner; each kind_*.go file registers its own.
var checkKinds = map[spec.CheckKind]checkKind{}

func register(k checkKind, kinds []spec.CheckKind) {
	for _, kind := range kinds {
		if _, dup := checkKinds[kind]; dup {
			panic("suites: two runners for check kind " + string(kind))
		}
		checkKinds[kind] = k
	}
}

// registerConfigKind makes k the runner of the per-config checks of kinds (an init of k's file).
func registerConfigKind(k configKind, kinds ...spec.CheckKind) { register(k, kinds) }

// registerCrossKind makes k the runner of the cross-config checks of kinds (an init of k's file).
func registerCrossKind(k crossKind, kinds ...spec.CheckKind) { register(k, kinds) }

// kindOf returns the runner of c (nil for a kind this version does not judge; spec validation
// rejects those).
func kindOf(c *spec.Check) checkKind { return checkKinds[c.Kind] }

// configKindOf returns the runner of a check judged per config (nil for another).
func configKindOf(c *spec.Check) configKind {
	if c.Scope() != spec.ScopePerConfig {
		return nil
	}
	k, _ := kindOf(c).(configKind)
	return k
}

// crossKindOf returns the runner of a check judged once after every config (spec.ScopeCross;
// nil for one judged per config).
func crossKindOf(c *spec.Check) crossKind {
	if c.Scope() != spec.ScopeCross {
		return nil
	}
	k, _ := kindOf(c).(crossKind)
	return k
}

// configScoped holds the defaults of a kind judged in each config's container.
type configScoped struct{}

func (configScoped) compares(*spec.Check) []string { return nil }
func (configScoped) together(*spec.Check) bool     { return false }

// merged: a per-config check's evidence is its config's, which the results carry whole.
func (configScoped) merged(*spec.Check) mergeRule { return mergeVerify }

// entry: the check's entry in the config's container, with the config's labels.
func (configScoped) entry(c *spec.Check, config string, labels []string) gate.Check {
	return checkEntry(c, config, labels)
}

// inShard: a per-config check is defined where any config it names runs.
func (configScoped) inShard(c *spec.Check, here func(string) bool, _ bool) bool {
	return slices.ContainsFunc(c.ConfigNames(), here)
}

// crossScoped holds the defaults of a kind judged once after every config.
type crossScoped struct{}

func (crossScoped) together(*spec.Check) bool { return false }

// allHere reports whether every config of cfgs runs here: a cross-config check is defined where
// all the configs it compares run.
func allHere(cfgs []string, here func(string) bool) bool {
	for _, n := range cfgs {
		if !here(n) {
			return false
		}
	}
	return true
}

// crossEntry is the report entry of a cross-config check, as the cross-config container
// records it (nil for a check judged per config).
func crossEntry(c *spec.Check) *gate.Check {
	k := crossKindOf(c)
	if k == nil {
		return nil
	}
	e := k.entry(c, "", nil)
	return &e
}

// crossConfigs returns the configs a cross-config check compares (nil for other checks; a
// relative check against the baseline names its one config).
func crossConfigs(c *spec.Check) []string {
	if k := kindOf(c); k != nil {
		return k.compares(c)
	}
	return nil
}

// need constructors shared by the kinds.

func launchedNeed(cfg string) need {
	return need{container: configContainer(cfg), what: "config " + cfg}
}

func probeNeed(cfg string) need {
	return need{container: configContainer(cfg), leaves: []string{probeSpecName(cfg)}, what: probeSpecName(cfg)}
}

func trialsNeed(cfg, workload string) need {
	n := trialsSpecName(cfg, workload)
	return need{container: configContainer(cfg), leaves: []string{n}, what: n}
}
