package vllm

import (
	"encoding/json"
	"fmt"
	"maps"
	"strings"

	"github.com/reckon-ci/reckon/engine/internal/core"
	"github.com/reckon-ci/reckon/wire/enginefacts"
)

// ProfilerSetup is how a vLLM launch gets a torch profiler (and so /start_profile) and where its
// traces land.
type ProfilerSetup struct {
	// Args are arguments to add to the launch (--profiler-config JSON), nil when none.
	Args []string
	// Env is the launch environment to use (the given one, plus VLLM_TORCH_PROFILER_DIR where
	// reckon sets it).
	Env map[string]string
	// TraceDir is where the workers' traces land ("" when the user's own configuration names a
	// profiler that writes no torch traces).
	TraceDir string
	// Note says what was honoured or why, for the log ("" when reckon set it up itself).
	Note string
}

// ProfilerConfigArg is --profiler-config's JSON for the torch profiler writing into dir.
func ProfilerConfigArg(dir string) string {
	b, _ := json.Marshal(map[string]string{"profiler": "torch", "torch_profiler_dir": dir})
	return string(b)
}

// ProfilerLaunch works out how to switch the torch profiler on for vLLM release version (""
// the newest) with traces in dir, honouring the user's own setting (wire/enginefacts:
// VLLMProfilerEnv, VLLMProfilerConfig):
//   - the user's --profiler-config in extraArgs (JSON, or the dotted
//     --profiler-config.torch_profiler_dir form) is kept, and its directory collected;
//   - the user's VLLM_TORCH_PROFILER_DIR is kept and collected where the release still reads it
//     (before 0.16); from 0.16 vLLM ignores it, so the same directory is passed as
//     --profiler-config instead;
//   - otherwise --profiler-config from 0.13, the environment variable before.
func ProfilerLaunch(version string, env map[string]string, extraArgs []string, dir string) (ProfilerSetup, error) {
	ver, err := core.ParseVersion(version)
	if err != nil {
		return ProfilerSetup{}, fmt.Errorf("vllm: %w", err)
	}
	in := func(f enginefacts.Fact) bool {
		return f.InRange([3]int{ver.Major, ver.Minor, ver.Patch}, ver.Newest)
	}
	envName := enginefacts.VLLMProfilerEnv.Value()
	flag := enginefacts.VLLMProfilerConfig.Value()
	out := ProfilerSetup{Env: env}
	if userDir, found, err := userProfilerConfig(extraArgs, flag); err != nil {
		return ProfilerSetup{}, err
	} else if found {
		out.TraceDir = userDir
		out.Note = "the config's own " + flag + " is kept; traces are collected from " + userDir
		if userDir == "" {
			out.Note = "the config's own " + flag + " names no torch profiler: no torch traces to collect"
		}
		return out, nil
	}
	if userDir, set := env[envName]; set && strings.TrimSpace(userDir) != "" {
		if in(enginefacts.VLLMProfilerEnv) {
			out.TraceDir = userDir
			out.Note = "the config's own " + envName + " is kept; traces are collected from " + userDir
			return out, nil
		}
		out.Args = []string{flag, ProfilerConfigArg(userDir)}
		out.TraceDir = userDir
		out.Note = fmt.Sprintf("vLLM %s ignores %s (removed in %s): its directory %s is passed as %s", releaseWord(version), envName, enginefacts.VLLMProfilerEnv.Until, userDir, flag)
		return out, nil
	}
	out.TraceDir = dir
	if in(enginefacts.VLLMProfilerConfig) {
		out.Args = []string{flag, ProfilerConfigArg(dir)}
		return out, nil
	}
	e := maps.Clone(env)
	if e == nil {
		e = map[string]string{}
	}
	e[envName] = dir
	out.Env = e
	return out, nil
}

func releaseWord(v string) string {
	if v == "" {
		return "(newest)"
	}
	return v
}

// userProfilerConfig finds --profiler-config in args: found reports whether it is there, dir is
// its torch_profiler_dir ("" when the profiler it names is not torch). Bad JSON is an error.
func userProfilerConfig(args []string, flag string) (dir string, found bool, err error) {
	profiler := ""
	for i := 0; i < len(args); i++ {
		name, val, hasVal := strings.Cut(args[i], "=")
		switch {
		case name == flag:
			if !hasVal {
				if i+1 >= len(args) {
					return "", false, fmt.Errorf("vllm: %s: expected JSON after it, got nothing", flag)
				}
				i++
				val = args[i]
			}
			var pc struct {
				Profiler string `json:"profiler"`
				Dir      string `json:"torch_profiler_dir"`
			}
			if err := json.Unmarshal([]byte(val), &pc); err != nil {
				return "", false, fmt.Errorf("vllm: %s %q: %v; expected JSON such as %s", flag, val, err, ProfilerConfigArg("/tmp/traces"))
			}
			found, profiler, dir = true, pc.Profiler, pc.Dir
		case strings.HasPrefix(name, flag+"."):
			if !hasVal && i+1 < len(args) {
				i++
				val = args[i]
			}
			found = true
			switch strings.TrimPrefix(name, flag+".") {
			case "torch_profiler_dir":
				dir = val
			case "profiler":
				profiler = val
			}
		}
	}
	if found && profiler != "" && profiler != "torch" {
		dir = ""
	}
	return dir, found, nil
}
