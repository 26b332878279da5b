package suites

import (
	"fmt"

	"github.com/reckon-ci/reckon/gate"
	"github.com/reckon-ci/reckon/spec"
	"github.com/reckon-ci/reckon/wire"
)

// equivalenceKind: numerical equivalence of a head config's numerics probe against a base,
// calibrated by a twin or an oracle when the spec names one.
type equivalenceKind struct{ crossScoped }

func init() { registerCrossKind(equivalenceKind{}, spec.KindEquivalence) }

func (equivalenceKind) entry(c *spec.Check, _ string, _ []string) gate.Check {
	p := c.Equivalence()
	e := checkEntry(c, p.Head, nil)
	e.Against = p.Base
	return e
}

func (equivalenceKind) labels(c *spec.Check) []string {
	p := c.Equivalence()
	return []string{labelNumerics, p.Base, p.Head}
}

func (equivalenceKind) compares(c *spec.Check) []string {
	p := c.Equivalence()
	out := []string{p.Base, p.Head}
	for _, n := range []string{p.Twin, p.Oracle} {
		if n != "" {
			out = append(out, n)
		}
	}
	return out
}

func (k equivalenceKind) needs(_ *spec.Spec, c *spec.Check, _ string) []need {
	var out []need
	for _, n := range k.compares(c) {
		out = append(out, probeNeed(n))
	}
	return out
}

func (k equivalenceKind) inShard(c *spec.Check, here func(string) bool, _ bool) bool {
	return allHere(k.compares(c), here)
}

// together: teacher forcing scores every config of the check on the sequences of the first
// config probed in the run, which another shard never sees.
func (equivalenceKind) together(*spec.Check) bool { return true }

func (equivalenceKind) judge(fw *framework, c *spec.Check) gate.Verdict {
	return equivalenceVerdict(fw, c)
}

// merged: teacher forcing scores every config on the sequences of the first config the shard
// probed, which its results do not carry: merge keeps the shard's verdict (and judges a deferred
// one from the replayed probes).
func (equivalenceKind) merged(*spec.Check) mergeRule { return mergeKeep }

func equivalenceVerdict(fw *framework, c *spec.Check) gate.Verdict {
	p := c.Equivalence()
	names := []string{p.Base, p.Head}
	for _, n := range []string{p.Twin, p.Oracle} {
		if n != "" {
			names = append(names, n)
		}
	}
	probes := map[string]*wire.NumericsProbe{}
	for _, n := range names {
		cs := fw.configs[n]
		if cs.probe == nil {
			err := cs.probeErr
			if err == nil {
				if v, skip := skipUnlaunched(c, p.Head, cs); skip {
					return v
				}
				err = fmt.Errorf("config %s: numerics were not measured (filtered out or interrupted)", cs.name)
			}
			return errVerdict(c, p.Head, err)
		}
		probes[n] = cs.probe
	}
	if err := exercised(fw, c, probes); err != nil {
		return errVerdict(c, p.Head, fmt.Errorf("%s: %w", c.Name, err))
	}
	chk := gate.EquivalenceCheck{
		TopK:             p.TopK,
		MaxRatio:         p.MaxRatio,
		BitwiseTolerance: p.BitwiseTolerance,
		MaxDistance:      p.MaxDistance,
		MaxAbsLogprob:    p.MaxAbsLogprobDelta,
		MeanAbsLogprob:   p.MeanAbsLogprobDelta,
		MinExactMatch:    p.MinExactMatch,
		DType:            probes[p.Head].DType,
		TP:               probes[p.Head].TPSize,
	}
	if chk.TopK == 0 && fw.spec.Numerics != nil {
		chk.TopK = fw.spec.Numerics.TopLogprobs
	}
	out := gate.Equivalence(gate.EquivalenceProbes{Base: probes[p.Base], Head: probes[p.Head], Twin: probes[p.Twin], Oracle: probes[p.Oracle]}, chk)
	out.Name = c.Name
	out.Config = p.Head
	out.Against = p.Base
	return out
}

// exercised returns an error when the check cannot tell its subject from its control (see
// gate.EquivalenceExercised): what each config asked for, the evidence of the allreduce it ran
// and whether speculative decoding ran for the probe's requests.
func exercised(fw *framework, c *spec.Check, probes map[string]*wire.NumericsProbe) error {
	p := c.Equivalence()
	side := func(name string) gate.EquivalenceSide {
		cs := fw.configs[name]
		s := gate.EquivalenceSide{Config: name, Requested: requestedAllReduce(cs.launch), NCCLAlgo: ncclAlgoOf(cs.launch), AllReduce: cs.allreduce}
		if s.AllReduce == nil && cs.launch.TPSize > 1 {
			e := gate.CombineAllReduce([]gate.AllReduceSource{logAllReduce(cs.report)})
			s.AllReduce = &e
		}
		if cs.launch.Speculative != nil {
			s.Speculative = true
			s.SpecRan, s.SpecWhy = false, "the probe recorded no speculative evidence"
			if p := probes[name]; p != nil && p.Speculative != nil {
				s.SpecRan, s.SpecWhy = p.Speculative.Ran()
			}
		}
		return s
	}
	base, head := side(p.Base), side(p.Head)
	if base.AllReduce == nil || head.AllReduce == nil { // tp 1: no allreduce to compare
		base.Requested, head.Requested = "", ""
	}
	var twin *gate.EquivalenceSide
	if p.Twin != "" {
		t := side(p.Twin)
		twin = &t
	}
	return gate.EquivalenceExercised(base, head, twin)
}
