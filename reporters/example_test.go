package reporters_test

import (
	"fmt"
	"github.com/reckon-ci/reckon/spec"

	"github.com/reckon-ci/reckon/gate"
	"github.com/reckon-ci/reckon/reporters"
)

// The story reckon exists for: the explanation attached to a throughput regression.
func ExampleExplain() {
	run := &gate.Run{
		SpecName: "pcie",
		Configs: []gate.Config{
			{Name: "nccl", Launches: 1, Engine: map[string]any{"kv_cache_gib": 10.42, "weights_gib": 16.1, "allreduce": "nccl"}},
			{Name: "custom-ar", Launches: 1, Engine: map[string]any{"kv_cache_gib": 0.90, "weights_gib": 16.1, "custom_ar_buffer_gib": 3.85, "allreduce": "custom"}},
		},
	}
	check := gate.Check{Verdict: gate.Verdict{Name: "output_throughput vs nccl", Kind: string(spec.KindRelative), Config: "custom-ar", Message: "custom-ar: output throughput -57% vs nccl", Against: "nccl"}, Status: gate.StatusFailed}
	fmt.Println(check.Message + "; " + reporters.Explain(run, &check))
	// Output:
	// custom-ar: output throughput -57% vs nccl; KV cache -91% (10.42 -> 0.90 GiB); custom AR buffers 3.85 GiB (none in nccl); allreduce custom (nccl config: nccl)
}
