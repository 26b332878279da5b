package suites

import (
	"strings"

	"github.com/reckon-ci/reckon/gate"
	"github.com/reckon-ci/reckon/spec"
)

// relativeKind: a ratio of an engine-report value between two configs of the run, or against
// the config's value in the stored baseline (of: baseline).
type relativeKind struct{ crossScoped }

func init() { registerCrossKind(relativeKind{}, spec.KindRelative) }

func (relativeKind) entry(c *spec.Check, _ string, _ []string) gate.Check {
	p := c.Relative()
	e := checkEntry(c, p.Config, nil)
	e.Against = p.Of
	return e
}

func (relativeKind) labels(c *spec.Check) []string {
	p := c.Relative()
	return []string{labelMemory, p.Config, p.Of}
}

func (relativeKind) compares(c *spec.Check) []string {
	p := c.Relative()
	if p.Of == spec.OfBaseline {
		return []string{p.Config}
	}
	return []string{p.Config, p.Of}
}

func (k relativeKind) needs(_ *spec.Spec, c *spec.Check, _ string) []need {
	var out []need
	for _, n := range k.compares(c) {
		out = append(out, launchedNeed(n))
	}
	return out
}

func (k relativeKind) inShard(c *spec.Check, here func(string) bool, _ bool) bool {
	return allHere(k.compares(c), here)
}

func (relativeKind) judge(fw *framework, c *spec.Check) gate.Verdict {
	return relativeVerdict(fw, c)
}

// merged: a relative check reads the engine reports the results carry; merge judges it again.
func (relativeKind) merged(*spec.Check) mergeRule { return mergeVerify }

func relativeVerdict(fw *framework, c *spec.Check) gate.Verdict {
	p := c.Relative()
	if p.Of == spec.OfBaseline {
		return baselineRelativeVerdict(fw, c)
	}
	head, base := fw.configs[p.Config], fw.configs[p.Of]
	if v, skip := skipUnlaunched(c, p.Config, head, base); skip {
		return v
	}
	hv, err := reportValue(head, p.Metric)
	if err != nil {
		return errVerdict(c, p.Config, err)
	}
	bv, err := reportValue(base, p.Metric)
	if err != nil {
		return errVerdict(c, p.Config, err)
	}
	for _, cs := range []*configState{head, base} {
		if cs.launchEr != nil && (hv == nil || bv == nil) {
			return errVerdict(c, p.Config, cs.infraError())
		}
	}
	out := gate.Relative(c.Name, p.Metric, hv, bv, p.Of, p.MinRatio, p.MaxRatio)
	out.Config = p.Config
	out.Message = p.Config + ": " + strings.TrimPrefix(out.Message, c.Name+": ")
	return out
}
