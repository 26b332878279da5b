package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/reckon-ci/reckon/testbed"
)

// TestDoctorKeyIsTheGates: doctor --spec prints the key reckon gate computes for that spec here
// (suites: testbed.Detect, then the spec's engine kind), and without --spec one key per engine.
func TestDoctorKeyIsTheGates(t *testing.T) {
	fp, err := testbed.Detect(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	fp.Engine = "sglang" // fixtures/specs/default.yaml's engine.kind
	want := fp.Key()
	out, errs, code := execCmd(t, newDoctorCmd(), "--json", "--spec", "../../fixtures/specs/default.yaml")
	if code != 0 {
		t.Fatalf("doctor: exit %d: %s", code, errs)
	}
	var rep doctorReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.ID != want || rep.Keys["sglang"] != want {
		t.Errorf("doctor --spec id %q, keys %v; the gate's key is %q", rep.ID, rep.Keys, want)
	}
	text, _, _ := execCmd(t, newDoctorCmd())
	if !strings.Contains(text, want+" (reckon gate's key for sglang specs here") {
		t.Errorf("doctor without --spec does not print the gate's sglang key %s:\n%s", want, text)
	}
}
