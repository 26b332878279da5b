package suites_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/reckon-ci/reckon/gate"
)

// TestRealEngineFieldCases runs the cases where a harness verified only against itself turns
// green or red for the wrong reason on real engines (fixtures/specs/real-engines): each must end
// with its one-line reason, and nothing else of the run may be red.
func TestRealEngineFieldCases(t *testing.T) {
	t.Parallel() // a gate run of its own: engines on free ports, reports in t.TempDir
	if testing.Short() {
		t.Skip("integration")
	}
	for _, c := range []struct {
		spec, check string
		status      gate.Status
		want        []string
	}{
		// No twin written: reckon derives one (nccl with NCCL_ALGO=Tree), so 1% off fails.
		{"numerics-fault-no-twin.yaml", "equivalence custom-ar vs nccl", gate.StatusFailed,
			[]string{"not equivalent (calibrated by twin nccl-twin)", "max_ratio 1.7"}},
		// tp 4 over PCIe: the engine turned custom allreduce off; NCCL compared with NCCL.
		{"pcie-tp4-both-nccl.yaml", "equivalence custom-ar vs nccl", gate.StatusError,
			[]string{"custom-ar and nccl both ran nccl allreduce: nothing was compared", "not supported on more than two PCIe-only GPUs"}},
		// Current SGLang at tp 2 over PCIe: custom allreduce v2 off without a word.
		{"pcie-tp2-silent-nccl.yaml", "expect custom-ar allreduce == custom", gate.StatusFailed,
			[]string{`allreduce is "nccl", expected "custom" (profiler: 0 custom / `, "NCCL allreduce kernels on 2 ranks"}},
		// vLLM 0.12 does not speculate requests that ask for logprobs.
		{"spec-logprobs-vllm-0.12.yaml", "speculative decoding is lossless", gate.StatusError,
			[]string{"eagle3: speculative decoding did not demonstrably run", "did not rise during the probe", "is_spec_decode_unsupported"}},
	} {
		t.Run(c.spec, func(t *testing.T) {
			r := gateSpec(t, filepath.Join("real-engines", c.spec))
			if r.exit == 0 {
				t.Fatalf("exit 0, want red\n%s", r.dump())
			}
			got := r.check(t, c.check)
			if got.Status != c.status {
				t.Fatalf("%s: %s (%s), want %s\n%s", c.check, got.Status, got.Message, c.status, r.dump())
			}
			for _, w := range c.want {
				if !strings.Contains(got.Message, w) {
					t.Errorf("message lacks %q: %s", w, got.Message)
				}
			}
			for _, ch := range r.results.Checks {
				if ch.Name != c.check && (ch.Status == gate.StatusFailed || ch.Status == gate.StatusError) {
					t.Errorf("%s is red too: %s", ch.Name, ch.Message)
				}
			}
			t.Logf("%s: %s", c.spec, got.Message)
		})
	}
}

// TestPersonasGreenFromHTTPAndKernels: every release the reference engine imitates, launched as
// its users do (SGLang at --log-level warning: no ready line, no allreduce line), is ready by
// HTTP and shows the allreduce it ran from its kernels; vLLM 0.10 gets the graph flag it knows.
func TestPersonasGreenFromHTTPAndKernels(t *testing.T) {
	t.Parallel() // a gate run of its own: engines on free ports, reports in t.TempDir
	if testing.Short() {
		t.Skip("integration")
	}
	for _, spec := range []string{"personas-sglang.yaml", "personas-vllm.yaml"} {
		t.Run(spec, func(t *testing.T) {
			r := gateSpec(t, filepath.Join("real-engines", spec))
			if r.exit != 0 {
				t.Fatalf("exit %d, want 0\n%s", r.exit, r.dump())
			}
			for _, c := range r.results.Configs {
				if c.AllReduce == nil || c.AllReduce.From != "profiler" {
					t.Errorf("%s: allreduce evidence %+v, want it from the profiled kernels", c.Name, c.AllReduce)
				}
				log, err := os.ReadFile(c.LogPath)
				if err != nil {
					t.Fatal(err)
				}
				if strings.HasPrefix(c.Name, "sglang") && strings.Contains(string(log), "fired up and ready") {
					t.Errorf("%s: at --log-level warning the log holds the INFO ready line", c.Name)
				}
				args := strings.Join(c.Args, " ")
				switch c.Name {
				case "vllm-0.10":
					if !strings.Contains(args, "--cuda-graph-sizes 16") || strings.Contains(args, "--max-cudagraph-capture-size") {
						t.Errorf("vLLM 0.10 launched with %s", args)
					}
				case "vllm-0.22":
					if !strings.Contains(string(log), "Starting vLLM server on http://") {
						t.Errorf("vLLM 0.22's start-up line missing")
					}
				}
			}
		})
	}
}
