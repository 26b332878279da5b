package vllm

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestProfilerLaunch: reckon's own trace directory goes in --profiler-config from 0.13 (the env
// var alone configures nothing from 0.16), the env var before; a user's own setting is kept and
// its directory collected.
func TestProfilerLaunch(t *testing.T) {
	const dir = "/out/profiles/nccl"
	cfg := ProfilerConfigArg(dir)
	cases := []struct {
		name, version string
		env           map[string]string
		extra         []string
		wantArgs      []string
		wantEnv       string // VLLM_TORCH_PROFILER_DIR in the resulting env
		wantDir       string
		note          string
	}{
		{"newest", "", nil, nil, []string{"--profiler-config", cfg}, "", dir, ""},
		{"0.22.1", "0.22.1", nil, nil, []string{"--profiler-config", cfg}, "", dir, ""},
		{"0.13.0 first with the flag", "0.13.0", nil, nil, []string{"--profiler-config", cfg}, "", dir, ""},
		{"0.12.0 env only", "0.12.0", nil, nil, nil, dir, dir, ""},
		{"user env on 0.12", "0.12.0", map[string]string{"VLLM_TORCH_PROFILER_DIR": "/mine"}, nil, nil, "/mine", "/mine", "kept"},
		{"user env on 0.15.1 still read", "0.15.1", map[string]string{"VLLM_TORCH_PROFILER_DIR": "/mine"}, nil, nil, "/mine", "/mine", "kept"},
		{"user env on 0.22 is ignored by vLLM", "0.22.1", map[string]string{"VLLM_TORCH_PROFILER_DIR": "/mine"}, nil,
			[]string{"--profiler-config", ProfilerConfigArg("/mine")}, "/mine", "/mine", "ignores VLLM_TORCH_PROFILER_DIR"},
		{"user JSON config", "0.22.1", nil, []string{"--profiler-config", `{"profiler": "torch", "torch_profiler_dir": "/cfg"}`}, nil, "", "/cfg", "kept"},
		{"user dotted config", "", nil, []string{"--profiler-config.profiler=torch", "--profiler-config.torch_profiler_dir", "/dot"}, nil, "", "/dot", "kept"},
		{"user cuda profiler", "", nil, []string{`--profiler-config={"profiler": "cuda"}`}, nil, "", "", "no torch traces"},
	}
	for _, c := range cases {
		got, err := ProfilerLaunch(c.version, c.env, c.extra, dir)
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if d := cmp.Diff(c.wantArgs, got.Args); d != "" {
			t.Errorf("%s: args (-want +got):\n%s", c.name, d)
		}
		if got.Env["VLLM_TORCH_PROFILER_DIR"] != c.wantEnv || got.TraceDir != c.wantDir || !strings.Contains(got.Note, c.note) {
			t.Errorf("%s: env %q dir %q note %q; want env %q dir %q note ~%q", c.name, got.Env["VLLM_TORCH_PROFILER_DIR"], got.TraceDir, got.Note, c.wantEnv, c.wantDir, c.note)
		}
	}
	if _, err := ProfilerLaunch("", nil, []string{"--profiler-config", "{bad"}, dir); err == nil || !strings.Contains(err.Error(), "--profiler-config") {
		t.Errorf("bad JSON: err = %v", err)
	}
	if cfg != `{"profiler":"torch","torch_profiler_dir":"/out/profiles/nccl"}` {
		t.Errorf("ProfilerConfigArg = %s", cfg)
	}
}
