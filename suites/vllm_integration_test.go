package suites_test

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/reckon-ci/reckon/gate"
	"github.com/reckon-ci/reckon/wire"
)

// The vLLM path end to end: the reference engine in its vLLM dialect (`bin/refengine vllm serve`),
// launched, driven and judged through the vllm adapter, with the specs of the SGLang path.

// TestDefaultVLLMSpecPasses: default-vllm.yaml (default.yaml's configs and checks through the vllm
// adapter) is green, each config launched once, every config's backend read from vLLM's lines.
func TestDefaultVLLMSpecPasses(t *testing.T) {
	t.Parallel() // a gate run of its own: engines on free ports, reports in t.TempDir
	if testing.Short() {
		t.Skip("integration")
	}
	r := gateSpec(t, "default-vllm.yaml")
	if r.exit != 0 {
		t.Fatalf("default-vllm spec: exit %d, want 0\n%s", r.exit, r.dump())
	}
	if r.results.Engine != "vllm" {
		t.Errorf("results engine %q, want vllm", r.results.Engine)
	}
	for _, c := range r.results.Configs {
		if c.Launches != 1 {
			t.Errorf("config %s launched %d times, want exactly 1", c.Name, c.Launches)
		}
		// vLLM 0.22 serves /start_profile only with --profiler-config (the environment variable
		// was removed in 0.16): every effective allreduce is decided by the kernels that ran.
		if ev := c.AllReduce; ev != nil && (ev.From != gate.SourceProfiler || ev.Effective == gate.BackendUnknown) {
			t.Errorf("config %s: allreduce %s, want it decided by the profiler", c.Name, ev.Summary())
		}
	}
	if n := countProfiled(r.results.Configs); n < 4 {
		t.Errorf("%d configs have profiler evidence, want the 4 with an allreduce expect at least", n)
	}
	if r.junit.Failures != 0 || r.junit.Errors != 0 || r.junit.Tests == 0 {
		t.Errorf("junit: tests=%d failures=%d errors=%d", r.junit.Tests, r.junit.Failures, r.junit.Errors)
	}
	if !strings.Contains(r.stdout, " passed, 0 failed") {
		t.Errorf("closing line missing: %q", tail(r.stdout, 3))
	}
	for _, name := range []string{"expect nccl allreduce == nccl", "expect nccl-tree allreduce == nccl", "expect custom-ar allreduce == custom", "expect eagle3 allreduce == custom"} {
		if c := r.check(t, name); c.Status != gate.StatusPassed {
			t.Errorf("%s: %s %s", name, c.Status, c.Message)
		}
	}
	if c := r.check(t, "speculative decoding accepts most draft tokens"); c.Status != gate.StatusPassed {
		t.Errorf("accept length from vLLM's SpecDecoding lines: %s %s", c.Status, c.Message)
	}
	if r.results.EngineVersion != "0.22.1" { // the default persona: vLLM 0.22 (refengine --engine-version)
		t.Errorf("engine version %q: want the vLLM dialect's /version", r.results.EngineVersion)
	}
}

// TestVLLMFieldFailures: the field failures that make sense for vLLM, through the vllm adapter,
// each red with its one-line reason and nothing else red.
func TestVLLMFieldFailures(t *testing.T) {
	t.Parallel() // a gate run of its own: engines on free ports, reports in t.TempDir
	for _, c := range []struct {
		spec  string
		check string
		want  []string
	}{
		// Custom allreduce forced past vLLM's rule onto 8 PCIe GPUs: KV and throughput.
		{"pcie-forced-custom-vllm.yaml", "custom allreduce is not slower than NCCL", []string{"output_throughput -", "regression;", "KV cache -"}},
		// 1% relative error on every custom sum: about 3x the twin's distance.
		{"numerics-fault-vllm.yaml", "equivalence custom-ar vs nccl", []string{"not equivalent (calibrated by twin nccl-tree): KL distance", "max_ratio 1.7", "worst prompt"}},
	} {
		t.Run(c.spec, func(t *testing.T) {
			r := redGate(t, c.spec)
			ch := r.check(t, c.check)
			if ch.Status != gate.StatusFailed {
				t.Fatalf("%s: %s %s", c.check, ch.Status, ch.Message)
			}
			for _, w := range c.want {
				if !strings.Contains(ch.Message, w) {
					t.Errorf("message lacks %q: %s", w, ch.Message)
				}
			}
			want := 1
			if strings.HasPrefix(c.spec, "pcie") {
				want = 2 // and the KV relative check
				kv := r.check(t, "relative custom-ar kv_cache_tokens >= 0.9 x nccl")
				if kv.Status != gate.StatusFailed {
					t.Errorf("KV check: %+v", kv)
				}
			}
			red := 0
			for _, x := range r.results.Checks {
				if x.Status == gate.StatusFailed || x.Status == gate.StatusError {
					red++
				}
			}
			if red != want {
				t.Errorf("%d checks red, want %d\n%s", red, want, r.dump())
			}
			t.Logf("%s: %s", c.spec, ch.Message)
		})
	}
}

// TestCrossEngineSGLangVsVLLM runs the same model, tp size, dtype and allreduce (custom-ar of
// default.yaml and default-vllm.yaml) under the SGLang dialect and the vLLM dialect and compares
// them as the harness compares two configs: numerics by equivalence, where identical numerics are
// expected (one engine core; the probes reach it through SGLang's /generate and through vLLM's
// echo completions with token-id prompts), and throughput by `reckon compare`, reported and not
// gated (the dialects' schedulers are configured with each engine's own defaults).
func TestCrossEngineSGLangVsVLLM(t *testing.T) {
	t.Parallel() // a gate run of its own: engines on free ports, reports in t.TempDir
	if testing.Short() {
		t.Skip("integration")
	}
	filter := []string{"--label-filter", "custom-ar", "--allow-partial"}
	sg := gateSpec(t, "default.yaml", filter...)
	vl := gateSpec(t, "default-vllm.yaml", filter...)
	for _, r := range []*gateRun{sg, vl} {
		if r.exit != 0 {
			t.Fatalf("custom-ar only: exit %d, want 0\n%s", r.exit, r.dump())
		}
	}
	base := readProbe(t, filepath.Join(sg.out, "numerics", "custom-ar.json"))
	head := readProbe(t, filepath.Join(vl.out, "numerics", "custom-ar.json"))
	base.Config, head.Config = "sglang custom-ar", "vllm custom-ar"
	zero := 0.0
	v := gate.Equivalence(gate.EquivalenceProbes{Base: base, Head: head}, gate.EquivalenceCheck{TopK: 5, MaxDistance: &zero, DType: base.DType, TP: base.TPSize})
	if v.Outcome != gate.Pass {
		t.Fatalf("cross-engine equivalence: %s: %s", v.Outcome, v.Message)
	}
	t.Logf("cross-engine equivalence: %s", v.Message)
	// Identical, not merely within a bound: every teacher-forced logprob, both passes.
	n := 0
	for i, bp := range base.Prompts {
		hp := head.Prompts[i]
		for _, pass := range [][2][]wire.TokenLogprob{{bp.Forced, hp.Forced}, {bp.ForcedBatched, hp.ForcedBatched}} {
			if len(pass[0]) != len(pass[1]) {
				t.Fatalf("prompt %s: %d vs %d forced positions", bp.ID, len(pass[0]), len(pass[1]))
			}
			for j := range pass[0] {
				b, h := pass[0][j], pass[1][j]
				if b.Token != h.Token || math.Float64bits(b.Logprob) != math.Float64bits(h.Logprob) {
					t.Fatalf("prompt %s position %d: sglang %d %v, vllm %d %v", bp.ID, j+1, b.Token, b.Logprob, h.Token, h.Logprob)
				}
				n++
			}
		}
	}
	if n == 0 {
		t.Fatal("no teacher-forced positions compared")
	}
	// Throughput: reported, not gated.
	sgTrials, _ := filepath.Glob(filepath.Join(sg.out, "trials", "custom-ar+decode+*.json"))
	vlTrials, _ := filepath.Glob(filepath.Join(vl.out, "trials", "custom-ar+decode+*.json"))
	if len(sgTrials) == 0 || len(vlTrials) == 0 {
		t.Fatalf("trial files: sglang %d, vllm %d", len(sgTrials), len(vlTrials))
	}
	args := []string{"compare", "--json", "--base=" + strings.Join(sgTrials, ","), "--head=" + strings.Join(vlTrials, ",")}
	cmd := exec.Command(filepath.Join(repoRoot, "bin", "reckon"), args...)
	cmd.Dir = repoRoot
	out, err := cmd.Output()
	if ee, ok := err.(*exec.ExitError); err != nil && (!ok || ee.ExitCode() > 1) {
		t.Fatalf("reckon compare: %v\n%s", err, out)
	}
	t.Logf("%d identical teacher-forced positions; throughput vllm vs sglang dialect (reported, not gated): %s", n, compareSummary(out))
}

func readProbe(t *testing.T, path string) *wire.NumericsProbe {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("numerics probe: %v", err)
	}
	var p wire.NumericsProbe
	if err := json.Unmarshal(b, &p); err != nil {
		t.Fatalf("numerics probe %s: %v", path, err)
	}
	return &p
}

// compareSummary is output_throughput's comparison out of `reckon compare --json`.
func compareSummary(out []byte) string {
	var v struct {
		Metrics []struct {
			Metric     string  `json:"metric"`
			BaseMedian float64 `json:"base_median"`
			HeadMedian float64 `json:"head_median"`
			Ratio      float64 `json:"ratio"`
			CILow      float64 `json:"ci_low"`
			CIHigh     float64 `json:"ci_high"`
			Verdict    string  `json:"verdict"`
		} `json:"metrics"`
	}
	if json.Unmarshal(out, &v) == nil {
		for _, m := range v.Metrics {
			if m.Metric == "output_throughput" {
				return fmt.Sprintf("output_throughput sglang %.1f -> vllm %.1f tok/s, ratio %.2f (CI %.2f-%.2f), %s", m.BaseMedian, m.HeadMedian, m.Ratio, m.CILow, m.CIHigh, m.Verdict)
			}
		}
	}
	return strings.TrimSpace(string(out))
}

// countProfiled is the number of configs whose allreduce evidence came from the profiler.
func countProfiled(cs []gate.Config) int {
	n := 0
	for _, c := range cs {
		if c.AllReduce != nil && c.AllReduce.From == gate.SourceProfiler {
			n++
		}
	}
	return n
}
