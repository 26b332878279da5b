package suites

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/reckon-ci/reckon/gate"
	"github.com/reckon-ci/reckon/reporters"
	"github.com/reckon-ci/reckon/spec"
)

// Verification of shards by reckon merge. A shard's results.json comes from a job that may have
// run untrusted code (a pull request's), so merge treats it as a claim: it must be of the spec
// merge judges with (its digest), of one commit, of the configs the spec assigns to its index,
// and list every check the spec defines for those configs, each once; the verdicts whose
// evidence the results carry are judged again, and any disagreement is reported and turns the
// merge red.

// mergeKind is the Kind of the checks reckon merge adds about the shards themselves.
const mergeKind = "merge"

// verifyShards checks the shards against the spec before anything is replayed. It returns an
// error for shards that cannot be merged (another spec or digest, a wrong assignment, a missing,
// unknown or repeated check), and the problems that --allow-mixed lets through as red checks
// (shards of different commits).
func verifyShards(s *spec.Spec, shards []shardRun, allowMixed bool) (red []string, err error) {
	digest := s.Digest()
	var problems []string
	bad := func(format string, a ...any) { problems = append(problems, fmt.Sprintf(format, a...)) }
	first := shards[0]
	commits := map[string][]string{}
	for _, sh := range shards {
		r, p := sh.run, sh.path()
		switch {
		case r.SpecDigest == "":
			bad("%s: no spec_digest (written by a reckon before merge verified shards): run the shard again with this reckon", p)
		case r.SpecDigest != digest:
			bad("%s: spec_digest %s, but the spec merge judges with (%s) is %s: the shard ran another version of the spec (pass --spec with the file the shards ran)", p, r.SpecDigest, s.File, digest)
		}
		commits[r.GitCommit] = append(commits[r.GitCommit], fmt.Sprintf("%d/%d", r.Shard.Index, r.Shard.Count))
		if r.LabelFilter != first.run.LabelFilter {
			bad("%s: --label-filter %q, but shard %d/%d ran %q: every shard must select the same checks", p, r.LabelFilter, first.run.Shard.Index, first.run.Shard.Count, first.run.LabelFilter)
		}
		problems = append(problems, verifyShardContent(s, sh)...)
	}
	seen := map[string]string{} // name\x00config -> shard path, for checks judged per config
	for _, sh := range shards {
		for _, e := range sh.run.Checks {
			if crossCheck(s, e.Name) {
				continue
			}
			k := e.Name + "\x00" + e.Config
			if other, ok := seen[k]; ok && other != sh.path() {
				bad("%s: check %q of config %s is also in %s: a config runs in one shard", sh.path(), e.Name, e.Config, other)
			}
			seen[k] = sh.path()
		}
	}
	if len(commits) > 1 {
		var parts []string
		for c, idx := range commits {
			if c == "" {
				c = "(none)"
			}
			parts = append(parts, fmt.Sprintf("%s (shard %s)", c, strings.Join(idx, ", ")))
		}
		slices.Sort(parts)
		msg := "the shards ran different commits: " + strings.Join(parts, "; ") + "; a cross-config check would compare two builds"
		if !allowMixed {
			bad("%s (merge the shards of one commit, or pass --allow-mixed to merge them red)", msg)
		} else {
			red = append(red, msg)
		}
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("shards do not match the spec %s:\n  %s", s.File, strings.Join(problems, "\n  "))
	}
	return red, nil
}

// path is the shard's results file, as errors name it.
func (sh shardRun) path() string { return sh.dir + "/" + reporters.JSONFile }

// crossCheck reports whether name is a cross-config check of the spec.
func crossCheck(s *spec.Spec, name string) bool {
	for _, c := range s.Checks {
		if c.Name == name {
			return crossKindOf(c) != nil
		}
	}
	return false
}

// verifyShardContent checks one shard: the configs it ran are those the spec assigns to its
// index, and its checks are the spec's for those configs, each once.
func verifyShardContent(s *spec.Spec, sh shardRun) []string {
	r, p := sh.run, sh.path()
	var problems []string
	bad := func(format string, a ...any) { problems = append(problems, fmt.Sprintf(format, a...)) }
	if err := checkShardNumbers(r.Shard.Index, r.Shard.Count); err != nil {
		return []string{fmt.Sprintf("%s: %v", p, err)}
	}
	by := r.Shard.By
	if by != ShardByGroup && by != ShardByConfig {
		return []string{fmt.Sprintf("%s: shard.by %q: expected %s or %s", p, by, ShardByGroup, ShardByConfig)}
	}
	want := shardConfigs(s, Shard{Index: r.Shard.Index, Count: r.Shard.Count, By: by})
	if !slices.Equal(r.Shard.Configs, want) {
		bad("%s: shard %d/%d by %s lists configs [%s], the spec assigns it [%s]", p, r.Shard.Index, r.Shard.Count, by, strings.Join(r.Shard.Configs, ", "), strings.Join(want, ", "))
	}
	here := map[string]bool{}
	for _, n := range want {
		here[n] = true
	}
	ran := map[string]int{}
	for _, c := range r.Configs {
		ran[c.Name]++
		switch {
		case !here[c.Name]:
			bad("%s: configs[] has %q, which the spec does not assign to shard %d/%d", p, c.Name, r.Shard.Index, r.Shard.Count)
		case ran[c.Name] > 1:
			bad("%s: config %q listed twice", p, c.Name)
		}
	}
	for _, n := range want {
		if ran[n] == 0 {
			bad("%s: config %s is assigned to shard %d/%d but absent from its configs[]: not run", p, n, r.Shard.Index, r.Shard.Count)
		}
	}
	checks := map[string]*spec.Check{}
	for _, c := range s.Checks {
		checks[c.Name] = c
	}
	type key struct{ name, config string }
	got := map[key]int{}
	for _, e := range r.Checks {
		got[key{e.Name, e.Config}]++
		if got[key{e.Name, e.Config}] == 2 {
			bad("%s: check %q (config %q) listed twice", p, e.Name, e.Config)
		}
		c := checks[e.Name]
		if c == nil {
			// Only the run's own checks of a config it ran: launch, log and measurements.
			if (e.Kind != gate.KindHealth && e.Kind != gate.KindMeasurement) || !here[e.Config] || !strings.HasPrefix(e.Name, e.Config+": ") {
				bad("%s: check %q (kind %s, config %q) is not a check of the spec for this shard", p, e.Name, e.Kind, e.Config)
			}
			continue
		}
		if ce := crossEntry(c); ce != nil {
			if e.Kind != ce.Kind || e.Config != ce.Config {
				bad("%s: check %q has kind %s and config %q, the spec's has %s and %q", p, e.Name, e.Kind, e.Config, ce.Kind, ce.Config)
			}
			continue
		}
		if e.Kind != string(c.Kind) || !slices.Contains(c.ConfigNames(), e.Config) || !here[e.Config] {
			bad("%s: check %q (kind %s, config %q) is not a check of the spec for this shard", p, e.Name, e.Kind, e.Config)
		}
		switch e.Outcome {
		case gate.OutcomeDeferred:
			bad("%s: check %q of config %s is marked deferred, but only cross-config checks are left to merge", p, e.Name, e.Config)
		case gate.OutcomeNotRun:
			if !r.Interrupted {
				bad("%s: check %q of config %s is not_run in a run that was not interrupted", p, e.Name, e.Config)
			}
		}
	}
	if r.LabelFilter != "" {
		return problems // a filtered run lists only the checks it selected
	}
	// Every check the spec defines for this shard is listed.
	for _, n := range want {
		if got[key{n + ": launch and readiness", n}] == 0 {
			bad("%s: config %s has no %q check", p, n, n+": launch and readiness")
		}
	}
	first := r.Shard.Index == 1
	for _, c := range s.Checks {
		k := kindOf(c)
		if k == nil {
			continue
		}
		if ce := crossEntry(c); ce != nil {
			in := k.inShard(c, func(n string) bool { return here[n] }, first)
			touches := slices.ContainsFunc(crossConfigs(c), func(n string) bool { return here[n] })
			if (in || touches) && got[key{c.Name, ce.Config}] == 0 {
				bad("%s: the spec's check %q is missing from the shard (judged or deferred)", p, c.Name)
			}
			continue
		}
		for _, n := range c.ConfigNames() {
			if here[n] && got[key{c.Name, n}] == 0 {
				bad("%s: the spec's check %q of config %s is missing from the shard", p, c.Name, n)
			}
		}
	}
	return problems
}

// judgeOwn judges again, from the replayed evidence, every per-config check a shard recorded
// (through configVerdict, as a live run judges it) and the run's own checks whose evidence the
// results carry (launch health, completed measurements); every other entry keeps its status no
// milder than its outcome. It returns the entries to report and one line per entry whose stated
// outcome or status its evidence contradicts.
func (fw *framework) judgeOwn(own []gate.Check) ([]gate.Check, []string) {
	checks := map[string]*spec.Check{}
	for _, c := range fw.spec.Checks {
		checks[c.Name] = c
	}
	var disagree []string
	out := make([]gate.Check, 0, len(own))
	for _, e := range own {
		cs := fw.configs[e.Config]
		if cs == nil || !cs.replayed || e.Outcome == gate.OutcomeNotRun || e.Outcome == gate.OutcomePartial {
			out = append(out, e)
			continue
		}
		var v *gate.Verdict
		if c := checks[e.Name]; c != nil {
			if k := configKindOf(c); k != nil && k.merged(c) == mergeVerify {
				x := configVerdict(k, cs.evidence(), c)
				v = &x
			}
		} else if w := fw.evidenceVerdict(cs, e); w != nil {
			v = w
		}
		if v != nil && v.Outcome != e.Outcome {
			disagree = append(disagree, fmt.Sprintf("%q (config %s): the shard says %s, its evidence says %s", e.Name, e.Config, e.Outcome, v.Outcome))
			ne := e
			ne.Explanation, ne.Trend = "", nil
			out = append(out, disagreed(fw.entryOf(ne, *v, false, ""), e.Outcome))
			continue
		}
		e, d := keptStatus(e, true)
		if d != "" {
			disagree = append(disagree, d)
		}
		out = append(out, e)
	}
	return out, disagree
}

// red reports whether a status turns the gate red.
func red(st gate.Status) bool { return st == gate.StatusFailed || st == gate.StatusError }

// evidenceVerdict judges again a run's own check of a replayed config where the results hold
// its evidence: a launch error decides the launch check, and a passed measurement has its
// trials (nil when the entry is neither).
func (fw *framework) evidenceVerdict(cs *configState, e gate.Check) *gate.Verdict {
	name, suffix := e.Name, ""
	if i := strings.Index(name, " (launch "); i > 0 && strings.HasSuffix(name, ")") {
		name, suffix = name[:i], name[i:]
	}
	switch {
	case name == cs.name+": launch and readiness" && suffix == "":
		if cs.launchEr != nil && e.Outcome != gate.Error {
			return &gate.Verdict{Name: e.Name, Kind: e.Kind, Config: cs.name, Outcome: gate.Error, Category: gate.CategoryInfrastructure, Message: cs.name + ": " + cs.launchEr.Error()}
		}
	case e.Kind == gate.KindMeasurement && e.Outcome == gate.Pass:
		for _, w := range fw.spec.Workloads {
			base := trialsSpecName(cs.name, w.Name)
			launch := 1
			if rest, ok := strings.CutPrefix(e.Name, base+", launch "); ok {
				n, _, _ := strings.Cut(rest, " ")
				launch, _ = strconv.Atoi(n)
			} else if e.Name != base {
				continue
			}
			if !slices.Contains(cs.trialLaunch[w.Name], launch) {
				return &gate.Verdict{Name: e.Name, Kind: e.Kind, Config: cs.name, Outcome: gate.Error, Category: gate.CategoryMeasurement,
					Message: fmt.Sprintf("%s: no trials of %s from launch %d in the results, but the shard recorded the measurement as passed", cs.name, w.Name, launch)}
			}
		}
	}
	return nil
}

// mergeProblemCheck is a red check reckon merge adds about the shards themselves.
func mergeProblemCheck(name string, lines []string) gate.Check {
	return gate.Check{
		Verdict: gate.Verdict{Name: name, Kind: mergeKind, Outcome: gate.Fail, Category: gate.CategoryBrokenInvariant,
			Message: name + ": " + lines[0] + more(len(lines)-1), Details: strings.Join(lines, "\n")},
		Status: gate.StatusFailed,
	}
}

func more(n int) string {
	if n <= 0 {
		return ""
	}
	return fmt.Sprintf(" (and %d more)", n)
}
