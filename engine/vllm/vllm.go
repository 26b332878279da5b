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

// ReadyLine reports whether line is one of vLLM's ready signals ("Starting vLLM API server",
// uvicorn's "Application startup complete").
func (*Adapter) ReadyLine(line string) bool {
	return strings.Contains(line, "Starting vLLM API server") || strings.Contains(line, "Application startup complete")
}

// Command returns the `vllm serve` argv for c: the command (c.Command or DefaultCommand),
// the model as positional argument, --tensor-parallel-size, --host, --port,
// --disable-custom-all-reduce, --max-cudagraph-capture-size, --gpu-memory-utilization,
// --speculative-config '{json}' and c.ExtraArgs.
func (*Adapter) Command(c core.LaunchConfig) ([]string, error) {
	if err := validate(c); err != nil {
		return nil, err
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
		argv = append(argv, "--max-cudagraph-capture-size", strconv.Itoa(c.CUDAGraphMaxBS))
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
	cfg := map[string]any{"method": strings.ToLower(strings.TrimSpace(s.Algorithm))}
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
