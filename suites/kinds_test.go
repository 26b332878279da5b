package suites

import (
	"path/filepath"
	"testing"

	"github.com/reckon-ci/reckon/spec"
)

// TestEveryCheckKindIsRegisteredOnce pins the registry: every kind a spec may name is judged by
// exactly one checkKind, in the scope spec.ChecksFor and the cross-config container expect, and
// every check of the fixture specs finds its kind.
func TestEveryCheckKindIsRegisteredOnce(t *testing.T) {
	for _, sk := range spec.CheckKinds {
		c := &spec.Check{Kind: sk}
		if sk == spec.KindThroughput || sk == spec.KindLatency {
			c.Metric = "output_throughput"
		}
		var found []checkKind
		for _, k := range checkKinds {
			if k.is(c) {
				found = append(found, k)
			}
		}
		if len(found) != 1 {
			t.Errorf("spec kind %s: %d registered kinds judge it, want 1", sk, len(found))
			continue
		}
		perConfig := sk == spec.KindFloor || sk == spec.KindExpect // spec.ChecksFor
		if found[0].cross() == perConfig {
			t.Errorf("spec kind %s: cross() = %v, want %v", sk, found[0].cross(), !perConfig)
		}
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
			if e := k.entry(c, "x", nil); e.Name != c.Name || e.Kind != string(c.Kind) || e.Line != c.Line {
				t.Errorf("%s: entry of %q: %+v", f, c.Name, e)
			}
		}
	}
}
