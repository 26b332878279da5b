package vllm_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/reckon-ci/reckon/engine"
	"github.com/reckon-ci/reckon/engine/vllm"
)

// These tests launch the reference engine in its vLLM dialect through this adapter, unchanged
// (command override `refengine vllm serve`), and pin the contract between its vLLM-format log
// lines and its own endpoints: what `reckon logs parse` reads is what /metrics, /v1/models,
// /version and /server_info (VLLM_SERVER_DEV_MODE=1) report.

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

func quiet() logrus.FieldLogger {
	l := logrus.New()
	l.SetOutput(os.Stderr)
	l.SetLevel(logrus.WarnLevel)
	return l
}

func tinyModel(t *testing.T) string {
	t.Helper()
	m, err := filepath.Abs(filepath.Join("..", "..", "fixtures", "models", "tiny.json"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func launch(t *testing.T, bin string, cfg engine.LaunchConfig) *engine.Instance {
	t.Helper()
	cfg.Command = []string{bin, "vllm", "serve"}
	cfg.Model = tinyModel(t)
	cfg.Host = "127.0.0.1"
	inst, err := engine.Launch(context.Background(), vllm.New(), engine.LaunchOptions{
		Config: cfg, LogPath: filepath.Join(t.TempDir(), "refengine-vllm.log"),
		ReadyTimeout: 2 * time.Minute, StopGrace: 5 * time.Second, Logger: quiet(),
	})
	if err != nil {
		t.Fatalf("Launch: %v", err)
	}
	t.Cleanup(func() {
		if err := inst.Stop(context.Background()); err != nil {
			t.Errorf("Stop: %v", err)
		}
	})
	return inst
}

func getBody(t *testing.T, url string) []byte {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: HTTP %d: %s", url, resp.StatusCode, b)
	}
	return b
}

// promMetrics reads a Prometheus text page into series name{labels} -> value.
func promMetrics(t *testing.T, body []byte) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	sc := bufio.NewScanner(bytes.NewReader(body))
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("metrics line %q: %v", line, err)
		}
		out[line[:i]] = v
	}
	return out
}

// series finds the one series of name whose labels contain every want fragment.
func series(t *testing.T, m map[string]float64, name string, want ...string) float64 {
	t.Helper()
	var hits []string
	for k := range m {
		if !strings.HasPrefix(k, name+"{") {
			continue
		}
		ok := true
		for _, w := range want {
			ok = ok && strings.Contains(k, w)
		}
		if ok {
			hits = append(hits, k)
		}
	}
	if len(hits) != 1 {
		t.Fatalf("metric %s%v: %d series (%v)", name, want, len(hits), hits)
	}
	return m[hits[0]]
}

var numGPUBlocksRE = regexp.MustCompile(`vllm:cache_config_info\{block_size="(\d+)",[^}]*num_gpu_blocks="(\d+)"\}`)

// TestVLLMDialectLogMatchesEndpoints launches tp 4 with EAGLE3 through the vllm adapter, drives
// it, and checks every EngineReport field against the engine's endpoints.
func TestVLLMDialectLogMatchesEndpoints(t *testing.T) {
	bin := buildRefengine(t)
	inst := launch(t, bin, engine.LaunchConfig{
		TPSize: 4, Speculative: &engine.Speculative{Algorithm: "EAGLE3", NumSteps: 3},
		ExtraArgs: []string{"--dtype", "bfloat16", "--max-num-seqs", "64"},
		Env:       map[string]string{"VLLM_SERVER_DEV_MODE": "1", "VLLM_LOG_STATS_INTERVAL": "0.2"},
	})
	url := inst.BaseURL()
	// Traffic, so that the stats and SpecDecoding lines appear.
	var wg sync.WaitGroup
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			body := fmt.Sprintf(`{"prompt": "pin the log to the metrics %d", "max_tokens": 40, "temperature": 0}`, i)
			resp, err := http.Post(url+"/v1/completions", "application/json", strings.NewReader(body))
			if err != nil {
				t.Errorf("completion: %v", err)
				return
			}
			resp.Body.Close()
		}(i)
	}
	wg.Wait()
	// After traffic the next interval logs a zero-throughput line (vLLM logs the interval after
	// an active one): from then on the log covers every verified draft.
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(inst.LogTail(400), "Avg generation throughput: 0.0 tokens/s") {
		if time.Now().After(deadline) {
			t.Fatalf("no idle stats line:\n%s", inst.LogTail(60))
		}
		time.Sleep(50 * time.Millisecond) // polling the engine's log for its next stats line
	}
	logBytes, err := os.ReadFile(inst.LogPath())
	if err != nil {
		t.Fatal(err)
	}
	if got := engine.DetectEngine(logBytes); got != vllm.Name {
		t.Fatalf("DetectEngine = %q, want vllm", got)
	}
	rep, err := engine.ParseLogFile(inst.LogPath(), "auto")
	if err != nil {
		t.Fatal(err)
	}
	if rep.Engine != vllm.Name || !rep.Ready || len(rep.Errors) != 0 {
		t.Fatalf("report: engine %s ready %v errors %+v", rep.Engine, rep.Ready, rep.Errors)
	}

	m := promMetrics(t, getBody(t, url+"/metrics"))
	bm := numGPUBlocksRE.FindStringSubmatch(string(getBody(t, url+"/metrics")))
	if bm == nil {
		t.Fatal("no vllm:cache_config_info with num_gpu_blocks")
	}
	bs, _ := strconv.Atoi(bm[1])
	blocks, _ := strconv.Atoi(bm[2])
	if rep.KVCacheTokens == nil || *rep.KVCacheTokens != int64(bs*blocks) {
		t.Errorf("kv_cache_tokens: log %v, /metrics num_gpu_blocks %d x block_size %d", rep.KVCacheTokens, blocks, bs)
	}
	if v := series(t, m, "vllm:refengine_kv_cache_tokens"); rep.KVCacheTokens == nil || float64(*rep.KVCacheTokens) != v {
		t.Errorf("kv_cache_tokens: log %v, /metrics %v", rep.KVCacheTokens, v)
	}
	if v := series(t, m, "vllm:refengine_kv_cache_gib"); rep.KVCacheGiB == nil || math.Abs(*rep.KVCacheGiB-v) > 1e-4 {
		t.Errorf("kv_cache_gib: log %v, /metrics %v", rep.KVCacheGiB, v)
	}
	drafts := series(t, m, "vllm:spec_decode_num_drafts_total")
	accepted := series(t, m, "vllm:spec_decode_num_accepted_tokens_total")
	drafted := series(t, m, "vllm:spec_decode_num_draft_tokens_total")
	if drafts == 0 || drafted != 3*drafts {
		t.Fatalf("spec decode counters: drafts %v, draft tokens %v (3 per draft expected)", drafts, drafted)
	}
	// The parser weights each line's mean (printed with 2 decimals) by its drafted tokens.
	if want := 1 + accepted/drafts; rep.SpecAcceptLength == nil || math.Abs(*rep.SpecAcceptLength-want) > 0.006 {
		t.Errorf("spec_accept_length: log %v, /metrics 1 + %v/%v = %.4f", rep.SpecAcceptLength, accepted, drafts, want)
	}
	var perPos float64
	for p := 0; p < 3; p++ {
		perPos += series(t, m, "vllm:spec_decode_num_accepted_tokens_per_pos_total", fmt.Sprintf(`position="%d"`, p))
	}
	if perPos != accepted {
		t.Errorf("per-position accepted %v, accepted %v", perPos, accepted)
	}
	if g := series(t, m, "vllm:generation_tokens_total"); g < 4 {
		t.Errorf("vllm:generation_tokens_total %v", g)
	}
	if n := series(t, m, "vllm:time_to_first_token_seconds_count"); n != 4 {
		t.Errorf("TTFT histogram count %v, want 4 requests", n)
	}
	if n := series(t, m, "vllm:e2e_request_latency_seconds_count"); n != 4 {
		t.Errorf("e2e histogram count %v, want 4", n)
	}

	var models struct {
		Data []struct {
			ID          string `json:"id"`
			OwnedBy     string `json:"owned_by"`
			MaxModelLen int    `json:"max_model_len"`
		} `json:"data"`
	}
	if err := json.Unmarshal(getBody(t, url+"/v1/models"), &models); err != nil || len(models.Data) != 1 {
		t.Fatalf("/v1/models: %v %+v", err, models)
	}
	if rep.ContextLen == nil || *rep.ContextLen != int64(models.Data[0].MaxModelLen) || models.Data[0].OwnedBy != "vllm" {
		t.Errorf("context_len: log %v, /v1/models %+v", rep.ContextLen, models.Data[0])
	}
	if rep.MaxConcurrency == nil || math.Abs(*rep.MaxConcurrency-float64(*rep.KVCacheTokens)/float64(models.Data[0].MaxModelLen)) > 0.006 {
		t.Errorf("max_concurrency: log %v, tokens %v / max_model_len %d", rep.MaxConcurrency, *rep.KVCacheTokens, models.Data[0].MaxModelLen)
	}
	var ver struct {
		Version string `json:"version"`
	}
	if err := json.Unmarshal(getBody(t, url+"/version"), &ver); err != nil || ver.Version == "" {
		t.Fatalf("/version: %v %+v", err, ver)
	}
	if !bytes.Contains(logBytes, []byte("vLLM API server version "+ver.Version)) {
		t.Errorf("log does not state /version's %q", ver.Version)
	}

	var si struct {
		VLLMConfig string         `json:"vllm_config"`
		Info       map[string]any `json:"refengine"`
	}
	if err := json.Unmarshal(getBody(t, url+"/server_info"), &si); err != nil || si.Info == nil || si.VLLMConfig == "" {
		t.Fatalf("/server_info (VLLM_SERVER_DEV_MODE=1): %v", err)
	}
	mu, _ := si.Info["memory_usage"].(map[string]any)
	num := func(k string) float64 { f, _ := mu[k].(float64); return f }
	for _, c := range []struct {
		name string
		log  *float64
		info float64
	}{{"weights_gib", rep.WeightsGiB, num("weight") + num("draft_weight")},
		{"kv_cache_gib", rep.KVCacheGiB, num("kvcache") + num("draft_kvcache")},
		{"cuda_graph_gib", rep.CUDAGraphGiB, num("cuda_graph") + num("draft_cuda_graph")}} {
		if c.log == nil || math.Abs(*c.log-c.info) > 2e-4 {
			t.Errorf("%s: log %v, server_info %v", c.name, c.log, c.info)
		}
	}
	if rep.AllReduce != si.Info["allreduce_backend"] || rep.AllReduce != engine.AllReduceCustom {
		t.Errorf("allreduce: log %q, server_info %v", rep.AllReduce, si.Info["allreduce_backend"])
	}
	if rep.MaxRunningRequests == nil || float64(*rep.MaxRunningRequests) != si.Info["max_running_requests"] {
		t.Errorf("max_running_requests: log %v, server_info %v", rep.MaxRunningRequests, si.Info["max_running_requests"])
	}
	if tok, _ := si.Info["max_total_num_tokens"].(float64); rep.KVCacheTokens == nil || float64(*rep.KVCacheTokens) != tok {
		t.Errorf("kv tokens: log %v, server_info %v", rep.KVCacheTokens, tok)
	}

	// The dialect's log yields every field that the real vLLM V1 logs in fixtures yield.
	got := presentFields(t, rep)
	for f, src := range realV1Fields(t) {
		if !got[f] {
			t.Errorf("field %s: present in the real vLLM log %s, missing from the dialect's", f, src)
		}
	}
}

// presentFields lists the EngineReport fields with a value.
func presentFields(t *testing.T, rep *engine.Report) map[string]bool {
	t.Helper()
	b, _ := json.Marshal(rep)
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	out := map[string]bool{}
	for k, v := range m {
		switch x := v.(type) {
		case nil:
		case []any:
			out[k] = len(x) > 0
		case string:
			out[k] = x != "" && x != engine.AllReduceUnknown
		case bool:
			out[k] = x
		default:
			out[k] = true
		}
	}
	return out
}

// realV1Fields maps each EngineReport field that some real vLLM V1 log under fixtures/logs/vllm
// yields (errors, readiness and the reason custom allreduce was off excluded: they depend on what
// happened, not on the grammar) to one such log.
func realV1Fields(t *testing.T) map[string]string {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join("..", "..", "fixtures", "logs", "vllm", "v1_*.log"))
	if len(files) == 0 {
		t.Fatal("no real vLLM V1 logs under fixtures/logs/vllm")
	}
	sort.Strings(files)
	out := map[string]string{}
	for _, f := range files {
		rep, err := engine.ParseLogFile(f, vllm.Name)
		if err != nil {
			t.Fatal(err)
		}
		for k, ok := range presentFields(t, rep) {
			if ok && out[k] == "" {
				out[k] = filepath.Base(f)
			}
		}
	}
	for _, k := range []string{"errors", "ready", "custom_allreduce_disabled_reason", "engine"} {
		delete(out, k)
	}
	return out
}

// TestVLLMDialectCustomAllReduceRule: vLLM's rule, read back by the adapter's parser: custom
// allreduce on two PCIe GPUs, NCCL with vLLM's warning on more than two.
func TestVLLMDialectCustomAllReduceRule(t *testing.T) {
	bin := buildRefengine(t)
	for _, c := range []struct {
		name   string
		tp     int
		want   string
		reason string
	}{
		{"pcie-tp4", 4, engine.AllReduceNCCL, "it's not supported on more than two PCIe-only GPUs"},
		{"pcie-tp2", 2, engine.AllReduceCustom, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			inst := launch(t, bin, engine.LaunchConfig{TPSize: c.tp, ExtraArgs: []string{"--topology", "pcie"}})
			rep, err := inst.Report()
			if err != nil {
				t.Fatal(err)
			}
			reason := ""
			if rep.CustomAllReduceDisabledReason != nil {
				reason = *rep.CustomAllReduceDisabledReason
			}
			if !rep.Ready || rep.AllReduce != c.want || reason != c.reason || len(rep.Errors) != 0 {
				t.Errorf("ready=%v allreduce=%s reason=%q errors=%v, want ready, %s, %q", rep.Ready, rep.AllReduce, reason, rep.Errors, c.want, c.reason)
			}
			if c.reason != "" {
				warn := regexp.MustCompile(`\(Worker_TP3 pid=\d+\) WARNING \d\d-\d\d \d\d:\d\d:\d\d \[custom_all_reduce\.py:\d+\] Custom allreduce is disabled because it's not supported on more than two PCIe-only GPUs\. To silence this warning, specify disable_custom_all_reduce=True explicitly\.`)
				if !warn.MatchString(inst.LogTail(400)) {
					t.Errorf("vLLM's warning, on every worker, missing:\n%s", inst.LogTail(40))
				}
			}
		})
	}
}
