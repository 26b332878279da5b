package profile

import (
	"context"
	"testing"
)

// TestRealTorchTrace pins the format on a real trace (fixtures/conformance/traces, recorded with
// ci/probes/torch_profiler_trace.py on an H200 with torch 2.11 and NCCL 2.28.9): four
// allreduces at world size 1, which NCCL issues (c10d::allreduce_ and nccl:all_reduce on the CPU
// side) but runs without any kernel. Neither the CPU ops nor the annotations may count as
// kernels: no allreduce kernel ran, so the trace proves nothing about the backend.
func TestRealTorchTrace(t *testing.T) {
	fc, err := ParseFile(context.Background(), "../../fixtures/conformance/traces/torch-2.11-nccl-world1-h200.trace.json.gz")
	if err != nil {
		t.Fatal(err)
	}
	if fc.Rank != 0 || fc.Events != 150 || fc.NCCLAllReduce != 0 || fc.CustomAllReduce != 0 || fc.OtherCollectives != 0 {
		t.Errorf("counts %+v", fc)
	}
	var s Summary
	s.Add(*fc)
	if s.Verdict() != VerdictUnknown {
		t.Errorf("verdict %q, want unknown: no allreduce kernel ran", s.Verdict())
	}
}
