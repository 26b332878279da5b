package server

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/reckon-ci/reckon/refengine/model"
	"github.com/reckon-ci/reckon/refengine/sched"
	"github.com/reckon-ci/reckon/wire"
)

// The vLLM dialect's HTTP API: the routes and response shapes of vLLM's OpenAI-compatible server
// (vllm/entrypoints/openai), over the same scheduler as the SGLang dialect.

// vllmHandler is the vLLM dialect's router. Unknown routes answer FastAPI's 404 body, so a client
// probing for SGLang's /generate learns that it is talking to vLLM.
func (e *Engine) vllmHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /health", e.health)
	mux.HandleFunc("GET /ping", e.health)
	mux.HandleFunc("POST /ping", e.health)
	mux.HandleFunc("GET /version", e.vllmVersion)
	mux.HandleFunc("GET /v1/models", e.vllmModels)
	mux.HandleFunc("POST /v1/completions", e.vllmCompletions)
	mux.HandleFunc("GET /metrics", e.vllmMetrics)
	mux.HandleFunc("POST /reset_prefix_cache", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	if e.v.devMode {
		mux.HandleFunc("GET /server_info", e.vllmServerInfo)
	}
	if e.vllmProfilerDir() != "" {
		mux.HandleFunc("POST /start_profile", e.vllmStartProfile)
		mux.HandleFunc("POST /stop_profile", e.vllmStopProfile)
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		for _, rt := range vllmRoutes {
			if rt[0] == r.URL.Path && e.vllmServes(rt[0]) {
				w.Header().Set("Allow", rt[1])
				writeJSON(w, http.StatusMethodNotAllowed, map[string]string{"detail": "Method Not Allowed"})
				return
			}
		}
		writeJSON(w, http.StatusNotFound, map[string]string{"detail": "Not Found"})
	})
	return mux
}

func (e *Engine) vllmVersion(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"version": e.Opts.Persona.Version})
}

// vllmModelCard is one entry of vLLM's /v1/models.
type vllmModelCard struct {
	ID          string  `json:"id"`
	Object      string  `json:"object"`
	Created     int64   `json:"created"`
	OwnedBy     string  `json:"owned_by"`
	Root        string  `json:"root"`
	Parent      *string `json:"parent"`
	MaxModelLen int     `json:"max_model_len"`
}

func (e *Engine) vllmModels(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": []vllmModelCard{{ID: e.modelName(), Object: "model",
		Created: e.started.Unix(), OwnedBy: "vllm", Root: e.Opts.ModelPath, MaxModelLen: e.ContextLen}}})
}

// vllmServerInfo is /server_info, served only with VLLM_SERVER_DEV_MODE=1 as in vLLM: the engine
// config as text (vLLM's vllm_config) and, under "refengine", the SGLang dialect's /server_info
// with its "refengine" facts merged in (memory plan, allreduce backend and engagement counters).
func (e *Engine) vllmServerInfo(w http.ResponseWriter, _ *http.Request) {
	o := e.Opts
	cfg := fmt.Sprintf("model='%s', tensor_parallel_size=%d, dtype=%s, max_model_len=%d, gpu_memory_utilization=%g, block_size=%d, max_num_seqs=%d, max_num_batched_tokens=%d, disable_custom_all_reduce=%s, enforce_eager=%s, max_cudagraph_capture_size=%d, speculative_config=%s, seed=%d",
		o.ModelPath, o.TPSize, e.dtypeName(), e.ContextLen, o.MemFractionStatic, o.PageSize, e.MaxRunning, o.ChunkedPrefill,
		pyBool(o.DisableCustomAR), pyBool(o.DisableCUDAGraph), o.CUDAGraphMaxBS, pySpecConfig(o), o.RandomSeed)
	info := e.ServerInfo()
	facts, _ := info["refengine"].(map[string]any)
	delete(info, "refengine")
	for k, v := range facts {
		info[k] = v
	}
	writeJSON(w, http.StatusOK, map[string]any{"vllm_config": cfg, "refengine": info})
}

// vllmLogprob is one entry of vLLM's prompt_logprobs.
type vllmLogprob struct {
	Logprob      float64 `json:"logprob"`
	Rank         int     `json:"rank"`
	DecodedToken string  `json:"decoded_token"`
}

// vllmChoice is a choice of vLLM's CompletionResponse.
type vllmChoice struct {
	Index          int                       `json:"index"`
	Text           string                    `json:"text"`
	Logprobs       *wire.Logprobs            `json:"logprobs"`
	FinishReason   *string                   `json:"finish_reason"`
	StopReason     any                       `json:"stop_reason"`
	TokenIDs       []int                     `json:"token_ids"`
	PromptLogprobs []map[string]*vllmLogprob `json:"prompt_logprobs"`
	PromptTokenIDs []int                     `json:"prompt_token_ids"`
}

// vllmUsage is vLLM's UsageInfo.
type vllmUsage struct {
	PromptTokens        int `json:"prompt_tokens"`
	TotalTokens         int `json:"total_tokens"`
	CompletionTokens    int `json:"completion_tokens"`
	PromptTokensDetails any `json:"prompt_tokens_details"`
}

// vllmResponse is vLLM's CompletionResponse.
type vllmResponse struct {
	ID                string       `json:"id"`
	Object            string       `json:"object"`
	Created           int64        `json:"created"`
	Model             string       `json:"model"`
	Choices           []vllmChoice `json:"choices"`
	ServiceTier       any          `json:"service_tier"`
	SystemFingerprint any          `json:"system_fingerprint"`
	Usage             *vllmUsage   `json:"usage"`
	KVTransferParams  any          `json:"kv_transfer_params"`
}

// vllmStreamChoice and vllmStreamChunk are the SSE chunks (vLLM leaves unset fields out).
type vllmStreamChoice struct {
	Index          int            `json:"index"`
	Text           string         `json:"text"`
	Logprobs       *wire.Logprobs `json:"logprobs"`
	FinishReason   *string        `json:"finish_reason"`
	StopReason     any            `json:"stop_reason"`
	TokenIDs       []int          `json:"token_ids,omitempty"`
	PromptTokenIDs []int          `json:"prompt_token_ids,omitempty"`
}

type vllmStreamChunk struct {
	ID      string             `json:"id"`
	Object  string             `json:"object"`
	Created int64              `json:"created"`
	Model   string             `json:"model"`
	Choices []vllmStreamChoice `json:"choices"`
	Usage   *vllmUsage         `json:"usage,omitempty"`
}

// vllmTokens names tokens in logprobs as vLLM does: their text, or "token_id:N" with
// return_tokens_as_token_ids (per request, or --return-tokens-as-token-ids).
type vllmTokens bool

func (asIDs vllmTokens) name(id int) string {
	if asIDs {
		return "token_id:" + strconv.Itoa(id)
	}
	return model.TokenText(id)
}

// vllmLP clamps -inf as vLLM does (OpenAI's JSON has no infinities).
func vllmLP(x float64) float64 { return math.Max(x, -9999.0) }

// top is vLLM's top_logprobs entry of a position: the top-k candidates and the position's own
// token (which vLLM always includes, so k or k+1 entries).
func (asIDs vllmTokens) top(p sched.Position, k int) map[string]float64 {
	m := make(map[string]float64, k+1)
	for _, c := range p.Top[:min(k, len(p.Top))] {
		m[asIDs.name(c.Token)] = vllmLP(c.Logprob)
	}
	m[asIDs.name(p.Token)] = vllmLP(p.Logprob)
	return m
}

// promptEntry is vLLM's prompt_logprobs entry of a position: token id -> {logprob, rank,
// decoded_token} for the prompt token and the top-k candidates.
func (asIDs vllmTokens) promptEntry(p sched.Position, k int) map[string]*vllmLogprob {
	m := make(map[string]*vllmLogprob, k+1)
	for i, c := range p.Top[:min(k, len(p.Top))] {
		m[strconv.Itoa(c.Token)] = &vllmLogprob{Logprob: vllmLP(c.Logprob), Rank: i + 1, DecodedToken: asIDs.name(c.Token)}
	}
	m[strconv.Itoa(p.Token)] = &vllmLogprob{Logprob: vllmLP(p.Logprob), Rank: p.Rank, DecodedToken: asIDs.name(p.Token)}
	return m
}

func (asIDs vllmTokens) addPrompt(lp *wire.Logprobs, prompt []int, pos []sched.Position, k int, off *int) {
	for i, t := range prompt {
		lp.Tokens = append(lp.Tokens, asIDs.name(t))
		lp.TextOffset = append(lp.TextOffset, *off)
		*off += model.TokenBytes(t)
		if i == 0 || i-1 >= len(pos) {
			lp.TokenLogprobs = append(lp.TokenLogprobs, nil)
			lp.TopLogprobs = append(lp.TopLogprobs, nil)
			continue
		}
		v := vllmLP(pos[i-1].Logprob)
		lp.TokenLogprobs = append(lp.TokenLogprobs, &v)
		lp.TopLogprobs = append(lp.TopLogprobs, asIDs.top(pos[i-1], k))
	}
}

func (asIDs vllmTokens) add(lp *wire.Logprobs, p sched.Position, k int, off *int) {
	lp.Tokens = append(lp.Tokens, asIDs.name(p.Token))
	v := vllmLP(p.Logprob)
	lp.TokenLogprobs = append(lp.TokenLogprobs, &v)
	lp.TopLogprobs = append(lp.TopLogprobs, asIDs.top(p, k))
	lp.TextOffset = append(lp.TextOffset, *off)
	*off += model.TokenBytes(p.Token)
}

// vllmRequestTimes observes one request for the latency histograms.
type vllmRequestTimes struct {
	arrival, last time.Time
	first         bool
}

func (e *Engine) observeToken(rt *vllmRequestTimes, now time.Time) {
	e.v.mu.Lock()
	defer e.v.mu.Unlock()
	if !rt.first {
		rt.first = true
		e.v.ttft.observe(now.Sub(rt.arrival).Seconds())
	} else {
		e.v.itl.observe(now.Sub(rt.last).Seconds())
	}
	rt.last = now
}

func (e *Engine) observeDone(rt *vllmRequestTimes, reason string) {
	e.v.mu.Lock()
	defer e.v.mu.Unlock()
	e.v.e2e.observe(time.Since(rt.arrival).Seconds())
	e.v.success[reason]++
}

// collectTimed is collect with the request's token times observed.
func (e *Engine) collectTimed(r *sched.Request, rt *vllmRequestTimes) *result {
	res := &result{stopAt: -1}
	for ev := range r.Events() {
		switch {
		case ev.Prompt != nil:
			res.prompt = ev.Prompt
		case ev.Generated:
			e.observeToken(rt, time.Now())
			res.tokens = append(res.tokens, ev.Token)
			if ev.Pos != nil {
				res.pos = append(res.pos, *ev.Pos)
			}
		case ev.Done:
			res.reason, res.stop, res.stopAt, res.err, res.verifies = ev.FinishReason, ev.MatchedStop, ev.StopAt, ev.Err, ev.SpecVerifies
		}
	}
	if res.reason == "" {
		res.reason = "abort"
	}
	e.observeDone(rt, res.reason)
	return res
}

// stopReason is vLLM's stop_reason: the stop string that ended the request, else null (EOS and
// length).
func stopReason(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// vllmCompletions is POST /v1/completions in vLLM's shape: prompt_logprobs, echo with the
// prompt's logprobs first, return_token_ids (token_ids, prompt_token_ids), return_tokens_as_token_ids
// ("token_id:N" token names), top_logprobs that always hold the position's own token, stop_reason,
// and vLLM's checks against --max-logprobs and max_model_len.
func (e *Engine) vllmCompletions(w http.ResponseWriter, r *http.Request) {
	arrival := time.Now()
	if e.crashDue() {
		hangUp(w)
		return
	}
	if e.failDue() {
		e.failRequest(w)
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
	topk, promptK := vllmLogprobsK(&req)
	if msg := e.vllmInvalid(&req, sp, topk, prompts); msg != "" {
		badRequest(w, "%s", msg)
		return
	}
	asIDs := vllmTokens(req.ReturnTokensAsTokenIDs || e.Opts.TokensAsTokenIDs)
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	id := newID("cmpl-")
	subs := make([]submitted, len(prompts))
	reqs := make([]*sched.Request, len(prompts))
	for i, p := range prompts {
		rq := &sched.Request{ID: fmt.Sprintf("%s-%d", id, i), Prompt: p, MaxNew: sp.maxTokens, Temperature: sp.temperature, TopP: sp.topP,
			Seed: req.Seed, IgnoreEOS: req.IgnoreEOS, MinNew: sp.minTokens, Stop: stop, Logprobs: topk >= 0, TopLogprobs: max(topk, promptK, 0),
			PromptLogprobs: promptK >= 0, Ctx: ctx,
			// vllm/v1/spec_decode/utils.py is_spec_decode_unsupported (before ~0.14): a request
			// with logprobs or prompt_logprobs is decoded without speculation.
			NoSpec: e.Opts.Persona.SpecSkipLogprobs && (req.Logprobs != nil || req.PromptLogprobs != nil)}
		reqs[i] = rq
		subs[i] = submitted{idx: i, prompt: p, req: rq}
	}
	if !e.submit(w, reqs) {
		return
	}
	created := time.Now().Unix()
	if req.Stream {
		e.vllmStream(w, id, created, &req, subs, stop, asIDs, arrival)
		return
	}
	resp := vllmResponse{ID: id, Object: "text_completion", Created: created, Model: e.modelName(), Usage: &vllmUsage{}}
	for _, s := range subs {
		res := e.collectTimed(s.req, &vllmRequestTimes{arrival: arrival})
		if res.err != nil {
			writeError(w, http.StatusInternalServerError, "InternalServerError", res.err.Error())
			return
		}
		resp.Choices = append(resp.Choices, vllmChoiceOf(&req, s, res, topk, promptK, asIDs))
		resp.Usage.PromptTokens += len(s.prompt)
		resp.Usage.CompletionTokens += len(res.tokens)
	}
	resp.Usage.TotalTokens = resp.Usage.PromptTokens + resp.Usage.CompletionTokens
	writeJSON(w, http.StatusOK, resp)
}

// vllmLogprobsK returns the top-k of the sampled tokens' logprobs and of the prompt's (-1: not
// asked). As in vLLM, echo with logprobs scores the prompt with the same k.
func vllmLogprobsK(req *wire.CompletionRequest) (topk, promptK int) {
	topk = -1
	if req.Logprobs != nil {
		topk = *req.Logprobs
	}
	promptK = -1
	if req.PromptLogprobs != nil {
		promptK = *req.PromptLogprobs
	}
	if promptK < 0 && req.Echo && topk >= 0 {
		promptK = topk // vLLM: echo with logprobs scores the prompt with the same k
	}
	return topk, promptK
}

// vllmInvalid is vLLM's 400 message for a completion request it rejects (sampling parameters,
// logprobs above --max-logprobs, prompt logprobs in a stream, a prompt that does not fit
// max_model_len); "" when the request is valid.
func (e *Engine) vllmInvalid(req *wire.CompletionRequest, sp sampling, topk int, prompts [][]int) string {
	maxTok, temp, topP, minTok := sp.maxTokens, sp.temperature, sp.topP, sp.minTokens
	maxLP := e.Opts.MaxLogprobs
	switch {
	case maxTok < 1:
		return fmt.Sprintf("max_tokens must be at least 1, got %d.", maxTok)
	case temp < 0:
		return fmt.Sprintf("temperature must be non-negative, got %v.", temp)
	case !(topP > 0 && topP <= 1):
		return fmt.Sprintf("top_p must be in (0, 1], got %v.", topP)
	case req.Logprobs != nil && (topk < 0 || topk > maxLP):
		return fmt.Sprintf("Requested sample logprobs of %d, which is greater than max allowed: %d", topk, maxLP)
	case req.PromptLogprobs != nil && (*req.PromptLogprobs < 0 || *req.PromptLogprobs > maxLP):
		return fmt.Sprintf("Requested prompt logprobs of %d, which is greater than max allowed: %d", *req.PromptLogprobs, maxLP)
	case req.Stream && req.PromptLogprobs != nil:
		return "`prompt_logprobs` are not available when `stream=True`."
	case minTok > maxTok:
		return fmt.Sprintf("min_tokens must be less than or equal to max_tokens=%d, got %d.", maxTok, minTok)
	}
	for _, p := range prompts {
		switch {
		case len(p) >= e.ContextLen:
			return fmt.Sprintf("This model's maximum context length is %d tokens. However, your request has %d input tokens. Please reduce the length of the input messages.", e.ContextLen, len(p))
		case len(p)+maxTok > e.ContextLen:
			return fmt.Sprintf("'max_tokens' or 'max_completion_tokens' is too large: %d. This model's maximum context length is %d tokens and your request has %d input tokens (%d > %d - %d).", maxTok, e.ContextLen, len(p), maxTok, e.ContextLen, len(p))
		}
	}
	return ""
}

// vllmChoiceOf is the choice of a non-streamed completion for prompt s and its result res: the
// text (after the prompt with echo), the logprobs with top-k topk, the prompt logprobs with
// top-k promptK, the token ids when asked, and the finish and stop reasons.
func vllmChoiceOf(req *wire.CompletionRequest, s submitted, res *result, topk, promptK int, asIDs vllmTokens) vllmChoice {
	ch := vllmChoice{Index: s.idx, StopReason: stopReason(res.stop)}
	if req.ReturnTokenIDs {
		ch.TokenIDs, ch.PromptTokenIDs = append([]int{}, res.tokens...), s.prompt
	}
	text := res.text()
	var lp *wire.Logprobs
	if topk >= 0 {
		lp = &wire.Logprobs{Tokens: []string{}, TokenLogprobs: []*float64{}, TopLogprobs: []map[string]float64{}, TextOffset: []int{}}
	}
	off := 0
	if req.Echo {
		if lp != nil {
			asIDs.addPrompt(lp, s.prompt, res.prompt, promptK, &off)
		}
		text = model.Decode(s.prompt) + text
	}
	if lp != nil {
		n := res.keptTokens()
		for i := 0; i < n && i < len(res.pos); i++ {
			asIDs.add(lp, res.pos[i], topk, &off)
		}
	}
	if req.PromptLogprobs != nil {
		ch.PromptLogprobs = append(ch.PromptLogprobs, nil)
		for i := range s.prompt[1:] {
			if i < len(res.prompt) {
				ch.PromptLogprobs = append(ch.PromptLogprobs, asIDs.promptEntry(res.prompt[i], promptK))
			}
		}
	}
	ch.Text = text
	ch.Logprobs = lp
	fr := res.reason
	ch.FinishReason = &fr
	return ch
}

// vllmStream streams a completion as vLLM does: one SSE chunk per token (the echoed prompt first),
// a final chunk with finish_reason and stop_reason, a usage chunk with
// stream_options.include_usage, then [DONE].
func (e *Engine) vllmStream(w http.ResponseWriter, id string, created int64, req *wire.CompletionRequest, subs []submitted, stop []string, asIDs vllmTokens, arrival time.Time) {
	stream := startSSE(w)
	send := stream.send
	hold := stopHold(stop)
	wantLP := req.Logprobs != nil
	var wg sync.WaitGroup
	var usageMu sync.Mutex
	usage := vllmUsage{}
	for _, s := range subs {
		wg.Add(1)
		go func(s submitted) {
			defer wg.Done()
			rt := &vllmRequestTimes{arrival: arrival}
			chunk := func(c vllmStreamChoice) {
				c.Index = s.idx
				send(vllmStreamChunk{ID: id, Object: "text_completion", Created: created, Model: e.modelName(), Choices: []vllmStreamChoice{c}})
			}
			off := 0
			if req.Echo {
				var lp *wire.Logprobs
				if wantLP {
					lp = &wire.Logprobs{}
					var prompt []sched.Position
					if ev, ok := <-s.req.Events(); ok && ev.Prompt != nil {
						prompt = ev.Prompt
					}
					asIDs.addPrompt(lp, s.prompt, prompt, max(*req.Logprobs, 0), &off)
				}
				c := vllmStreamChoice{Text: model.Decode(s.prompt), Logprobs: lp}
				if req.ReturnTokenIDs {
					c.PromptTokenIDs = s.prompt
				}
				chunk(c)
			}
			var text []byte
			sent, n := 0, 0
			reason := "abort"
			for ev := range s.req.Events() {
				switch {
				case ev.Generated:
					e.observeToken(rt, time.Now())
					n++
					text = append(text, []byte(model.Decode([]int{ev.Token}))...)
					upto := safeCut(text, max(sent, len(text)-hold))
					c := vllmStreamChoice{Text: string(text[sent:upto])}
					if wantLP && ev.Pos != nil {
						c.Logprobs = &wire.Logprobs{}
						asIDs.add(c.Logprobs, *ev.Pos, max(*req.Logprobs, 0), &off)
					}
					if req.ReturnTokenIDs {
						c.TokenIDs = []int{ev.Token}
					}
					chunk(c)
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
					reason = ev.FinishReason
					fr := ev.FinishReason
					chunk(vllmStreamChoice{Text: rest, FinishReason: &fr, StopReason: stopReason(ev.MatchedStop)})
					usageMu.Lock()
					usage.PromptTokens += len(s.prompt)
					usage.CompletionTokens += n
					usageMu.Unlock()
				}
			}
			e.observeDone(rt, reason)
		}(s)
	}
	wg.Wait()
	if req.StreamOptions != nil && req.StreamOptions.IncludeUsage {
		usage.TotalTokens = usage.PromptTokens + usage.CompletionTokens
		send(vllmStreamChunk{ID: id, Object: "text_completion", Created: created, Model: e.modelName(), Choices: []vllmStreamChoice{}, Usage: &usage})
	}
	stream.done()
}
