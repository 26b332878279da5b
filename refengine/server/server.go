// Package server is the reference engine's process: it parses SGLang-style flags, builds the
// tensor-parallel model, computes the memory plan, allocates the KV pool, prints SGLang-format
// start-up lines, and serves SGLang's HTTP API (OpenAI completions, /generate, server info,
// metrics) until SIGTERM.
package server

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/reckon-ci/reckon/refengine/collective"
	"github.com/reckon-ci/reckon/refengine/device"
	"github.com/reckon-ci/reckon/refengine/interconnect"
	"github.com/reckon-ci/reckon/refengine/kvcache"
	"github.com/reckon-ci/reckon/refengine/memplan"
	"github.com/reckon-ci/reckon/refengine/model"
	"github.com/reckon-ci/reckon/refengine/sched"
	"github.com/reckon-ci/reckon/refengine/tp"
)

// Version is the reference engine's own version (/server_info's "refengine" object); the version
// the engine reports as its engine's is its persona's (Persona.Version).
const Version = "refengine-0.1"

// ForceCustomAREnv forces the custom allreduce where SGLang would refuse it (PCIe, tp > 2).
const ForceCustomAREnv = "REFENGINE_FORCE_CUSTOM_AR"

// Engine is a started reference engine (model, memory plan, scheduler), ready to serve HTTP.
type Engine struct {
	Opts    *Options
	Cfg     model.Config
	Log     *Logger
	Group   *tp.Group
	Sched   *sched.Scheduler
	Alloc   *kvcache.Allocator
	Plans   []memplan.Plan // per rank
	Backend string         // "custom" or "nccl"
	// NCCLAlgorithm is the NCCL path's allreduce algorithm (ring or tree, from NCCL_ALGO): all
	// allreduces when Backend is "nccl", the tensors too large for the custom path otherwise.
	NCCLAlgorithm collective.Algorithm
	// WeightSeed is the seed the weights were generated from (--weight-seed or the model file's).
	WeightSeed uint64
	// CustomDisabledReason is set when the custom allreduce was requested but refused with a
	// warning (TP2 over PCIe under v2 is refused silently and leaves it empty).
	CustomDisabledReason string
	// CustomARRule is the custom-allreduce implementation whose rule was applied: "v1" (SGLang
	// 0.3/0.4, vLLM, SGLang latest with SGLANG_OPT_USE_CUSTOM_ALL_REDUCE_V2=0) or "v2" (SGLang
	// latest's CustomAllReduceV2).
	CustomARRule string
	// CustomForced: REFENGINE_FORCE_CUSTOM_AR=1 put the custom allreduce where the rule refused it.
	CustomForced bool
	// Fused: FlashInfer allreduce fusion runs the allreduces of at most FusedMaxBytes bytes
	// (--enable-flashinfer-allreduce-fusion, or SGLang's auto-enable: fusionAutoEnabled).
	Fused         bool
	FusedMaxBytes int64
	// FileSeed is the model file's weight seed (WeightSeed differs with --weight-seed).
	FileSeed       uint64
	CustomMaxBytes int64
	ContextLen     int
	MaxRunning     int
	GraphBytes     int64 // graph reserve, target + draft
	GraphTarget    int64
	GraphDraft     int64
	Interconnect   interconnect.Model
	// Device is the modelled device clock's timer (--clock modelled; nil on the wall clock) and
	// Pacer its pacer; Launch is the launch index its noise was drawn for.
	Device *device.Timer
	Pacer  *device.Pacer
	Launch uint64
	// sizes are rank 0's sizes as the memory plan and the logs count them: the real model's, or
	// the modelled model's with --modelled-memory.
	sizes     rankSizes
	started   time.Time
	ready     atomic.Bool
	served    atomic.Int64
	arrived   atomic.Int64 // generation requests seen by the failure fault (failDue)
	fatal     chan error
	fatalOnce sync.Once
	getenv    func(string) string
	// v is the vLLM dialect's state (stats, histograms); nil in the SGLang dialect.
	v *vllmState
	// prof is the torch profiler (/start_profile, /stop_profile).
	prof *profiler
}

// Main is the engine's entry point: it parses args, starts the engine, serves until ctx is done
// (SIGTERM/SIGINT in cmd/refengine), and returns the process exit code: 0 after a clean
// shutdown, 1 when the engine failed or crashed (fault injection), 2 for a bad command line or a
// bad NCCL_ALGO. args in the SGLang dialect are SGLang's flags; `vllm serve MODEL ...` or
// `--dialect vllm [serve] MODEL ...` selects the vLLM dialect (vLLM's flags, logs and HTTP API).
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	dialect, rest, err := SplitDialect(args)
	if err != nil {
		fmt.Fprintf(stderr, "refengine: %v\n", err)
		return 2
	}
	if wantsVersion(rest) {
		p, _, err := personaOf(dialect, rest)
		if err != nil {
			fmt.Fprintf(stderr, "refengine: %v\n", err)
			return 2
		}
		fmt.Fprintln(stdout, p.Version)
		return 0
	}
	var opts *Options
	if dialect == DialectVLLM {
		opts, err = ParseVLLMFlags(rest, stderr)
	} else {
		opts, err = ParseFlags(rest, stderr)
	}
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		if dialect == DialectVLLM {
			msg := strings.TrimPrefix(err.Error(), "usage: ")
			if !strings.HasPrefix(msg, "vllm serve: error: ") && !strings.HasPrefix(msg, "vllm: error: ") {
				msg = "vllm serve: error: " + msg
			}
			fmt.Fprintf(stderr, "%s\n%s\n", vllmUsageLine, msg)
			return 2
		}
		fmt.Fprintf(stderr, "refengine: %v\n", strings.TrimPrefix(err.Error(), "usage: "))
		return 2
	}
	lg := NewLogger(stderr, opts.TPSize)
	e, err := Build(opts, lg, nil)
	if errors.Is(err, errUsage) {
		fmt.Fprintf(stderr, "refengine: %v\n", strings.TrimPrefix(err.Error(), "usage: "))
		return 2
	}
	if err != nil {
		if dialect == DialectVLLM {
			if errors.Is(err, memplan.ErrNotEnoughMemory) {
				// vLLM V1's words for a KV budget that holds no block.
				err = fmt.Errorf("ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing the engine. (%w)", err)
			}
			(&Engine{Log: lg}).vllmFatal("Build", err)
			return 1
		}
		// SGLang's scheduler process dies with a Python traceback; print the same shape.
		lg.Error("Scheduler hit an exception: Traceback (most recent call last):\n"+
			"  File \"refengine/server/server.go\", in Build\n"+
			"RuntimeError: %v", err)
		return 1
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(opts.Host, fmt.Sprint(opts.Port)))
	if err != nil {
		if dialect == DialectVLLM {
			lg.VLLMRaw(tagAPIServer, "ERROR:    [Errno 98] error while attempting to bind on address (%s, %d): address already in use (%v)", opts.Host, opts.Port, err)
			return 1
		}
		lg.Error("ERROR: [Errno 98] error while attempting to bind on address (%s, %d): address already in use (%v)", opts.Host, opts.Port, err)
		return 1
	}
	if err := e.Serve(ctx, ln); err != nil {
		return 1
	}
	return 0
}

// SplitDialect picks the dialect from the front of a command line: `vllm serve ...` and
// `--dialect vllm [serve] ...` (or `--dialect=vllm`) are the vLLM dialect, `--dialect sglang ...`
// and anything else the SGLang dialect. It returns the remaining arguments. Between `vllm` and
// `serve` it takes --engine-version V (kept in the remaining arguments); `vllm [--engine-version
// V] --version` needs no serve.
func SplitDialect(args []string) (Dialect, []string, error) {
	if len(args) > 0 && args[0] == "vllm" {
		var pre []string
		i := 1
		for ; i < len(args) && args[i] != "serve"; i++ {
			a := args[i]
			switch {
			case a == "--version" || a == "-version" || strings.HasPrefix(a, EngineVersionFlag+"="):
				pre = append(pre, a)
			case a == EngineVersionFlag && i+1 < len(args):
				pre = append(pre, a, args[i+1])
				i++
			default:
				if wantsVersion(pre) {
					return DialectVLLM, pre, nil
				}
				return "", nil, errors.New("vllm: expected the serve subcommand (refengine vllm [--engine-version V] serve MODEL [vLLM flags])")
			}
		}
		if i >= len(args) {
			if wantsVersion(pre) {
				return DialectVLLM, pre, nil
			}
			return "", nil, errors.New("vllm: expected the serve subcommand (refengine vllm [--engine-version V] serve MODEL [vLLM flags])")
		}
		return DialectVLLM, append(pre, args[i+1:]...), nil
	}
	if len(args) == 0 {
		return DialectSGLang, args, nil
	}
	var d string
	var rest []string
	switch {
	case args[0] == "--dialect" || args[0] == "-dialect":
		if len(args) < 2 {
			return "", nil, errors.New("--dialect: expected sglang or vllm, got nothing")
		}
		d, rest = args[1], args[2:]
	case strings.HasPrefix(args[0], "--dialect="):
		d, rest = strings.TrimPrefix(args[0], "--dialect="), args[1:]
	default:
		return DialectSGLang, args, nil
	}
	switch Dialect(strings.ToLower(d)) {
	case DialectSGLang:
		return DialectSGLang, rest, nil
	case DialectVLLM:
		if len(rest) > 0 && rest[0] == "serve" {
			rest = rest[1:]
		}
		return DialectVLLM, rest, nil
	}
	return "", nil, fmt.Errorf("--dialect %q: expected sglang or vllm", d)
}
