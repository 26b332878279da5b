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
