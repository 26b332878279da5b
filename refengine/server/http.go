package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/reckon-ci/reckon/refengine/memplan"
	"github.com/reckon-ci/reckon/refengine/model"
	"github.com/reckon-ci/reckon/refengine/sched"
	"github.com/reckon-ci/reckon/refengine/tp"
	"github.com/reckon-ci/reckon/wire"
)

// maxTopLogprobs is the largest number of alternatives a request may ask for.
const maxTopLogprobs = 20

// maxBodyBytes bounds request bodies.
const maxBodyBytes = 8 << 20

// Handler is the engine's HTTP API.
func (e *Engine) Handler() http.Handler {
	if e.Opts.Dialect == DialectVLLM {
		return e.vllmHandler() // vllm_http.go
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /health", e.health)
	mux.HandleFunc("GET /health_generate", e.healthGenerate)
	mux.HandleFunc("GET /v1/models", e.models)
	mux.HandleFunc("POST /v1/completions", e.completions)
	mux.HandleFunc("POST /v1/chat/completions", e.chatCompletions) // chat.go
	mux.HandleFunc("POST /generate", e.generate)
	mux.HandleFunc("GET /get_server_info", e.serverInfo)
	mux.HandleFunc("GET /get_model_info", e.modelInfo)
	mux.HandleFunc("GET /flush_cache", e.flushCache)
	mux.HandleFunc("POST /flush_cache", e.flushCache)
	mux.HandleFunc("GET /metrics", e.metrics)
	mux.HandleFunc("GET /start_profile", e.sglangStartProfile)
	mux.HandleFunc("POST /start_profile", e.sglangStartProfile)
	mux.HandleFunc("GET /stop_profile", e.sglangStopProfile)
	mux.HandleFunc("POST /stop_profile", e.sglangStopProfile)
	known := map[string]string{"/health": "GET", "/health_generate": "GET", "/v1/models": "GET", "/v1/completions": "POST",
		"/v1/chat/completions": "POST", "/generate": "POST", "/get_server_info": "GET", "/get_model_info": "GET",
		"/flush_cache": "GET, POST", "/metrics": "GET", "/start_profile": "GET, POST", "/stop_profile": "GET, POST"}
	if !e.Opts.Persona.ServerInfoOnlyOld {
		// Newer releases serve the new names too (the old ones are deprecated aliases).
		mux.HandleFunc("GET /server_info", e.serverInfo)
		mux.HandleFunc("GET /model_info", e.modelInfo)
		known["/server_info"], known["/model_info"] = "GET", "GET"
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if allow, ok := known[r.URL.Path]; ok {
			w.Header().Set("Allow", allow)
			writeError(w, http.StatusMethodNotAllowed, "MethodNotAllowed", fmt.Sprintf("%s %s: method not allowed (use %s)", r.Method, r.URL.Path, allow))
			return
		}
		writeError(w, http.StatusNotFound, "NotFoundError", fmt.Sprintf("no route for %s %s", r.Method, r.URL.Path))
	})
	return mux
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, typ, msg string) {
	writeJSON(w, status, wire.ErrorResponse{Error: wire.ErrorBody{Message: msg, Type: typ, Code: status}})
}

func badRequest(w http.ResponseWriter, format string, args ...any) {
	writeError(w, http.StatusBadRequest, "BadRequestError", fmt.Sprintf(format, args...))
}

func (e *Engine) health(w http.ResponseWriter, _ *http.Request) {
	if !e.ready.Load() {
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	w.WriteHeader(http.StatusOK)
}

// healthGenerate is /health_generate: 503 until ready, then a one-token generation through the
// scheduler (200 when it completes, 503 when it fails).
func (e *Engine) healthGenerate(w http.ResponseWriter, r *http.Request) {
	if !e.ready.Load() {
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	if err := e.generateOne(r.Context()); err != nil {
		writeError(w, http.StatusServiceUnavailable, "ServiceUnavailableError", "health generation failed: "+err.Error())
		return
	}
	w.WriteHeader(http.StatusOK)
}

func (e *Engine) modelName() string {
	if e.Opts.ServedModelName != "" {
		return e.Opts.ServedModelName
	}
	return e.Opts.ModelPath
}

func (e *Engine) models(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, wire.ModelList{Object: "list", Data: []wire.ModelCard{{ID: e.modelName(), Object: "model", OwnedBy: "sglang", MaxLen: e.ContextLen}}})
}

func (e *Engine) modelInfo(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"model_path": e.Opts.ModelPath, "tokenizer_path": e.Opts.ModelPath, "is_generation": true,
		"preferred_sampling_params": nil, "weight_version": "default"})
}

func (e *Engine) flushCache(w http.ResponseWriter, _ *http.Request) {
	w.WriteHeader(http.StatusOK)
	fmt.Fprintln(w, "Cache flushed.\nPlease check backend logs for more details. (When there are running or waiting requests, the operation will not be performed.)")
}

// ServerInfo is what /server_info (/get_server_info) reports (also used by tests): the server
// arguments, version, KV capacity, memory usage and internal_states as SGLang reports them, and
// under "refengine" the facts only the reference engine knows (refengineFacts).
func (e *Engine) ServerInfo() map[string]any {
	st := e.Sched.Stats()
	p := e.Plans[0]
	// weight, kvcache and cuda_graph are the target model's, as SGLang reports them (and as the
	// log lines give them); the draft model's parts are reported separately.
	targetW := e.Group.Shard(tp.Target, 0).Bytes()
	targetKV := e.Group.KVStore(tp.Target, 0).Bytes()
	if e.Opts.ModelledMemory {
		targetW, targetKV = e.sizes.TargetWeights, e.sizes.kvTarget()
	}
	mem := map[string]any{
		"weight":           round4(memplan.GiB(targetW)),
		"kvcache":          round4(memplan.GiB(targetKV)),
		"token_capacity":   e.Alloc.CapacityTokens(),
		"cuda_graph":       round4(memplan.GiB(e.GraphTarget)),
		"draft_weight":     round4(memplan.GiB(p.Weights - targetW)),
		"draft_kvcache":    round4(memplan.GiB(e.kvBytes(0) - targetKV)),
		"draft_cuda_graph": round4(memplan.GiB(e.GraphDraft)),
		"custom_allreduce": round4(memplan.GiB(p.CustomAR)),
		"activations":      round4(memplan.GiB(p.Activations)),
		"fault_reserve":    round4(memplan.GiB(p.FaultReserve)),
		"leaked_tokens":    st.LeakedTokens,
		"leaked":           round4(memplan.GiB(int64(st.LeakedTokens) * e.kvBytes(0) / int64(max(1, e.Alloc.CapacityTokens())))),
	}
	internal := map[string]any{
		"memory_usage":                          mem,
		"max_total_num_tokens":                  e.Alloc.CapacityTokens(),
		"last_gen_throughput":                   st.LastGenThroughput,
		"avg_spec_accept_length":                nil,
		"effective_max_running_requests_per_dp": e.MaxRunning,
		"token_usage":                           st.TokenUsage(),
		"num_running_reqs":                      st.Running,
		"num_queue_reqs":                        st.Queued,
	}
	info := map[string]any{
		"model_path": e.Opts.ModelPath, "served_model_name": e.modelName(), "tp_size": e.Opts.TPSize,
		"host": e.Opts.Host, "port": e.Opts.Port, "dtype": e.Opts.DType, "mem_fraction_static": e.Opts.MemFractionStatic,
		"max_running_requests": e.MaxRunning, "chunked_prefill_size": e.Opts.ChunkedPrefill,
		"max_prefill_tokens": e.Opts.MaxPrefillTokens, "context_length": e.ContextLen, "page_size": e.Opts.PageSize,
		"cuda_graph_max_bs": e.Opts.CUDAGraphMaxBS, "disable_cuda_graph": e.Opts.DisableCUDAGraph,
		"disable_custom_all_reduce": e.Opts.DisableCustomAR, "random_seed": e.Opts.RandomSeed,
		"enable_deterministic_inference": e.Opts.Deterministic, "log_level": e.Opts.LogLevel,
		"speculative_algorithm": nil, "version": e.Opts.Persona.Version,
		"memory_usage": mem, "max_total_num_tokens": e.Alloc.CapacityTokens(),
		"last_gen_throughput": st.LastGenThroughput,
		"internal_states":     []map[string]any{internal},
		"refengine":           e.refengineFacts(st),
	}
	if e.Opts.Persona.GraphFlagDecode {
		// sglang server_args: the decode batch limit has its own name; the old one stays unset
		// (the real run's /get_server_info had cuda_graph_max_bs = None).
		info["cuda_graph_max_bs_decode"] = e.Opts.CUDAGraphMaxBS
		info["cuda_graph_max_bs"] = nil
	}
	if e.Opts.SpecAlgorithm != "" {
		al := st.AvgAcceptLength()
		info["speculative_algorithm"] = strings.ToUpper(e.Opts.SpecAlgorithm)
		info["speculative_num_steps"] = e.Opts.SpecNumSteps
		info["speculative_eagle_topk"] = e.Opts.SpecEagleTopK
		info["speculative_num_draft_tokens"] = e.Opts.SpecNumDraftTokens
		info["avg_spec_accept_length"] = al
		internal["avg_spec_accept_length"] = al
	}
	return info
}

// refengineFacts are what the reference engine knows about itself and no release reports: the
// persona, the modelled device and interconnect, the memory plan, the allreduce backend in effect
// and the engagement counters of the allreduce paths (was the custom path used, did its largest
// message stay within its buffer, did a fault alter results), the faults and the weight seed.
func (e *Engine) refengineFacts(st sched.Stats) map[string]any {
	p := e.Plans[0]
	gs := e.Group.Stats()
	return map[string]any{
		"persona": e.Opts.Persona.Name, "dialect": string(e.Opts.Dialect), "refengine_version": Version,
		"device_memory": e.Opts.DeviceMemory, "topology": e.Opts.Topology, "interconnect": e.Interconnect.Describe(),
		"allreduce_backend": e.Backend, "custom_allreduce_rule": e.CustomARRule,
		"custom_allreduce_disabled_reason":   nilIfEmpty(e.CustomDisabledReason),
		"custom_allreduce_forced":            e.CustomForced,
		"custom_allreduce_max_bytes":         e.CustomMaxBytes,
		"nccl_algorithm":                     string(e.NCCLAlgorithm),
		"custom_allreduce_calls":             gs.CustomCalls,
		"nccl_allreduce_calls":               gs.RingCalls + gs.TreeCalls,
		"nccl_ring_calls":                    gs.RingCalls,
		"nccl_tree_calls":                    gs.TreeCalls,
		"custom_allreduce_max_message_bytes": gs.MaxCustomBytes,
		"faulted_calls":                      gs.FaultedCalls,
		"modelled_comm_time_s":               st.CommTime.Seconds(),
		"fault_delay_s":                      st.FaultDelay.Seconds(),
		"generation_tokens_total":            st.GenerationTokensTotal,
		"memory_plan": map[string]any{
			"device": p.DeviceBytes, "fraction": e.Opts.MemFractionStatic, "static": p.Static, "weights": p.Weights,
			"custom_allreduce": p.CustomAR, "graph_reserve": p.GraphReserve, "activations": p.Activations,
			"fault_reserve": p.FaultReserve, "kv_cache": e.kvBytes(0), "available": e.available(0),
		},
		"faults": map[string]any{"allreduce_error": e.Opts.FaultAllReduceError, "allreduce_scale": e.Opts.FaultAllReduceScale,
			"allreduce_drop_rank_above": sizeOrNil(e.Opts.FaultDropRank, e.Opts.FaultDropRankAbove),
			"allreduce_stale_above":     sizeOrNil(e.Opts.FaultStale, e.Opts.FaultStaleAbove),
			"allreduce_min_batch":       e.Opts.FaultMinBatch, "reserve_mb": e.Opts.FaultReserveMB,
			"slowdown": e.Opts.FaultSlowdown, "crash_after": e.Opts.FaultCrashAfter, "hang_startup": e.Opts.FaultHangStartup,
			"leak_mb_per_request": e.Opts.FaultLeakMBPerReq},
		"weight_seed":     e.WeightSeed,
		"model_file_seed": e.FileSeed,
		"profiling":       e.prof.active(),
		"clock":           e.Opts.Clock,
		"device_clock":    e.deviceClockFacts(st),
	}
}

// deviceClockFacts describe the modelled device clock (nil on the wall clock): what is modelled
// (the GPU and the model whose size sets step times, while the real model computes every logit),
// the noise settings, and the counters, among them the steps whose real CPU compute overran the
// modelled time.
func (e *Engine) deviceClockFacts(st sched.Stats) any {
	if e.Device == nil {
		return nil
	}
	d := st.Device
	t := e.Device
	return map[string]any{
		"gpu": t.GPU.Name, "gpu_description": t.GPU.Display, "gpu_memory_bytes": t.GPU.MemoryBytes,
		"gpu_hbm_gbps": t.GPU.HBMGBps, "gpu_bf16_tflops": t.GPU.BF16TFLOPS, "gpu_source": t.GPU.Source,
		"model": t.Model.Name, "model_weight_bytes": t.Model.WeightBytes(), "model_source": t.Model.Source,
		"computed_model":  e.Cfg.Name,
		"note":            "step times are the modelled model's on the modelled GPU; the real (computed) model is the small one, which produces every logit",
		"describe":        t.Describe(),
		"modelled_memory": e.Opts.ModelledMemory,
		"slowdown":        e.Opts.FaultSlowdown,
		"noise": map[string]any{"step_cv": e.Opts.ClockStepCV, "step_period_s": e.Opts.ClockStepPeriod.Seconds(),
			"launch_cv": e.Opts.ClockLaunchCV, "drift_per_minute": e.Opts.ClockDriftPerMinute, "seed": e.Opts.ClockSeed,
			"launch": e.Launch, "launch_factor": d.LaunchFactor},
		"steps": d.Steps, "cpu_overrun_steps": d.Overruns, "worst_cpu_overrun_s": d.WorstOverrun.Seconds(),
		"modelled_s": d.Modelled.Seconds(), "real_compute_s": d.Real.Seconds(), "slept_s": d.Slept.Seconds(),
		"catch_up_s": e.Opts.ClockCatchUp.Seconds(), "repaid_s": d.Repaid.Seconds(),
		"modelled_compute_s": st.DeviceCompute.Seconds(),
	}
}

// sizeOrNil is a fault's size threshold in bytes, or nil when the fault is off.
func sizeOrNil(on bool, b int64) any {
	if !on {
		return nil
	}
	return b
}

func nilIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func round4(x float64) float64 { return float64(int64(x*1e4+0.5)) / 1e4 }

func (e *Engine) serverInfo(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, e.ServerInfo())
}

func (e *Engine) metrics(w http.ResponseWriter, _ *http.Request) {
	st := e.Sched.Stats()
	lbl := fmt.Sprintf(`{model_name=%q}`, e.modelName())
	var b strings.Builder
	m := func(name, typ, help string, v any) {
		fmt.Fprintf(&b, "# HELP sglang:%s %s\n# TYPE sglang:%s %s\nsglang:%s%s %v\n", name, help, name, typ, name, lbl, v)
	}
	m("num_running_reqs", "gauge", "The number of running requests.", st.Running)
	m("num_queue_reqs", "gauge", "The number of requests in the waiting queue.", st.Queued)
	m("num_used_tokens", "gauge", "The number of used KV cache tokens.", st.UsedTokens+st.LeakedTokens)
	m("max_total_num_tokens", "gauge", "KV cache token capacity.", st.CapacityTokens)
	m("token_usage", "gauge", "The token usage (fraction of the KV cache in use).", fmt.Sprintf("%.6f", st.TokenUsage()))
	m("gen_throughput", "gauge", "The generation throughput (token/s) of the last decode log window.", fmt.Sprintf("%.3f", st.LastGenThroughput))
	m("spec_accept_length", "gauge", "The average acceptance length of speculative decoding.", fmt.Sprintf("%.4f", st.AvgAcceptLength()))
	m("generation_tokens_total", "counter", "Number of generation tokens processed.", st.GenerationTokensTotal)
	m("prompt_tokens_total", "counter", "Number of prefill tokens processed.", st.PromptTokensTotal)
	m("num_requests_total", "counter", "Number of requests received.", st.RequestsTotal)
	w.Header().Set("Content-Type", "text/plain; version=0.0.4")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write([]byte(b.String()))
}

func newID(prefix string) string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// parsePrompts decodes an OpenAI prompt: a string, a list of token ids, a list of strings or a
// list of token-id lists.
func parsePrompts(raw json.RawMessage, vocab int) ([][]int, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, errors.New(`"prompt" is required`)
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return [][]int{model.Encode(s)}, nil
	}
	var ids []int
	if json.Unmarshal(raw, &ids) == nil {
		if len(ids) == 0 {
			return nil, errors.New(`"prompt" is an empty list`)
		}
		return [][]int{ids}, checkIDs(ids, vocab, 0)
	}
	var ss []string
	if json.Unmarshal(raw, &ss) == nil {
		if len(ss) == 0 {
			return nil, errors.New(`"prompt" is an empty list`)
		}
		out := make([][]int, len(ss))
		for i, s := range ss {
			out[i] = model.Encode(s)
		}
		return out, nil
	}
	var idss [][]int
	if json.Unmarshal(raw, &idss) == nil {
		if len(idss) == 0 {
			return nil, errors.New(`"prompt" is an empty list`)
		}
		for i, ids := range idss {
			if err := checkIDs(ids, vocab, i); err != nil {
				return nil, err
			}
		}
		return idss, nil
	}
	return nil, errors.New(`"prompt" must be a string, a list of strings, a list of token ids or a list of token-id lists`)
}

func checkIDs(ids []int, vocab, idx int) error {
	for i, t := range ids {
		if t < 0 || t >= vocab {
			return fmt.Errorf(`"prompt"[%d]: token id %d at index %d is out of range [0, %d)`, idx, t, i, vocab)
		}
	}
	return nil
}

func parseStop(raw json.RawMessage) ([]string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return []string{s}, nil
	}
	var ss []string
	if err := json.Unmarshal(raw, &ss); err != nil {
		return nil, errors.New(`"stop" must be a string or a list of strings`)
	}
	return ss, nil
}

func decodeBody(w http.ResponseWriter, r *http.Request, v any) bool {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBodyBytes))
	if err := dec.Decode(v); err != nil {
		badRequest(w, "invalid JSON body: %v", err)
		return false
	}
	return true
}

// submitted is one prompt's request with its position in the answer.
type submitted struct {
	idx    int
	prompt []int
	req    *sched.Request
}

func (e *Engine) submit(w http.ResponseWriter, reqs []*sched.Request) bool {
	for _, rq := range reqs {
		if err := e.Sched.Submit(rq); err != nil {
			// Requests already queued (reqs[:i]) end with the HTTP request's context.
			var tl *sched.InputTooLongError
			if errors.Is(err, sched.ErrClosed) {
				writeError(w, http.StatusServiceUnavailable, "ServiceUnavailableError", err.Error())
			} else if errors.As(err, &tl) {
				badRequest(w, "%s", tl.Error())
			} else {
				badRequest(w, "%v", err)
			}
			return false
		}
	}
	return true
}

func (e *Engine) completions(w http.ResponseWriter, r *http.Request) {
	if e.crashDue() {
		hangUp(w)
		return
	}
	var req wire.CompletionRequest
	if !decodeBody(w, r, &req) {
		return
	}
	prompts, err := parsePrompts(req.Prompt, e.Cfg.Vocab)
	if err != nil {
		badRequest(w, "%v", err)
		return
	}
	stop, err := parseStop(req.Stop)
	if err != nil {
		badRequest(w, "%v", err)
		return
	}
	sp := samplingOf(req.MaxTokens, defaultCompletionTokens, req.Temperature, req.TopP, req.MinTokens)
	if err := sp.check(); err != nil {
		badRequest(w, "%v", err)
		return
	}
	topk := -1
	if req.Logprobs != nil {
		topk = *req.Logprobs
		if topk < 0 || topk > maxTopLogprobs {
			badRequest(w, `"logprobs" must be between 0 and %d, got %d`, maxTopLogprobs, topk)
			return
		}
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	id := newID("cmpl-")
	subs := make([]submitted, len(prompts))
	reqs := make([]*sched.Request, len(prompts))
	for i, p := range prompts {
		rq := &sched.Request{ID: fmt.Sprintf("%s-%d", id, i), Prompt: p, MaxNew: sp.maxTokens, Temperature: sp.temperature, TopP: sp.topP,
			Seed: req.Seed, IgnoreEOS: req.IgnoreEOS, MinNew: sp.minTokens, Stop: stop, Logprobs: topk >= 0, TopLogprobs: max(topk, 0),
			PromptLogprobs: req.Echo && topk >= 0, Ctx: ctx}
		reqs[i] = rq
		subs[i] = submitted{idx: i, prompt: p, req: rq}
	}
	if !e.submit(w, reqs) {
		return
	}
	created := time.Now().Unix()
	if req.Stream {
		e.streamCompletions(w, r, id, created, &req, subs, stop)
		return
	}
	resp := wire.CompletionResponse{ID: id, Object: "text_completion", Created: created, Model: e.modelName()}
	usage := &wire.Usage{}
	for _, s := range subs {
		res := collect(s.req)
		if res.err != nil {
			writeError(w, http.StatusInternalServerError, "InternalServerError", res.err.Error())
			return
		}
		ch := wire.CompletionChoice{Index: s.idx, TokenIDs: res.tokens, PromptTokenIDs: s.prompt}
		text := res.text()
		var lp *wire.Logprobs
		if topk >= 0 {
			lp = &wire.Logprobs{Tokens: []string{}, TokenLogprobs: []*float64{}, TopLogprobs: []map[string]float64{}, TextOffset: []int{}}
		}
		off := 0
		if req.Echo {
			ptxt := model.Decode(s.prompt)
			if lp != nil {
				addPromptLogprobs(lp, s.prompt, res.prompt, &off)
			}
			text = ptxt + text
		}
		if lp != nil {
			n := res.keptTokens()
			for i := 0; i < n && i < len(res.pos); i++ {
				addLogprob(lp, res.pos[i], &off)
			}
		}
		ch.Text = text
		ch.Logprobs = lp
		fr := res.reason
		ch.FinishReason = &fr
		resp.Choices = append(resp.Choices, ch)
		usage.PromptTokens += len(s.prompt)
		usage.CompletionTokens += len(res.tokens)
	}
	usage.TotalTokens = usage.PromptTokens + usage.CompletionTokens
	resp.Usage = usage
	writeJSON(w, http.StatusOK, resp)
}

func addPromptLogprobs(lp *wire.Logprobs, prompt []int, pos []sched.Position, off *int) {
	for i, t := range prompt {
		txt := model.TokenText(t)
		lp.Tokens = append(lp.Tokens, txt)
		lp.TextOffset = append(lp.TextOffset, *off)
		*off += model.TokenBytes(t)
		if i == 0 || i-1 >= len(pos) {
			lp.TokenLogprobs = append(lp.TokenLogprobs, nil)
			lp.TopLogprobs = append(lp.TopLogprobs, nil)
			continue
		}
		p := pos[i-1]
		v := p.Logprob
		lp.TokenLogprobs = append(lp.TokenLogprobs, &v)
		lp.TopLogprobs = append(lp.TopLogprobs, topMap(p))
	}
}

func addLogprob(lp *wire.Logprobs, p sched.Position, off *int) {
	lp.Tokens = append(lp.Tokens, model.TokenText(p.Token))
	v := p.Logprob
	lp.TokenLogprobs = append(lp.TokenLogprobs, &v)
	lp.TopLogprobs = append(lp.TopLogprobs, topMap(p))
	lp.TextOffset = append(lp.TextOffset, *off)
	*off += model.TokenBytes(p.Token)
}

func topMap(p sched.Position) map[string]float64 {
	m := make(map[string]float64, len(p.Top))
	for _, c := range p.Top {
		m[model.TokenText(c.Token)] = c.Logprob
	}
	return m
}

// result is a finished request.
type result struct {
	tokens   []int
	pos      []sched.Position
	prompt   []sched.Position
	reason   string
	stop     string
	stopAt   int
	verifies int
	drafted  int // draft tokens proposed to the request's verify steps
	accepted int // of which the target accepted
	err      error
}

func collect(r *sched.Request) *result {
	res := &result{stopAt: -1}
	for ev := range r.Events() {
		switch {
		case ev.Prompt != nil:
			res.prompt = ev.Prompt
		case ev.Generated:
			res.tokens = append(res.tokens, ev.Token)
			if ev.Pos != nil {
				res.pos = append(res.pos, *ev.Pos)
			}
		case ev.Done:
			res.reason, res.stop, res.stopAt, res.err, res.verifies = ev.FinishReason, ev.MatchedStop, ev.StopAt, ev.Err, ev.SpecVerifies
			res.drafted, res.accepted = ev.SpecDraftTokens, ev.SpecAcceptedDrafts
		}
	}
	if res.reason == "" {
		res.reason = "abort"
	}
	return res
}

// text is the generated text, cut at the stop string.
func (r *result) text() string {
	t := model.Decode(r.tokens)
	if r.stopAt >= 0 && r.stopAt <= len(t) {
		t = t[:r.stopAt]
	}
	return t
}

// keptTokens is the number of generated tokens whose text is (at least partly) kept.
func (r *result) keptTokens() int {
	if r.stopAt < 0 {
		return len(r.tokens)
	}
	b := 0
	for i, t := range r.tokens {
		if b >= r.stopAt {
			return i
		}
		b += model.TokenBytes(t)
	}
	return len(r.tokens)
}

// safeCut moves n back so that b[:n] does not end inside a UTF-8 sequence.
func safeCut(b []byte, n int) int {
	for k := 1; k <= 3 && n-k >= 0; k++ {
		c := b[n-k]
		if c < 0x80 {
			return n
		}
		if c >= 0xC0 { // lead byte: is its sequence complete within b[:n]?
			if utf8.FullRune(b[n-k : n]) {
				return n
			}
			return n - k
		}
	}
	return n
}

func (e *Engine) streamCompletions(w http.ResponseWriter, r *http.Request, id string, created int64, req *wire.CompletionRequest, subs []submitted, stop []string) {
	stream := startSSE(w)
	send := stream.send
	hold := stopHold(stop)
	wantLP := req.Logprobs != nil
	var wg sync.WaitGroup
	var usageMu sync.Mutex
	usage := wire.Usage{}
	for _, s := range subs {
		wg.Add(1)
		go func(s submitted) {
			defer wg.Done()
			chunk := func(text string, lp *wire.Logprobs, fr *string, ids []int) {
				send(wire.CompletionResponse{ID: id, Object: "text_completion", Created: created, Model: e.modelName(),
					Choices: []wire.CompletionChoice{{Index: s.idx, Text: text, Logprobs: lp, FinishReason: fr, TokenIDs: ids}}})
			}
			off := 0
			if req.Echo {
				var lp *wire.Logprobs
				if wantLP {
					lp = &wire.Logprobs{}
				}
				var prompt []sched.Position
				// prompt logprobs arrive first when asked
				if wantLP {
					ev, ok := <-s.req.Events()
					if ok && ev.Prompt != nil {
						prompt = ev.Prompt
					}
					addPromptLogprobs(lp, s.prompt, prompt, &off)
				}
				chunk(model.Decode(s.prompt), lp, nil, nil)
			}
			var text []byte
			sent := 0
			n := 0
			for ev := range s.req.Events() {
				switch {
				case ev.Generated:
					n++
					text = append(text, []byte(model.Decode([]int{ev.Token}))...)
					upto := safeCut(text, max(sent, len(text)-hold))
					var lp *wire.Logprobs
					if wantLP && ev.Pos != nil {
						lp = &wire.Logprobs{}
						addLogprob(lp, *ev.Pos, &off)
					}
					chunk(string(text[sent:upto]), lp, nil, []int{ev.Token})
					sent = upto
				case ev.Done:
					end := len(text)
					if ev.StopAt >= 0 && ev.StopAt <= end {
						end = ev.StopAt
					}
					rest := ""
					if end > sent {
						rest = string(text[sent:end])
					}
					fr := ev.FinishReason
					chunk(rest, nil, &fr, nil)
					usageMu.Lock()
					usage.PromptTokens += len(s.prompt)
					usage.CompletionTokens += n
					usageMu.Unlock()
				}
			}
		}(s)
	}
	wg.Wait()
	if req.StreamOptions != nil && req.StreamOptions.IncludeUsage {
		usage.TotalTokens = usage.PromptTokens + usage.CompletionTokens
		send(wire.CompletionResponse{ID: id, Object: "text_completion", Created: created, Model: e.modelName(), Choices: []wire.CompletionChoice{}, Usage: &usage})
	}
	stream.done()
}

func (e *Engine) generate(w http.ResponseWriter, r *http.Request) {
	if e.crashDue() {
		hangUp(w)
		return
	}
	var req wire.GenerateRequest
	if !decodeBody(w, r, &req) {
		return
	}
	var prompt []int
	switch {
	case len(req.InputIDs) > 0:
		if err := checkIDs(req.InputIDs, e.Cfg.Vocab, 0); err != nil {
			badRequest(w, "%s", strings.Replace(err.Error(), `"prompt"[0]`, `"input_ids"`, 1))
			return
		}
		prompt = req.InputIDs
	case req.Text != "":
		prompt = model.Encode(req.Text)
	default:
		badRequest(w, `either "text" or "input_ids" is required`)
		return
	}
	sp := req.SamplingParams
	maxNew := 128
	if sp.MaxNewTokens != nil {
		maxNew = *sp.MaxNewTokens
	}
	if maxNew < 0 {
		badRequest(w, `"max_new_tokens" must be >= 0, got %d`, maxNew)
		return
	}
	temp := 1.0
	if sp.Temperature != nil {
		temp = *sp.Temperature
	}
	if temp < 0 {
		badRequest(w, `"temperature" must be >= 0, got %v`, temp)
		return
	}
	if req.TopLogprobsNum < 0 || req.TopLogprobsNum > maxTopLogprobs {
		badRequest(w, `"top_logprobs_num" must be between 0 and %d, got %d`, maxTopLogprobs, req.TopLogprobsNum)
		return
	}
	inputLP := req.ReturnLogprob && req.LogprobStart != nil && *req.LogprobStart >= 0
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	rid := newID("")
	rq := &sched.Request{ID: rid, Prompt: prompt, MaxNew: maxNew, Temperature: temp, IgnoreEOS: sp.IgnoreEOS, Stop: sp.Stop,
		Logprobs: req.ReturnLogprob, TopLogprobs: req.TopLogprobsNum, PromptLogprobs: inputLP, Ctx: ctx}
	if !e.submit(w, []*sched.Request{rq}) {
		return
	}
	start := time.Now()
	if req.Stream {
		stream := startSSE(w)
		var toks []int
		for ev := range rq.Events() {
			if ev.Generated {
				toks = append(toks, ev.Token)
			}
			if ev.Generated || ev.Done {
				res := &result{tokens: toks, stopAt: -1, reason: ev.FinishReason}
				if ev.Done {
					res.stopAt = ev.StopAt
				}
				out := wire.GenerateResponse{Text: res.text(), OutputIDs: toks, MetaInfo: wire.GenerateMeta{ID: rid, PromptTokens: len(prompt), CompletionTokens: len(toks), E2ELatency: time.Since(start).Seconds()}}
				if ev.Done {
					out.MetaInfo.FinishReason = map[string]any{"type": ev.FinishReason}
				}
				stream.send(out)
			}
		}
		stream.done()
		return
	}
	res := collect(rq)
	meta := wire.GenerateMeta{ID: rid, PromptTokens: len(prompt), CompletionTokens: len(res.tokens), E2ELatency: time.Since(start).Seconds()}
	fr := map[string]any{"type": res.reason}
	if res.stop != "" {
		fr["matched"] = res.stop
	}
	if res.reason == "length" {
		fr["length"] = len(res.tokens)
	}
	meta.FinishReason = fr
	if req.ReturnLogprob {
		pos := res.pos
		if e.specV2Truncates() && len(pos) > 1 {
			// Spec v2: only the first output token's logprob comes back (sglang#14046); the
			// output itself (output_ids, completion_tokens) is complete.
			pos = pos[:1]
		}
		for _, p := range pos {
			meta.OutputTokenLogprobs = append(meta.OutputTokenLogprobs, []any{p.Logprob, p.Token, nil})
			var top [][]any
			for _, c := range p.Top {
				top = append(top, []any{c.Logprob, c.Token, nil})
			}
			meta.OutputTopLogprobs = append(meta.OutputTopLogprobs, top)
		}
		if inputLP {
			meta.InputTokenLogprobs, meta.InputTopLogprobs = e.inputLogprobs(prompt, res.prompt, *req.LogprobStart)
		}
	}
	writeJSON(w, http.StatusOK, sglangGenerateResponse{Text: res.text(), OutputIDs: res.tokens, MetaInfo: e.specMeta(meta, res)})
}

// sglangGenerateResponse is /generate's answer: wire.GenerateResponse with the speculative
// decoding fields of meta_info that the persona's release reports.
type sglangGenerateResponse struct {
	Text      string         `json:"text"`
	OutputIDs []int          `json:"output_ids,omitempty"`
	MetaInfo  sglangMetaInfo `json:"meta_info"`
}

// sglangMetaInfo is wire.GenerateMeta plus the speculative fields (SGLang's tokenizer manager
// _calculate_spec_decoding_metrics): spec_verify_ct whenever the server speculates (0 included),
// and in 0.4 and later the acceptance length and the accepted / drafted token counts.
type sglangMetaInfo struct {
	wire.GenerateMeta
	SpecVerifyCount    *int     `json:"spec_verify_ct,omitempty"`
	SpecAcceptLength   *float64 `json:"spec_accept_length,omitempty"`
	SpecAcceptTokenNum *int     `json:"spec_accept_token_num,omitempty"`
	SpecDraftTokenNum  *int     `json:"spec_draft_token_num,omitempty"`
}

// specMeta adds the speculative fields to meta when the server speculates.
func (e *Engine) specMeta(meta wire.GenerateMeta, res *result) sglangMetaInfo {
	out := sglangMetaInfo{GenerateMeta: meta}
	if e.Opts.SpecAlgorithm == "" {
		return out
	}
	v := res.verifies
	out.SpecVerifyCount = &v
	if e.Opts.Persona.SpecAcceptMeta && v > 0 {
		al := float64(len(res.tokens)) / float64(v)
		acc, drafted := res.accepted, res.drafted
		out.SpecAcceptLength, out.SpecAcceptTokenNum, out.SpecDraftTokenNum = &al, &acc, &drafted
	}
	return out
}

// specV2Truncates reports whether output logprobs are cut to the first token: the persona's
// release runs spec v2 by default, the server speculates and SGLANG_ENABLE_SPEC_V2 is not 0/false.
func (e *Engine) specV2Truncates() bool {
	return e.Opts.Persona.SpecV2LogprobTruncation && e.Opts.SpecAlgorithm != "" && !envFalse(e.getenv("SGLANG_ENABLE_SPEC_V2"))
}

// inputLogprobs renders input_token_logprobs / input_top_logprobs from logprob_start_len on:
// current releases pad the first entry ([null, id, null]; scheduler: [None] +
// input_token_logprobs[:-1]), so there are prompt_tokens-start entries and entry j is prompt
// token start+j; old releases (InputLogprobsNoPad) start at token start+1 without a pad, so
// there are prompt_tokens-start-1.
func (e *Engine) inputLogprobs(prompt []int, scored []sched.Position, start int) ([][]any, [][][]any) {
	var vals [][]any
	var tops [][][]any
	first := start
	if e.Opts.Persona.InputLogprobsNoPad {
		first = start + 1
	}
	for i := first; i < len(prompt); i++ {
		if i == 0 || (i == start && !e.Opts.Persona.InputLogprobsNoPad) {
			vals = append(vals, []any{nil, prompt[i], nil})
			tops = append(tops, nil)
			continue
		}
		if i-1 >= len(scored) {
			break
		}
		pp := scored[i-1]
		vals = append(vals, []any{pp.Logprob, prompt[i], nil})
		// As SGLang: the top-k candidates of every prompt position (null for the first).
		top := [][]any{}
		for _, c := range pp.Top {
			top = append(top, []any{c.Logprob, c.Token, nil})
		}
		tops = append(tops, top)
	}
	return vals, tops
}

// Default output lengths when a request sets none: OpenAI's completions default, and the chat
// endpoint's.
const (
	defaultCompletionTokens = 16
	defaultChatTokens       = 128
)

// sampling is a request's sampling settings with the defaults filled in: the one home of those
// defaults for the completions and chat handlers of both dialects.
type sampling struct {
	maxTokens, minTokens int
	temperature, topP    float64
}

// samplingOf fills in the defaults: defaultMax tokens, temperature 1, top_p 1, no minimum.
func samplingOf(maxTokens *int, defaultMax int, temperature, topP *float64, minTokens *int) sampling {
	s := sampling{maxTokens: defaultMax, temperature: 1, topP: 1}
	if maxTokens != nil {
		s.maxTokens = *maxTokens
	}
	if temperature != nil {
		s.temperature = *temperature
	}
	if topP != nil {
		s.topP = *topP
	}
	if minTokens != nil {
		s.minTokens = *minTokens
	}
	return s
}

// check validates the settings with the SGLang dialect's wording (the vLLM dialect words its own).
func (s sampling) check() error {
	switch {
	case s.maxTokens < 0:
		return fmt.Errorf(`"max_tokens" must be >= 0, got %d`, s.maxTokens)
	case s.temperature < 0:
		return fmt.Errorf(`"temperature" must be >= 0, got %v`, s.temperature)
	case !(s.topP > 0 && s.topP <= 1):
		return fmt.Errorf(`"top_p" must be in (0, 1], got %v`, s.topP)
	}
	return nil
}

// sse is an event-stream answer: one `data:` event per value, flushed at once; safe for
// concurrent use.
type sse struct {
	w  http.ResponseWriter
	fl http.Flusher
	mu sync.Mutex
}

// startSSE answers with an event stream.
func startSSE(w http.ResponseWriter) *sse {
	fl, _ := w.(http.Flusher)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	return &sse{w: w, fl: fl}
}

// send writes v as one JSON event.
func (s *sse) send(v any) {
	b, _ := json.Marshal(v)
	s.raw(string(b))
}

// done ends the stream with the OpenAI sentinel.
func (s *sse) done() { s.raw("[DONE]") }

func (s *sse) raw(data string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fmt.Fprintf(s.w, "data: %s\n\n", data)
	if s.fl != nil {
		s.fl.Flush()
	}
}

// stopHold is how many trailing bytes of streamed text must be held back because they could
// be the start of a stop string.
func stopHold(stop []string) int {
	hold := 0
	for _, s := range stop {
		hold = max(hold, len(s)-1)
	}
	return hold
}
