package suites

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/reckon-ci/reckon/gate"
	"github.com/reckon-ci/reckon/spec"
)

// Sharding (reckon gate --shard I/N): a spec's configs are split over N runs, e.g. one per GPU
// runner, and `reckon merge` joins their outputs into one verdict. The partition depends only
// on the spec, so every runner computes the same one.

// Ways of spreading configs over shards (Shard.By).
const (
	// ShardByGroup keeps the configs that a cross-config check ties together (relative,
	// equivalence with its twin and oracle, a statistical check against another config) in one
	// shard: every check is judged where its configs ran. The default.
	ShardByGroup = "group"
	// ShardByConfig spreads every config on its own, for runners that are the same testbed (the
	// same testbed key): the cross-config checks whose configs land on different shards are
	// left to reckon merge, which judges them from the shards' results and refuses to compare
	// across testbed keys. The configs of an equivalence check still share a shard (their probes
	// are teacher-forced on one run's sequences).
	ShardByConfig = "config"
)

// Shard selects one part of a spec's configs.
type Shard struct {
	// Index is 1-based; Count is the number of shards (0: no sharding).
	Index, Count int
	// By is ShardByGroup (default) or ShardByConfig.
	By string
}

// ParseShard reads "I/N" (1 <= I <= N).
func ParseShard(v string) (Shard, error) {
	i, n, ok := strings.Cut(v, "/")
	idx, err1 := strconv.Atoi(strings.TrimSpace(i))
	cnt, err2 := strconv.Atoi(strings.TrimSpace(n))
	if !ok || err1 != nil || err2 != nil || cnt < 1 || idx < 1 || idx > cnt || cnt > MaxShards {
		return Shard{}, fmt.Errorf("--shard %q: expected I/N with 1 <= I <= N <= %d, e.g. --shard 1/4", v, MaxShards)
	}
	return Shard{Index: idx, Count: cnt, By: ShardByGroup}, nil
}

// MaxShards is the most shards a run may be split into: a shard plan holds a slot per shard,
// so a count read from a shard's results.json must be bounded before it is planned with.
const MaxShards = 1024

// checkShardNumbers checks a shard's index and count as read from a results file: 1 <= index
// <= count <= MaxShards (a count of 0 or 10^12 would break or exhaust the plan).
func checkShardNumbers(index, count int) error {
	if count < 1 || count > MaxShards || index < 1 || index > count {
		return fmt.Errorf("shard %d/%d: expected index/count with 1 <= index <= count <= %d", index, count, MaxShards)
	}
	return nil
}

// ShardGroups returns the units a spec's configs are sharded in, each in spec order: with
// ShardByGroup the configs tied by cross-config checks (connected components), with
// ShardByConfig every config alone except the configs of an equivalence check.
func ShardGroups(s *spec.Spec, by string) [][]string {
	names := s.ConfigNames()
	parent := map[string]string{}
	for _, n := range names {
		parent[n] = n
	}
	var find func(string) string
	find = func(x string) string {
		if parent[x] != x {
			parent[x] = find(parent[x])
		}
		return parent[x]
	}
	for _, c := range s.Checks {
		// An equivalence check's configs always share a shard: teacher forcing scores them all on
		// the sequences of the first config probed in the run, which another shard never sees.
		if k := kindOf(c); k != nil && (by != ShardByConfig || k.together(c)) {
			cfgs := crossConfigs(c)
			for _, o := range cfgs[min(1, len(cfgs)):] {
				a, b := find(cfgs[0]), find(o)
				if a != b {
					parent[b] = a
				}
			}
		}
	}
	var groups [][]string
	at := map[string]int{}
	for _, n := range names {
		r := find(n)
		i, ok := at[r]
		if !ok {
			i = len(groups)
			at[r] = i
			groups = append(groups, nil)
		}
		groups[i] = append(groups[i], n)
	}
	return groups
}

// ShardPlan assigns every config of the spec to one of count shards (index 1..count): the
// groups, heaviest first (weight: the config's launches), each to the least loaded shard, ties
// to the lowest index. It is a function of the spec alone.
func ShardPlan(s *spec.Spec, count int, by string) map[string]int {
	groups := ShardGroups(s, by)
	weight := func(g []string) int {
		w := 0
		for _, c := range g {
			w += launchesOf(s, c)
		}
		return w
	}
	order := make([]int, len(groups))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return weight(groups[order[a]]) > weight(groups[order[b]]) })
	load := make([]int, count)
	out := map[string]int{}
	for _, gi := range order {
		best := 0
		for i := 1; i < count; i++ {
			if load[i] < load[best] {
				best = i
			}
		}
		load[best] += weight(groups[gi])
		for _, c := range groups[gi] {
			out[c] = best + 1
		}
	}
	return out
}

// shardConfigs returns the configs of shard sh in spec order.
func shardConfigs(s *spec.Spec, sh Shard) []string {
	plan := ShardPlan(s, sh.Count, sh.By)
	var out []string
	for _, n := range s.ConfigNames() {
		if plan[n] == sh.Index {
			out = append(out, n)
		}
	}
	return out
}

// inShard reports whether this run defines a check: per-config checks of its configs,
// cross-config checks whose configs all run here, and config-free checks (allreduce probe
// files) in shard 1. Without sharding every check is defined.
func (fw *framework) inShard(c *spec.Check) bool {
	if fw.shardSet == nil {
		return true
	}
	k := kindOf(c)
	return k != nil && k.inShard(c, func(n string) bool { return fw.shardSet[n] }, fw.opts.Shard.Index == 1)
}

// shardConfigNames filters names to this run's shard (all of them without sharding).
func (fw *framework) shardConfigNames(names []string) []string {
	if fw.shardSet == nil {
		return names
	}
	var out []string
	for _, n := range names {
		if fw.shardSet[n] {
			out = append(out, n)
		}
	}
	return out
}

// applyShard restricts the run to its shard: it records the shard in the run, drops the other
// configs from the report, and lists as deferred the cross-config checks whose configs are
// split between this shard and others (reckon merge judges them).
func (fw *framework) applyShard() {
	sh := fw.opts.Shard
	if sh.Count == 0 {
		return
	}
	if sh.By == "" {
		sh.By = ShardByGroup
	}
	fw.opts.Shard = sh
	cfgs := shardConfigs(fw.spec, sh)
	fw.shardSet = map[string]bool{}
	for _, c := range cfgs {
		fw.shardSet[c] = true
	}
	fw.run.Shard = &gate.Shard{Index: sh.Index, Count: sh.Count, By: sh.By, Configs: cfgs}
	for n, cs := range fw.configs {
		cs.reported = fw.shardSet[n]
	}
	for _, c := range fw.spec.Checks {
		cc := crossConfigs(c)
		if cc == nil || fw.inShard(c) || !slices.ContainsFunc(cc, func(n string) bool { return fw.shardSet[n] }) {
			continue
		}
		e := *crossEntry(c)
		var elsewhere []string
		for _, n := range cc {
			if !fw.shardSet[n] && !slices.Contains(elsewhere, n) {
				elsewhere = append(elsewhere, n)
			}
		}
		e.Status = gate.StatusSkipped
		e.Outcome = gate.OutcomeDeferred
		e.Message = fmt.Sprintf("deferred to reckon merge: config %s runs in another shard (--shard %d/%d --shard-by %s)", strings.Join(elsewhere, ", "), sh.Index, sh.Count, sh.By)
		fw.run.Shard.Deferred = append(fw.run.Shard.Deferred, c.Name)
		fw.run.Checks = append(fw.run.Checks, e)
	}
}
