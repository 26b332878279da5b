package spec

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/reckon-ci/reckon/internal/statdefault"
)

// kindHead is a spec with two configs, a workload and numerics, for one check appended to it.
const kindHead = `name: k
engine: {kind: sglang, model: m, tp_size: 2}
configs:
  - {name: a, disable_custom_all_reduce: true}
  - {name: b, env: {NCCL_ALGO: Tree}, disable_custom_all_reduce: true}
  - {name: c}
workloads: [{name: w, concurrency: 1, num_prompts: 1, input_len: 1, output_len: 1, trials: 3}]
numerics: {prompts: p.jsonl}
checks:
`

// minimalChecks is one valid check of every registered kind, with its scope and the generated
// name it must get.
var minimalChecks = map[CheckKind]struct {
	yaml  string
	scope Scope
	name  string
}{
	KindFloor:          {"{kind: floor, metric: kv_cache_tokens, min: 1}", ScopePerConfig, "floor kv_cache_tokens >= 1"},
	KindRelative:       {"{kind: relative, config: c, of: a, metric: kv_cache_tokens, min_ratio: 0.9}", ScopeCross, "relative c kv_cache_tokens >= 0.9 x a"},
	KindExpect:         {"{kind: expect, configs: [a], allreduce: nccl}", ScopePerConfig, "expect a allreduce == nccl"},
	KindEquivalence:    {"{kind: equivalence, base: a, head: c, twin: b}", ScopeCross, "equivalence c vs a"},
	KindAllReduceProbe: {"{kind: allreduce_probe, file: p.json}", ScopeCross, "allreduce_probe p.json"},
	KindThroughput:     {"{kind: throughput, config: c, metric: output_throughput, against: config:a}", ScopeCross, "throughput c w output_throughput vs a"},
	KindLatency:        {"{kind: latency, config: c, metric: median_ttft_ms}", ScopeCross, "latency c w median_ttft_ms vs baseline"},
	KindErrorRate:      {"{kind: error_rate, configs: [a]}", ScopePerConfig, "error_rate <= 1% (w)"},
}

// TestEveryKindHasADescriptor: every registered kind decodes, links, validates, names itself and
// has a scope; the registry and CheckKinds agree, and no kind is registered twice.
func TestEveryKindHasADescriptor(t *testing.T) {
	if len(kindDefs) != len(minimalChecks) {
		t.Errorf("%d kinds registered, %d tested here: add the new kind to minimalChecks", len(kindDefs), len(minimalChecks))
	}
	seen := map[CheckKind]bool{}
	for i, d := range kindDefs {
		if seen[d.kind] {
			t.Errorf("kind %s registered twice", d.kind)
		}
		seen[d.kind] = true
		if CheckKinds[i] != d.kind || d.decode == nil {
			t.Errorf("registry entry %d (%s): CheckKinds has %s, decode set %v", i, d.kind, CheckKinds[i], d.decode != nil)
		}
		tc, ok := minimalChecks[d.kind]
		if !ok {
			continue
		}
		s, err := Parse([]byte(kindHead+"  - "+tc.yaml+"\n"), "k.yaml")
		if err != nil {
			t.Errorf("%s: %v", d.kind, err)
			continue
		}
		c := s.Checks[0]
		if c.Kind != d.kind || c.Params == nil {
			t.Fatalf("%s: check %+v", d.kind, c)
		}
		if c.Scope() != tc.scope || c.Params.Scope() != tc.scope {
			t.Errorf("%s: scope %v, want %v", d.kind, c.Scope(), tc.scope)
		}
		if c.Name != tc.name || c.Params.name(c.Kind) != tc.name {
			t.Errorf("%s: name %q, want %q", d.kind, c.Name, tc.name)
		}
		// At most one accessor answers for the kind's parameters (a kind may have none and be
		// read by a type switch, as error_rate is).
		n := 0
		for _, p := range []any{c.Floor(), c.Relative(), c.Expectation(), c.Equivalence(), c.Probe(), c.Stat()} {
			if !isNilPtr(p) {
				n++
			}
		}
		if n > 1 {
			t.Errorf("%s: %d accessors return parameters, want at most 1", d.kind, n)
		}
	}
}

func isNilPtr(p any) bool {
	switch x := p.(type) {
	case *FloorParams:
		return x == nil
	case *RelativeParams:
		return x == nil
	case *ExpectParams:
		return x == nil
	case *EquivalenceParams:
		return x == nil
	case *AllReduceProbeParams:
		return x == nil
	case *StatParams:
		return x == nil
	}
	return true
}

// TestParamsDecode: each kind's parameters as decoded, defaults included (a floor's configs,
// an equivalence check's top_k and derived twin, a statistical check's alpha and min_effect).
func TestParamsDecode(t *testing.T) {
	one, two := 1.0, 2.0
	ratio := 0.9
	for _, tc := range []struct {
		check string
		want  Params
	}{
		{"{kind: floor, metric: kv_cache_tokens, min: 1, max: 2}",
			&FloorParams{Configs: []string{"a", "b", "c"}, Metric: "kv_cache_tokens", Min: &one, Max: &two}},
		{"{kind: floor, configs: [c], metric: output_throughput, min: 1}",
			&FloorParams{Configs: []string{"c"}, Metric: "output_throughput", Min: &one, Workload: "w"}},
		{"{kind: relative, config: c, of: baseline, metric: kv_cache_tokens, min_ratio: 0.9}",
			&RelativeParams{Metric: "kv_cache_tokens", Config: "c", Of: OfBaseline, MinRatio: &ratio}},
		{"{kind: expect, config: c, allreduce: custom}",
			&ExpectParams{Configs: []string{"c"}, Expect: Expect{AllReduce: AllReduceCustom}}},
		{"{kind: equivalence, base: a, head: c}",
			&EquivalenceParams{Base: "a", Head: "c", TopK: DefaultTopLogprobs, Twin: "a-twin", TwinDerived: true}},
		{"{kind: equivalence, base: a, head: c, twin: none, max_distance: 2}",
			&EquivalenceParams{Base: "a", Head: "c", TopK: DefaultTopLogprobs, NoTwin: true, MaxDistance: &two}},
		{"{kind: allreduce_probe, file: /p.json, algorithms: [one_shot], max_rel_err: {bf16: 1}}",
			&AllReduceProbeParams{File: "/p.json", Algorithms: []string{"one_shot"}, MaxRelErr: map[string]float64{"bfloat16": 1}}},
		{"{kind: throughput, config: c, metric: output_throughput}",
			&StatParams{Metric: "output_throughput", Config: "c", Workload: "w", Against: AgainstBaseline, MinEffect: DefaultMinEffect, Alpha: DefaultAlpha, Test: TestCompare, Power: statdefault.Power}},
		{"{kind: latency, config: c, metric: median_ttft_ms, against: history, min_effect: 5%, alpha: 0.05}",
			&StatParams{Metric: "median_ttft_ms", Config: "c", Workload: "w", Against: AgainstHistory, HistoryRuns: DefaultHistoryRuns, MinEffect: 0.05, Alpha: 0.05, Test: TestDetect, Power: statdefault.Power}},
	} {
		s, err := Parse([]byte(kindHead+"  - "+tc.check+"\n"), "k.yaml")
		if err != nil {
			t.Errorf("%s: %v", tc.check, err)
			continue
		}
		if diff := cmp.Diff(tc.want, s.Checks[0].Params, cmp.AllowUnexported(FloorParams{}, RelativeParams{}, StatParams{}), cmpIgnoreAt); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tc.check, diff)
		}
	}
}

// cmpIgnoreAt leaves out where a metric was written (a position, tested with the errors).
var cmpIgnoreAt = cmp.FilterPath(func(p cmp.Path) bool { return strings.HasSuffix(p.String(), "metricAt") }, cmp.Ignore())

// TestParamsValidate: each kind's own validation reports its problems with code and field.
func TestParamsValidate(t *testing.T) {
	for _, tc := range []struct {
		check string
		want  string // "code field"
	}{
		{"{kind: floor, metric: kv_cache_tokens}", "missing-field checks[0]"},
		{"{kind: floor, metric: kv_cache_tokens, min: 2, max: 1}", "conflict checks[0].max"},
		{"{kind: relative, config: c, of: c, metric: kv_cache_tokens, min_ratio: 1}", "conflict checks[0].of"},
		{"{kind: expect, configs: [c], allreduce: fast}", "value checks[0].allreduce"},
		{"{kind: expect, configs: [c]}", "missing-field checks[0]"},
		{"{kind: equivalence, base: a, head: c, twin: b, oracle: b}", "conflict checks[0].oracle"},
		{"{kind: equivalence, base: a, head: c, max_distance: 1}", "conflict checks[0].max_distance"},
		{"{kind: allreduce_probe, file: p.json, max_abs_err: {int8: 1}}", "value checks[0].max_abs_err"},
		{"{kind: throughput, config: c, metric: output_throughput, min_effect: 5}", "value checks[0].min_effect"},
		{"{kind: throughput, config: c, metric: output_throughput, history_runs: 3}", "conflict checks[0].history_runs"},
		{"{kind: latency, config: c, metric: kv_cache_tokens}", "unmeasured-metric checks[0].metric"},
	} {
		_, err := Parse([]byte(kindHead+"  - "+tc.check+"\n"), "k.yaml")
		var list ErrorList
		if !errors.As(err, &list) {
			t.Errorf("%s: error %v, want %s", tc.check, err, tc.want)
			continue
		}
		var got []string
		for _, e := range list {
			got = append(got, e.Code+" "+e.Field)
		}
		if len(got) != 1 || got[0] != tc.want {
			t.Errorf("%s: errors %v, want [%s]", tc.check, got, tc.want)
		}
	}
}

// TestCheckJSONIsFlat: a check serialises as one object, the kind's fields beside the common
// ones, under the names the YAML uses (what `reckon spec check --json` prints).
func TestCheckJSONIsFlat(t *testing.T) {
	s, err := Parse([]byte(kindHead+"  - {kind: throughput, name: tp, tags: [x], config: c, metric: output_throughput, against: config:a}\n"), "k.yaml")
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(s.Checks[0])
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"kind":"throughput","name":"tp","tags":["x"],"line":10,"metric":"output_throughput","config":"c","workload":"w","against":"config","against_config":"a","min_effect":0.02,"alpha":0.01,"test":"compare","power":0.95}`
	if string(b) != want {
		t.Errorf("JSON\n got %s\nwant %s", b, want)
	}
	if b, _ := json.Marshal(&Check{Kind: KindFloor, Name: "bare"}); string(b) != `{"kind":"floor","name":"bare","line":0}` {
		t.Errorf("a check without parameters: %s", b)
	}
}
