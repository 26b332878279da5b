package profile

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/reckon-ci/reckon/wire/enginefacts"
)

// VerdictFused is Summary.Verdict's word for FlashInfer allreduce fusion (a third allreduce
// implementation beside NCCL and custom allreduce).
const VerdictFused = "fused"

// FusedAllReduce is a FlashInfer allreduce fusion kernel (enginefacts.FlashInferFusionKernels).
const FusedAllReduce Kind = OtherCollective + 1

// MinShare is the smallest share of a profiling window's allreduce kernels an implementation
// needs to count as having run: one custom-looking kernel among hundreds of NCCL kernels is
// named as an outlier, not taken for the implementation that ran.
const MinShare = 0.05

// BaseName is a kernel's bare function name, as torch's profiler demangles it: the return type
// ("void "), namespaces, template arguments and the parameter list removed.
//
//	void vllm::cross_device_reduce_1stage<float, 2>(vllm::RankData*, ...) -> cross_device_reduce_1stage
//	void ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>) -> ncclDevKernel_AllReduce_Sum_bf16_RING_LL
func BaseName(name string) string {
	s := strings.TrimSpace(strings.ReplaceAll(name, "(anonymous namespace)", "anonymous"))
	// Cut the parameter list: the first '(' outside template brackets.
	depth := 0
	for i, r := range s {
		switch r {
		case '<':
			depth++
		case '>':
			if depth > 0 {
				depth--
			}
		case '(':
			if depth == 0 {
				s = s[:i]
				goto params
			}
		}
	}
params:
	// Drop template arguments (outermost brackets and everything in them).
	var b strings.Builder
	depth = 0
	for _, r := range s {
		switch {
		case r == '<':
			depth++
		case r == '>' && depth > 0:
			depth--
		case depth == 0:
			b.WriteRune(r)
		}
	}
	s = strings.TrimSpace(b.String())
	// The return type and qualifiers come before the last space; the namespaces before "::".
	if i := strings.LastIndexByte(s, ' '); i >= 0 {
		s = s[i+1:]
	}
	if i := strings.LastIndex(s, "::"); i >= 0 {
		s = s[i+2:]
	}
	return strings.TrimLeft(s, "*&")
}

// Classify says what the kernel called name is, from its bare name (BaseName): an NCCL kernel
// starts with "nccl" (an allreduce when it contains "AllReduce", another collective otherwise);
// a FlashInfer allreduce fusion kernel is named in enginefacts.FlashInferFusionKernels or
// contains "allreduce_fusion"; any other name containing cross_device_reduce, all_reduce or
// allreduce (any case) is a custom allreduce. Everything else is ignored.
func Classify(name string) Kind {
	base := BaseName(name)
	lower := strings.ToLower(base)
	if strings.HasPrefix(lower, "nccl") {
		if strings.Contains(lower, "allreduce") {
			return NCCLAllReduce
		}
		return OtherCollective
	}
	for _, k := range enginefacts.FlashInferFusionKernels.Values {
		if base == k {
			return FusedAllReduce
		}
	}
	if strings.Contains(lower, "allreduce_fusion") || strings.Contains(lower, "allreducefusion") {
		return FusedAllReduce
	}
	if strings.Contains(lower, "cross_device_reduce") || strings.Contains(lower, "all_reduce") || strings.Contains(lower, "allreduce") {
		return CustomAllReduce
	}
	return Ignored
}

// IsFrontendTrace reports whether a trace file is vLLM's front-end (AsyncLLM) CPU trace, which
// lands beside the workers' traces and is not a rank (enginefacts.VLLMFrontendTrace).
func IsFrontendTrace(path string) bool {
	base := filepath.Base(path)
	for _, v := range enginefacts.VLLMFrontendTrace.Values {
		if strings.Contains(base, v) {
			return true
		}
	}
	return false
}

// ran reports whether an implementation with n of total allreduce kernels counts as having run.
func ran(n, total int) bool {
	return n > 0 && float64(n) >= MinShare*float64(total)
}

// outliers words the implementations that ran too few kernels to count, with one name each.
func (s *Summary) outliers() []string {
	total := s.NCCLAllReduce + s.CustomAllReduce + s.FusedAllReduce
	var out []string
	for _, c := range []struct {
		n    int
		kind Kind
		word string
	}{{s.CustomAllReduce, CustomAllReduce, "custom-looking"}, {s.FusedAllReduce, FusedAllReduce, "fusion"}, {s.NCCLAllReduce, NCCLAllReduce, "NCCL"}} {
		if c.n == 0 || ran(c.n, total) {
			continue
		}
		out = append(out, fmt.Sprintf("%d %s kernel(s) of %d, under %.0f%%: not counted (%s)", c.n, c.word, total, MinShare*100, s.firstKernel(c.kind)))
	}
	return out
}

// firstKernel is the first kernel name of kind k seen in the files ("" when none was kept).
func (s *Summary) firstKernel(k Kind) string {
	for _, f := range s.Files {
		for _, name := range f.Kernels {
			if Classify(name) == k {
				return BaseName(name)
			}
		}
	}
	return ""
}
