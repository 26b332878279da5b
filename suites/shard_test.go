package suites

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/reckon-ci/reckon/spec"
)

func mustSpec(t *testing.T, src string) *spec.Spec {
	t.Helper()
	s, err := spec.Parse([]byte(src), "t.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// abcSpec: a, b and c relaunched (3 launches); d and e tied by a relative check; f alone.
const abcSpec = `name: t
engine: {kind: sglang, model: m, tp_size: 2}
configs: [{name: a}, {name: b}, {name: c}, {name: d}, {name: e}, {name: f}]
workloads:
  - {name: w, concurrency: 1, num_prompts: 1, input_len: 1, output_len: 1, trials: 2, launches: 3}
checks:
  - {kind: throughput, config: b, metric: output_throughput, against: "config:a"}
  - {kind: throughput, config: c, metric: output_throughput, against: "config:a"}
  - {kind: relative, config: e, of: d, metric: kv_cache_tokens, min_ratio: 0.9}
  - {kind: floor, config: f, metric: kv_cache_tokens, min: 1}
`

func TestRelaunchScheduleIsBalancedAndInterleaved(t *testing.T) {
	s := mustSpec(t, abcSpec)
	order := func(configs ...string) string {
		var parts []string
		for _, st := range relaunchSchedule(s, configs) {
			parts = append(parts, fmt.Sprintf("%s%d", st.config, st.launch))
		}
		return strings.Join(parts, " ")
	}
	// The first launches (a1 b1, in spec order) run in the config containers.
	if got := order("a", "b"); got != "b2 a2 a3 b3" {
		t.Errorf("two configs: %q (whole run: a1 b1 b2 a2 a3 b3)", got)
	}
	if got := order("a", "b", "c"); got != "c2 b2 a2 a3 b3 c3" {
		t.Errorf("three configs: %q", got)
	}
	// Configs without relaunching workloads are not relaunched.
	if got := order("a", "d", "f"); got != "a2 a3" {
		t.Errorf("mixed: %q", got)
	}
	// With an even number of launches the mean positions are equal: a1 b1 b2 a2 a3 b3 b4 a4.
	s4 := mustSpec(t, strings.Replace(abcSpec, "launches: 3", "launches: 4", 1))
	pos := map[string]float64{"a": 0, "b": 1}
	for i, st := range relaunchSchedule(s4, []string{"a", "b"}) {
		pos[st.config] += float64(i + 2)
	}
	if pos["a"] != pos["b"] {
		t.Errorf("4 launches: position sums a %v b %v", pos["a"], pos["b"])
	}
}

func TestShardPlanKeepsTiedConfigsTogether(t *testing.T) {
	s := mustSpec(t, abcSpec)
	groups := fmt.Sprint(ShardGroups(s, ShardByGroup))
	if groups != "[[a b c] [d e] [f]]" {
		t.Errorf("groups %s", groups)
	}
	plan := ShardPlan(s, 2, ShardByGroup)
	if plan["a"] != plan["b"] || plan["b"] != plan["c"] || plan["d"] != plan["e"] {
		t.Errorf("tied configs split: %v", plan)
	}
	// Heaviest first (a b c: 9 launches) to shard 1, then d e and f to shard 2.
	if got := fmt.Sprint(shardConfigs(s, Shard{Index: 1, Count: 2, By: ShardByGroup}), shardConfigs(s, Shard{Index: 2, Count: 2, By: ShardByGroup})); got != "[a b c] [d e f]" {
		t.Errorf("shards %s", got)
	}
	// Stable: the same spec always gives the same plan.
	for i := 0; i < 20; i++ {
		if fmt.Sprint(ShardPlan(mustSpec(t, abcSpec), 2, ShardByGroup)) != fmt.Sprint(plan) {
			t.Fatal("plan changed between calls")
		}
	}
	// By config: every config on its own, spread over all shards.
	byConfig := ShardPlan(s, 3, ShardByConfig)
	seen := map[int]int{}
	for _, n := range s.ConfigNames() {
		seen[byConfig[n]]++
	}
	if len(seen) != 3 {
		t.Errorf("by config over 3 shards: %v", byConfig)
	}
	// Even by config, the configs of an equivalence check share a shard (teacher forcing).
	eq := mustSpec(t, `name: q
engine: {kind: sglang, model: m, tp_size: 2}
configs: [{name: a}, {name: t, env: {NCCL_ALGO: Tree}}, {name: b}, {name: c}]
numerics: {prompts: p.jsonl}
checks:
  - {kind: equivalence, base: a, head: b, twin: t}
  - {kind: relative, config: c, of: a, metric: kv_cache_tokens, min_ratio: 0.9}
`)
	if got := fmt.Sprint(ShardGroups(eq, ShardByConfig)); got != "[[a t b] [c]]" {
		t.Errorf("by config with an equivalence check: %s", got)
	}
	// More shards than groups: the surplus ones are empty.
	if got := shardConfigs(s, Shard{Index: 4, Count: 4, By: ShardByGroup}); len(got) != 0 {
		t.Errorf("shard 4/4 of 3 groups: %v", got)
	}
}

func TestParseShard(t *testing.T) {
	if sh, err := ParseShard("2/4"); err != nil || sh.Index != 2 || sh.Count != 4 || sh.By != ShardByGroup {
		t.Errorf("2/4: %+v %v", sh, err)
	}
	for _, bad := range []string{"0/4", "5/4", "2", "a/b", "1/0", "-1/2"} {
		if _, err := ParseShard(bad); err == nil || !strings.Contains(err.Error(), "expected I/N with 1 <= I <= N") {
			t.Errorf("%q: %v", bad, err)
		}
	}
}

func TestLaunchUnits(t *testing.T) {
	m := func(x float64) map[string]float64 { return map[string]float64{"tput": x} }
	trials := []map[string]float64{m(100), m(102), m(110), m(112), m(90), m(92)}
	lv := launchUnits(trials, []int{1, 1, 2, 2, 3, 3}, "tput")
	if fmt.Sprint(lv.Means) != "[101 111 91]" || fmt.Sprint(lv.Trials) != "[2 2 2]" {
		t.Fatalf("means %v trials %v", lv.Means, lv.Trials)
	}
	// Between: sd(101, 111, 91) = 10 over the grand mean 101; within: pooled sd sqrt(2) / 101.
	if math.Abs(lv.Between-10.0/101) > 1e-12 || math.Abs(lv.Within-math.Sqrt2/101) > 1e-12 {
		t.Errorf("between %v within %v", lv.Between, lv.Within)
	}
	one := launchUnits(trials[:3], []int{1, 2, 3}, "tput")
	if !math.IsNaN(one.Within) || len(one.Means) != 3 {
		t.Errorf("one trial per launch: %+v", one)
	}
}
