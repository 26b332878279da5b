package main

import (
	"strings"
	"testing"
)

// reckon gate --between-launch-cv rejects what is not a CV, naming the flag, before any launch.
func TestGateBetweenLaunchCVFlag(t *testing.T) {
	for _, v := range []string{"0", "150%", "x", "-2%"} {
		_, errs, code := execCmd(t, newGateCmd(), "--spec", "../../fixtures/specs/ab.yaml", "--out", t.TempDir(), "--between-launch-cv", v)
		if code != 2 || !strings.Contains(errs, "--between-launch-cv \""+v+"\": expected a between-launch CV such as 3% or 0.03") {
			t.Errorf("%s: exit %d: %s", v, code, errs)
		}
	}
}
