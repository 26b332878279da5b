package server

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/reckon-ci/reckon/wire/enginefacts"
)

// TestPersonaFullRelease: --engine-version takes the full release string a persona reports
// (0.12.0, 0.4.4.post1), picks that line's persona and reports what was given; the version
// facts apply to it.
func TestPersonaFullRelease(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"vllm", "--engine-version", "0.12.0", "--version"}, "0.12.0"},
		{[]string{"vllm", "--engine-version", "v0.22.1", "--version"}, "0.22.1"},
		{[]string{"--engine-version", "0.4.4.post1", "--version"}, "0.4.4.post1"},
		{[]string{"--engine-version", "0.3.6", "--version"}, "0.3.6"},
	} {
		var out, errb strings.Builder
		if code := Main(context.Background(), c.args, &out, &errb); code != 0 || out.String() != c.want+"\n" {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want 0 and %q", c.args, code, out.String(), errb.String(), c.want)
		}
	}
	var errb strings.Builder
	if code := Main(context.Background(), []string{"vllm", "--engine-version", "0.11.0", "--version"}, io.Discard, &errb); code != 2 || !strings.Contains(errb.String(), "unknown vllm release") {
		t.Errorf("0.11.0 (no persona of that line): exit %d, %q", code, errb.String())
	}
	for v, want := range map[string][4]bool{ // capture-size flag, --profiler-config, env var, no spec with logprobs
		"0.10": {false, false, true, true}, "0.12.0": {true, false, true, true}, "0.22": {true, true, false, false}, "latest": {true, true, false, false},
	} {
		p, err := LookupPersona(DialectVLLM, v)
		if err != nil {
			t.Fatal(err)
		}
		if got := [4]bool{p.MaxCaptureSizeFlag, p.ProfilerConfigFlag, p.ProfilerEnv, p.SpecSkipLogprobs}; got != want {
			t.Errorf("vllm %s: capture-size flag, profiler config, env, spec skips logprobs = %v, want %v", v, got, want)
		}
	}
}

// TestVLLMLatestIgnoresProfilerEnv: vLLM 0.22 with only VLLM_TORCH_PROFILER_DIR has no profiler
// (the variable was removed in 0.16), so /start_profile is 404; 0.12.0 still reads it.
func TestVLLMLatestIgnoresProfilerEnv(t *testing.T) {
	dir := t.TempDir()
	env := map[string]string{VLLMProfilerDirEnv: dir}
	ts := startVLLM(t, env, "-tp", "2")
	if code, _ := ts.post(t, "/start_profile", ""); code != 404 {
		t.Errorf("0.22 with only %s: /start_profile %d, want 404", VLLMProfilerDirEnv, code)
	}
	if strings.Contains(ts.log.String(), "Torch profiler is enabled") {
		t.Error("0.22 logged a profiler it does not have")
	}
	_ = ts.stop()
	ts = startVLLM(t, env, "-tp", "2", "--engine-version", "0.12.0")
	if code, _ := ts.post(t, "/start_profile", ""); code != 200 {
		t.Errorf("0.12.0 with %s: /start_profile %d, want 200", VLLMProfilerDirEnv, code)
	}
	_ = ts.stop()
}

// moeModel writes the tiny model with an architecture of SGLang's auto-enable list.
func moeModel(t *testing.T, arch string) string {
	t.Helper()
	b, err := os.ReadFile(modelPath(t))
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "moe.json")
	if err := os.WriteFile(p, []byte(strings.Replace(string(b), `"RefEngineForCausalLM"`, `"`+arch+`"`, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestSGLangFusionAutoEnable: SGLang latest with a Qwen3-MoE architecture on a modelled H100
// (SM90) runs FlashInfer allreduce fusion even with custom allreduce disabled, and its traces
// name FlashInfer's kernel; --enforce-disable-flashinfer-allreduce-fusion, an SM120 GPU, another
// architecture or an older persona leave plain NCCL.
func TestSGLangFusionAutoEnable(t *testing.T) {
	kernel := enginefacts.FlashInferFusionKernels.Value()
	moe := moeModel(t, "Qwen3MoeForCausalLM")
	for _, c := range []struct {
		name  string
		args  []string
		fused bool
	}{
		{"qwen3-moe h100 nccl config", []string{"--model-path", moe}, true},
		{"enforce-disable", []string{"--model-path", moe, "--enforce-disable-flashinfer-allreduce-fusion"}, false},
		{"sm120", []string{"--model-path", moe, "--modelled-gpu", "rtx-pro-6000"}, false},
		{"dense architecture", nil, false},
		{"0.4 persona", []string{"--model-path", moe, "--engine-version", "0.4"}, false},
		{"dense with --enable", []string{"--enable-flashinfer-allreduce-fusion"}, true},
	} {
		dir := t.TempDir()
		ts := start(t, nil, true, append([]string{"--tp-size", "2", "--disable-custom-all-reduce"}, c.args...)...)
		if code, _ := ts.post(t, "/start_profile", map[string]any{"output_dir": dir}); code != 200 {
			t.Fatalf("%s: /start_profile %d", c.name, code)
		}
		ts.complete(t, map[string]any{"prompt": "fuse me", "max_tokens": 4, "temperature": 0})
		if code, _ := ts.post(t, "/stop_profile", ""); code != 200 {
			t.Fatalf("%s: /stop_profile %d", c.name, code)
		}
		files := profileFiles(t, dir, ".trace.json.gz")
		if len(files) != 2 {
			t.Fatalf("%s: files %v", c.name, files)
		}
		fusedKernels, ncclKernels := 0, 0
		for r, f := range files {
			for _, ev := range readTrace(t, f).TraceEvents {
				switch {
				case ev.Cat != "kernel":
				case strings.Contains(ev.Name, "::"+kernel+"<"):
					fusedKernels++
					if r == 0 && !strings.HasPrefix(ev.Name, "void flashinfer::trtllm_allreduce_fusion::") {
						t.Errorf("%s: fusion kernel name %q", c.name, ev.Name)
					}
				case strings.HasPrefix(ev.Name, "nccl"):
					ncclKernels++
				}
			}
		}
		if (fusedKernels > 0) != c.fused || (!c.fused && ncclKernels == 0) {
			t.Errorf("%s: %d fusion and %d NCCL kernels; fused %v", c.name, fusedKernels, ncclKernels, c.fused)
		}
		info := ts.info(t)
		if c.name != "0.4 persona" && info["enable_flashinfer_allreduce_fusion"] != c.fused {
			t.Errorf("%s: server_info enable_flashinfer_allreduce_fusion = %v, want %v", c.name, info["enable_flashinfer_allreduce_fusion"], c.fused)
		}
		if gs := ts.e.Group.Stats(); (gs.FusedCalls > 0) != c.fused || gs.CustomCalls != 0 {
			t.Errorf("%s: group stats %+v", c.name, gs)
		}
		_ = ts.stop()
	}
	// The 0.4 persona has no fusion flags at all.
	if _, err := ParseFlags([]string{"--model-path", moe, "--engine-version", "0.4", "--enforce-disable-flashinfer-allreduce-fusion"}, io.Discard); err == nil {
		t.Error("SGLang 0.4 accepted --enforce-disable-flashinfer-allreduce-fusion")
	}
}
