// Package vllm is the engine adapter for vLLM (vllm-project/vllm): the `vllm serve` command
// line, its ready signal and its log grammar from V0 (≤0.7, "Loading model weights took X GB",
// "# GPU blocks: N") through V1 ("GPU KV cache size: N tokens", "(Worker_TP0 pid=...)" tags).
package vllm

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/reckon-ci/reckon/engine/internal/core"
	"github.com/reckon-ci/reckon/wire/enginefacts"
)

// Name is the engine kind of this adapter.
const Name = "vllm"

// DefaultCommand launches vLLM's OpenAI-compatible server.
var DefaultCommand = []string{"vllm", "serve"}

// Adapter implements core.Adapter (engine.Adapter) for vLLM.
type Adapter struct{}

// New returns the vLLM adapter.
func New() *Adapter { return &Adapter{} }

// Name returns "vllm".
func (*Adapter) Name() string { return Name }

// HealthPath returns "/health": vLLM starts its HTTP server only after the engine is
// initialised, so the first 200 means ready.
func (*Adapter) HealthPath() string { return "/health" }

// ReadyLine reports whether line is one of vLLM's ready signals: "Starting vLLM server on"
// (0.22 and later), "Starting vLLM API server" (earlier: "Starting vLLM API server [0] on
// http://..."), uvicorn's "Application startup complete". Readiness is decided over HTTP;
// the line only corroborates.
func (*Adapter) ReadyLine(line string) bool {
	return strings.Contains(line, "Starting vLLM server on") || strings.Contains(line, "Starting vLLM API server") ||
		strings.Contains(line, "Application startup complete")
}

// MaxCaptureSizeSince is the first release (major, minor, patch) given
// --max-cudagraph-capture-size N; earlier releases get --cuda-graph-sizes N (one value: capture
// sizes 1, 2, 4 and multiples of 8 up to N) and reject the new flag (argparse exit 2). It is
// wire/enginefacts.VLLMMaxCaptureSize (0.11.1; 0.11.0 still takes only --cuda-graph-sizes).
var MaxCaptureSizeSince = maxCaptureSizeSince()

func maxCaptureSizeSince() [3]int {
	v, _ := enginefacts.VLLMMaxCaptureSize.SinceTriple()
	return v
}

// speculativeMethods maps reckon's spellings (spec/ accepts EAGLE, EAGLE3, NEXTN, MTP,
// STANDALONE, NGRAM, MEDUSA) to the "method" of vLLM's --speculative-config. NEXTN
// (DeepSeek-style next-n prediction) is vLLM's mtp; a STANDALONE draft model is draft_model.
// MEDUSA is not in the set reckon supports for vLLM.
var speculativeMethods = map[string]string{
	"EAGLE":      "eagle",
	"EAGLE3":     "eagle3",
	"MTP":        "mtp",
	"NEXTN":      "mtp",
	"NGRAM":      "ngram",
	"STANDALONE": "draft_model",
}

// SpeculativeAlgorithms lists reckon's spellings of the speculative algorithms vLLM accepts,
// sorted: EAGLE, EAGLE3, MTP, NEXTN, NGRAM, STANDALONE.
func SpeculativeAlgorithms() []string {
	return []string{"EAGLE", "EAGLE3", "MTP", "NEXTN", "NGRAM", "STANDALONE"}
}

// SpeculativeMethod returns vLLM's --speculative-config "method" for reckon's spelling alg
// (case-insensitive), or an error naming the accepted list.
func SpeculativeMethod(alg string) (string, error) {
	if v, ok := speculativeMethods[strings.ToUpper(strings.TrimSpace(alg))]; ok {
		return v, nil
	}
	return "", fmt.Errorf("vllm: speculative algorithm %q: vLLM does not accept it; expected one of %s", alg, strings.Join(SpeculativeAlgorithms(), ", "))
}

// SpeculativeAlgorithms lists reckon's spellings of the speculative algorithms vLLM accepts.
func (*Adapter) SpeculativeAlgorithms() []string { return SpeculativeAlgorithms() }

// VersionCommand returns the argv that prints vLLM's version: the command (c.Command or
// DefaultCommand) with a trailing "serve" removed, plus --version: `vllm --version`,
// `bin/refengine vllm --engine-version 0.12 --version`.
func (*Adapter) VersionCommand(c core.LaunchConfig) []string {
	argv := DefaultCommand
	if len(c.Command) > 0 {
		argv = c.Command
	}
	argv = append([]string{}, argv...)
	if n := len(argv); n > 1 && argv[n-1] == "serve" {
		argv = argv[:n-1]
	}
	return append(argv, "--version")
}

// Command returns the `vllm serve` argv for c: the command (c.Command or DefaultCommand),
// the model as positional argument, --tensor-parallel-size, --host, --port,
// --disable-custom-all-reduce, --max-cudagraph-capture-size (c.EngineVersion at least
// MaxCaptureSizeSince or newest; --cuda-graph-sizes before), --gpu-memory-utilization,
// --speculative-config '{json}' (method mapped by SpeculativeMethod) and c.ExtraArgs.
func (*Adapter) Command(c core.LaunchConfig) ([]string, error) {
	if err := validate(c); err != nil {
		return nil, err
	}
	ver, err := core.ParseVersion(c.EngineVersion)
	if err != nil {
		return nil, fmt.Errorf("vllm: %w", err)
	}
	argv := append([]string{}, DefaultCommand...)
	if len(c.Command) > 0 {
		argv = append([]string{}, c.Command...)
	}
	if c.Model != "" {
		argv = append(argv, c.Model)
	}
	if c.TPSize > 0 {
		argv = append(argv, "--tensor-parallel-size", strconv.Itoa(c.TPSize))
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
		flag := "--max-cudagraph-capture-size"
		if !ver.AtLeast(MaxCaptureSizeSince[0], MaxCaptureSizeSince[1], MaxCaptureSizeSince[2]) {
			flag = "--cuda-graph-sizes"
		}
		argv = append(argv, flag, strconv.Itoa(c.CUDAGraphMaxBS))
	}
	if c.MemFractionStatic > 0 {
		argv = append(argv, "--gpu-memory-utilization", strconv.FormatFloat(c.MemFractionStatic, 'f', -1, 64))
	}
	if s := c.Speculative; s != nil {
		js, err := speculativeConfig(s)
		if err != nil {
			return nil, err
		}
		argv = append(argv, "--speculative-config", js)
	}
	return append(argv, c.ExtraArgs...), nil
}

// speculativeConfig renders vLLM's --speculative-config JSON. vLLM's num_speculative_tokens is
// the draft depth, SGLang's num steps; when only the number of draft tokens is given it is used.
func speculativeConfig(s *core.Speculative) (string, error) {
	method, err := SpeculativeMethod(s.Algorithm)
	if err != nil {
		return "", err
	}
	cfg := map[string]any{"method": method}
	if s.DraftModelPath != "" {
		cfg["model"] = s.DraftModelPath
	}
	switch {
	case s.NumSteps > 0:
		cfg["num_speculative_tokens"] = s.NumSteps
	case s.NumDraftTokens > 0:
		cfg["num_speculative_tokens"] = s.NumDraftTokens
	}
	b, err := json.Marshal(cfg)
	if err != nil {
		return "", fmt.Errorf("vllm: speculative config: %w", err)
	}
	return string(b), nil
}

func validate(c core.LaunchConfig) error {
	switch {
	case c.Model == "" && len(c.Command) == 0:
		return fmt.Errorf("vllm: model: expected a model path or hub id, got nothing")
	case c.TPSize < 0:
		return fmt.Errorf("vllm: tp size: expected >= 1 (or 0 for the default), got %d", c.TPSize)
	case c.Port < 0 || c.Port > 65535:
		return fmt.Errorf("vllm: port: expected 0..65535, got %d", c.Port)
	case c.CUDAGraphMaxBS < 0:
		return fmt.Errorf("vllm: cuda graph max bs: expected >= 1 (or 0 for the default), got %d", c.CUDAGraphMaxBS)
	case c.MemFractionStatic < 0 || c.MemFractionStatic > 1:
		return fmt.Errorf("vllm: gpu memory utilization: expected a fraction in (0, 1] (or 0 for the default), got %g", c.MemFractionStatic)
	}
	if s := c.Speculative; s != nil {
		switch {
		case strings.TrimSpace(s.Algorithm) == "":
			return fmt.Errorf("vllm: speculative: algorithm: expected e.g. eagle3, eagle, ngram or mtp, got nothing")
		case s.NumSteps < 0 || s.NumDraftTokens < 0 || s.EagleTopK < 0:
			return fmt.Errorf("vllm: speculative: num steps, eagle topk and num draft tokens must be >= 0 (got %d, %d, %d)", s.NumSteps, s.EagleTopK, s.NumDraftTokens)
		case s.EagleTopK > 1:
			return fmt.Errorf("vllm: speculative: eagle topk %d: vLLM's --speculative-config drafts a chain; expected topk 0 or 1", s.EagleTopK)
		}
	}
	return nil
}

// ParseLog reads a vLLM log into a Report.
func (*Adapter) ParseLog(r io.Reader) (*core.Report, error) { return Parse(r) }
