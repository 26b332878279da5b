// completions.go holds POST /v1/completions: prompt, stop and sampling parsing, submission to
// the scheduler, collecting the result with its logprobs, and the streamed form.

package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/reckon-ci/reckon/refengine/model"
	"github.com/reckon-ci/reckon/refengine/sched"
	"github.com/reckon-ci/reckon/wire"
)

// maxTopLogprobs is the largest number of alternatives a request may ask for.
const maxTopLogprobs = 20

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
		resp.Choices = append(resp.Choices, completionChoiceOf(req.Echo, s, res, topk))
		usage.PromptTokens += len(s.prompt)
		usage.CompletionTokens += len(res.tokens)
	}
	usage.TotalTokens = usage.PromptTokens + usage.CompletionTokens
	resp.Usage = usage
	writeJSON(w, http.StatusOK, resp)
}

// completionChoiceOf is the choice of a non-streamed completion for prompt s and its result res:
// the text (after the prompt with echo), the logprobs with top-k topk (-1: none), the token ids
// and the finish reason.
func completionChoiceOf(echo bool, s submitted, res *result, topk int) wire.CompletionChoice {
	ch := wire.CompletionChoice{Index: s.idx, TokenIDs: res.tokens, PromptTokenIDs: s.prompt}
	text := res.text()
	var lp *wire.Logprobs
	if topk >= 0 {
		lp = &wire.Logprobs{Tokens: []string{}, TokenLogprobs: []*float64{}, TopLogprobs: []map[string]float64{}, TextOffset: []int{}}
	}
	off := 0
	if echo {
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
	return ch
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
