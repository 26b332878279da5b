package main

import (
	"strings"
	"testing"
)

// TestBaselinesFlagEverywhere: the baseline commands take --baselines as gate and merge do; the
// old --dir still works and warns.
func TestBaselinesFlagEverywhere(t *testing.T) {
	dir := t.TempDir()
	for _, sub := range []string{"record", "diff", "show"} {
		cmd := newBaselineCmd()
		c, _, err := cmd.Find([]string{sub})
		if err != nil || c.Flags().Lookup("baselines") == nil {
			t.Errorf("baseline %s has no --baselines flag", sub)
		}
	}
	for _, cmd := range []struct {
		name string
		has  bool
	}{{"gate", newGateCmd().Flags().Lookup("baselines") != nil}, {"merge", newMergeCmd().Flags().Lookup("baselines") != nil}} {
		if !cmd.has {
			t.Errorf("%s has no --baselines flag", cmd.name)
		}
	}
	out, errs, code := execCmd(t, newBaselineCmd(), "show", "--dir", dir)
	if code != 0 || !strings.Contains(out+errs, "--dir has been deprecated, use --baselines") {
		t.Errorf("show --dir: exit %d, out %q, err %q: want it to work and warn", code, out, errs)
	}
	out, errs, code = execCmd(t, newBaselineCmd(), "show", "--baselines", dir)
	if code != 0 || strings.Contains(out+errs, "deprecated") {
		t.Errorf("show --baselines: exit %d, out %q, err %q", code, out, errs)
	}
}
