package server

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/reckon-ci/reckon/wire/enginefacts"
)

// A Persona is a named release of a real engine that the reference engine imitates
// (--engine-version): the version it reports and the behaviours that differ between releases.
// Every switch is data here; the code paths that read them are the engine's real ones (the
// allreduce selection, the scheduler, the HTTP handlers). The sources are the real engines' files
// and issues, as collected in docs/refengine.md ("Personas").
type Persona struct {
	// Dialect is the engine the persona belongs to.
	Dialect Dialect
	// Name is the --engine-version value ("0.3", "latest", "0.12", ...).
	Name string
	// Version is what the release reports: SGLang's /server_info (/get_server_info) "version",
	// vLLM's /version and its first log line; `--version` prints it.
	Version string

	// CustomARV2 selects SGLang's CustomAllReduceV2 by default (SGLANG_OPT_USE_CUSTOM_ALL_REDUCE_V2=0
	// falls back to v1): custom only with full NVLink, TP2 over PCIe silently NCCL, nothing logged
	// when custom is on. Source: sglang python/sglang/srt/distributed/device_communicators/
	// custom_all_reduce.py dispatch_custom_allreduce, custom_all_reduce_v2.py
	// can_use_custom_all_reduce_v2 ("return full_nvlink is True"; no logger.info in the file),
	// custom_all_reduce_utils.py can_use_custom_all_reduce_with_nvlink.
	CustomARV2 bool
	// RegisteringLine: v1 custom allreduce prints "Registering N cuda graph addresses" when CUDA
	// graphs are captured (sglang/vllm custom_all_reduce.py register_graph_buffers). In SGLang only
	// rank 0 prints it (the dialect's existing rule), in vLLM every worker.
	RegisteringLine bool
	// ARBackendsLine: vLLM prints "Using ['CUSTOM', 'PYNCCL'] all-reduce backends (in dispatch
	// order) for group 'tp:0'" once, under "(Worker pid=N)" (vllm cuda_communicator.py; present
	// in the real 0.22.1 start-up log, absent from older releases, about before 0.19-0.20).
	ARBackendsLine bool
	// NewReadyLine: vLLM 0.22 says "Starting vLLM server on http://HOST:PORT" (api_server.py:583 in
	// the real 0.22.1 log, noonghunna/club-3090#405); older releases "Starting vLLM API server 0
	// on http://HOST:PORT".
	NewReadyLine bool

	// GraphFlagDecode: SGLang accepts --cuda-graph-max-bs-decode and still --cuda-graph-max-bs
	// with the warning "'--cuda-graph-max-bs is deprecated, use --cuda-graph-max-bs-decode'"
	// (sgl-project/sglang PR #29591, 2026-06). Older releases know only --cuda-graph-max-bs.
	GraphFlagDecode bool
	// MaxCaptureSizeFlag: vLLM accepts --max-cudagraph-capture-size; without it the release
	// takes --cuda-graph-sizes and argparse rejects --max-cudagraph-capture-size ("unrecognized
	// arguments", exit 2). Set from wire/enginefacts.VLLMMaxCaptureSize (0.11.1 and later).
	MaxCaptureSizeFlag bool
	// ProfilerConfigFlag: vLLM's --profiler-config '{"profiler":"torch","torch_profiler_dir":DIR}'
	// (vllm/config/profiler.py). Set from wire/enginefacts.VLLMProfilerConfig (0.13 and later).
	ProfilerConfigFlag bool
	// ProfilerEnv: vLLM reads VLLM_TORCH_PROFILER_DIR (deprecated in 0.13, removed in 0.16: a
	// later release with only the variable set serves no /start_profile). Set from
	// wire/enginefacts.VLLMProfilerEnv.
	ProfilerEnv bool
	// FusionAutoEnable: SGLang has --enable-flashinfer-allreduce-fusion and
	// --enforce-disable-flashinfer-allreduce-fusion and turns the fusion on by itself for the
	// model architectures of wire/enginefacts.SGLangFusionAutoEnable on an SM90/SM100 GPU
	// (server_args.py), custom allreduce disabled or not; its traces then show FlashInfer's
	// allreduce_fusion_kernel_oneshot_lamport.
	FusionAutoEnable bool

	// ServerInfoOnlyOld: SGLang serves only /get_server_info and /get_model_info (sglang
	// http_server.py @ 0025436e has only @app.get("/get_server_info")); newer releases also serve
	// /server_info and /model_info.
	ServerInfoOnlyOld bool
	// InputLogprobsNoPad: input_token_logprobs without the leading [null, id, null] entry, so
	// prompt_tokens == logprob_start_len + 1 + len(input_token_logprobs) (sglang
	// test/srt/test_srt_endpoint.py @ 2fce449b, ~v0.2.x-0.3); newer releases pad:
	// req.input_token_logprobs_val = [None] + input_token_logprobs[:-1] (scheduler).
	InputLogprobsNoPad bool
	// SpecV2LogprobTruncation: with speculative decoding and SGLANG_ENABLE_SPEC_V2 unset or true
	// (environ.py: SGLANG_ENABLE_SPEC_V2 = EnvBool(True) in newer releases), a request with
	// return_logprob gets output_token_logprobs / output_top_logprobs for the first output token
	// only (sgl-project/sglang#14046; also #17349, #19761).
	SpecV2LogprobTruncation bool
	// SpecAcceptMeta: /generate meta_info carries spec_accept_length, spec_accept_token_num and
	// spec_draft_token_num beside spec_verify_ct (sglang tokenizer_manager.py
	// _calculate_spec_decoding_metrics); older releases report spec_verify_ct only.
	SpecAcceptMeta bool
	// SpecSkipLogprobs: vLLM does not speculate for a request with logprobs or prompt_logprobs
	// (vllm/v1/spec_decode/utils.py is_spec_decode_unsupported: "or sampling_params.logprobs is
	// not None"); removed around v0.14.0 (vllm-project/vllm#34497). Set from
	// wire/enginefacts.VLLMSpecSkipsLogprobs.
	SpecSkipLogprobs bool
}

// personas is the table of releases, per dialect, newest last. The first entry of a dialect whose
// name is "latest" (or, in vLLM, the one marked by vllmLatest) is the default.
var personas = []Persona{
	{Dialect: DialectSGLang, Name: "0.3", Version: "0.3.6",
		RegisteringLine: true, ServerInfoOnlyOld: true, InputLogprobsNoPad: true},
	{Dialect: DialectSGLang, Name: "0.4", Version: "0.4.10",
		RegisteringLine: true, SpecAcceptMeta: true},
	// Real SGLang main builds report 0.0.0.dev1+g<sha> (the 2026-04 /server_info vector).
	{Dialect: DialectSGLang, Name: "latest", Version: "0.0.0.dev1+grefengine",
		CustomARV2: true, RegisteringLine: true, GraphFlagDecode: true, SpecV2LogprobTruncation: true, SpecAcceptMeta: true,
		FusionAutoEnable: true},
	{Dialect: DialectVLLM, Name: "0.10", Version: "0.10.2",
		RegisteringLine: true},
	{Dialect: DialectVLLM, Name: "0.12", Version: "0.12.0",
		RegisteringLine: true},
	{Dialect: DialectVLLM, Name: "0.22", Version: "0.22.1",
		RegisteringLine: true, ARBackendsLine: true, NewReadyLine: true},
}

// withFacts sets the switches of p that wire/enginefacts decides from the release p reports.
func withFacts(p Persona) Persona {
	if p.Dialect != DialectVLLM {
		return p
	}
	v, newest := releaseTriple(p.Version)
	p.MaxCaptureSizeFlag = enginefacts.VLLMMaxCaptureSize.InRange(v, newest)
	p.ProfilerConfigFlag = enginefacts.VLLMProfilerConfig.InRange(v, newest)
	p.ProfilerEnv = enginefacts.VLLMProfilerEnv.InRange(v, newest)
	p.SpecSkipLogprobs = enginefacts.VLLMSpecSkipsLogprobs.InRange(v, newest)
	return p
}

// releaseTriple is a release's (major, minor, patch); newest for a main-branch build
// (0.0.0.devN+g...) or anything that does not parse.
func releaseTriple(s string) (v [3]int, newest bool) {
	s = strings.TrimPrefix(strings.TrimSpace(s), "v")
	parts := strings.SplitN(s, ".", 4)
	if len(parts) < 2 {
		return v, true
	}
	for i := 0; i < 3 && i < len(parts); i++ {
		d := parts[i]
		for j, r := range d {
			if r < '0' || r > '9' {
				d = d[:j]
				break
			}
		}
		n, err := strconv.Atoi(d)
		if err != nil {
			return v, true
		}
		v[i] = n
	}
	return v, v == [3]int{}
}

// vllmLatest is the vLLM persona that "latest" names.
const vllmLatest = "0.22"

// EngineVersionFlag is the flag that picks the persona, in both dialects.
const EngineVersionFlag = "--engine-version"

// LookupPersona returns the persona named v in dialect d; "" and "latest" give the newest. A
// full release string of a persona's line is accepted too ("0.12.0", "0.4.4.post1", "v0.22.1"):
// the persona of that major.minor imitates it and reports the release given, so that the
// version boundaries of wire/enginefacts apply to it. An unknown name is an error listing the
// accepted values.
func LookupPersona(d Dialect, v string) (*Persona, error) {
	name := strings.TrimSpace(v)
	if name == "" {
		name = "latest"
	}
	if d == DialectVLLM && name == "latest" {
		name = vllmLatest
	}
	for i := range personas {
		if personas[i].Dialect == d && personas[i].Name == name {
			p := withFacts(personas[i])
			return &p, nil
		}
	}
	if line, ok := releaseLine(name); ok {
		for i := range personas {
			if personas[i].Dialect == d && personas[i].Name == line {
				p := personas[i]
				p.Version = strings.TrimPrefix(name, "v")
				p = withFacts(p)
				return &p, nil
			}
		}
	}
	return nil, fmt.Errorf("%s %q: unknown %s release; expected one of %s (or a full release of one of those lines, e.g. 0.12.0)", EngineVersionFlag, v, d, strings.Join(PersonaNames(d), ", "))
}

// releaseLine is the major.minor of a full release string ("0.12.0" -> "0.12", "0.4.4.post1"
// -> "0.4"); ok is false for anything else.
func releaseLine(s string) (string, bool) {
	s = strings.TrimPrefix(s, "v")
	parts := strings.SplitN(s, ".", 3)
	if len(parts) < 3 || parts[2] == "" || parts[2][0] < '0' || parts[2][0] > '9' {
		return "", false
	}
	for _, p := range parts[:2] {
		if _, err := strconv.Atoi(p); err != nil {
			return "", false
		}
	}
	return parts[0] + "." + parts[1], true
}

// PersonaNames lists the accepted --engine-version values of dialect d.
func PersonaNames(d Dialect) []string {
	var out []string
	for _, p := range personas {
		if p.Dialect == d {
			out = append(out, p.Name)
		}
	}
	if d == DialectVLLM {
		out = append(out, "latest")
	}
	return out
}

// splitEngineVersion takes --engine-version V (or --engine-version=V, single dash too) out of
// args, anywhere among them, and returns V ("" when absent) and the other arguments.
func splitEngineVersion(args []string) (string, []string, error) {
	v := ""
	rest := make([]string, 0, len(args))
	for i := 0; i < len(args); i++ {
		a := args[i]
		name, val, hasVal := strings.Cut(a, "=")
		if name != EngineVersionFlag && name != EngineVersionFlag[1:] {
			rest = append(rest, a)
			continue
		}
		if !hasVal {
			if i+1 >= len(args) {
				return "", nil, fmt.Errorf("%s: expected a release after it (sglang: %s; vllm: %s), got nothing", EngineVersionFlag,
					strings.Join(PersonaNames(DialectSGLang), ", "), strings.Join(PersonaNames(DialectVLLM), ", "))
			}
			i++
			val = args[i]
		}
		v = val
	}
	return v, rest, nil
}

// personaOf picks the persona named by args' --engine-version for dialect d and returns the
// remaining arguments.
func personaOf(d Dialect, args []string) (*Persona, []string, error) {
	v, rest, err := splitEngineVersion(args)
	if err != nil {
		return nil, nil, err
	}
	p, err := LookupPersona(d, v)
	if err != nil {
		return nil, nil, err
	}
	return p, rest, nil
}

// wantsVersion reports whether args ask for --version (print the persona's version and exit).
func wantsVersion(args []string) bool {
	for _, a := range args {
		if a == "--version" || a == "-version" {
			return true
		}
	}
	return false
}

// envFalse reports whether an environment value turns a boolean switch off, as SGLang's EnvBool
// reads it ("0", "false", "no", "off", any case).
func envFalse(v string) bool {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "0", "false", "no", "off":
		return true
	}
	return false
}
