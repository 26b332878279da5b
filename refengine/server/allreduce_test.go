package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strings"
	"testing"
)

// faultPrompt is prefilled in one step: 80 tokens (one per byte), so each of its allreduces holds
// 80 tokens of hidden 128: 40 KiB in float32, 20 KiB in bf16. Every other allreduce of the tests
// (warmup prefill, decode) is smaller.
const faultPrompt = "Teacher-forced logprobs of this prompt are compared between two configurations.."

const faultPromptTokens = len(faultPrompt)

// info fetches /get_server_info over HTTP, decoded generically.
func (ts *testServer) info(t *testing.T) map[string]any {
	t.Helper()
	code, body := ts.get(t, "/get_server_info")
	var m map[string]any
	if err := json.Unmarshal(body, &m); code != 200 || err != nil {
		t.Fatalf("/get_server_info: HTTP %d, %v: %s", code, err, body)
	}
	// the reference engine's own facts (allreduce engagement, weight seed) are in its object
	if facts, ok := m["refengine"].(map[string]any); ok {
		for k, v := range facts {
			m[k] = v
		}
	}
	return m
}

func num(t *testing.T, m map[string]any, k string) float64 {
	t.Helper()
	v, ok := m[k].(float64)
	if !ok {
		t.Fatalf("server info %q = %v (%T), want a number", k, m[k], m[k])
	}
	return v
}

func identical(a, b []float64) bool {
	if len(a) != len(b) || len(a) == 0 {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestAllReduceFaults: each fault changes teacher-forced prompt logprobs once its condition is
// reached, and leaves them bit-identical to the un-faulted custom engine when it is not; faults
// never touch the NCCL path. faulted_calls in /get_server_info counts what a fault altered.
func TestAllReduceFaults(t *testing.T) {
	if faultPromptTokens != 80 {
		t.Fatalf("prompt of %d tokens; the sizes below assume 80", faultPromptTokens)
	}
	base := []string{"--tp-size", "4"}
	run := func(args ...string) ([]float64, map[string]any) {
		t.Helper()
		ts := start(t, nil, true, append(append([]string{}, base...), args...)...)
		lps := echoLogprobs(t, ts, faultPrompt)
		info := ts.info(t)
		_ = ts.stop()
		return lps, info
	}
	clean, cleanInfo := run()
	if num(t, cleanInfo, "faulted_calls") != 0 || num(t, cleanInfo, "custom_allreduce_calls") == 0 {
		t.Fatalf("clean engine: faulted_calls %v, custom calls %v", cleanInfo["faulted_calls"], cleanInfo["custom_allreduce_calls"])
	}
	if got, want := num(t, cleanInfo, "custom_allreduce_max_message_bytes"), float64(faultPromptTokens*128*4); got != want {
		t.Errorf("largest custom message %v bytes, want %v (80 tokens x hidden 128 x 4 bytes)", got, want)
	}
	msg := faultPromptTokens * 128 * 4 // 40960 bytes
	cases := []struct {
		name   string
		args   []string
		active bool
	}{
		{"scale active", []string{"--fault-allreduce-scale", "0.01"}, true},
		{"negative scale active", []string{"--fault-allreduce-scale", "-0.01"}, true},
		{"drop rank above 1KiB", []string{"--fault-allreduce-drop-rank-above", "1KiB"}, true},
		{"drop rank above message-1", []string{"--fault-allreduce-drop-rank-above", fmt.Sprint(msg - 1)}, true},
		{"drop rank above message", []string{"--fault-allreduce-drop-rank-above", fmt.Sprint(msg)}, false},
		{"drop rank above 1MiB", []string{"--fault-allreduce-drop-rank-above", "1MiB"}, false},
		{"stale above 0", []string{"--fault-allreduce-stale-above", "0"}, true},
		{"stale above 1MiB", []string{"--fault-allreduce-stale-above", "1MiB"}, false},
		{"min batch reached", []string{"--fault-allreduce-drop-rank-above", "0", "--fault-allreduce-min-batch", fmt.Sprint(faultPromptTokens)}, true},
		{"min batch above the step", []string{"--fault-allreduce-drop-rank-above", "0", "--fault-allreduce-min-batch", fmt.Sprint(faultPromptTokens + 1)}, false},
		{"min batch gates scale", []string{"--fault-allreduce-scale", "0.05", "--fault-allreduce-min-batch", "4096"}, false},
		{"min batch gates error", []string{"--fault-allreduce-error", "0.05", "--fault-allreduce-min-batch", "4096"}, false},
		{"combined", []string{"--fault-allreduce-scale", "0.01", "--fault-allreduce-stale-above", "1MiB", "--fault-allreduce-drop-rank-above", "1KiB"}, true},
	}
	for _, c := range cases {
		lps, info := run(c.args...)
		d := maxAbsDiff(lps, clean)
		faulted := num(t, info, "faulted_calls")
		t.Logf("%-28s max |Δ prompt logprob| vs clean custom %.3g, faulted_calls %v", c.name, d, faulted)
		if c.active {
			if d < 1e-3 || faulted == 0 {
				t.Errorf("%s (%v): logprobs moved by %.3g, faulted_calls %v; want a visible change", c.name, c.args, d, faulted)
			}
		} else if !identical(lps, clean) || faulted != 0 {
			t.Errorf("%s (%v): condition not reached, yet logprobs moved by %.3g (faulted_calls %v); want bit-identical", c.name, c.args, d, faulted)
		}
	}

	// The NCCL path is never faulted: a config with custom allreduce disabled and every fault
	// set gives the clean NCCL logprobs bit for bit.
	nccl, ncclInfo := run("--disable-custom-all-reduce")
	all := []string{"--disable-custom-all-reduce", "--fault-allreduce-error", "0.05", "--fault-allreduce-scale", "0.05",
		"--fault-allreduce-drop-rank-above", "0", "--fault-allreduce-stale-above", "0"}
	faultyNCCL, faultyInfo := run(all...)
	if !identical(nccl, faultyNCCL) || num(t, faultyInfo, "faulted_calls") != 0 || num(t, faultyInfo, "custom_allreduce_calls") != 0 {
		t.Errorf("nccl with fault flags: logprobs moved by %.3g, info %v; faults must apply to the custom path only", maxAbsDiff(nccl, faultyNCCL), faultyInfo)
	}
	if num(t, ncclInfo, "nccl_ring_calls") == 0 || num(t, ncclInfo, "nccl_allreduce_calls") != num(t, ncclInfo, "nccl_ring_calls") || num(t, ncclInfo, "nccl_tree_calls") != 0 {
		t.Errorf("nccl engine counters: %v", ncclInfo)
	}
	faults := faultyInfo["faults"].(map[string]any)
	for k, want := range map[string]any{"allreduce_error": 0.05, "allreduce_scale": 0.05, "allreduce_drop_rank_above": 0.0, "allreduce_stale_above": 0.0, "allreduce_min_batch": 0.0} {
		if faults[k] != want {
			t.Errorf("faults[%q] = %v, want %v", k, faults[k], want)
		}
	}
	if f := cleanInfo["faults"].(map[string]any); f["allreduce_drop_rank_above"] != nil || f["allreduce_stale_above"] != nil {
		t.Errorf("faults off, but the faults map says %v", f)
	}
}

// TestStaleFaultCountsAllButFirstCallOfEachSize: the stale fault hands out the previous call's
// result of the same size, so the first custom allreduce of each size is correct and every later
// one is faulted.
func TestStaleFaultCountsAllButFirstCallOfEachSize(t *testing.T) {
	ts := start(t, nil, true, "--tp-size", "2", "--fault-allreduce-stale-above", "0", "--skip-server-warmup")
	echoLogprobs(t, ts, faultPrompt)
	info := ts.info(t)
	calls, faulted := num(t, info, "custom_allreduce_calls"), num(t, info, "faulted_calls")
	// one prefill step of 80 tokens: 2 allreduces per layer x 4 layers, all of one size; the
	// first is correct
	if calls != 8 || faulted != 7 {
		t.Errorf("custom calls %v, faulted %v; want 8 and 7 (all but the first call of the size)", calls, faulted)
	}
}

// TestNCCLAlgo: NCCL_ALGO=Tree switches the NCCL path to the tree: bf16 logprobs at tp 4 differ
// from the ring's in the last bits, at tp 2 (one sum, a+b) they are bit-identical; the log line
// and /get_server_info say which algorithm is in effect.
func TestNCCLAlgo(t *testing.T) {
	p := faultPrompt
	lp := func(tp string, env map[string]string, args ...string) ([]float64, *testServer) {
		ts := start(t, env, true, append([]string{"--tp-size", tp, "--dtype", "bfloat16", "--disable-custom-all-reduce"}, args...)...)
		return echoLogprobs(t, ts, p), ts
	}
	tree := map[string]string{"NCCL_ALGO": "Tree"}
	ring4, r4 := lp("4", nil)
	tree4, t4 := lp("4", tree)
	ring2, _ := lp("2", map[string]string{"NCCL_ALGO": "ring"})
	tree2, _ := lp("2", map[string]string{"NCCL_ALGO": "allreduce:tree"})
	d4 := maxAbsDiff(ring4, tree4)
	t.Logf("bf16 nccl ring vs tree: tp 4 max |Δ prompt logprob| %.3g, tp 2 %.3g", d4, maxAbsDiff(ring2, tree2))
	if identical(ring4, tree4) || d4 > 0.5 {
		t.Errorf("bf16 tp 4: ring vs tree max |Δ| %.3g; want a rounding-level difference (> 0, well below 0.5)", d4)
	}
	if !identical(ring2, tree2) {
		t.Errorf("bf16 tp 2: ring and tree differ by %.3g; with two ranks they must be bit-identical", maxAbsDiff(ring2, tree2))
	}
	if strings.Contains(t4.log.String(), "Allreduce backend:") || strings.Contains(r4.log.String(), "Allreduce backend:") {
		t.Errorf("the log carries the reference engine's own 'Allreduce backend:' line, which no release prints")
	}
	ti, ri := t4.info(t), r4.info(t)
	if ti["nccl_algorithm"] != "tree" || ri["nccl_algorithm"] != "ring" || num(t, ti, "nccl_tree_calls") == 0 || num(t, ti, "nccl_ring_calls") != 0 {
		t.Errorf("server info: tree engine %v / %v / %v, ring engine %v", ti["nccl_algorithm"], ti["nccl_tree_calls"], ti["nccl_ring_calls"], ri["nccl_algorithm"])
	}
}

// TestNCCLAlgoOnCustomPath: with custom allreduce on, the NCCL algorithm carries the tensors too
// large for the custom buffer (here: a 600-token prefill, above its 512 tokens), and says so.
func TestNCCLAlgoOnCustomPath(t *testing.T) {
	ts := start(t, map[string]string{"NCCL_ALGO": "TREE"}, true, "--tp-size", "4")
	if info := ts.info(t); info["allreduce_backend"] != "custom" || info["nccl_algorithm"] != "tree" || num(t, info, "custom_allreduce_max_bytes") != 256<<10 {
		t.Errorf("server info: backend %v, nccl algorithm %v, custom buffer %v; want custom, tree, 256 KiB", info["allreduce_backend"], info["nccl_algorithm"], info["custom_allreduce_max_bytes"])
	}
	before := num(t, ts.info(t), "nccl_tree_calls")
	ts.complete(t, map[string]any{"prompt": strings.Repeat("x", 599), "max_tokens": 1, "temperature": 0})
	info := ts.info(t)
	if before != 0 || num(t, info, "nccl_tree_calls") != 8 || num(t, info, "nccl_ring_calls") != 0 {
		t.Errorf("tree calls before %v, after a 600-token prefill %v (ring %v); want 0 and 8", before, info["nccl_tree_calls"], info["nccl_ring_calls"])
	}
	if got := num(t, info, "custom_allreduce_max_message_bytes"); got > float64(ts.e.CustomMaxBytes) || got == 0 {
		t.Errorf("largest custom message %v bytes, custom buffer %d", got, ts.e.CustomMaxBytes)
	}
}

// TestNCCLAlgoRejected: a value the model cannot honour stops the engine before it loads,
// naming NCCL_ALGO, the value and what is accepted, with the usage exit code 2.
func TestNCCLAlgoRejected(t *testing.T) {
	for _, v := range []string{"NVLS", "ring,collnetdirect", "bogus", "allreduce:^ring,tree"} {
		opts, err := ParseFlags([]string{"--model-path", modelPath(t), "--tp-size", "2"}, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		_, err = Build(opts, NewLogger(io.Discard, 2), func(k string) string {
			if k == "NCCL_ALGO" {
				return v
			}
			return ""
		})
		if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("NCCL_ALGO=%q", v)) || !strings.Contains(err.Error(), "Ring and Tree") {
			t.Errorf("NCCL_ALGO=%s: Build error %v", v, err)
		}
	}
	t.Setenv("NCCL_ALGO", "NVLSTree")
	var stderr bytes.Buffer
	code := Main(context.Background(), []string{"--model-path", modelPath(t), "--tp-size", "2", "--port", "0"}, io.Discard, &stderr)
	if code != 2 || !strings.Contains(stderr.String(), `refengine: NCCL_ALGO="NVLSTree": algorithm NVLSTree is not modelled`) {
		t.Errorf("Main exit %d, stderr %q; want 2 and the NCCL_ALGO error", code, stderr.String())
	}
}

// TestFaultFlagErrors: bad fault values are rejected with the flag's name.
func TestFaultFlagErrors(t *testing.T) {
	for want, args := range map[string][]string{
		"--fault-allreduce-scale -1":                {"--fault-allreduce-scale", "-1"},
		"--fault-allreduce-scale -2":                {"--fault-allreduce-scale", "-2"},
		"--fault-allreduce-drop-rank-above: \"-1\"": {"--fault-allreduce-drop-rank-above", "-1"},
		"--fault-allreduce-stale-above: \"lots\"":   {"--fault-allreduce-stale-above", "lots"},
		"--fault-allreduce-stale-above: \"-4KiB\"":  {"--fault-allreduce-stale-above", "-4KiB"},
		"--fault-allreduce-min-batch -1":            {"--fault-allreduce-min-batch", "-1"},
		"--fault-allreduce-error -0.1":              {"--fault-allreduce-error", "-0.1"},
		"weight-seed":                               {"--weight-seed", "-3"},
	} {
		_, err := ParseFlags(args, io.Discard)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%v: got %v, want an error mentioning %q", args, err, want)
		}
	}
	o, err := ParseFlags([]string{"--fault-allreduce-drop-rank-above", "64KiB", "--fault-allreduce-stale-above", "0", "--fault-allreduce-scale", "-0.5", "--fault-allreduce-min-batch", "32"}, io.Discard)
	if err != nil || !o.FaultDropRank || o.FaultDropRankAbove != 64<<10 || !o.FaultStale || o.FaultStaleAbove != 0 || o.FaultAllReduceScale != -0.5 || o.FaultMinBatch != 32 {
		t.Errorf("good fault flags: %+v, %v", o, err)
	}
	o, err = ParseFlags(nil, io.Discard)
	if err != nil || o.FaultDropRank || o.FaultStale || o.FaultAllReduceScale != 0 || o.FaultMinBatch != 0 || o.WeightSeed != 0 {
		t.Errorf("defaults: every fault must be off: %+v, %v", o, err)
	}
}

// TestWeightSeed: --weight-seed regenerates the weights from another seed, deterministically;
// 0 or the model file's own seed give the file's weights.
func TestWeightSeed(t *testing.T) {
	lp := func(args ...string) ([]float64, *testServer) {
		ts := start(t, nil, true, append([]string{"--tp-size", "2"}, args...)...)
		return echoLogprobs(t, ts, faultPrompt), ts
	}
	def, d := lp()
	fileSeed := fmt.Sprint(uint64(num(t, d.info(t), "weight_seed")))
	same, _ := lp("--weight-seed", fileSeed)
	s7a, a := lp("--weight-seed", "7")
	s7b, _ := lp("--weight-seed", "7")
	s8, _ := lp("--weight-seed", "8")
	if fileSeed != "20260401" || !identical(def, same) {
		t.Errorf("file seed %s: --weight-seed with the file's seed changed logprobs by %.3g", fileSeed, maxAbsDiff(def, same))
	}
	if !identical(s7a, s7b) {
		t.Errorf("--weight-seed 7 twice: logprobs differ by %.3g", maxAbsDiff(s7a, s7b))
	}
	if maxAbsDiff(def, s7a) < 1e-2 || maxAbsDiff(s7a, s8) < 1e-2 {
		t.Errorf("other seeds must give other weights: default vs 7 %.3g, 7 vs 8 %.3g", maxAbsDiff(def, s7a), maxAbsDiff(s7a, s8))
	}
	if ai := a.info(t); num(t, ai, "weight_seed") != 7 || num(t, ai, "model_file_seed") != 20260401 || strings.Contains(a.log.String(), "Weights are generated") {
		t.Errorf("seed 7 not reported in server info (or a log line no release prints): %v", ai["weight_seed"])
	}
	// the draft model derives from the seeded target
	sp := start(t, nil, true, "--tp-size", "2", "--weight-seed", "7", "--speculative-algorithm", "EAGLE3")
	if got := echoLogprobs(t, sp, faultPrompt); !identical(got, s7a) && maxAbsDiff(got, s7a) > 1e-5 {
		t.Errorf("EAGLE3 with --weight-seed 7: target logprobs differ from the plain engine's by %.3g", maxAbsDiff(got, s7a))
	}
}

// spreadPrompts are scored teacher-forced (echo logprobs) by TestAllReduceOrderSpread.
var spreadPrompts = []string{
	faultPrompt,
	"The quick brown fox jumps over the lazy dog, and then it runs back into the forest to sleep.",
	"func main() {\n\tfmt.Println(\"tensor parallel allreduce: ring, tree and one-shot\")\n}\n",
	"Dear Sir or Madam, I am writing to ask about the numerical equivalence of two summation orders.",
}

// TestAllReduceOrderSpread measures how far correct allreduce algorithms that only sum in
// different orders move teacher-forced prompt logprobs: NCCL ring vs NCCL tree and NCCL ring vs
// the custom one-shot, at tp 2, 4 and 8 in bfloat16 and float32. At tp 2 there is one sum
// (a+b == b+a), so all three must agree bit for bit; at tp 4 and 8 they differ at rounding level.
func TestAllReduceOrderSpread(t *testing.T) {
	if testing.Short() {
		t.Skip("18 engines: skipped with -short")
	}
	type cfg struct {
		name string
		env  map[string]string
		args []string
	}
	cfgs := []cfg{
		{"ring", nil, []string{"--disable-custom-all-reduce"}},
		{"tree", map[string]string{"NCCL_ALGO": "Tree"}, []string{"--disable-custom-all-reduce"}},
		{"one_shot", nil, nil},
	}
	for _, dtype := range []string{"bfloat16", "float32"} {
		for _, tpn := range []string{"2", "4", "8"} {
			lps := map[string][]float64{}
			for _, c := range cfgs {
				ts := start(t, c.env, true, append([]string{"--tp-size", tpn, "--dtype", dtype}, c.args...)...)
				for _, p := range spreadPrompts {
					lps[c.name] = append(lps[c.name], echoLogprobs(t, ts, p)...)
				}
				_ = ts.stop()
			}
			for _, other := range []string{"tree", "one_shot"} {
				a, b := lps["ring"], lps[other]
				var sum, worst float64
				differ := 0
				for i := range a {
					d := math.Abs(a[i] - b[i])
					sum += d
					worst = max(worst, d)
					if d != 0 {
						differ++
					}
				}
				mean := sum / float64(len(a))
				t.Logf("%-8s tp %s ring vs %-8s over %d prompt tokens: mean |Δ logprob| %.3g, max %.3g, %d tokens differ", dtype, tpn, other, len(a), mean, worst, differ)
				switch {
				case tpn == "2" && worst != 0:
					t.Errorf("%s tp 2: ring vs %s differ (max %.3g); with two ranks they must be bit-identical", dtype, other, worst)
				case tpn != "2" && (differ == 0 || worst > 0.5 || dtype == "float32" && worst > 1e-4):
					t.Errorf("%s tp %s: ring vs %s max |Δ| %.3g over %d differing tokens; want a rounding-level difference", dtype, tpn, other, worst, differ)
				}
			}
		}
	}
}

// TestKernelFaultsAndOracle: the bf16-accumulation fault moves bf16 logprobs and is counted; the
// per-rank order changes nothing in bf16 (float32 sums of bf16 values are exact) but makes the
// float32 ranks disagree; the oracle kernels equal the correct custom kernel in bf16 in either
// order, and the flags show in the faults map.
func TestKernelFaultsAndOracle(t *testing.T) {
	run := func(args ...string) ([]float64, map[string]any) {
		t.Helper()
		ts := start(t, nil, true, append([]string{"--tp-size", "4"}, args...)...)
		lps := echoLogprobs(t, ts, faultPrompt)
		info := ts.info(t)
		_ = ts.stop()
		return lps, info
	}
	bf := []string{"--dtype", "bfloat16"}
	clean, _ := run(bf...)
	for _, c := range []struct {
		name   string
		args   []string
		moved  bool
		key    string
		keyVal any
	}{
		{"accumulate bf16", []string{"--fault-allreduce-accumulate", "bfloat16"}, true, "allreduce_accumulate", "bfloat16"},
		{"rank order, bf16", []string{"--fault-allreduce-rank-order"}, false, "allreduce_rank_order", true},
		{"oracle forward", []string{"--allreduce-oracle", "forward"}, false, "", nil},
		{"oracle reverse", []string{"--allreduce-oracle", "reverse"}, false, "", nil},
	} {
		lps, info := run(append(append([]string{}, bf...), c.args...)...)
		d, faulted := maxAbsDiff(lps, clean), num(t, info, "faulted_calls")
		t.Logf("%-18s max |Δ prompt logprob| vs clean custom %.3g, faulted_calls %v", c.name, d, faulted)
		if c.moved != (d > 1e-3 && faulted > 0) || (!c.moved && (!identical(lps, clean) || faulted != 0)) {
			t.Errorf("%s: moved %.3g, faulted_calls %v; want moved=%v", c.name, d, faulted, c.moved)
		}
		if c.key != "" {
			if f := info["faults"].(map[string]any); f[c.key] != c.keyVal {
				t.Errorf("%s: faults[%q] = %v", c.name, c.key, f[c.key])
			}
		} else if info["allreduce_oracle"] != c.args[1] {
			t.Errorf("%s: allreduce_oracle %v", c.name, info["allreduce_oracle"])
		}
	}
	f32, _ := run()
	lps, info := run("--fault-allreduce-rank-order")
	if d := maxAbsDiff(lps, f32); d == 0 || d > 1e-3 || num(t, info, "faulted_calls") == 0 {
		t.Errorf("rank order, float32: moved by %.3g, faulted_calls %v; want a last-bits change, counted", d, info["faulted_calls"])
	}
}
