package suites_test

import (
	"strings"
	"testing"

	"github.com/reckon-ci/reckon/gate"
)

// TestFusionOnNCCLConfig: fusion-nccl.yaml, an SGLang NCCL config of a Qwen3-MoE model on a
// modelled H100, where the engine turned FlashInfer allreduce fusion on by itself. The expect
// fails naming the fusion and SGLang's off switch (never "custom"); the config with the switch is
// NCCL; a config expecting fused passes. Every verdict comes from the profiler.
func TestFusionOnNCCLConfig(t *testing.T) {
	t.Parallel() // a gate run of its own: engines on free ports, reports in t.TempDir
	r := redGate(t, "fusion-nccl.yaml")
	ch := r.check(t, "expect nccl allreduce == nccl")
	if ch.Status != gate.StatusFailed {
		t.Fatalf("nccl expect: %s %s", ch.Status, ch.Message)
	}
	for _, w := range []string{"FlashInfer allreduce fusion", `"fused"`, "--enforce-disable-flashinfer-allreduce-fusion", "profiler: ", "FlashInfer allreduce fusion / 0 custom"} {
		if !strings.Contains(ch.Message, w) {
			t.Errorf("message lacks %q: %s", w, ch.Message)
		}
	}
	if strings.Contains(ch.Message, `is "custom"`) {
		t.Errorf("fusion called custom: %s", ch.Message)
	}
	for _, name := range []string{"expect nccl-no-fusion allreduce == nccl", "expect fused allreduce == fused"} {
		if c := r.check(t, name); c.Status != gate.StatusPassed {
			t.Errorf("%s: %s %s", name, c.Status, c.Message)
		}
	}
	for _, c := range r.results.Configs {
		if c.AllReduce == nil || c.AllReduce.From != gate.SourceProfiler {
			t.Errorf("config %s: allreduce evidence %+v, want it from the profiler", c.Name, c.AllReduce)
		}
	}
}
