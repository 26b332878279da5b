package server

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"github.com/reckon-ci/reckon/refengine/model"
	"github.com/reckon-ci/reckon/refengine/sched"
	"github.com/reckon-ci/reckon/wire"
)

// chatMessage is one message of an OpenAI chat request (content as a string).
type chatMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// chatRequest is the body of POST /v1/chat/completions, with SGLang's ignore_eos extension.
type chatRequest struct {
	Model         string              `json:"model"`
	Messages      []chatMessage       `json:"messages"`
	MaxTokens     *int                `json:"max_tokens"`
	MaxCompletion *int                `json:"max_completion_tokens"`
	Temperature   *float64            `json:"temperature"`
	TopP          *float64            `json:"top_p"`
	Seed          *int64              `json:"seed"`
	Stop          json.RawMessage     `json:"stop"`
	Stream        bool                `json:"stream"`
	StreamOptions *wire.StreamOptions `json:"stream_options"`
	IgnoreEOS     bool                `json:"ignore_eos"`
	MinTokens     *int                `json:"min_tokens"`
}

// chatDelta is the delta (streaming) or message (whole answer) of a chat choice.
type chatDelta struct {
	Role    string  `json:"role,omitempty"`
	Content *string `json:"content"`
}

type chatChoice struct {
	Index        int        `json:"index"`
	Delta        *chatDelta `json:"delta,omitempty"`
	Message      *chatDelta `json:"message,omitempty"`
	FinishReason *string    `json:"finish_reason"`
}

type chatResponse struct {
	ID      string       `json:"id"`
	Object  string       `json:"object"`
	Created int64        `json:"created"`
	Model   string       `json:"model"`
	Choices []chatChoice `json:"choices"`
	Usage   *wire.Usage  `json:"usage,omitempty"`
}

// chatTemplate is the reference engine's plain chat template: every message as "role: content"
// on its own line, then "assistant:" for the answer. Its tokens are counted in prompt_tokens.
func chatTemplate(msgs []chatMessage) string {
	var b strings.Builder
	for _, m := range msgs {
		b.WriteString(m.Role)
		b.WriteString(": ")
		b.WriteString(m.Content)
		b.WriteByte('\n')
	}
	b.WriteString("assistant:")
	return b.String()
}

// chatCompletions serves POST /v1/chat/completions as SGLang does: the messages through the chat
// template, one choice, streamed (a first role delta, content deltas, a last delta with the
// finish reason, a usage event with stream_options.include_usage, then [DONE]) or whole.
func (e *Engine) chatCompletions(w http.ResponseWriter, r *http.Request) {
	if e.crashDue() {
		hangUp(w)
		return
	}
	if e.failDue() {
		e.failRequest(w)
		return
	}
	var req chatRequest
	if !decodeBody(w, r, &req) {
		return
	}
	if len(req.Messages) == 0 {
		badRequest(w, `"messages" must hold at least one message`)
		return
	}
	for i, m := range req.Messages {
		switch m.Role {
		case "system", "user", "assistant":
		default:
			badRequest(w, `"messages"[%d].role: expected system, user or assistant, got %q`, i, m.Role)
			return
		}
	}
	stop, err := parseStop(req.Stop)
	if err != nil {
		badRequest(w, "%v", err)
		return
	}
	maxTok := req.MaxTokens
	if req.MaxCompletion != nil {
		maxTok = req.MaxCompletion
	}
	sp := samplingOf(maxTok, defaultChatTokens, req.Temperature, req.TopP, req.MinTokens)
	if err := sp.check(); err != nil {
		badRequest(w, "%v", err)
		return
	}
	prompt := model.Encode(chatTemplate(req.Messages))
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	id := newID("chatcmpl-")
	rq := &sched.Request{ID: id, Prompt: prompt, MaxNew: sp.maxTokens, Temperature: sp.temperature, TopP: sp.topP, Seed: req.Seed,
		IgnoreEOS: req.IgnoreEOS, MinNew: sp.minTokens, Stop: stop, Ctx: ctx}
	if !e.submit(w, []*sched.Request{rq}) {
		return
	}
	created := time.Now().Unix()
	name := e.modelName()
	if !req.Stream {
		res := collect(rq)
		if res.err != nil {
			writeError(w, http.StatusInternalServerError, "InternalServerError", res.err.Error())
			return
		}
		text := res.text()
		fr := res.reason
		writeJSON(w, http.StatusOK, chatResponse{ID: id, Object: "chat.completion", Created: created, Model: name,
			Choices: []chatChoice{{Message: &chatDelta{Role: "assistant", Content: &text}, FinishReason: &fr}},
			Usage:   &wire.Usage{PromptTokens: len(prompt), CompletionTokens: len(res.tokens), TotalTokens: len(prompt) + len(res.tokens)}})
		return
	}
	chatStream(w, rq, &req, id, created, name, len(prompt), stop)
}

// chatStream streams request rq's answer as SGLang does: a first role delta, content deltas
// (holding back what could still become a stop string), a last delta with the finish reason, a
// usage event with stream_options.include_usage, then [DONE].
func chatStream(w http.ResponseWriter, rq *sched.Request, req *chatRequest, id string, created int64, name string, promptTokens int, stop []string) {
	stream := startSSE(w)
	send := stream.send
	chunk := func(d chatDelta, fr *string) {
		send(chatResponse{ID: id, Object: "chat.completion.chunk", Created: created, Model: name, Choices: []chatChoice{{Delta: &d, FinishReason: fr}}})
	}
	empty := ""
	chunk(chatDelta{Role: "assistant", Content: &empty}, nil)
	hold := stopHold(stop)
	var text []byte
	sent, n := 0, 0
	for ev := range rq.Events() {
		switch {
		case ev.Generated:
			n++
			text = append(text, model.Decode([]int{ev.Token})...)
			upto := safeCut(text, max(sent, len(text)-hold))
			if upto > sent {
				s := string(text[sent:upto])
				chunk(chatDelta{Content: &s}, nil)
				sent = upto
			}
		case ev.Done:
			end := len(text)
			if ev.StopAt >= 0 && ev.StopAt <= end {
				end = ev.StopAt
			}
			if end > sent {
				s := string(text[sent:end])
				chunk(chatDelta{Content: &s}, nil)
			}
			fr := ev.FinishReason
			chunk(chatDelta{Content: &empty}, &fr)
		}
	}
	if req.StreamOptions != nil && req.StreamOptions.IncludeUsage {
		send(chatResponse{ID: id, Object: "chat.completion.chunk", Created: created, Model: name, Choices: []chatChoice{},
			Usage: &wire.Usage{PromptTokens: promptTokens, CompletionTokens: n, TotalTokens: promptTokens + n}})
	}
	stream.done()
}
