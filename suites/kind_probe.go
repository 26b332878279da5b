package suites

import (
	"fmt"
	"math"

	"github.com/reckon-ci/reckon/gate"
	"github.com/reckon-ci/reckon/spec"
	"github.com/reckon-ci/reckon/wire"
)

// allReduceProbeKind: an op-level allreduce probe file (reckon probe, or the engine's own),
// read with the strict reader and judged against per-dtype tolerances. It compares no config
// of the run; the first shard judges it.
type allReduceProbeKind struct{ crossScoped }

func init() { registerCrossKind(allReduceProbeKind{}, spec.KindAllReduceProbe) }

func (allReduceProbeKind) entry(c *spec.Check, _ string, _ []string) gate.Check {
	return checkEntry(c, "", nil)
}

func (allReduceProbeKind) labels(*spec.Check) []string                  { return []string{labelNumerics} }
func (allReduceProbeKind) compares(*spec.Check) []string                { return nil }
func (allReduceProbeKind) needs(*spec.Spec, *spec.Check, string) []need { return nil }

// merged: the probe file is not in the shard's results; the shard's verdict is kept.
func (allReduceProbeKind) merged(*spec.Check) mergeRule { return mergeKeep }

// inShard: a probe file compares no config of the run; shard 1 judges it.
func (allReduceProbeKind) inShard(_ *spec.Check, _ func(string) bool, first bool) bool {
	return first
}

func (allReduceProbeKind) judge(fw *framework, c *spec.Check) gate.Verdict {
	return probeVerdict(fw, c)
}

func probeVerdict(fw *framework, c *spec.Check) gate.Verdict {
	pp := c.Probe()
	// The same strict reader as `reckon probe check`: a file that breaks the probe contract
	// (a missing max_rel_err, an unknown field) is an error here too, never a pass.
	p, err := wire.ReadAllReduceProbe(pp.File)
	if err != nil {
		return errVerdict(c, "", fmt.Errorf("allreduce probe: %w", err))
	}
	out := gate.AllReduceProbeCheckOf(p, probeTolerances(p.WorldSize, c), pp.Algorithms)
	out.Name = c.Name
	return out
}

// probeTolerances are the gate's per-dtype defaults for worldSize ranks with the check's
// max_rel_err and max_abs_err applied on top (each replaces only its own bound).
func probeTolerances(worldSize int, c *spec.Check) map[string]gate.Tolerance {
	p := c.Probe()
	tol := gate.DefaultAllReduceTolerances(worldSize)
	for dt, v := range p.MaxRelErr {
		t := tol[dt]
		t.MaxRelErr = v
		tol[dt] = t
	}
	for dt, v := range p.MaxAbsErr {
		t, ok := tol[dt]
		if !ok {
			// A dtype the defaults do not know: bound only its absolute error.
			t.MaxRelErr = math.Inf(1)
		}
		t.MaxAbsErr = v
		tol[dt] = t
	}
	return tol
}
