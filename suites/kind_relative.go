package suites

import (
	"strings"

	"github.com/reckon-ci/reckon/gate"
	"github.com/reckon-ci/reckon/spec"
)

// relativeKind: a ratio of an engine-report value between two configs of the run, or against
// the config's value in the stored baseline (of: baseline).
type relativeKind struct{ crossScoped }

func (relativeKind) is(c *spec.Check) bool { return c.Kind == spec.KindRelative }

func (relativeKind) entry(c *spec.Check, _ string, _ []string) gate.Check {
	e := checkEntry(c, c.Config, nil)
	e.Against = c.Of
	return e
}

func (relativeKind) labels(c *spec.Check) []string { return []string{labelMemory, c.Config, c.Of} }

func (relativeKind) compares(c *spec.Check) []string {
	if c.Of == spec.OfBaseline {
		return []string{c.Config}
	}
	return []string{c.Config, c.Of}
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

func (relativeKind) judge(fw *framework, _ *configState, c *spec.Check) gate.Verdict {
	return relativeVerdict(fw, c)
}

func (relativeKind) rejudge(_ *spec.Check, judged bool) bool { return !judged }

func relativeVerdict(fw *framework, c *spec.Check) gate.Verdict {
	if c.Of == spec.OfBaseline {
		return baselineRelativeVerdict(fw, c)
	}
	head, base := fw.configs[c.Config], fw.configs[c.Of]
	if v, skip := skipUnlaunched(c, c.Config, head, base); skip {
		return v
	}
	hv, err := reportValue(head, c.Metric)
	if err != nil {
		return errVerdict(c, c.Config, err)
	}
	bv, err := reportValue(base, c.Metric)
	if err != nil {
		return errVerdict(c, c.Config, err)
	}
	for _, cs := range []*configState{head, base} {
		if cs.launchEr != nil && (hv == nil || bv == nil) {
			return errVerdict(c, c.Config, cs.infraError())
		}
	}
	out := gate.Relative(c.Name, c.Metric, hv, bv, c.Of, c.MinRatio, c.MaxRatio)
	out.Config = c.Config
	out.Message = c.Config + ": " + strings.TrimPrefix(out.Message, c.Name+": ")
	return out
}
