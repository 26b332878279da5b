package suites

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/reckon-ci/reckon/engine"
	"github.com/reckon-ci/reckon/engine/client"
	"github.com/reckon-ci/reckon/spec"
)

// The node that launches a config holds every phase at its own limit: the version command
// before the launch, the readiness wait, the evidence gathered after it (whose longest part is
// the profile window: a request, /stop_profile, parsing the traces) and the stop grace. Before,
// it held only the readiness wait and the grace, so a /stop_profile taking 100 s (within the
// client's own 120 s) after a slow start timed the node out and the launch read "not run".
func TestLaunchNodeHoldsEveryPhase(t *testing.T) {
	l := spec.Launch{ReadyTimeout: spec.Duration(10 * time.Minute), StopGrace: spec.Duration(30 * time.Second)}
	profileWindow := 2*time.Minute + client.ProfileStopTimeout + traceParseTimeout // request, stop, parse
	if evidenceBudget < profileWindow {
		t.Errorf("evidence budget %s is shorter than the profile window's limits %s", evidenceBudget, profileWindow)
	}
	phases := engine.DefaultVersionTimeout + l.ReadyTimeout.D() + evidenceBudget + l.StopGrace.D()
	if got := launchNodeTimeout(l, true); got <= phases {
		t.Errorf("first launch's node timeout %s does not exceed its phases %s", got, phases)
	}
	if got := launchNodeTimeout(l, false); got <= engine.DefaultVersionTimeout+l.ReadyTimeout.D()+l.StopGrace.D() {
		t.Errorf("relaunch's node timeout %s does not cover its version probe and readiness", got)
	}
}

// The health check of a launch says when the release could not be asked before the launch and
// when the evidence after readiness ran out of its budget, instead of "not run".
func TestHealthVerdictNamesVersionAndEvidenceErrors(t *testing.T) {
	cs := &configState{name: "a"}
	cs.releaseErr = errors.New("detect sglang version: python -c ...: context deadline exceeded (the version command ran longer than its limit of 2m0s (engine.DefaultVersionTimeout))")
	cs.evidenceErr = errors.New("the evidence gathered after readiness (engine version, memory plan, allreduce profile) ran past its budget of 10m0s")
	v := healthDetails(cs)
	for _, want := range []string{"engine release unknown before the launch", "DefaultVersionTimeout", "evidence incomplete: the evidence gathered after readiness"} {
		if !strings.Contains(v, want) {
			t.Errorf("details %q do not say %q", v, want)
		}
	}
}
