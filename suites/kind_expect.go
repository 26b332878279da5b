package suites

import (
	"github.com/reckon-ci/reckon/gate"
	"github.com/reckon-ci/reckon/spec"
)

// expectKind: what the engine actually did equals what the config asked for (today: the
// effective allreduce backend), so that a config that silently fell back fails.
type expectKind struct{ configScoped }

func init() { registerConfigKind(expectKind{}, spec.KindExpect) }

func (expectKind) labels(*spec.Check) []string { return []string{labelHealth} }

func (expectKind) late(*spec.Check) bool { return false }

func (expectKind) needs(*spec.Spec, *spec.Check, string) []need { return nil }

func (expectKind) judge(ev *evidence, c *spec.Check) gate.Verdict {
	p := c.Expectation()
	if err := ev.infraError(); err != nil {
		return errVerdict(c, ev.name, err)
	}
	ar := ev.allreduce
	if ar == nil { // not gathered (tp 1, or results from before evidence existed): the engine report alone
		e := gate.CombineAllReduce([]gate.AllReduceSource{reportAllReduce(ev.engine)})
		ar = &e
	}
	out := gate.ExpectAllReduce(c.Name, ar, p.Expect.AllReduce)
	out.Config = ev.name
	return out // its words: reporters.Sentence, when the entry is recorded
}
