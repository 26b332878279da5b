package server

import (
	"context"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/reckon-ci/reckon/refengine/memplan"
	"github.com/reckon-ci/reckon/refengine/sched"
)

// vLLM's process tags and levels, and the source locations its lines carry (those of vLLM 0.11;
// the reference engine's own lines say [refengine]).
const (
	tagAPIServer  = "APIServer"
	tagEngineCore = "EngineCore_DP0"
	tagWorker     = "Worker"
	levelInfo     = "INFO"
	levelWarning  = "WARNING"
	levelError    = "ERROR"
	locRefengine  = "refengine"
)

// VLLMStatsIntervalEnv sets the seconds between the vLLM dialect's periodic stats lines, as
// vLLM's VLLM_LOG_STATS_INTERVAL does (default 10).
const VLLMStatsIntervalEnv = "VLLM_LOG_STATS_INTERVAL"

// VLLMDevModeEnv enables /server_info in the vLLM dialect, as VLLM_SERVER_DEV_MODE=1 does in vLLM.
const VLLMDevModeEnv = "VLLM_SERVER_DEV_MODE"

// vllmState is what the vLLM dialect keeps beside the engine core: the counters' origin (the
// warmup is not counted, as vLLM's dummy runs are not), request histograms and finish counts.
type vllmState struct {
	statsInterval time.Duration
	devMode       bool

	mu      sync.Mutex
	base    sched.Stats
	ttft    *histogram
	itl     *histogram
	e2e     *histogram
	success map[string]int64
}

// vllmInit reads the vLLM dialect's environment.
func (e *Engine) vllmInit() error {
	v := &vllmState{statsInterval: 10 * time.Second, success: map[string]int64{}, devMode: e.getenv(VLLMDevModeEnv) == "1",
		ttft: newHistogram(0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0),
		itl:  newHistogram(0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0),
		e2e:  newHistogram(0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0),
	}
	if s := strings.TrimSpace(e.getenv(VLLMStatsIntervalEnv)); s != "" {
		f, err := strconv.ParseFloat(s, 64)
		if err != nil || !(f > 0) || f > 86400 {
			return fmt.Errorf("%s=%q: expected seconds between stats lines, a number > 0 (vLLM's default is 10)", VLLMStatsIntervalEnv, s)
		}
		v.statsInterval = time.Duration(f * float64(time.Second))
	}
	e.v = v
	return nil
}

// flagName is a flag's name in the engine's dialect (errors name the flag the user typed).
func (o *Options) flagName(sglang string) string {
	if o.Dialect != DialectVLLM {
		return sglang
	}
	switch sglang {
	case "--tp-size":
		return "--tensor-parallel-size"
	case "--mem-fraction-static":
		return "--gpu-memory-utilization"
	case "--cuda-graph-max-bs":
		return "--max-cudagraph-capture-size"
	case "--chunked-prefill-size":
		return "--max-num-batched-tokens"
	}
	return sglang
}

func (e *Engine) vlog(tag, level, loc, format string, args ...any) {
	e.Log.VLLM(tag, level, loc, format, args...)
}

// rankTag is the process tag of rank r: vLLM's multiprocess workers at tp > 1, the engine core
// process itself at tp 1.
func (e *Engine) rankTag(r int) string {
	if e.Opts.TPSize > 1 {
		return fmt.Sprintf("Worker_TP%d", r)
	}
	return tagEngineCore
}

func (e *Engine) dtypeName() string {
	if e.Opts.DType == "bfloat16" {
		return "torch.bfloat16"
	}
	return "torch.float32"
}

// vllmHeader prints vLLM's first lines: version, the arguments given, the resolved model and the
// engine config dump.
func (e *Engine) vllmHeader() {
	o := e.Opts
	e.vlog(tagAPIServer, levelInfo, "api_server.py:1839", "vLLM API server version %s", e.Opts.Persona.Version)
	e.vlog(tagAPIServer, levelInfo, "utils.py:233", "non-default args: %s", formatNonDefaultArgs(o.NonDefaultArgs))
	e.vlog(tagAPIServer, levelInfo, "model.py:547", "Resolved architecture: %s", archName(e.Cfg))
	e.vlog(tagAPIServer, levelInfo, "model.py:1510", "Using max model len %d", e.ContextLen)
	e.vlog(tagAPIServer, levelInfo, "scheduler.py:205", "Chunked prefill is enabled with max_num_batched_tokens=%d.", o.ChunkedPrefill)
	spec := "None"
	if o.SpecAlgorithm != "" {
		spec = fmt.Sprintf("SpeculativeConfig(method='%s', model='%s', num_spec_tokens=%d)", strings.ToLower(o.SpecAlgorithm), o.ModelPath, o.SpecNumSteps)
	}
	e.vlog(tagEngineCore, levelInfo, "core.py:77", "Initializing a V1 LLM engine (v%s) with config: model='%s', speculative_config=%s, tokenizer='%s', skip_tokenizer_init=False, tokenizer_mode=auto, revision=None, trust_remote_code=False, dtype=%s, max_seq_len=%d, download_dir=None, load_format=auto, tensor_parallel_size=%d, pipeline_parallel_size=1, data_parallel_size=1, disable_custom_all_reduce=%s, quantization=None, enforce_eager=%s, kv_cache_dtype=auto, device_config=cpu, seed=%d, served_model_name=%s, enable_prefix_caching=False, chunked_prefill_enabled=True",
		e.Opts.Persona.Version, o.ModelPath, spec, o.ModelPath, e.dtypeName(), e.ContextLen, o.TPSize, pyBool(o.DisableCustomAR), pyBool(o.DisableCUDAGraph), o.RandomSeed, e.modelName())
	if dir := e.vllmProfilerDir(); dir != "" {
		e.vlog(tagAPIServer, levelWarning, "api_server.py:1062", "Torch profiler is enabled in the API server. This should ONLY be used for local development!")
		e.vlog(tagEngineCore, levelInfo, "gpu_worker.py:93", "Profiling enabled. Traces will be saved to: %s", dir)
	}
}

// vllmCaptureSizes are vLLM's CUDA graph capture sizes up to maxBS: 1, 2, 4, then multiples of 8
// up to 256, then multiples of 16.
func vllmCaptureSizes(maxBS int) []int {
	var out []int
	for _, b := range []int{1, 2, 4} {
		if b <= maxBS {
			out = append(out, b)
		}
	}
	for b := 8; b < 256 && b <= maxBS; b += 8 {
		out = append(out, b)
	}
	for b := 256; b <= maxBS; b += 16 {
		out = append(out, b)
	}
	if len(out) == 0 || out[len(out)-1] != maxBS {
		out = append(out, maxBS)
	}
	return out
}

// commaInt groups an integer's digits with commas, as vLLM's KV cache lines do.
func commaInt(n int) string {
	s := strconv.Itoa(n)
	if n < 0 {
		return "-" + commaInt(-n)
	}
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// vllmStartup prints the per-rank start-up lines of vLLM V1 (workers, model loading, KV cache,
// graph capture) and the reference engine's own summary lines, from the memory plan Build made.
// Sizes are GiB with four decimals (vLLM prints two; the engine is small).
func (e *Engine) vllmStartup(loadElapsed float64) {
	o := e.Opts
	n := o.TPSize
	backends := "['PYNCCL']"
	if e.Backend == "custom" {
		backends = "['CUSTOM', 'PYNCCL']"
	}
	spec := o.SpecAlgorithm != ""
	for r := 0; r < n; r++ {
		tag := e.rankTag(r)
		if n > 1 {
			e.vlog(tag, levelInfo, "parallel_state.py:1208", "rank %d in world size %d is assigned as DP rank 0, PP rank 0, TP rank %d, EP rank %d", r, n, r, r)
		}
		if r == 0 && n > 1 && o.Persona.ARBackendsLine {
			// Printed once, by rank 0, while the workers are still tagged "Worker pid=N".
			e.vlog(tagWorker, levelInfo, "cuda_communicator.py:245", "Using %s all-reduce backends (in dispatch order) for group 'tp:0'", backends)
		}
		if e.CustomDisabledReason != "" {
			e.vlog(tag, levelWarning, "custom_all_reduce.py:154", "%s", e.CustomDisabledReason)
		}
		e.vlog(tag, levelInfo, "gpu_model_runner.py:2602", "Starting to load model %s...", o.ModelPath)
		if spec {
			e.vlog(tag, levelInfo, "gpu_model_runner.py:2620", "Loading drafter model...")
		}
		e.vlog(tag, levelInfo, "default_loader.py:267", "Loading weights took %.2f seconds", loadElapsed)
		p := e.Plans[r]
		e.vlog(tag, levelInfo, "gpu_model_runner.py:2653", "Model loading took %.4f GiB and %.6f seconds", memplan.GiB(p.Weights), loadElapsed)
		if p.FaultReserve > 0 {
			e.vlog(tag, levelInfo, locRefengine, "Fault injection: reserving %.4f GiB per rank (--fault-reserve-mb %g).", memplan.GiB(p.FaultReserve), o.FaultReserveMB)
		}
		e.vlog(tag, levelInfo, "gpu_worker.py:298", "Available KV cache memory: %.4f GiB", memplan.GiB(e.kvBytes(r)))
	}
	tokens := e.Alloc.CapacityTokens()
	e.vlog(tagEngineCore, levelInfo, "kv_cache_utils.py:1087", "GPU KV cache size: %s tokens", commaInt(tokens))
	e.vlog(tagEngineCore, levelInfo, "kv_cache_utils.py:1091", "Maximum concurrency for %s tokens per request: %.2fx", commaInt(e.ContextLen), float64(tokens)/float64(e.ContextLen))
	if !o.DisableCUDAGraph {
		sizes := vllmCaptureSizes(o.CUDAGraphMaxBS)
		e.Log.Raw("Capturing CUDA graphs (mixed prefill-decode, PIECEWISE): 100%%|██████████| %d/%d [00:00<00:00, 999.99it/s]", len(sizes), len(sizes))
		for r := 0; r < n; r++ {
			if e.Backend == "custom" && o.Persona.RegisteringLine {
				e.vlog(e.rankTag(r), levelInfo, "custom_all_reduce.py:203", "Registering %d cuda graph addresses", 2*e.Cfg.Layers*len(sizes))
			}
			e.vlog(e.rankTag(r), levelInfo, "gpu_model_runner.py:3480", "Graph capturing finished in 0 secs, took %.4f GiB", memplan.GiB(e.GraphBytes))
		}
	}
}

// vllmRoutes are the routes the vLLM dialect serves (listed at start-up as vLLM does).
var vllmRoutes = [][2]string{{"/health", "GET"}, {"/ping", "GET, POST"}, {"/version", "GET"}, {"/v1/models", "GET"},
	{"/v1/completions", "POST"}, {"/metrics", "GET"}, {"/reset_prefix_cache", "POST"}, {"/server_info", "GET"},
	{"/start_profile", "POST"}, {"/stop_profile", "POST"}}

// vllmServes reports whether the route is served: /server_info only in dev mode, the profiler's
// routes only when profiling is configured.
func (e *Engine) vllmServes(route string) bool {
	switch route {
	case "/server_info":
		return e.v.devMode
	case "/start_profile", "/stop_profile":
		return e.vllmProfilerDir() != ""
	}
	return true
}

// vllmReady prints the end of vLLM's start-up: engine init time, the block count, the API server
// and uvicorn lines. It runs once the warmup request has gone through (vLLM's warmup is part
// of engine init; its HTTP server starts after it).
func (e *Engine) vllmReady(addr *net.TCPAddr) {
	st := e.Sched.Stats()
	e.v.mu.Lock()
	e.v.base = st
	e.v.mu.Unlock()
	e.vlog(tagEngineCore, levelInfo, "core.py:210", "init engine (profile, create kv cache, warmup model) took %.2f seconds", time.Since(e.started).Seconds())
	e.vlog(tagAPIServer, levelInfo, "loggers.py:147", "Engine 000: vllm cache_config_info with initialization after num_gpu_blocks is: %d", e.Alloc.CapacityTokens()/e.Opts.PageSize)
	e.vlog(tagAPIServer, levelInfo, "api_server.py:1634", "Supported_tasks: ['generate']")
	hostPort := net.JoinHostPort(e.Opts.Host, strconv.Itoa(addr.Port))
	if e.Opts.Persona.NewReadyLine {
		e.vlog(tagAPIServer, levelInfo, "api_server.py:583", "Starting vLLM server on http://%s", hostPort)
	} else {
		e.vlog(tagAPIServer, levelInfo, "api_server.py:1912", "Starting vLLM API server 0 on http://%s", hostPort)
	}
	e.vlog(tagAPIServer, levelInfo, "launcher.py:34", "Available routes are:")
	for _, r := range vllmRoutes {
		if !e.vllmServes(r[0]) {
			continue
		}
		e.vlog(tagAPIServer, levelInfo, "launcher.py:42", "Route: %s, Methods: %s", r[0], r[1])
	}
	e.Log.VLLMUvicorn(tagAPIServer, "INFO:     Started server process [%d]", os.Getpid())
	e.Log.VLLMUvicorn(tagAPIServer, "INFO:     Waiting for application startup.")
	e.Log.VLLMUvicorn(tagAPIServer, "INFO:     Application startup complete.")
}

// vllmStatsLoop prints vLLM V1's periodic stats line (and the spec-decoding line when drafts were
// verified) every stats interval, while the current or the previous interval saw tokens, until
// ctx ends.
func (e *Engine) vllmStatsLoop(ctx context.Context) {
	if e.Opts.DisableLogStats {
		return
	}
	tick := time.NewTicker(e.v.statsInterval)
	defer tick.Stop()
	last := e.Sched.Stats()
	lastT := time.Now()
	prevActive := false
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tick.C:
			st := e.Sched.Stats()
			dt := now.Sub(lastT).Seconds()
			prompt := float64(st.PromptTokensTotal-last.PromptTokensTotal) / dt
			gen := float64(st.GenerationTokensTotal-last.GenerationTokensTotal) / dt
			active := prompt > 0 || gen > 0
			if active || prevActive {
				e.vlog(tagAPIServer, levelInfo, "loggers.py:127", "Engine 000: Avg prompt throughput: %.1f tokens/s, Avg generation throughput: %.1f tokens/s, Running: %d reqs, Waiting: %d reqs, GPU KV cache usage: %.1f%%, Prefix cache hit rate: 0.0%%",
					prompt, gen, st.Running, st.Queued, 100*st.TokenUsage())
			}
			if drafts := st.SpecVerifies - last.SpecVerifies; drafts > 0 {
				acc := st.SpecDraftAccepted - last.SpecDraftAccepted
				drafted := st.SpecDraftTokens - last.SpecDraftTokens
				rates := make([]string, len(st.SpecAcceptedPerPos))
				for i := range rates {
					prev := int64(0)
					if i < len(last.SpecAcceptedPerPos) {
						prev = last.SpecAcceptedPerPos[i]
					}
					rates[i] = fmt.Sprintf("%.3f", float64(st.SpecAcceptedPerPos[i]-prev)/float64(drafts))
				}
				e.vlog(tagAPIServer, levelInfo, "metrics.py:96", "SpecDecoding metrics: Mean acceptance length: %.2f, Accepted throughput: %.2f tokens/s, Drafted throughput: %.2f tokens/s, Accepted: %d tokens, Drafted: %d tokens, Per-position acceptance rate: %s, Avg Draft acceptance rate: %.1f%%",
					1+float64(acc)/float64(drafts), float64(acc)/dt, float64(drafted)/dt, acc, drafted, strings.Join(rates, ", "), 100*float64(acc)/float64(max(drafted, 1)))
			}
			prevActive = active
			last, lastT = st, now
		}
	}
}

// vllmFatal prints an engine-core failure as vLLM V1 does: the fatal-error line and its
// traceback from the engine core, then the API server's dead-engine error.
func (e *Engine) vllmFatal(where string, err error) {
	e.vlog(tagEngineCore, levelError, "core.py:710", "EngineCore encountered a fatal error.\nTraceback (most recent call last):\n  File \"refengine/server/%s\", in %s\nRuntimeError: %v", "server.go", where, err)
	e.vlog(tagAPIServer, levelError, "async_llm.py:480", "AsyncLLM output_handler failed.\nvllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. See stack trace (above) for the root cause.")
}
