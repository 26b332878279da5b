package suites

import "testing"

func TestServerMemoryParts(t *testing.T) {
	// The reference engine's /server_info: memory_usage at top level with its plan's other parts.
	body := []byte(`{"memory_usage":{"weight":0.05,"kvcache":0.01,"token_capacity":1024,"cuda_graph":0.02,
		"custom_allreduce":0.09,"activations":0,"leaked_tokens":3,"leaked":0.001}}`)
	got := serverMemory(body)
	want := map[string]float64{"weights_gib": 0.05, "kv_cache_gib": 0.01, "cuda_graph_gib": 0.02, "custom_allreduce_gib": 0.09}
	if len(got) != len(want) {
		t.Fatalf("serverMemory = %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
	// SGLang's newer layout: internal_states[0].memory_usage.
	if got := serverMemory([]byte(`{"internal_states":[{"memory_usage":{"weight":16.1,"cuda_graph":1.2}}]}`)); got["cuda_graph_gib"] != 1.2 {
		t.Errorf("internal_states layout: %v", got)
	}
	m := map[string]any{"weights_gib": 16.0, "kv_cache_gib": nil}
	mergeServerMemory(m, map[string]float64{"weights_gib": 16.1, "kv_cache_gib": 9, "custom_allreduce_gib": 3.85})
	if m["weights_gib"] != 16.0 || m["kv_cache_gib"] != 9.0 || m["custom_allreduce_gib"] != 3.85 {
		t.Errorf("merge kept the log's values and added the rest? %v", m)
	}
}
