package workload

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/reckon-ci/reckon/engine/client"
)

// ChatPath is the OpenAI chat completions endpoint (Options.Chat).
const ChatPath = "/v1/chat/completions"

// chatMessage is one message of a chat request.
type chatMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// chatRequest is the body of a streamed POST /v1/chat/completions (SGLang and vLLM accept
// ignore_eos as an extension, as on completions).
type chatRequest struct {
	Model         string        `json:"model,omitempty"`
	Messages      []chatMessage `json:"messages"`
	MaxTokens     int           `json:"max_tokens"`
	Temperature   *float64      `json:"temperature,omitempty"`
	TopP          *float64      `json:"top_p,omitempty"`
	IgnoreEOS     bool          `json:"ignore_eos,omitempty"`
	Stream        bool          `json:"stream"`
	StreamOptions struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
}

// chatChunk is one streamed chat event.
type chatChunk struct {
	Choices []struct {
		Index int `json:"index"`
		Delta struct {
			Content *string `json:"content"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
	} `json:"usage"`
	Error json.RawMessage `json:"error"`
}

// chatResult is what one streamed chat completion produced, timed like client.StreamResult.
type chatResult struct {
	start     time.Time
	arrivals  []time.Duration
	prompt    int
	output    int
	hasUsage  bool
	contentEv int
}

// maxChatEvent bounds one server-sent event of a chat stream.
const maxChatEvent = 1 << 20

// chatHTTP sends chat requests; every request is bounded by its context.
var chatHTTP = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1024, DisableCompression: true}}

// streamChat sends one streamed chat completion of text (one user message) and reads its events:
// a content event is one with a non-empty delta.content of choice 0 (the first, role-only delta
// and the usage event are not timing points), as vLLM's and SGLang's benchmarks time chat.
func (r *runner) streamChat(ctx context.Context, text string, maxTok int) (*chatResult, error) {
	const endpoint = "POST " + ChatPath + " (stream)"
	body := chatRequest{Model: r.model, Messages: []chatMessage{{Role: "user", Content: text}}, MaxTokens: maxTok,
		Temperature: r.o.sentTemperature(), TopP: r.o.TopP, IgnoreEOS: r.o.IgnoreEOS, Stream: true}
	body.StreamOptions.IncludeUsage = true
	b, err := json.Marshal(body)
	if err != nil {
		return nil, fmt.Errorf("%s: encoding request: %w", endpoint, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(r.c.BaseURL(), "/")+ChatPath, bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", endpoint, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	res := &chatResult{start: r.c.Now()}
	resp, err := chatHTTP.Do(req)
	if err != nil {
		return res, fmt.Errorf("%s: %w", endpoint, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return res, &client.APIError{Endpoint: endpoint, StatusCode: resp.StatusCode, Body: strings.TrimSpace(string(data))}
	}
	rd := bufio.NewReaderSize(resp.Body, 64<<10)
	for {
		line, err := readLine(rd, maxChatEvent)
		if err == io.EOF {
			break
		}
		if err != nil {
			return res, fmt.Errorf("%s: %w", endpoint, err)
		}
		line = bytes.TrimSpace(line)
		if !bytes.HasPrefix(line, []byte("data:")) {
			continue
		}
		at := r.c.Now().Sub(res.start)
		data := bytes.TrimSpace(line[len("data:"):])
		if string(data) == "[DONE]" {
			break
		}
		var ev chatChunk
		if err := json.Unmarshal(data, &ev); err != nil {
			return res, fmt.Errorf("%s: malformed event %.80q: %w", endpoint, data, err)
		}
		if len(ev.Error) > 0 && string(ev.Error) != "null" {
			return res, fmt.Errorf("%s: error event: %s", endpoint, ev.Error)
		}
		if ev.Usage != nil {
			res.hasUsage, res.prompt, res.output = true, ev.Usage.PromptTokens, ev.Usage.CompletionTokens
		}
		for _, ch := range ev.Choices {
			if ch.Index == 0 && ch.Delta.Content != nil && *ch.Delta.Content != "" {
				res.arrivals = append(res.arrivals, at)
				res.contentEv++
			}
		}
	}
	if len(res.arrivals) == 0 {
		return res, fmt.Errorf("%s: the stream ended without a content event", endpoint)
	}
	if !res.hasUsage {
		res.output = res.contentEv
	}
	return res, nil
}

// readLine reads one line of at most limit bytes.
func readLine(rd *bufio.Reader, limit int) ([]byte, error) {
	var out []byte
	for {
		part, isPrefix, err := rd.ReadLine()
		if err != nil {
			if err == io.EOF && len(out) > 0 {
				return out, nil
			}
			return nil, err
		}
		out = append(out, part...)
		if len(out) > limit {
			return nil, errors.New("event larger than 1 MiB")
		}
		if !isPrefix {
			return out, nil
		}
	}
}

// chatOne is runner.one for the chat endpoint.
func (r *runner) chatOne(ctx context.Context, p Prompt, start time.Time) RequestRecord {
	if r.o.RequestTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, r.o.RequestTimeout)
		defer cancel()
	}
	res, err := r.streamChat(ctx, p.Text, p.OutputLen)
	rec := RequestRecord{}
	if res != nil {
		rec.Start = res.start.Sub(start)
	}
	if err != nil {
		rec.Err = err.Error()
		if res != nil {
			rec.Latency = r.c.Now().Sub(res.start)
		}
		return rec
	}
	rec.Success = true
	rec.TTFT = res.arrivals[0]
	rec.Latency = res.arrivals[len(res.arrivals)-1]
	for i := 1; i < len(res.arrivals); i++ {
		rec.ITLs = append(rec.ITLs, res.arrivals[i]-res.arrivals[i-1])
	}
	rec.OutputTokens, rec.PromptTokens = res.output, res.prompt
	if !res.hasUsage {
		rec.PromptTokens = p.InputLen
		r.mu.Lock()
		r.noUsage++
		r.mu.Unlock()
	}
	if r.o.IgnoreEOS && rec.OutputTokens < p.OutputLen {
		r.mu.Lock()
		r.shortCount++
		r.mu.Unlock()
	}
	return rec
}

// chatUsage sends one unmeasured chat request (max_tokens 1) and returns its prompt_tokens.
func (r *runner) chatUsage(ctx context.Context, text string) (int, error) {
	res, err := r.streamChat(ctx, text, 1)
	if err != nil {
		return 0, err
	}
	if !res.hasUsage {
		return 0, errors.New("the server sent no usage counts")
	}
	return res.prompt, nil
}
