package suites

import (
	"strings"

	"github.com/reckon-ci/reckon/gate"
	"github.com/reckon-ci/reckon/spec"
)

// expectKind: what the engine actually did equals what the config asked for (today: the
// effective allreduce backend), so that a config that silently fell back fails.
type expectKind struct{ configScoped }

func init() { registerKind(expectKind{}, spec.KindExpect) }

func (expectKind) labels(*spec.Check) []string { return []string{labelHealth} }

func (expectKind) late(*spec.Check) bool { return false }

func (expectKind) needs(*spec.Spec, *spec.Check, string) []need { return nil }

func (expectKind) judge(_ *framework, cs *configState, c *spec.Check) gate.Verdict {
	p := c.Expectation()
	if err := cs.infraError(); err != nil {
		return errVerdict(c, cs.name, err)
	}
	ev := cs.allreduce
	if ev == nil { // not gathered (tp 1, or a run read back from before evidence existed): the log alone
		e := gate.CombineAllReduce([]gate.AllReduceSource{logAllReduce(cs.report)})
		ev = &e
	}
	out := gate.ExpectAllReduce(c.Name, ev, p.Expect.AllReduce)
	out.Config = cs.name
	out.Message = cs.name + ": " + strings.TrimPrefix(out.Message, c.Name+": ")
	return out
}
