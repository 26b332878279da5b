package suites_test

import (
	"strings"
	"testing"

	"github.com/reckon-ci/reckon/gate"
)

// TestNumericsFieldFailures runs each allreduce fault of the reference engine through the gate:
// each must turn the equivalence check red with its one-line reason, while the twin and the
// reference stay healthy.
func TestNumericsFieldFailures(t *testing.T) {
	t.Parallel() // a gate run of its own: engines on free ports, reports in t.TempDir
	for _, c := range []struct {
		spec string
		want []string
	}{
		// 1% relative error on every sum (bf16, tp 4): about 3x the twin's distance.
		{"numerics-fault.yaml", []string{"not equivalent (calibrated by twin nccl-tree): KL distance", "x nccl-tree's (one at a time; 95% CI", "max_ratio 1.7", "worst prompt"}},
		// The previous call's result above 8 KiB: every prefill step.
		{"numerics-stale.yaml", []string{"x nccl-tree's (one at a time", "worst prompt"}},
		// Wrong only when a step holds 128 tokens or more: only the under-load pass reaches it.
		{"numerics-under-load.yaml", []string{"x nccl-tree's (under load", "worst prompt"}},
		// float32 at tp 2: correct algorithms are bit-identical, so the candidate must be too.
		{"numerics-fp32-bitwise.yaml", []string{"near-bitwise expected (nccl-tree within 1e-06 of nccl everywhere", "max |Δ logprob|", "positions differ"}},
	} {
		t.Run(c.spec, func(t *testing.T) {
			r := redGate(t, c.spec)
			eq := r.check(t, "equivalence custom-ar vs nccl")
			if eq.Status != gate.StatusFailed {
				t.Fatalf("equivalence: %s %s", eq.Status, eq.Message)
			}
			for _, w := range c.want {
				if !strings.Contains(eq.Message, w) {
					t.Errorf("message lacks %q: %s", w, eq.Message)
				}
			}
			if strings.Contains(c.spec, "under-load") {
				if eq.Metrics["ratio"] > 1.7 || eq.Metrics["ratio_batched"] <= 1.7 {
					t.Errorf("under-load fault: ratio alone %v, under load %v", eq.Metrics["ratio"], eq.Metrics["ratio_batched"])
				}
			}
			failed := 0
			for _, ch := range r.results.Checks {
				if ch.Status == gate.StatusFailed || ch.Status == gate.StatusError {
					failed++
				}
			}
			if failed != 1 {
				t.Errorf("%d checks red, want only the equivalence check\n%s", failed, r.dump())
			}
			t.Logf("%s: %s", c.spec, eq.Message)
		})
	}
}

// TestNumericsCorrectAlgorithmsStayGreen: the custom one-shot against the ring with the tree as
// twin, at tp 2, 4 and 8 in bfloat16 and float32, passes (near-bitwise at tp 2, by ratio above).
func TestNumericsCorrectAlgorithmsStayGreen(t *testing.T) {
	t.Parallel() // a gate run of its own: engines on free ports, reports in t.TempDir
	if testing.Short() {
		t.Skip("integration")
	}
	r := gateSpec(t, "numerics-correct.yaml")
	if r.exit != 0 {
		t.Fatalf("exit %d, want 0\n%s", r.exit, r.dump())
	}
	n := 0
	for _, c := range r.results.Checks {
		if c.Kind != "equivalence" {
			continue
		}
		n++
		want := "KL distance"
		if strings.Contains(c.Name, "tp2") {
			want = "near-bitwise"
		}
		if c.Status != gate.StatusPassed || !strings.Contains(c.Message, want) {
			t.Errorf("%s: %s %s", c.Name, c.Status, c.Message)
		}
	}
	if n != 6 {
		t.Errorf("%d equivalence checks, want 6", n)
	}
}

// TestNumericsOracleCatchesBF16Accumulation: a custom kernel that accumulates in bf16 rounds as
// often as the NCCL ring, so the twin check (against nccl, twin nccl-tree) passes it; the oracle
// check (the custom path's reference kernel, twin the same kernel summing in reverse, which
// agree bit for bit) fails it by the near-bitwise rule and passes the correct kernel.
func TestNumericsOracleCatchesBF16Accumulation(t *testing.T) {
	t.Parallel() // a gate run of its own: engines on free ports, reports in t.TempDir
	r := redGate(t, "numerics-bf16-accumulate.yaml")
	for _, c := range []struct {
		name   string
		status gate.Status
		want   string
	}{
		{"equivalence custom-ar vs nccl", gate.StatusPassed, "calibrated by twin nccl-tree"},
		{"equivalence custom-ar vs oracle", gate.StatusFailed, "near-bitwise expected (oracle-reversed within 1e-06 of oracle everywhere"},
		{"equivalence custom-ok vs oracle", gate.StatusPassed, "near-bitwise (one at a time; max |Δ| 0 <= 1e-06)"},
	} {
		ch := r.check(t, c.name)
		if ch.Status != c.status || !strings.Contains(ch.Message, c.want) {
			t.Errorf("%s: %s %s; want %s with %q", c.name, ch.Status, ch.Message, c.status, c.want)
		}
	}
	failed := 0
	for _, ch := range r.results.Checks {
		if ch.Status == gate.StatusFailed || ch.Status == gate.StatusError {
			failed++
		}
	}
	if failed != 1 {
		t.Errorf("%d checks red, want only the oracle check of custom-ar\n%s", failed, r.dump())
	}
}
