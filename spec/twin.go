package spec

import (
	"fmt"
	"maps"
	"strings"
)

// twinNone is the value of an equivalence check's twin that opts out of calibration.
const twinNone = "none"

// ncclAlgoEnv is NCCL's variable that picks the allreduce algorithm (Ring, Tree, ...); SGLang
// and vLLM both reduce through NCCL, so it gives a twin on either engine.
const ncclAlgoEnv = "NCCL_ALGO"

// DeriveTwin returns the twin reckon launches for an equivalence check that names neither twin
// nor oracle: the base config summing in another correct order. A base that runs NCCL gets
// NCCL_ALGO=Tree (Ring when the base already forces Tree); a base that may run the engine's
// custom allreduce gets NCCL (disable_custom_all_reduce), the reference implementation. The
// twin's name is BASE-twin (BASE-twin2, ... when taken); how it was derived is in Reason.
func DeriveTwin(s *Spec, base string, taken func(string) bool) (*Config, string, error) {
	bc, ok := s.Config(base)
	if !ok {
		return nil, "", fmt.Errorf("no config %q", base)
	}
	bl, err := s.Resolved(base)
	if err != nil {
		return nil, "", err
	}
	twin := *bc
	twin.Name = base + "-twin"
	for i := 2; taken(twin.Name); i++ {
		twin.Name = fmt.Sprintf("%s-twin%d", base, i)
	}
	twin.Tags = append([]string(nil), bc.Tags...)
	twin.Args = append([]string(nil), bc.Args...)
	twin.Env = maps.Clone(bc.Env)
	if twin.Env == nil {
		twin.Env = map[string]string{}
	}
	twin.Expect = Expect{}
	twin.DerivedFrom = base
	var reason string
	if bl.DisableCustomAllReduce {
		algo := "Tree"
		if strings.EqualFold(bl.Env[ncclAlgoEnv], "tree") {
			algo = "Ring"
		}
		twin.Env[ncclAlgoEnv] = algo
		reason = fmt.Sprintf("%s with %s=%s (NCCL summing in another order)", base, ncclAlgoEnv, algo)
	} else {
		off := true
		twin.DisableCustomAllReduce = &off
		reason = fmt.Sprintf("%s with disable_custom_all_reduce (NCCL, the reference allreduce)", base)
	}
	return &twin, reason, nil
}

// deriveTwins gives every equivalence check without twin, oracle or `twin: none` a derived
// twin (DeriveTwin), one per base config, appended to the spec's configs.
func (b *builder) deriveTwins(s *Spec, configs map[string]bool) {
	derived := map[string]string{} // base -> twin name
	for _, c := range s.Checks {
		p := c.Equivalence()
		if p == nil || p.Twin != "" || p.Oracle != "" || p.NoTwin || !configs[p.Base] {
			continue
		}
		if name, ok := derived[p.Base]; ok {
			p.Twin, p.TwinDerived = name, true
			continue
		}
		twin, reason, err := DeriveTwin(s, p.Base, func(n string) bool { return configs[n] })
		if err != nil {
			b.errorf(b.checkNode[c], b.checkPath[c], "deriving a twin for base %q: %v", p.Base, err)
			continue
		}
		twin.Line = c.Line
		s.Configs = append(s.Configs, twin)
		configs[twin.Name] = true
		derived[p.Base] = twin.Name
		p.Twin, p.TwinDerived = twin.Name, true
		s.DerivedTwins = append(s.DerivedTwins, DerivedTwin{Config: twin.Name, Base: p.Base, Reason: reason})
	}
}

// DerivedTwin records a twin config reckon added to the spec (see DeriveTwin).
type DerivedTwin struct {
	Config string `json:"config"`
	Base   string `json:"base"`
	Reason string `json:"reason"`
}
