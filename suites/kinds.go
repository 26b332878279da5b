package suites

import (
	"slices"

	"github.com/reckon-ci/reckon/gate"
	"github.com/reckon-ci/reckon/spec"
)

// checkKind is the runner of one kind of check. The runner (tree.go: the Ginkgo tree;
// plan.go: what each check needs; shard.go and merge.go: sharding and reckon merge) only calls
// these methods, so a new kind is one file (kind_KIND.go) that registers its runner for its
// spec.CheckKind. Where a check is judged (in each config's container, or once after every
// config in the cross-config container) is its spec.Check.Scope, the one definition spec,
// sharding and merge share; kinds of spec.ScopePerConfig embed configScoped, kinds of
// spec.ScopeCross embed crossScoped.
type checkKind interface {
	// entry is c's report entry before it is judged: its name, kind, subject config, the config
	// it compares with, labels and line. config is the container's config of a per-config check.
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
	// late reports whether a per-config check is judged after the config's measurements (a
	// metric that exists only after traffic).
	late(c *spec.Check) bool
	// judge returns c's verdict; cs is the config's state of a per-config check (nil for a
	// cross-config one).
	judge(fw *framework, cs *configState, c *spec.Check) gate.Verdict
	// rejudge reports whether reckon merge judges c again from the shards' results rather than
	// keep the verdict of the shard that judged it (judged: one did).
	rejudge(c *spec.Check, judged bool) bool
}

// checkKinds maps each spec.CheckKind to its runner; each kind_*.go file registers its own
// (TestEveryKindHasARunner checks that spec's registry and this one agree).
var checkKinds = map[spec.CheckKind]checkKind{}

// registerKind makes k the runner of the checks of kinds (an init of k's file).
func registerKind(k checkKind, kinds ...spec.CheckKind) {
	for _, kind := range kinds {
		if _, dup := checkKinds[kind]; dup {
			panic("suites: two runners for check kind " + string(kind))
		}
		checkKinds[kind] = k
	}
}

// kindOf returns the runner of c (nil for a kind this version does not judge; spec validation
// rejects those).
func kindOf(c *spec.Check) checkKind { return checkKinds[c.Kind] }

// crossKindOf returns the runner of a check judged once after every config (spec.ScopeCross;
// nil for one judged per config).
func crossKindOf(c *spec.Check) checkKind {
	if c.Scope() != spec.ScopeCross {
		return nil
	}
	return kindOf(c)
}

// configScoped holds the defaults of a kind judged in each config's container.
type configScoped struct{}

func (configScoped) compares(*spec.Check) []string  { return nil }
func (configScoped) rejudge(*spec.Check, bool) bool { return false }
func (configScoped) together(*spec.Check) bool      { return false }

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

func (crossScoped) late(*spec.Check) bool     { return false }
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
