package engine_test

import (
	"context"
	"encoding/json"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/reckon-ci/reckon/engine"
)

// buildRefengine builds the reference engine once per test binary run.
func buildRefengine(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and launches the reference engine")
	}
	bin := filepath.Join(t.TempDir(), "refengine")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/reckon-ci/reckon/cmd/refengine").CombinedOutput()
	if err != nil {
		t.Skipf("reference engine does not build (its own tests report that): %v\n%s", err, out)
	}
	return bin
}

// TestLaunchRefengineThroughSGLangAdapter launches the real reference engine the way the gate
// does (sglang adapter + command override), waits for /health and the ready line, and reads
// its log: PCIe TP4 must come out as nccl with SGLang's reason, NVLink TP2 as custom. The NVLink
// case runs the 0.4 persona: its v1 custom allreduce logs "Registering N cuda graph addresses",
// while the newest SGLang's CustomAllReduceV2 logs nothing when it is on.
func TestLaunchRefengineThroughSGLangAdapter(t *testing.T) {
	bin := buildRefengine(t)
	model, err := filepath.Abs(filepath.Join("..", "fixtures", "models", "tiny.json"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(model); err != nil {
		t.Skipf("no tiny model config: %v", err)
	}
	cases := []struct {
		name, topology string
		tp             int
		want, reason   string
		extra          []string
	}{
		{"pcie-tp4", "pcie", 4, "nccl", "it's not supported on more than two PCIe-only GPUs", nil},
		{"nvlink-tp2", "nvlink", 2, "custom", "", []string{"--engine-version", "0.4"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			inst, err := engine.Launch(context.Background(), sglangAdapter(), engine.LaunchOptions{
				Config: engine.LaunchConfig{
					Command: []string{bin}, Model: model, TPSize: c.tp, Host: "127.0.0.1",
					ExtraArgs: append([]string{"--topology", c.topology}, c.extra...),
				},
				LogPath:      filepath.Join(t.TempDir(), "refengine.log"),
				ReadyTimeout: 2 * time.Minute,
				StopGrace:    5 * time.Second,
				Logger:       quietLogger(),
			})
			if err != nil {
				t.Fatalf("Launch: %v", err)
			}
			defer func() {
				if err := inst.Stop(context.Background()); err != nil {
					t.Errorf("Stop: %v", err)
				}
				assertGroupGone(t, inst.Pid(), "after stopping the reference engine")
			}()
			rep, err := inst.Report()
			if err != nil {
				t.Fatal(err)
			}
			reason := ""
			if rep.CustomAllReduceDisabledReason != nil {
				reason = *rep.CustomAllReduceDisabledReason
			}
			if !rep.Ready || rep.AllReduce != c.want || reason != c.reason {
				t.Errorf("ready=%v allreduce=%s reason=%q, want ready, %s, %q", rep.Ready, rep.AllReduce, reason, c.want, c.reason)
			}
			if rep.KVCacheTokens == nil || *rep.KVCacheTokens <= 0 || rep.WeightsGiB == nil || rep.KVCacheGiB == nil ||
				rep.AvailableGPUMemGiB == nil || rep.CUDAGraphGiB == nil || rep.ContextLen == nil || rep.MaxRunningRequests == nil {
				t.Errorf("memory plan incomplete: %+v", rep)
			}
			if len(rep.Errors) != 0 {
				t.Errorf("errors in a clean start: %+v", rep.Errors)
			}
			assertLogMatchesServerInfo(t, inst.BaseURL(), rep)
		})
	}
}

// assertLogMatchesServerInfo pins the contract between the engine's log lines and its endpoint:
// what the log parser reads (KV tokens, KV, weight and graph memory) is what /get_server_info
// reports, within the log's rounding (values are printed with 2-4 decimals; K and V are printed
// separately and summed).
func assertLogMatchesServerInfo(t *testing.T, baseURL string, rep *engine.Report) {
	t.Helper()
	resp, err := http.Get(baseURL + "/get_server_info")
	if err != nil {
		t.Fatalf("get_server_info: %v", err)
	}
	defer resp.Body.Close()
	var info struct {
		MaxTotalNumTokens int `json:"max_total_num_tokens"`
		MemoryUsage       struct {
			TokenCapacity int `json:"token_capacity"`
		} `json:"memory_usage"`
		// The reference engine's own facts (no SGLang release reports an allreduce backend).
		Refengine struct {
			AllReduceBackend string `json:"allreduce_backend"`
		} `json:"refengine"`
	}
	var raw map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&raw); err != nil {
		t.Fatalf("get_server_info: %v", err)
	}
	b, _ := json.Marshal(raw)
	_ = json.Unmarshal(b, &info)
	mu, _ := raw["memory_usage"].(map[string]any)
	num := func(k string) float64 { f, _ := mu[k].(float64); return f }
	if rep.KVCacheTokens == nil || *rep.KVCacheTokens != int64(info.MaxTotalNumTokens) || info.MemoryUsage.TokenCapacity != info.MaxTotalNumTokens {
		t.Errorf("KV tokens: log %v, server_info max_total_num_tokens %d, token_capacity %d", rep.KVCacheTokens, info.MaxTotalNumTokens, info.MemoryUsage.TokenCapacity)
	}
	if rep.AllReduce != info.Refengine.AllReduceBackend {
		t.Errorf("allreduce: log %q, server_info refengine.allreduce_backend %q", rep.AllReduce, info.Refengine.AllReduceBackend)
	}
	for _, c := range []struct {
		name string
		log  *float64
		info float64
	}{{"kv_cache_gib", rep.KVCacheGiB, num("kvcache")}, {"weights_gib", rep.WeightsGiB, num("weight")}, {"cuda_graph_gib", rep.CUDAGraphGiB, num("cuda_graph")}} {
		if c.log == nil || math.Abs(*c.log-c.info) > 0.0011 {
			t.Errorf("%s: log %v, server_info %v", c.name, c.log, c.info)
		}
	}
}
