// Package sglang is the engine adapter for SGLang (sgl-project/sglang): its launch_server
// command line, its ready signal and its log grammar across versions (v0.1 "[gpu_id=N]"
// prefixes up to the 2026 "Capture target decode CUDA graph end. elapsed=..." records).
//
// The reference engine prints SGLang's newest log format and is launched through this adapter
// with a command override.
package sglang

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/reckon-ci/reckon/engine/internal/core"
	"github.com/reckon-ci/reckon/wire/enginefacts"
)

// Name is the engine kind of this adapter.
const Name = "sglang"

// DefaultCommand launches SGLang's HTTP server.
var DefaultCommand = []string{"python3", "-m", "sglang.launch_server"}

// ReadyText is the line SGLang prints once the warmup request succeeded.
const ReadyText = "The server is fired up and ready to roll!"

// Adapter implements core.Adapter (engine.Adapter) for SGLang.
type Adapter struct{}

// New returns the SGLang adapter.
func New() *Adapter { return &Adapter{} }

// Name returns "sglang".
func (*Adapter) Name() string { return Name }

// HealthPath returns "/health" (503 while starting in new versions, 200 once serving).
func (*Adapter) HealthPath() string { return "/health" }

// ReadyLine reports whether line is SGLang's ready signal.
func (*Adapter) ReadyLine(line string) bool { return strings.Contains(line, ReadyText) }

// GraphMaxBSDecodeSince is the first release (major, minor, patch) given
// --cuda-graph-max-bs-decode instead of --cuda-graph-max-bs. The decode spelling replaced the
// old one in SGLang's own tests and docs with sgl-project/sglang PR #29591 (2026-06-29), and
// the old one now logs "'--cuda-graph-max-bs is deprecated, use --cuda-graph-max-bs-decode'";
// v0.5.15 (docker image lmsysorg/sglang:v0.5.15-cu129) is the earliest release seen launched
// with the new flag (a third-party report of 2026-07). Earlier releases keep the old spelling,
// which every release accepts so far, so a threshold set too late costs only a warning.
// The boundary is wire/enginefacts.SGLangGraphMaxBSDecode.
var GraphMaxBSDecodeSince = graphMaxBSDecodeSince()

func graphMaxBSDecodeSince() [3]int {
	v, _ := enginefacts.SGLangGraphMaxBSDecode.SinceTriple()
	return v
}

// speculativeNames maps reckon's spellings (spec/ accepts EAGLE, EAGLE3, NEXTN, MTP,
// STANDALONE, NGRAM, MEDUSA) to SGLang's --speculative-algorithm choices. MTP is SGLang's
// NEXTN (DeepSeek-style multi-token prediction); SGLang has no MEDUSA.
var speculativeNames = map[string]string{
	"EAGLE":      "EAGLE",
	"EAGLE3":     "EAGLE3",
	"NEXTN":      "NEXTN",
	"MTP":        "NEXTN",
	"STANDALONE": "STANDALONE",
	"NGRAM":      "NGRAM",
}

// SpeculativeAlgorithms lists reckon's spellings of the speculative algorithms SGLang accepts,
// sorted: EAGLE, EAGLE3, MTP, NEXTN, NGRAM, STANDALONE.
func SpeculativeAlgorithms() []string {
	return []string{"EAGLE", "EAGLE3", "MTP", "NEXTN", "NGRAM", "STANDALONE"}
}

// SpeculativeAlgorithm returns SGLang's --speculative-algorithm value for reckon's spelling
// alg (case-insensitive), or an error naming the accepted list.
func SpeculativeAlgorithm(alg string) (string, error) {
	if v, ok := speculativeNames[strings.ToUpper(strings.TrimSpace(alg))]; ok {
		return v, nil
	}
	return "", fmt.Errorf("sglang: speculative algorithm %q: SGLang does not accept it; expected one of %s", alg, strings.Join(SpeculativeAlgorithms(), ", "))
}

// SpeculativeAlgorithms lists reckon's spellings of the speculative algorithms SGLang accepts.
func (*Adapter) SpeculativeAlgorithms() []string { return SpeculativeAlgorithms() }

// isDefaultForm reports whether argv launches SGLang as `PYTHON -m sglang.launch_server`.
func isDefaultForm(argv []string) bool {
	for k := 0; k+1 < len(argv); k++ {
		if argv[k] == "-m" && argv[k+1] == "sglang.launch_server" {
			return true
		}
	}
	return false
}

// VersionCommand returns the argv that prints SGLang's version: for the default
// `python3 -m sglang.launch_server` form (or c.Command of that form, with its interpreter)
// `python3 -c "import sglang; print(sglang.__version__)"`, otherwise the command plus
// --version (the reference engine: `bin/refengine [--engine-version V] --version`).
func (*Adapter) VersionCommand(c core.LaunchConfig) []string {
	argv := DefaultCommand
	if len(c.Command) > 0 {
		argv = c.Command
	}
	if isDefaultForm(argv) {
		return []string{argv[0], "-c", "import sglang; print(sglang.__version__)"}
	}
	return append(append([]string{}, argv...), "--version")
}

// Command returns the launch_server argv for c: the command (c.Command or DefaultCommand),
// then --model-path, --tp-size, --host, --port, --disable-custom-all-reduce,
// --cuda-graph-max-bs-decode (c.EngineVersion newest, a main-branch build or at least
// GraphMaxBSDecodeSince; --cuda-graph-max-bs before), --mem-fraction-static, the
// --speculative-* flags (the algorithm mapped by SpeculativeAlgorithm) and c.ExtraArgs.
func (*Adapter) Command(c core.LaunchConfig) ([]string, error) {
	if err := validate(c); err != nil {
		return nil, err
	}
	ver, err := core.ParseVersion(c.EngineVersion)
	if err != nil {
		return nil, fmt.Errorf("sglang: %w", err)
	}
	argv := append([]string{}, DefaultCommand...)
	if len(c.Command) > 0 {
		argv = append([]string{}, c.Command...)
	}
	if c.Model != "" {
		argv = append(argv, "--model-path", c.Model)
	}
	if c.TPSize > 0 {
		argv = append(argv, "--tp-size", strconv.Itoa(c.TPSize))
	}
	if c.Host != "" {
		argv = append(argv, "--host", c.Host)
	}
	if c.Port > 0 {
		argv = append(argv, "--port", strconv.Itoa(c.Port))
	}
	if c.DisableCustomAllReduce {
		argv = append(argv, "--disable-custom-all-reduce")
	}
	if c.CUDAGraphMaxBS > 0 {
		flag := "--cuda-graph-max-bs"
		if ver.AtLeast(GraphMaxBSDecodeSince[0], GraphMaxBSDecodeSince[1], GraphMaxBSDecodeSince[2]) {
			flag = "--cuda-graph-max-bs-decode"
		}
		argv = append(argv, flag, strconv.Itoa(c.CUDAGraphMaxBS))
	}
	if c.MemFractionStatic > 0 {
		argv = append(argv, "--mem-fraction-static", strconv.FormatFloat(c.MemFractionStatic, 'f', -1, 64))
	}
	if s := c.Speculative; s != nil {
		alg, err := SpeculativeAlgorithm(s.Algorithm)
		if err != nil {
			return nil, err
		}
		argv = append(argv, "--speculative-algorithm", alg)
		if s.DraftModelPath != "" {
			argv = append(argv, "--speculative-draft-model-path", s.DraftModelPath)
		}
		if s.NumSteps > 0 {
			argv = append(argv, "--speculative-num-steps", strconv.Itoa(s.NumSteps))
		}
		if s.EagleTopK > 0 {
			argv = append(argv, "--speculative-eagle-topk", strconv.Itoa(s.EagleTopK))
		}
		if s.NumDraftTokens > 0 {
			argv = append(argv, "--speculative-num-draft-tokens", strconv.Itoa(s.NumDraftTokens))
		}
	}
	return append(argv, c.ExtraArgs...), nil
}

func validate(c core.LaunchConfig) error {
	switch {
	case c.Model == "" && len(c.Command) == 0:
		return fmt.Errorf("sglang: model: expected a model path or hub id, got nothing")
	case c.TPSize < 0:
		return fmt.Errorf("sglang: tp size: expected >= 1 (or 0 for the default), got %d", c.TPSize)
	case c.Port < 0 || c.Port > 65535:
		return fmt.Errorf("sglang: port: expected 0..65535, got %d", c.Port)
	case c.CUDAGraphMaxBS < 0:
		return fmt.Errorf("sglang: cuda graph max bs: expected >= 1 (or 0 for the default), got %d", c.CUDAGraphMaxBS)
	case c.MemFractionStatic < 0 || c.MemFractionStatic > 1:
		return fmt.Errorf("sglang: mem fraction static: expected a fraction in (0, 1] (or 0 for the default), got %g", c.MemFractionStatic)
	}
	if s := c.Speculative; s != nil {
		switch {
		case strings.TrimSpace(s.Algorithm) == "":
			return fmt.Errorf("sglang: speculative: algorithm: expected e.g. EAGLE3, EAGLE or NGRAM, got nothing")
		case s.NumSteps < 0 || s.EagleTopK < 0 || s.NumDraftTokens < 0:
			return fmt.Errorf("sglang: speculative: num steps, eagle topk and num draft tokens must be >= 0 (got %d, %d, %d)", s.NumSteps, s.EagleTopK, s.NumDraftTokens)
		}
	}
	return nil
}

// ParseLog reads an SGLang log into a Report.
func (*Adapter) ParseLog(r io.Reader) (*core.Report, error) { return Parse(r) }
