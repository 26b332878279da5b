package server

import (
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/reckon-ci/reckon/refengine/memplan"
)

func buildArgs(t *testing.T, env map[string]string, args ...string) (*Engine, error) {
	t.Helper()
	opts, err := ParseFlags(append([]string{"--model-path", filepath.Join("..", "..", "fixtures", "models", "tiny.json")}, args...), io.Discard)
	if err != nil {
		return nil, err
	}
	return Build(opts, NewLogger(io.Discard, opts.TPSize), func(k string) string { return env[k] })
}

func TestClockFlags(t *testing.T) {
	for _, bad := range [][]string{
		{"--clock", "gpu"},
		{"--modelled-gpu", "a100"},
		{"--modelled-model", "gpt-5"},
		{"--modelled-memory"},
		{"--clock-step-cv", "0.05"},
		{"--clock", "modelled", "--clock-launch-cv", "0.05"},
		{"--clock", "modelled", "--clock-step-cv", "-1"},
		{"--clock", "modelled", "--clock-catch-up", "-1s"},
	} {
		if _, err := ParseFlags(bad, io.Discard); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	o, err := ParseFlags([]string{"--clock", "modelled", "--clock-launch-cv", "0.05", "--clock-launch", "3"}, io.Discard)
	if err != nil || o.Clock != "modelled" || o.ClockLaunch != 3 || !o.DeviceMemoryDefault || o.DeviceMemory != 192<<20 {
		t.Errorf("%+v %v", o, err)
	}
	if o, _ := ParseFlags(nil, io.Discard); o.Clock != "wall" {
		t.Errorf("default clock %q, want wall", o.Clock)
	}
}

func TestLaunchCounter(t *testing.T) {
	f := filepath.Join(t.TempDir(), "launches")
	o := &Options{ClockLaunch: -1, ClockLaunchCounter: f}
	for want := uint64(0); want < 3; want++ {
		if got, err := launchIndex(o); err != nil || got != want {
			t.Fatalf("launch %d: got %d, %v", want, got, err)
		}
	}
	if data, _ := os.ReadFile(f); strings.TrimSpace(string(data)) != "3" {
		t.Errorf("counter file holds %q", data)
	}
	if got, _ := launchIndex(&Options{ClockLaunch: 7, ClockLaunchCounter: f}); got != 7 {
		t.Errorf("--clock-launch 7 gave %d", got)
	}
	if err := os.WriteFile(f, []byte("x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := launchIndex(o); err == nil || !strings.Contains(err.Error(), "not a launch index") {
		t.Errorf("a bad counter file: %v", err)
	}
}

// TestModelledMemoryPlan: with --modelled-memory the memory plan is the modelled model's on the
// modelled GPU: the seed spec's Kimi-K2.5-sized model on 8 RTX PRO 6000 (fixtures/specs/seed-8xpcie.yaml).
func TestModelledMemoryPlan(t *testing.T) {
	args := []string{"--tp-size", "8", "--topology", "pcie", "--clock", "modelled", "--modelled-gpu", "rtx-pro-6000",
		"--modelled-model", "kimi-k2.5-int4", "--modelled-memory", "--mem-fraction-static", "0.84", "--skip-server-warmup"}
	nccl, err := buildArgs(t, nil, append(args, "--disable-custom-all-reduce")...)
	if err != nil {
		t.Fatal(err)
	}
	forced, err := buildArgs(t, map[string]string{ForceCustomAREnv: "1"}, append(args, "--speculative-algorithm", "EAGLE3")...)
	if err != nil {
		t.Fatal(err)
	}
	gib := func(b int64) float64 { return memplan.GiB(b) }
	if w := gib(nccl.Plans[0].Weights); math.Abs(w-69.23) > 0.1 {
		t.Errorf("weights per rank %.2f GiB, want about 69.2", w)
	}
	if kv := gib(nccl.sizes.kvTarget()); math.Abs(kv-10.42)/10.42 > 0.1 {
		t.Errorf("nccl KV cache %.2f GiB, field 10.42", kv)
	}
	if ar := gib(forced.Plans[0].CustomAR); math.Abs(ar-3.85)/3.85 > 0.1 {
		t.Errorf("forced custom allreduce buffers %.2f GiB, field about 3.85", ar)
	}
	if forced.sizes.kvTarget() >= nccl.sizes.kvTarget() {
		t.Errorf("forced custom KV %.2f GiB not below nccl's %.2f", gib(forced.sizes.kvTarget()), gib(nccl.sizes.kvTarget()))
	}
	info := nccl.ServerInfo()
	dc, _ := info["refengine"].(map[string]any)["device_clock"].(map[string]any)
	if dc == nil || dc["gpu"] != "rtx-pro-6000" || dc["model"] != "kimi-k2.5-int4" || dc["modelled_memory"] != true {
		t.Errorf("device_clock facts: %v", dc)
	}
	if _, ok := dc["cpu_overrun_steps"]; !ok {
		t.Error("no CPU overrun counter in /server_info")
	}
	if mu := info["memory_usage"].(map[string]any); math.Abs(mu["weight"].(float64)-gib(nccl.Plans[0].Weights)) > 1e-3 {
		t.Errorf("memory_usage.weight %v", mu["weight"])
	}
	// The wall clock reports no device clock.
	wall, err := buildArgs(t, nil, "--skip-server-warmup")
	if err != nil {
		t.Fatal(err)
	}
	if wall.ServerInfo()["refengine"].(map[string]any)["device_clock"] != nil {
		t.Error("device_clock facts on the wall clock")
	}
}
