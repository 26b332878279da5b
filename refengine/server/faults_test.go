package server

import (
	"encoding/json"
	"math"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/reckon-ci/reckon/wire"
)

func echoLogprobs(t *testing.T, ts *testServer, p string) []float64 {
	t.Helper()
	out := ts.complete(t, map[string]any{"prompt": p, "max_tokens": 1, "temperature": 0, "logprobs": 1, "echo": true})
	var lps []float64
	for _, v := range out.Choices[0].Logprobs.TokenLogprobs[1:] {
		lps = append(lps, *v)
	}
	return lps
}

func maxAbsDiff(a, b []float64) float64 {
	var d float64
	for i := range a {
		d = math.Max(d, math.Abs(a[i]-b[i]))
	}
	return d
}

// TestFaultAllReduceError: the corrupted custom allreduce moves prompt logprobs far beyond the
// rounding-level difference between custom and NCCL.
func TestFaultAllReduceError(t *testing.T) {
	p := "Teacher-forced logprobs of this prompt are compared across configurations."
	custom := echoLogprobs(t, start(t, nil, true, "--tp-size", "4"), p)
	nccl := echoLogprobs(t, start(t, nil, true, "--tp-size", "4", "--disable-custom-all-reduce"), p)
	bad := echoLogprobs(t, start(t, nil, true, "--tp-size", "4", "--fault-allreduce-error", "0.05"), p)
	good, broken := maxAbsDiff(custom, nccl), maxAbsDiff(bad, nccl)
	t.Logf("max |Δ logprob| vs nccl: custom %.3g, custom with 5%% fault %.3g", good, broken)
	if good > 1e-4 {
		t.Errorf("clean custom vs nccl differ by %.3g, more than rounding", good)
	}
	if broken < 1e-2 {
		t.Errorf("faulty custom vs nccl differ by only %.3g", broken)
	}
}

func TestFaultReserveShrinksKV(t *testing.T) {
	a := start(t, nil, false, "--device-memory", "192MiB")
	b := start(t, nil, false, "--device-memory", "192MiB", "--fault-reserve-mb", "32")
	lost := a.e.Alloc.CapacityTokens() - b.e.Alloc.CapacityTokens()
	perTok := a.e.Plans[0].KVBytesPerToken
	want := float64(32<<20) / float64(perTok)
	if math.Abs(float64(lost)-want) > 16 {
		t.Errorf("KV lost %d tokens, want %.0f (32 MiB / %d bytes per token)", lost, want, perTok)
	}
	if !strings.Contains(b.log.String(), "Fault injection: reserving") {
		t.Error("no fault reserve log line")
	}
}

func TestFaultSlowdown(t *testing.T) {
	clean := start(t, nil, true)
	slow := start(t, nil, true, "--fault-slowdown", "3")
	for _, ts := range []*testServer{clean, slow} {
		ts.complete(t, greedyReq("slow down", 16))
	}
	st0, st1 := clean.e.Sched.Stats(), slow.e.Sched.Stats()
	if st0.FaultDelay != 0 || st1.FaultDelay <= 0 {
		t.Errorf("injected delay: clean %v, slowdown 3 %v", st0.FaultDelay, st1.FaultDelay)
	}
	info := slow.e.ServerInfo()["refengine"].(map[string]any)
	if info["fault_delay_s"].(float64) <= 0 {
		t.Errorf("server info does not show the injected delay: %v", info)
	}
}

func TestFaultCrashAfter(t *testing.T) {
	ts := start(t, nil, true, "--fault-crash-after", "2")
	ts.complete(t, greedyReq("one", 2))
	ts.complete(t, greedyReq("two", 2))
	// the third request finds the engine crashing: no answer
	if resp, err := http.Post(ts.url+"/v1/completions", "application/json", strings.NewReader(`{"prompt": "three"}`)); err == nil {
		resp.Body.Close()
		t.Errorf("request after the crash answered HTTP %d", resp.StatusCode)
	}
	// Serve ends on its own (guard against a hang only).
	select {
	case <-ts.exited:
	case <-time.After(30 * time.Second):
		t.Fatal("engine did not crash after 2 requests")
	}
	err := ts.exitErr
	if err == nil || !strings.Contains(err.Error(), "crashed after 2") {
		t.Fatalf("Serve returned %v, want the crash", err)
	}
	log := ts.log.String()
	if !strings.Contains(log, "Traceback (most recent call last):") || !strings.Contains(log, "RuntimeError: refengine fault injection") {
		t.Errorf("no traceback in the log:\n%s", log)
	}
	if _, err := http.Get(ts.url + "/health"); err == nil {
		t.Error("server still answering after the crash")
	}
}

func TestFaultHangStartup(t *testing.T) {
	ts := start(t, nil, false, "--fault-hang-startup")
	// the engine works (a request completes) but never declares itself ready
	ts.complete(t, greedyReq("hello?", 2))
	if code, _ := ts.get(t, "/health"); code != http.StatusServiceUnavailable {
		t.Errorf("/health = %d, want 503 forever", code)
	}
	if strings.Contains(ts.log.String(), "ready to roll") {
		t.Error("ready line printed despite --fault-hang-startup")
	}
	clean := start(t, nil, true)
	if code, _ := clean.get(t, "/health"); code != 200 {
		t.Errorf("clean engine /health = %d", code)
	}
}

func TestFaultLeak(t *testing.T) {
	clean := start(t, nil, true)
	leaky := start(t, nil, true, "--fault-leak-mb-per-request", "1")
	for i := 0; i < 3; i++ {
		clean.complete(t, greedyReq("leak", 4))
		leaky.complete(t, greedyReq("leak", 4))
	}
	usage := func(ts *testServer) (int, float64) {
		_, body := ts.get(t, "/get_server_info")
		var info wire.ServerInfo
		if err := json.Unmarshal(body, &info); err != nil {
			t.Fatal(err)
		}
		st := info.InternalStates[0]
		mu := st["memory_usage"].(map[string]any)
		return int(mu["leaked_tokens"].(float64)), st["token_usage"].(float64)
	}
	// the warmup request of the leaky engine leaks too: 4 requests
	lt, lu := usage(leaky)
	ct, cu := usage(clean)
	perReq := int(math.Ceil(float64(1<<20)/float64(leaky.e.Plans[0].KVBytesPerToken*16))) * 16
	t.Logf("idle after 3 requests: leaky %d tokens leaked (usage %.4f), clean %d (usage %.4f)", lt, lu, ct, cu)
	// the self-check runs when the scheduler goes idle, asynchronously: poll for it
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if strings.Contains(leaky.log.String(), "memory leak detected") {
			break
		}
	}
	if !strings.Contains(leaky.log.String(), "token_to_kv_pool_allocator memory leak detected! available_size=") ||
		strings.Contains(clean.log.String(), "memory leak detected") {
		t.Error("the idle self-check must report the leak (and only the leak)")
	}
	if ct != 0 || cu != 0 || lt != 4*perReq || lu <= 0 {
		t.Errorf("leaked tokens: clean %d (usage %v), leaky %d (usage %v); want 0 and %d", ct, cu, lt, lu, 4*perReq)
	}
}

// TestFaultFailEveryInOneLaunch: --fault-fail-every 3 fails every third generation request with
// HTTP 500 and the engine's error body, only in the launch index --fault-fail-launch names
// (taken from --clock-launch-counter, as a harness's relaunches take it); other launches serve
// every request.
func TestFaultFailEveryInOneLaunch(t *testing.T) {
	counter := t.TempDir() + "/launches"
	req := map[string]any{"prompt": "a b c", "max_tokens": 2, "temperature": 0}
	statuses := func(ts *testServer) []int {
		var out []int
		for range 6 {
			code, body := ts.post(t, "/v1/completions", req)
			out = append(out, code)
			if code != http.StatusOK {
				var e wire.ErrorResponse
				if err := json.Unmarshal(body, &e); err != nil || e.Error.Code != 500 || e.Error.Type != "InternalServerError" || !strings.Contains(e.Error.Message, "--fault-fail-every ") {
					t.Errorf("failed request's body %s (%v)", body, err)
				}
			}
		}
		return out
	}
	args := []string{"--clock-launch-counter", counter, "--fault-fail-every", "3", "--fault-fail-launch", "1"}
	first := statuses(start(t, nil, true, args...))
	second := statuses(start(t, nil, true, args...))
	want0, want1 := []int{200, 200, 200, 200, 200, 200}, []int{200, 200, 500, 200, 200, 500}
	if !slices.Equal(first, want0) || !slices.Equal(second, want1) {
		t.Errorf("launch 0 answered %v (want %v), launch 1 %v (want %v)", first, want0, second, want1)
	}
	every := statuses(start(t, nil, true, "--fault-fail-every", "2"))
	if !slices.Equal(every, []int{200, 500, 200, 500, 200, 500}) {
		t.Errorf("every launch, every 2nd: %v", every)
	}
}
