// generate.go holds SGLang's native POST /generate: its request, its meta_info (speculative
// acceptance, input logprobs) and its answer.

package server

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/reckon-ci/reckon/refengine/model"
	"github.com/reckon-ci/reckon/refengine/sched"
	"github.com/reckon-ci/reckon/wire"
)

func (e *Engine) generate(w http.ResponseWriter, r *http.Request) {
	if e.crashDue() {
		hangUp(w)
		return
	}
	if e.failDue() {
		e.failRequest(w)
		return
	}
	var req wire.GenerateRequest
	if !decodeBody(w, r, &req) {
		return
	}
	prompt, msg := e.generatePrompt(&req)
	if msg != "" {
		badRequest(w, "%s", msg)
		return
	}
	maxNew, temp, msg := generateSampling(&req)
	if msg != "" {
		badRequest(w, "%s", msg)
		return
	}
	sp := req.SamplingParams
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
		generateStream(w, rq, rid, len(prompt), start)
		return
	}
	res := collect(rq)
	meta := wire.GenerateMeta{ID: rid, PromptTokens: len(prompt), CompletionTokens: len(res.tokens), E2ELatency: time.Since(start).Seconds()}
	meta.FinishReason = generateFinishReason(res)
	if req.ReturnLogprob {
		e.generateLogprobs(&meta, res)
		if inputLP {
			meta.InputTokenLogprobs, meta.InputTopLogprobs = e.inputLogprobs(prompt, res.prompt, *req.LogprobStart)
		}
	}
	writeJSON(w, http.StatusOK, sglangGenerateResponse{Text: res.text(), OutputIDs: res.tokens, MetaInfo: e.specMeta(meta, res)})
}

// generatePrompt is the request's prompt: its input_ids (checked against the vocabulary) or its
// encoded text. The message, when not "", is the 400 for a request with neither or bad ids.
func (e *Engine) generatePrompt(req *wire.GenerateRequest) ([]int, string) {
	switch {
	case len(req.InputIDs) > 0:
		if err := checkIDs(req.InputIDs, e.Cfg.Vocab, 0); err != nil {
			return nil, strings.Replace(err.Error(), `"prompt"[0]`, `"input_ids"`, 1)
		}
		return req.InputIDs, ""
	case req.Text != "":
		return model.Encode(req.Text), ""
	default:
		return nil, `either "text" or "input_ids" is required`
	}
}

// generateSampling is the request's max_new_tokens (default 128) and temperature (default 1),
// with the 400 message, when not "", for a negative one or a top_logprobs_num out of range.
func generateSampling(req *wire.GenerateRequest) (maxNew int, temp float64, msg string) {
	sp := req.SamplingParams
	maxNew = 128
	if sp.MaxNewTokens != nil {
		maxNew = *sp.MaxNewTokens
	}
	if maxNew < 0 {
		return 0, 0, fmt.Sprintf(`"max_new_tokens" must be >= 0, got %d`, maxNew)
	}
	temp = 1.0
	if sp.Temperature != nil {
		temp = *sp.Temperature
	}
	if temp < 0 {
		return 0, 0, fmt.Sprintf(`"temperature" must be >= 0, got %v`, temp)
	}
	if req.TopLogprobsNum < 0 || req.TopLogprobsNum > maxTopLogprobs {
		return 0, 0, fmt.Sprintf(`"top_logprobs_num" must be between 0 and %d, got %d`, maxTopLogprobs, req.TopLogprobsNum)
	}
	return maxNew, temp, ""
}

// generateStream streams request rq's answer as SGLang does: one SSE event per token with the
// text and ids so far, the last with its finish reason, then [DONE].
func generateStream(w http.ResponseWriter, rq *sched.Request, rid string, promptTokens int, start time.Time) {
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
			out := wire.GenerateResponse{Text: res.text(), OutputIDs: toks, MetaInfo: wire.GenerateMeta{ID: rid, PromptTokens: promptTokens, CompletionTokens: len(toks), E2ELatency: time.Since(start).Seconds()}}
			if ev.Done {
				out.MetaInfo.FinishReason = map[string]any{"type": ev.FinishReason}
			}
			stream.send(out)
		}
	}
	stream.done()
}

// generateFinishReason is meta_info.finish_reason: its type, the stop string matched, and the
// length for a request cut at max_new_tokens.
func generateFinishReason(res *result) map[string]any {
	fr := map[string]any{"type": res.reason}
	if res.stop != "" {
		fr["matched"] = res.stop
	}
	if res.reason == "length" {
		fr["length"] = len(res.tokens)
	}
	return fr
}

// generateLogprobs fills meta's output token logprobs and top logprobs from res (with
// speculative decoding v2, only the first token's, as that release reports).
func (e *Engine) generateLogprobs(meta *wire.GenerateMeta, res *result) {
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
