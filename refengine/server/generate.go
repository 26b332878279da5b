// generate.go holds SGLang's native POST /generate: its request, its meta_info (speculative
// acceptance, input logprobs) and its answer.

package server

import (
	"context"
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
