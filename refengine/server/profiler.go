package server

import (
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/reckon-ci/reckon/refengine/collective"
	"github.com/reckon-ci/reckon/refengine/tp"
	"github.com/reckon-ci/reckon/wire/enginefacts"
)

// The torch profiler of both dialects: /start_profile and /stop_profile record, per TP rank, one
// kernel event for every allreduce call the ranks really ran while profiling was on (the
// algorithm that ran, its measured wall time), and write them as gzip'd Chrome trace JSON, the
// files torch.profiler's trace handlers write (SGLang: DIR/{profile_id}-TP-{rank}.trace.json.gz;
// vLLM: DIR/{worker_name}.{ms}.pt.trace.json.gz). While profiling is off the allreduce path pays
// one atomic load (tp.Group.SetAllReduceHook).

// Environment variables naming the profiler's output directory.
const (
	SGLangProfilerDirEnv = "SGLANG_TORCH_PROFILER_DIR"
	VLLMProfilerDirEnv   = "VLLM_TORCH_PROFILER_DIR"
)

// The CUDA stream and the CPU thread the trace events are placed on.
const (
	traceStream = 7
	traceCPUTid = 1
)

// errProfiling and errNotProfiling are the profiler's refusals (SGLang's words).
var (
	errProfiling    = errors.New("Profiling is already in progress. Call /stop_profile first.")
	errNotProfiling = errors.New("Profiling is not in progress. Call /start_profile first.")
)

// traceEvent is one complete ("X") event of a Chrome trace.
type traceEvent struct {
	Ph   string         `json:"ph"`
	Cat  string         `json:"cat"`
	Name string         `json:"name"`
	Pid  int            `json:"pid"`
	Tid  int            `json:"tid"`
	Ts   float64        `json:"ts"`
	Dur  float64        `json:"dur"`
	Args map[string]any `json:"args"`
}

// profiler is the engine's torch profiler: off, or recording into per-rank event lists.
type profiler struct {
	e  *Engine
	on atomic.Bool

	mu        sync.Mutex
	dir       string
	id        string // SGLang's profile id
	gpu, cpu  bool
	stepsLeft int // > 0: stop after that many forward steps (SGLang's num_steps)
	events    [][]traceEvent
	corr      int
}

func newProfiler(e *Engine) *profiler { return &profiler{e: e} }

// active reports whether profiling is on.
func (p *profiler) active() bool { return p != nil && p.on.Load() }

// start begins recording into dir and returns the profile id; steps > 0 stops after that many
// forward steps.
func (p *profiler) start(dir string, steps int, cpu, gpu bool) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("profiler output directory %s: %w", dir, err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.on.Load() {
		return "", errProfiling
	}
	p.dir, p.stepsLeft, p.cpu, p.gpu = dir, steps, cpu, gpu
	p.id = strconv.FormatFloat(float64(time.Now().UnixNano())/1e9, 'f', -1, 64)
	p.events = make([][]traceEvent, p.e.Opts.TPSize)
	p.corr = 0
	p.on.Store(true)
	p.e.Group.SetAllReduceHook(p.record)
	return p.id, nil
}

// stop ends recording and writes every rank's trace; it returns the files written.
func (p *profiler) stop() ([]string, error) {
	p.mu.Lock()
	if !p.on.Load() {
		p.mu.Unlock()
		return nil, errNotProfiling
	}
	p.e.Group.SetAllReduceHook(nil)
	p.on.Store(false)
	events, dir, id := p.events, p.dir, p.id
	p.events = nil
	p.mu.Unlock()
	var files []string
	for r, evs := range events {
		path := filepath.Join(dir, p.fileName(id, r))
		if err := writeTrace(path, p.trace(r, evs)); err != nil {
			return files, err
		}
		files = append(files, path)
	}
	return files, nil
}

// onStep counts a forward step against num_steps and stops the profiler (writing the traces,
// off the scheduler's goroutine) when they are done.
func (p *profiler) onStep() {
	if !p.on.Load() {
		return
	}
	p.mu.Lock()
	done := false
	if p.stepsLeft > 0 {
		p.stepsLeft--
		done = p.stepsLeft == 0
	}
	p.mu.Unlock()
	if done {
		go p.stopAndLog()
	}
}

// fileName is rank r's trace file name in the dialect's scheme.
func (p *profiler) fileName(id string, r int) string {
	if p.e.Opts.Dialect == DialectVLLM {
		return fmt.Sprintf("%s.%d.pt.trace.json.gz", p.workerName(r), time.Now().UnixMilli())
	}
	return fmt.Sprintf("%s-TP-%d.trace.json.gz", id, r)
}

// workerName is vLLM's worker name of rank r: host and process, and the rank (every vLLM worker
// is a process of its own; the reference engine's ranks share one).
func (p *profiler) workerName(r int) string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "localhost"
	}
	return fmt.Sprintf("%s_%d-rank-%d", host, os.Getpid(), r)
}

// record turns one allreduce call into a kernel event (and a cpu_op) on every rank.
func (p *profiler) record(rec tp.AllReduceRecord) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.on.Load() || p.events == nil {
		return
	}
	ts := float64(rec.Start.UnixNano()) / 1e3
	dur := float64(rec.Duration.Nanoseconds()) / 1e3
	kernel := p.kernelName(rec)
	for r := range p.events {
		p.corr++
		if p.cpu {
			p.events[r] = append(p.events[r], traceEvent{Ph: "X", Cat: "cpu_op", Name: p.cpuOpName(rec), Pid: os.Getpid(), Tid: traceCPUTid,
				Ts: ts, Dur: dur, Args: map[string]any{"External id": p.corr, "Record function id": 0, "Ev Idx": p.corr}})
		}
		if p.gpu {
			p.events[r] = append(p.events[r], traceEvent{Ph: "X", Cat: "kernel", Name: kernel, Pid: r, Tid: traceStream,
				Ts: ts, Dur: dur, Args: map[string]any{"device": r, "stream": traceStream, "correlation": p.corr,
					"External id": p.corr, "bytes": rec.Bytes}})
		}
	}
}

// kernelName is the CUDA kernel that the call's algorithm launches: NCCL's ring or tree LL
// kernel, or the custom allreduce's one-shot kernel (namespace sglang or vllm).
func (p *profiler) kernelName(rec tp.AllReduceRecord) string {
	if rec.Fused {
		// FlashInfer's fusion kernel (allreduce + residual + RMSNorm pattern 1), as torch
		// demangles it (wire/enginefacts.FlashInferFusionKernels).
		typ := "float"
		if rec.BF16 {
			typ = "__nv_bfloat16"
		}
		ns := "flashinfer::trtllm_allreduce_fusion::"
		return fmt.Sprintf("void %s%s<(%sAllReduceFusionPattern)1, %s, %d, true, true>(%sAllReduceFusionParams<%s>)",
			ns, enginefacts.FlashInferFusionKernels.Value(), ns, typ, rec.Ranks, ns, typ)
	}
	if rec.Algorithm == collective.OneShot {
		ns, typ := "sglang", "float"
		if p.e.Opts.Dialect == DialectVLLM {
			ns = "vllm"
		}
		if rec.BF16 {
			typ = "__nv_bfloat16"
		}
		return fmt.Sprintf("void %s::cross_device_reduce_1stage<%s, %d>(%s::RankData*, %s::RankSignals, %s::Signal*, %s*, int, int)",
			ns, typ, rec.Ranks, ns, ns, ns, typ)
	}
	dt, alg := "f32", "RING"
	if rec.BF16 {
		dt = "bf16"
	}
	if rec.Algorithm == collective.Tree {
		alg = "TREE"
	}
	return fmt.Sprintf("ncclDevKernel_AllReduce_Sum_%s_%s_LL(ncclDevKernelArgsStorage<4096ul>)", dt, alg)
}

// cpuOpName is the host-side op that launched the call.
func (p *profiler) cpuOpName(rec tp.AllReduceRecord) string {
	switch {
	case rec.Fused:
		return "flashinfer::trtllm_allreduce_fusion" // the torch op FlashInfer registers (flashinfer/comm/trtllm_ar.py)
	case rec.Algorithm != collective.OneShot:
		return "nccl:all_reduce"
	case p.e.Opts.Dialect == DialectVLLM:
		return "_C_custom_ar::all_reduce"
	}
	return "sgl_kernel::all_reduce"
}

// trace is rank r's Chrome trace document.
func (p *profiler) trace(r int, evs []traceEvent) map[string]any {
	if evs == nil {
		evs = []traceEvent{}
	}
	return map[string]any{
		"schemaVersion": 1,
		"deviceProperties": []map[string]any{{"id": r, "name": "RefEngine modelled GPU", "totalGlobalMem": p.e.Opts.DeviceMemory,
			"computeMajor": 9, "computeMinor": 0, "maxThreadsPerBlock": 1024, "numSms": 132, "warpSize": 32}},
		"distributedInfo": map[string]any{"backend": "nccl", "rank": r, "world_size": p.e.Opts.TPSize},
		"traceEvents":     evs,
		"displayTimeUnit": "ms",
	}
}

// writeTrace writes doc as gzip'd JSON to path, atomically: into path+".tmp" (which no trace
// reader's suffix matches), then renamed, so that a reader polling the directory never opens a
// half-written trace (seen under load).
func writeTrace(path string, doc any) error {
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return fmt.Errorf("profiler trace: %w", err)
	}
	fail := func(err error) error {
		f.Close()
		os.Remove(tmp)
		return fmt.Errorf("profiler trace %s: %w", path, err)
	}
	zw := gzip.NewWriter(f)
	if err := json.NewEncoder(zw).Encode(doc); err != nil {
		return fail(err)
	}
	if err := zw.Close(); err != nil {
		return fail(err)
	}
	if err := f.Close(); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("profiler trace %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("profiler trace %s: %w", path, err)
	}
	return nil
}

// stopAndLog stops the profiler and says so in the dialect's log lines.
func (p *profiler) stopAndLog() {
	e := p.e
	if e.Opts.Dialect == DialectVLLM {
		e.vlog(tagAPIServer, levelInfo, "api_server.py:1083", "Stopping profiler...")
	}
	files, err := p.stop()
	switch {
	case errors.Is(err, errNotProfiling):
		return
	case err != nil:
		if e.Opts.Dialect == DialectVLLM {
			e.vlog(tagEngineCore, levelError, "gpu_worker.py:420", "%v", err)
		} else {
			e.Log.Error("%v", err)
		}
		return
	}
	if e.Opts.Dialect == DialectVLLM {
		e.vlog(tagAPIServer, levelInfo, "api_server.py:1085", "Profiler stopped.")
		return
	}
	dir := ""
	if len(files) > 0 {
		dir = filepath.Dir(files[0])
	}
	for r := 0; r < e.Opts.TPSize; r++ {
		e.Log.Rank(r, "Profiling done. Traces are saved to: %s", dir)
	}
}

// sglangProfileReq is SGLang's ProfileReqInput (the fields the reference engine honours).
type sglangProfileReq struct {
	OutputDir  string   `json:"output_dir"`
	NumSteps   *int     `json:"num_steps"`
	Activities []string `json:"activities"`
}

// sglangStartProfile is SGLang's /start_profile.
func (e *Engine) sglangStartProfile(w http.ResponseWriter, r *http.Request) {
	var req sglangProfileReq
	if r.Body != nil && r.ContentLength != 0 {
		if !decodeBody(w, r, &req) {
			return
		}
	}
	dir := req.OutputDir
	if dir == "" {
		dir = e.getenv(SGLangProfilerDirEnv)
	}
	if dir == "" {
		dir = "/tmp"
	}
	steps := 0
	if req.NumSteps != nil {
		if *req.NumSteps < 1 {
			badRequest(w, `"num_steps" must be a positive number of forward steps, got %d`, *req.NumSteps)
			return
		}
		steps = *req.NumSteps
	}
	cpu, gpu := true, true
	if req.Activities != nil {
		cpu, gpu = false, false
		for _, a := range req.Activities {
			switch strings.ToUpper(a) {
			case "CPU":
				cpu = true
			case "GPU", "CUDA":
				gpu = true
			case "MEM":
			default:
				badRequest(w, `"activities": unknown activity %q (expected CPU, GPU or MEM)`, a)
				return
			}
		}
	}
	id, err := e.prof.start(dir, steps, cpu, gpu)
	if err != nil {
		plainText(w, http.StatusBadRequest, err.Error()+"\n")
		return
	}
	for rk := 0; rk < e.Opts.TPSize; rk++ {
		e.Log.Rank(rk, "Profiling starts. Traces will be saved to: %s (with profile id: %s)", dir, id)
	}
	plainText(w, http.StatusOK, "Start profiling.\n")
}

// sglangStopProfile is SGLang's /stop_profile.
func (e *Engine) sglangStopProfile(w http.ResponseWriter, _ *http.Request) {
	if !e.prof.active() {
		plainText(w, http.StatusBadRequest, errNotProfiling.Error()+"\n")
		return
	}
	for rk := 0; rk < e.Opts.TPSize; rk++ {
		e.Log.Rank(rk, "Stop profiling...")
	}
	e.prof.stopAndLog()
	plainText(w, http.StatusOK, "Stop profiling. This will take some time.\n")
}

// vllmProfilerDir is where the vLLM dialect's profiler writes ("" = profiling not configured,
// so /start_profile and /stop_profile do not exist, 404): --profiler-config (0.13 and later)
// or, in releases that still read it (before 0.16), VLLM_TORCH_PROFILER_DIR
// (wire/enginefacts.VLLMProfilerEnv, VLLMProfilerConfig).
func (e *Engine) vllmProfilerDir() string {
	if e.Opts.ProfilerDir != "" {
		return e.Opts.ProfilerDir
	}
	if e.Opts.Persona != nil && !e.Opts.Persona.ProfilerEnv {
		return ""
	}
	return e.getenv(VLLMProfilerDirEnv)
}

// vllmStartProfile is vLLM's /start_profile (an empty 200).
func (e *Engine) vllmStartProfile(w http.ResponseWriter, _ *http.Request) {
	e.vlog(tagAPIServer, levelInfo, "api_server.py:1071", "Starting profiler...")
	if _, err := e.prof.start(e.vllmProfilerDir(), 0, true, true); err != nil {
		writeJSON(w, http.StatusInternalServerError, map[string]string{"detail": err.Error()})
		return
	}
	e.vlog(tagAPIServer, levelInfo, "api_server.py:1073", "Profiler started.")
	w.WriteHeader(http.StatusOK)
}

// vllmStopProfile is vLLM's /stop_profile (an empty 200 once the traces are written).
func (e *Engine) vllmStopProfile(w http.ResponseWriter, _ *http.Request) {
	if !e.prof.active() {
		writeJSON(w, http.StatusInternalServerError, map[string]string{"detail": errNotProfiling.Error()})
		return
	}
	e.prof.stopAndLog()
	w.WriteHeader(http.StatusOK)
}

func plainText(w http.ResponseWriter, status int, body string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write([]byte(body))
}
