package suites

import (
	"context"
	"encoding/json"
	"math"
	"strings"
)

// serverMemoryKeys maps the memory_usage keys of SGLang's /server_info (and the reference
// engine's, which adds its memory plan's other parts) to EngineReport keys. Keys not listed
// become "<key>_gib"; token counts and the run-time leak are not parts of the plan.
var serverMemoryKeys = map[string]string{
	"weight":           "weights_gib",
	"kvcache":          "kv_cache_gib",
	"cuda_graph":       "cuda_graph_gib",
	"custom_allreduce": "custom_allreduce_gib",
}

// recordServerMemory reads the memory plan the engine reports at /server_info (SGLang's
// memory_usage, top level or in internal_states[0]) once the engine is ready, so that the
// reports can show every part of it, the custom allreduce buffers included. Engines without the
// endpoint (vLLM) leave it empty; errors only mean less to show.
func (fw *framework) recordServerMemory(ctx context.Context, cs *configState) {
	if cs.inst == nil {
		return
	}
	base := strings.TrimRight(cs.inst.BaseURL(), "/")
	body, err := httpGet(ctx, base+"/server_info")
	if err != nil {
		body, err = httpGet(ctx, base+"/get_server_info")
	}
	if err != nil {
		return
	}
	cs.serverMemory = serverMemory(body)
}

// serverMemory extracts the positive GiB parts of a /server_info body's memory_usage as
// EngineReport keys (nil when it has none).
func serverMemory(body []byte) map[string]float64 {
	var info struct {
		MemoryUsage    map[string]any   `json:"memory_usage"`
		InternalStates []map[string]any `json:"internal_states"`
	}
	if json.Unmarshal(body, &info) != nil {
		return nil
	}
	mu := info.MemoryUsage
	if mu == nil && len(info.InternalStates) > 0 {
		mu, _ = info.InternalStates[0]["memory_usage"].(map[string]any)
	}
	out := map[string]float64{}
	for k, v := range mu {
		f, ok := v.(float64)
		if !ok || f <= 0 || math.IsInf(f, 0) || math.IsNaN(f) || strings.Contains(k, "token") || strings.HasPrefix(k, "leak") {
			continue
		}
		key, known := serverMemoryKeys[k]
		if !known {
			key = k + "_gib"
		}
		out[key] = f
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// mergeServerMemory adds the server's memory parts to an EngineReport object where the log said
// nothing of them (the log's values stay: floors were written against them).
func mergeServerMemory(m map[string]any, mem map[string]float64) {
	for k, v := range mem {
		if cur, ok := m[k]; !ok || cur == nil {
			m[k] = v
		}
	}
}
