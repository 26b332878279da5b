package gate

import (
	"fmt"
	"slices"
	"strings"
)

// EquivalenceSide is what one config of an equivalence check asked for and what it ran.
type EquivalenceSide struct {
	// Config is the config's name.
	Config string
	// Requested is the allreduce the config asked for: BackendNCCL when custom allreduce is
	// disabled, else BackendCustom (the engine's choice, custom where it supports it).
	Requested string
	// NCCLAlgo is the NCCL_ALGO the config sets ("" for NCCL's own choice).
	NCCLAlgo string
	// AllReduce is the evidence of what ran (nil: none was gathered).
	AllReduce *AllReduceEvidence
	// Speculative is true when the config launches with speculative decoding.
	Speculative bool
	// SpecRan says whether speculative decoding demonstrably ran for the probe's requests, and
	// SpecWhy the evidence or its absence (only read when Speculative).
	SpecRan bool
	SpecWhy string
}

func (s EquivalenceSide) effective() string {
	if s.AllReduce == nil || s.AllReduce.Effective == "" {
		return BackendUnknown
	}
	return s.AllReduce.Effective
}

func (s EquivalenceSide) tried() string {
	if s.AllReduce == nil {
		return "no evidence was gathered"
	}
	return s.AllReduce.Tried()
}

// EquivalenceExercised returns nil when an equivalence check can tell its subject from its
// control, and otherwise an error that names both sides and what they ran:
//   - base and head ask for different allreduces (the check compares algorithms): both must be
//     shown to have run, and to have run different ones;
//   - one side runs speculative decoding and the other does not (the check compares speculative
//     with plain decoding): the speculative side must be shown to have speculated for the
//     probe's requests;
//   - a twin shown to run exactly what the base ran (same backend and NCCL algorithm) measures a
//     spread of zero and calibrates nothing.
//
// The error is marked ErrUnverified: the check could not prove what it checks.
func EquivalenceExercised(base, head EquivalenceSide, twin *EquivalenceSide) error {
	return Unverified(equivalenceExercised(base, head, twin))
}

func equivalenceExercised(base, head EquivalenceSide, twin *EquivalenceSide) error {
	sides := []EquivalenceSide{head, base}
	if twin != nil {
		sides = append(sides, *twin)
	}
	for _, s := range sides {
		if s.effective() == BackendFused && s.Requested != BackendFused {
			off := ""
			if s.AllReduce.TurnOff != "" {
				off = "; turn it off with " + s.AllReduce.TurnOff
			}
			return fmt.Errorf("%s asks for %s allreduce but ran FlashInfer allreduce fusion (%s): the check would compare fusion, not %s%s",
				s.Config, s.Requested, s.AllReduce.decidedBy(), s.Requested, off)
		}
	}
	if base.Requested != head.Requested {
		be, he := base.effective(), head.effective()
		switch {
		case be == BackendUnknown || he == BackendUnknown:
			var unknown []string
			for _, s := range []EquivalenceSide{head, base} {
				if s.effective() == BackendUnknown {
					unknown = append(unknown, fmt.Sprintf("%s (%s)", s.Config, s.tried()))
				}
			}
			return fmt.Errorf("cannot show that %s (asks for %s allreduce) and %s (asks for %s) ran different allreduces: no evidence for %s",
				head.Config, head.Requested, base.Config, base.Requested, strings.Join(unknown, "; "))
		case be == he:
			off := head
			if head.Requested == be {
				off = base
			}
			why := ""
			if r := disabledReason(off.AllReduce); r != "" {
				why = "; " + r
			}
			return fmt.Errorf("%s and %s both ran %s allreduce: nothing was compared (%s asked for %s, ran %s%s)",
				head.Config, base.Config, be, off.Config, off.Requested, be, why)
		}
	}
	for _, s := range []EquivalenceSide{head, base} {
		other := base
		if s.Config == base.Config {
			other = head
		}
		if s.Speculative && !other.Speculative && !s.SpecRan {
			return fmt.Errorf("%s: speculative decoding did not demonstrably run for the numerics probe's requests, so %s was compared with plain decoding: %s",
				s.Config, s.Config, s.SpecWhy)
		}
	}
	if twin != nil {
		te, be := twin.effective(), base.effective()
		if te != BackendUnknown && te == be {
			ta, ba := algorithms(twin.AllReduce), algorithms(base.AllReduce)
			sameAlgo := te == BackendCustom || (len(ta) > 0 && slices.Equal(ta, ba))
			if sameAlgo && (twin.Requested != base.Requested || !strings.EqualFold(twin.NCCLAlgo, base.NCCLAlgo)) {
				algo := te
				if te == BackendNCCL && len(ta) > 0 {
					algo = fmt.Sprintf("NCCL %s", strings.Join(ta, "+"))
					if !slices.Contains(ta, "TREE") {
						// NCCL kernel names tell TREE from the rest only: NVLS, CollNet and PAT
						// also run in ..._RING_LL kernels (wire/enginefacts nccl.kernel.algorithm).
						algo = "NCCL non-TREE kernels on both (RING_LL names also cover NVLS, CollNet and PAT)"
						return fmt.Errorf("twin %s cannot be shown to sum in another order than base %s (%s), though it asks for another summation order: it calibrates nothing it can show",
							twin.Config, base.Config, algo)
					}
				}
				return fmt.Errorf("twin %s ran the same allreduce as base %s (%s), though it asks for another summation order: its spread is zero and calibrates nothing",
					twin.Config, base.Config, algo)
			}
		}
	}
	return nil
}

func algorithms(e *AllReduceEvidence) []string {
	if e == nil {
		return nil
	}
	out := slices.Clone(e.NCCLAlgorithms)
	slices.Sort(out)
	return out
}

// disabledReason is the reason a log gave for not using custom allreduce, when one did.
func disabledReason(e *AllReduceEvidence) string {
	if e == nil {
		return ""
	}
	for _, s := range e.Sources {
		if s.Source == SourceLog && s.Says == BackendNCCL && s.Detail != "" {
			return "engine said: " + s.Detail
		}
	}
	return ""
}
