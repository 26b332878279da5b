package suites

import (
	"path/filepath"
	"testing"

	"github.com/reckon-ci/reckon/spec"
)

// TestEveryCheckKindIsRegisteredOnce pins the registry: every kind a spec may name has a runner
// (kind_*.go registers it), no runner is registered for a kind spec does not know, and every
// check of the fixture specs finds its runner.
func TestEveryCheckKindIsRegisteredOnce(t *testing.T) {
	for _, sk := range spec.CheckKinds {
		if checkKinds[sk] == nil {
			t.Errorf("spec kind %s has no runner", sk)
		}
	}
	if len(checkKinds) != len(spec.CheckKinds) {
		t.Errorf("%d runners for %d spec kinds", len(checkKinds), len(spec.CheckKinds))
	}
	files, err := filepath.Glob(filepath.Join("..", "fixtures", "specs", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("fixture specs: %v %v", files, err)
	}
	for _, f := range files {
		s, err := spec.Load(f)
		if err != nil {
			continue // the bad ones are under fixtures/specs/bad; a few need files of a run
		}
		for _, c := range s.Checks {
			k := kindOf(c)
			if k == nil {
				t.Errorf("%s:%d: check %q of kind %s has no registered kind", f, c.Line, c.Name, c.Kind)
				continue
			}
			switch _, perConfig := k.(configKind); {
			case c.Scope() == spec.ScopePerConfig && !perConfig:
				t.Errorf("%s: %q is judged per config, but its kind %s registered a cross-config runner", f, c.Name, c.Kind)
			case c.Scope() == spec.ScopeCross && (configKindOf(c) != nil || crossKindOf(c) == nil):
				t.Errorf("%s: %q is judged cross-config, but its kind %s registered a per-config runner", f, c.Name, c.Kind)
			}
			if e := k.entry(c, "x", nil); e.Name != c.Name || e.Kind != string(c.Kind) || e.Line != c.Line {
				t.Errorf("%s: entry of %q: %+v", f, c.Name, e)
			}
		}
	}
}

// TestErrorRateIsJudgedPerConfigAfterTheLastLaunch: error_rate's runner is a per-config one,
// judged late (after the config's last launch), and needs its workload's trials.
func TestErrorRateIsJudgedPerConfigAfterTheLastLaunch(t *testing.T) {
	s, err := spec.Parse([]byte(`name: e
engine: {kind: sglang, model: m}
configs: [{name: a}, {name: b}]
workloads: [{name: w, concurrency: 1, num_prompts: 1, input_len: 1, output_len: 1, trials: 2, launches: 2}]
checks:
  - {kind: error_rate, configs: [a], max: 0}
`), "e.yaml")
	if err != nil {
		t.Fatal(err)
	}
	c := s.Checks[0]
	k := configKindOf(c)
	if k == nil || crossKindOf(c) != nil || !k.late(c) {
		t.Fatalf("error_rate's runner: %T, late %v", kindOf(c), k != nil && k.late(c))
	}
	if n := k.needs(s, c, "a"); len(n) != 1 || n[0].what != trialsSpecName("a", "w") {
		t.Errorf("needs %+v", n)
	}
	if got := launchesOf(s, "a"); got != 2 {
		t.Errorf("config a: %d launches, want 2 (the check's workload)", got)
	}
	if got := launchesOf(s, "b"); got != 1 || len(s.WorkloadsFor("b")) != 0 {
		t.Errorf("config b, which the check does not name: %d launches, workloads %v", got, s.WorkloadsFor("b"))
	}
}
