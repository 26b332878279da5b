package gate

import (
	"strings"
	"testing"
)

// fusedEvidence is the reproduced SGLang window: an NCCL config (custom allreduce disabled) of a
// Qwen3-MoE model on SM90, where SGLang turned FlashInfer allreduce fusion on by itself.
func fusedEvidence() AllReduceEvidence {
	ev := CombineAllReduce([]AllReduceSource{
		{Source: SourceProfiler, Says: BackendFused, Detail: "960 FlashInfer allreduce fusion / 0 custom / 512 NCCL allreduce kernels on 2 ranks"},
		{Source: SourceLog, Says: BackendNCCL, Detail: "custom allreduce not used"},
		{Source: SourceServerInfo, Says: BackendNCCL, Detail: "disable_custom_all_reduce is true"},
	})
	ev.TurnOff = "--enforce-disable-flashinfer-allreduce-fusion"
	return ev
}

// TestExpectNCCLWhereFusionRan: the expect fails naming fusion and how to turn it off, not
// "allreduce is custom"; the log and /server_info (which only see custom allreduce off) are no
// disagreement.
func TestExpectNCCLWhereFusionRan(t *testing.T) {
	ev := fusedEvidence()
	if ev.Effective != BackendFused || ev.From != SourceProfiler || ev.Disagreement != "" {
		t.Fatalf("evidence %+v: want fused from the profiler, no disagreement", ev)
	}
	v := ExpectAllReduce("nccl", &ev, BackendNCCL)
	if v.Outcome != Fail || !strings.Contains(v.Message, "FlashInfer allreduce fusion") || !strings.Contains(v.Message, "--enforce-disable-flashinfer-allreduce-fusion") || strings.Contains(v.Message, `"custom"`) {
		t.Errorf("verdict %s: %s", v.Outcome, v.Message)
	}
	if v := ExpectAllReduce("fusion", &ev, BackendFused); v.Outcome != Pass {
		t.Errorf("expect fused: %s %s", v.Outcome, v.Message)
	}
	// A profiler saying nccl beside a fused one is still a disagreement.
	ev2 := CombineAllReduce([]AllReduceSource{{Source: SourceProfiler, Says: BackendFused}, {Source: SourceProfiler, Says: BackendNCCL}})
	if ev2.Disagreement == "" {
		t.Error("two profiler windows disagreeing were not reported")
	}
}

// TestEquivalenceSaysWhatItCompared: a base asking for NCCL that ran fusion makes the check
// unverified, naming the fusion, instead of comparing custom with fusion under the name NCCL.
func TestEquivalenceSaysWhatItCompared(t *testing.T) {
	ev := fusedEvidence()
	custom := CombineAllReduce([]AllReduceSource{{Source: SourceProfiler, Says: BackendCustom, Detail: "96 custom / 4 NCCL"}})
	err := EquivalenceExercised(EquivalenceSide{Config: "nccl", Requested: BackendNCCL, AllReduce: &ev},
		EquivalenceSide{Config: "custom-ar", Requested: BackendCustom, AllReduce: &custom}, nil)
	if err == nil || !strings.Contains(err.Error(), "nccl asks for nccl allreduce but ran FlashInfer allreduce fusion") || !strings.Contains(err.Error(), "--enforce-disable-flashinfer-allreduce-fusion") {
		t.Errorf("err = %v", err)
	}
}
