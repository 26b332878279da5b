package spec

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const twinSpec = `
name: twins
engine: {kind: sglang, model: m, tp_size: 4}
configs:
  - {name: nccl, disable_custom_all_reduce: true}
  - {name: nccl-twin, disable_custom_all_reduce: true, env: {NCCL_ALGO: Ring}}
  - {name: custom-ar}
  - {name: eagle3, speculative: {algorithm: EAGLE3}}
  - {name: tree, disable_custom_all_reduce: true, env: {NCCL_ALGO: tree}}
  - {name: other}
numerics: {prompts: p.jsonl, max_tokens: 8, top_logprobs: 5}
checks:
  - {kind: floor, metric: kv_cache_tokens, min: 1}
  - {kind: equivalence, base: nccl, head: custom-ar}
  - {kind: equivalence, name: again, base: nccl, head: other}
  - {kind: equivalence, base: custom-ar, head: eagle3}
  - {kind: equivalence, base: tree, head: other}
  - {kind: equivalence, name: uncalibrated, base: other, head: custom-ar, twin: none, max_distance: 0.1}
`

func TestDerivedTwins(t *testing.T) {
	s := mustParse(t, twinSpec)
	want := []DerivedTwin{
		{Config: "nccl-twin2", Base: "nccl", Reason: "nccl with NCCL_ALGO=Tree (NCCL summing in another order)"},
		{Config: "custom-ar-twin", Base: "custom-ar", Reason: "custom-ar with disable_custom_all_reduce (NCCL, the reference allreduce)"},
		{Config: "tree-twin", Base: "tree", Reason: "tree with NCCL_ALGO=Ring (NCCL summing in another order)"},
	}
	if diff := cmp.Diff(want, s.DerivedTwins); diff != "" {
		t.Fatalf("derived twins (-want +got):\n%s", diff)
	}
	twinOf := map[string]string{}
	for _, c := range s.Checks {
		if p := c.Equivalence(); p != nil {
			twinOf[c.Name] = p.Twin
			if p.TwinDerived != (p.Twin != "") {
				t.Errorf("%s: twin %q derived %v", c.Name, p.Twin, p.TwinDerived)
			}
		}
	}
	wantTwin := map[string]string{
		"equivalence custom-ar vs nccl": "nccl-twin2", "again": "nccl-twin2", // one twin per base
		"equivalence eagle3 vs custom-ar": "custom-ar-twin", "equivalence other vs tree": "tree-twin",
		"uncalibrated": "",
	}
	if diff := cmp.Diff(wantTwin, twinOf); diff != "" {
		t.Errorf("twins per check (-want +got):\n%s", diff)
	}
	l, err := s.Resolved("nccl-twin2")
	if err != nil || l.Env["NCCL_ALGO"] != "Tree" || !l.DisableCustomAllReduce {
		t.Errorf("nccl's twin launches as %+v (%v), want nccl with NCCL_ALGO=Tree", l, err)
	}
	l, err = s.Resolved("custom-ar-twin")
	if err != nil || !l.DisableCustomAllReduce || l.Speculative != nil {
		t.Errorf("custom-ar's twin launches as %+v (%v), want custom-ar with NCCL", l, err)
	}
	floor := s.Checks[0]
	if diff := cmp.Diff([]string{"nccl", "nccl-twin", "custom-ar", "eagle3", "tree", "other"}, floor.Floor().Configs); diff != "" {
		t.Errorf("a floor of every config takes no derived twin (-want +got):\n%s", diff)
	}
	if c, _ := s.Config("tree-twin"); c.DerivedFrom != "tree" || !c.Expect.IsZero() {
		t.Errorf("tree-twin: derived from %q, expect %+v", c.DerivedFrom, c.Expect)
	}
}

func TestEngineVersion(t *testing.T) {
	s := mustParse(t, "name: v\nengine: {kind: vllm, model: m, version: 0.12.0}\nconfigs: [{name: a}]\n")
	if l, _ := s.Resolved("a"); s.Engine.Version != "0.12.0" || l.EngineVersion != "0.12.0" {
		t.Errorf("version %q, launch %q", s.Engine.Version, l.EngineVersion)
	}
	for _, v := range []string{"0.0.0.dev1+g5dd2c243e", "0.5.3.post1", "0.4.4.post1", "v0.22.1", "0.4"} {
		mustParse(t, "name: v\nengine: {kind: vllm, model: m, version: "+v+"}\nconfigs: [{name: a}]\n")
	}
	_, err := Parse([]byte("name: v\nengine: {kind: vllm, model: m, version: latest-ish}\nconfigs: [{name: a}]\n"), "v.yaml")
	if err == nil || !strings.Contains(err.Error(), "v.yaml:2:") || !strings.Contains(err.Error(), "engine.version") {
		t.Errorf("a bad version: %v", err)
	}
}
