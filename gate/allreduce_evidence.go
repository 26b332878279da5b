package gate

import (
	"fmt"
	"strings"
)

// Effective allreduce backends, as AllReduceEvidence.Effective states them.
const (
	BackendCustom  = "custom"
	BackendNCCL    = "nccl"
	BackendUnknown = "unknown"
	// BackendFused is FlashInfer allreduce fusion (allreduce fused with residual add and
	// RMSNorm): neither NCCL nor custom allreduce, and invisible to the log and /server_info,
	// which speak only of custom allreduce.
	BackendFused = "fused"
)

// Sources of allreduce evidence, in the order of trust CombineAllReduce gives them: kernels that
// ran beat a log line, which beats a launch setting the server reports.
const (
	SourceProfiler   = "profiler"    // allreduce kernels in a torch-profiler window
	SourceLog        = "log"         // the engine's start-up log lines
	SourceServerInfo = "server_info" // the engine's /server_info (disable_custom_all_reduce)
)

// AllReduceSource is what one source says about the allreduce a config ran.
type AllReduceSource struct {
	// Source is one of the Source* constants.
	Source string `json:"source"`
	// Says is BackendCustom, BackendNCCL, BackendFused or BackendUnknown (the source was tried
	// and proves nothing, or could not be read: Detail says why).
	Says string `json:"says"`
	// Detail is the source's own words: the kernel counts, the log's reason, the error.
	Detail string `json:"detail,omitempty"`
	// NCCLAlgorithms are the NCCL algorithms the profiled kernels ran (RING, TREE, ...), when
	// the kernel names say.
	NCCLAlgorithms []string `json:"nccl_algorithms,omitempty"`
}

// AllReduceEvidence is a config's effective allreduce with everything that was tried to learn it.
type AllReduceEvidence struct {
	// Effective is what the most trusted source that knows says (BackendUnknown when none does).
	Effective string `json:"effective"`
	// From is the source Effective comes from ("" when unknown).
	From string `json:"from,omitempty"`
	// NCCLAlgorithms are the NCCL algorithms seen in the profiled kernels.
	NCCLAlgorithms []string `json:"nccl_algorithms,omitempty"`
	// Sources are every source tried, in order of trust.
	Sources []AllReduceSource `json:"sources"`
	// Disagreement names sources that contradict Effective ("" when all that know agree).
	Disagreement string `json:"disagreement,omitempty"`
	// TurnOff says how to turn off the implementation that ran when the engine chose it by
	// itself (FlashInfer allreduce fusion: the engine's flag), for messages.
	TurnOff string `json:"turn_off,omitempty"`
}

// CombineAllReduce decides the effective allreduce from the sources, in order of trust: the first
// that says custom, nccl or fused decides; later ones that say otherwise are kept as a
// disagreement, except a log or /server_info saying nccl beside fused: they speak only of custom
// allreduce (off), which fusion does not contradict.
func CombineAllReduce(sources []AllReduceSource) AllReduceEvidence {
	ev := AllReduceEvidence{Effective: BackendUnknown, Sources: sources}
	var against []string
	for _, s := range sources {
		if s.Says != BackendCustom && s.Says != BackendNCCL && s.Says != BackendFused {
			continue
		}
		if ev.From == "" {
			ev.Effective, ev.From, ev.NCCLAlgorithms = s.Says, s.Source, s.NCCLAlgorithms
			continue
		}
		if s.Says != ev.Effective && !(ev.Effective == BackendFused && s.Says == BackendNCCL && s.Source != SourceProfiler) {
			against = append(against, fmt.Sprintf("%s says %s", s.Source, s.Says))
		}
	}
	if len(against) > 0 {
		ev.Disagreement = fmt.Sprintf("%s says %s, but %s", ev.From, ev.Effective, strings.Join(against, ", "))
	}
	return ev
}

// decidedBy is the deciding source with its words: "profiler: 0 custom / 128 NCCL allreduce
// kernels on 2 ranks".
func (e AllReduceEvidence) decidedBy() string {
	for _, s := range e.Sources {
		if s.Source == e.From && s.Detail != "" {
			return s.Source + ": " + s.Detail
		}
	}
	return e.From
}

// Summary is one line: "custom (profiler: 96 custom / 0 NCCL allreduce kernels on 4 ranks)".
func (e AllReduceEvidence) Summary() string {
	if e.Effective == BackendUnknown || e.Effective == "" {
		return "unknown (" + e.Tried() + ")"
	}
	return fmt.Sprintf("%s (%s)", e.Effective, e.decidedBy())
}

// Tried lists every source with what it said: "profiler: no allreduce kernel in the window; log:
// no allreduce record".
func (e AllReduceEvidence) Tried() string {
	if len(e.Sources) == 0 {
		return "no source of evidence was tried"
	}
	parts := make([]string, 0, len(e.Sources))
	for _, s := range e.Sources {
		d := s.Detail
		if d == "" {
			d = s.Says
		}
		parts = append(parts, s.Source+": "+d)
	}
	return strings.Join(parts, "; ")
}

// ExpectAllReduce judges a config's expected allreduce against its evidence. No evidence at all
// is an error (what was tried is in the message), never a failure of the engine: the check could
// not see what ran. A disagreement between sources is kept in the details.
func ExpectAllReduce(name string, ev *AllReduceEvidence, want string) Verdict {
	v := Verdict{Name: name}
	if ev == nil || ev.Effective == BackendUnknown || ev.Effective == "" {
		tried := "no source of evidence was tried"
		if ev != nil {
			tried = ev.Tried()
		}
		v.Outcome, v.Category = Error, CategoryUnverified
		v.Message = fmt.Sprintf("%s: cannot tell which allreduce ran (expected %q): %s", name, want, tried)
		return v
	}
	switch ev.Effective {
	case want:
		v.Outcome = Pass
		v.Message = fmt.Sprintf("%s: allreduce is %q as expected, from the %s", name, ev.Effective, ev.From)
	case BackendFused:
		v.Outcome, v.Category = Fail, CategoryBrokenInvariant
		v.Message = fmt.Sprintf("%s: allreduce is FlashInfer allreduce fusion (%q), expected %q (%s); SGLang turns it on by itself for some MoE models on SM90/SM100", name, ev.Effective, want, ev.decidedBy())
		if ev.TurnOff != "" {
			v.Message += "; turn it off with " + ev.TurnOff
		}
	default:
		v.Outcome, v.Category = Fail, CategoryBrokenInvariant
		v.Message = fmt.Sprintf("%s: allreduce is %q, expected %q (%s)", name, ev.Effective, want, ev.decidedBy())
	}
	v.Details = "evidence: " + ev.Tried()
	if ev.Disagreement != "" {
		v.Details += "\nsources disagree: " + ev.Disagreement
	}
	return v
}
