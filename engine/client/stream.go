package client

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

	"github.com/reckon-ci/reckon/wire"
)

// Chunk is one event of a streamed completion, as it arrived.
type Chunk struct {
	// Seq numbers the events of the stream from 0, usage-only events included.
	Seq int
	// Arrival is when the event was read, measured from the moment the request was sent.
	Arrival time.Duration
	// Content is true when the event carries at least one generated token (non-empty text,
	// token ids or logprob tokens); only content events are timing points for TTFT and ITL.
	Content bool
	// Index is the choice index of the delta (0 for single-prompt requests).
	Index        int
	Text         string
	Tokens       int // tokens in this event: token_ids, else logprob tokens, else 1 for content
	TokenIDs     []int
	Logprobs     *wire.Logprobs
	FinishReason string
	Usage        *wire.Usage
}

// StreamResult is what one streamed completion produced, with its client-side timings.
// Times are measured with the client's clock (monotonic by default) from the moment the request
// was handed to the HTTP transport.
type StreamResult struct {
	Start time.Time
	// TTFT is the arrival of the first content event (zero when none arrived).
	TTFT time.Duration
	// Latency is the arrival of the last content event: the end-to-end latency as vLLM and SGLang
	// measure it.
	Latency time.Duration
	// Closed is when the stream ended ([DONE] or end of body).
	Closed time.Duration
	// Arrivals holds the arrival of each content event; ChunkTokens its token count.
	Arrivals    []time.Duration
	ChunkTokens []int
	// Text, TokenIDs and Logprobs are the concatenated deltas of choice 0.
	Text           string
	TokenIDs       []int
	PromptTokenIDs []int
	Logprobs       *wire.Logprobs
	FinishReason   string
	// Usage is the final usage event, when the server sent one.
	Usage *wire.Usage
	// OutputTokens is usage.completion_tokens when reported, else the tokens counted in events.
	OutputTokens int
	// CountedTokens is the number of tokens counted from the events themselves.
	CountedTokens int
	// PromptTokens is usage.prompt_tokens when reported, else 0.
	PromptTokens int
	// Done is true when the server ended the stream with "data: [DONE]".
	Done bool
	// NotStreamed is true when the server answered with one JSON body instead of an event
	// stream: the whole answer then counts as a single chunk (TTFT = E2E latency).
	NotStreamed bool

	text []byte
}

// ITLs returns the gaps between consecutive content events.
func (r *StreamResult) ITLs() []time.Duration {
	if len(r.Arrivals) < 2 {
		return nil
	}
	out := make([]time.Duration, len(r.Arrivals)-1)
	for i := 1; i < len(r.Arrivals); i++ {
		out[i-1] = r.Arrivals[i] - r.Arrivals[i-1]
	}
	return out
}

// streamEvent is one decoded SSE data payload: a completion chunk or an error object.
type streamEvent struct {
	wire.CompletionResponse
	Error json.RawMessage `json:"error,omitempty"`
}

// Stream sends req with stream=true (and asks for a final usage event) and reads the server-sent
// events as they arrive, calling onChunk (may be nil) for each. On a failure after the stream
// started the partial result is returned together with the error.
func (c *Client) Stream(ctx context.Context, req wire.CompletionRequest, onChunk func(Chunk)) (*StreamResult, error) {
	const endpoint = "POST /v1/completions (stream)"
	if req.Model == "" {
		req.Model = c.model
	}
	req.Stream = true
	if req.StreamOptions == nil {
		req.StreamOptions = &wire.StreamOptions{IncludeUsage: true}
	}
	ctx, cancel := c.withTimeout(ctx)
	defer cancel()
	hreq, err := c.newRequest(ctx, http.MethodPost, "/v1/completions", req)
	if err != nil {
		return nil, err
	}
	hreq.Header.Set("Accept", "text/event-stream")
	res := &StreamResult{Start: c.now()}
	resp, err := c.http.Do(hreq)
	if err != nil {
		return res, fmt.Errorf("%s: %w", endpoint, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		return res, apiError(endpoint, resp.StatusCode, data)
	}
	if ct := resp.Header.Get("Content-Type"); strings.HasPrefix(ct, "application/json") {
		err = c.readWhole(endpoint, resp.Body, res, onChunk)
		c.finish(res)
		if err == nil && len(res.Arrivals) == 0 {
			err = &MalformedError{Endpoint: endpoint, Field: "choices", Reason: "answer has no generated token"}
		}
		return res, err
	}
	err = c.readEvents(endpoint, resp.Body, res, onChunk, streamTokenLimit(req.MaxTokens))
	c.finish(res)
	if err == nil {
		drain(resp.Body)
	}
	if err != nil {
		if ctx.Err() != nil && !errors.Is(err, ErrMalformed) {
			err = fmt.Errorf("%s: %w", endpoint, ctx.Err())
		}
		return res, err
	}
	if len(res.Arrivals) == 0 {
		return res, &MalformedError{Endpoint: endpoint, Field: "choices", Reason: "stream ended without any generated token"}
	}
	return res, nil
}

// drainGrace bounds how long the client waits for the end of a body after [DONE].
const drainGrace = 50 * time.Millisecond

// drain reads what follows [DONE] (normally only the end of the chunked body) so that the
// connection can be reused, without waiting long for a server that keeps the response open:
// the caller's Close then ends the read.
func drain(body io.Reader) {
	done := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, io.LimitReader(body, 64<<10))
		close(done)
	}()
	t := time.NewTimer(drainGrace)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
	}
}

var (
	prefixData = []byte("data:")
	doneMarker = []byte("[DONE]")
)

// DefaultMaxStreamTokens caps the tokens of a stream whose request sets no max_tokens.
const DefaultMaxStreamTokens = 1 << 20

// tokenLimit is how many tokens a stream may bring before it is cut: max_tokens plus a margin
// for servers that count differently (detokenizer events, a final chunk), as text.
type tokenLimit struct {
	tokens int
	detail string
}

func streamTokenLimit(maxTokens *int) tokenLimit {
	if maxTokens == nil || *maxTokens <= 0 {
		return tokenLimit{tokens: DefaultMaxStreamTokens, detail: "no max_tokens in the request: client.DefaultMaxStreamTokens"}
	}
	n := *maxTokens
	margin := max(16, n/4)
	return tokenLimit{tokens: n + margin, detail: fmt.Sprintf("max_tokens %d + margin %d", n, margin)}
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// readEvents parses the SSE body. Events are separated by blank lines; only "data:" fields are
// used ("event:", "id:", "retry:" and ":" comments are skipped). Multi-line data is joined with
// "\n" as the SSE specification says. The stream is cut, with a *LimitError, when an event is
// longer than Options.MaxEventBytes, when the body exceeds Options.MaxBodyBytes, or when it
// brings more tokens (or events) than lim allows.
func (c *Client) readEvents(endpoint string, body io.Reader, res *StreamResult, onChunk func(Chunk), lim tokenLimit) error {
	cr := &countingReader{r: body}
	br := bufio.NewReaderSize(cr, 64<<10)
	er := &eventReader{c: c, endpoint: endpoint, res: res, onChunk: onChunk, lim: lim,
		maxEvent: c.opts.MaxEventBytes, maxEvents: 2*lim.tokens + 64}
	for {
		line, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			if line, err = er.gatherLong(br, line); line == nil {
				return er.eventTooBig()
			}
		}
		if cr.n > c.opts.MaxBodyBytes {
			return &LimitError{Endpoint: endpoint, What: "event stream", Limit: c.opts.MaxBodyBytes, Unit: "bytes", Option: "Options.MaxBodyBytes"}
		}
		if len(line) > 0 {
			if lerr := er.line(bytes.TrimRight(line, "\r\n")); lerr != nil {
				return lerr
			}
		}
		if err != nil {
			if err == io.EOF {
				if derr := er.dispatch(); derr != nil {
					return derr
				}
				if !res.Done {
					res.Closed = c.now().Sub(res.Start)
				}
				c.finish(res)
				return nil
			}
			c.finish(res)
			return fmt.Errorf("%s: reading stream: %w", endpoint, err)
		}
		if res.Done {
			c.finish(res)
			return nil
		}
	}
}

// eventReader is the state of readEvents between lines: the data of the event being gathered,
// the chunk sequence number and the parsers that decode each event into the result.
type eventReader struct {
	c         *Client
	endpoint  string
	res       *StreamResult
	onChunk   func(Chunk)
	lim       tokenLimit
	maxEvent  int // Options.MaxEventBytes
	maxEvents int // 2 x the token limit + 64
	data      []byte
	seq       int
	fast      fastParser
	fc        fastChunk
	r         chunkSink
}

// eventTooBig is the error of an event longer than Options.MaxEventBytes.
func (er *eventReader) eventTooBig() error {
	return &LimitError{Endpoint: er.endpoint, What: "server-sent event", Limit: int64(er.maxEvent), Unit: "bytes", Option: "Options.MaxEventBytes (reckon bench --max-event-bytes)"}
}

// gatherLong reads the rest of a data line longer than the reader's buffer, first being its
// start, and returns it whole with the error that ended it; nil when it exceeds the event limit.
// One allocation up to 8 MiB instead of a series of growing copies.
func (er *eventReader) gatherLong(br *bufio.Reader, first []byte) ([]byte, error) {
	full := append(make([]byte, 0, min(er.maxEvent+2, 8<<20)), first...)
	err := bufio.ErrBufferFull
	for errors.Is(err, bufio.ErrBufferFull) {
		var line []byte
		line, err = br.ReadSlice('\n')
		if len(full)+len(line) > er.maxEvent+2 {
			return nil, nil
		}
		full = append(full, line...)
	}
	return full, err
}

// line handles one line of the stream, without its line ending: a blank line dispatches the event
// gathered so far and checks the token and event limits; a "data:" field adds to the event.
func (er *eventReader) line(trimmed []byte) error {
	switch {
	case len(trimmed) == 0:
		if derr := er.dispatch(); derr != nil {
			return derr
		}
		if er.res.CountedTokens > er.lim.tokens {
			return &LimitError{Endpoint: er.endpoint, What: "generated tokens of the stream", Limit: int64(er.lim.tokens), Unit: "tokens", Detail: er.lim.detail}
		}
		if er.seq > er.maxEvents {
			return &LimitError{Endpoint: er.endpoint, What: "events of the stream", Limit: int64(er.maxEvents), Unit: "events", Detail: "2 x (" + er.lim.detail + ") + 64"}
		}
	case bytes.HasPrefix(trimmed, prefixData):
		v := trimmed[len(prefixData):]
		if len(v) > 0 && v[0] == ' ' {
			v = v[1:]
		}
		if len(er.data)+1+len(v) > er.maxEvent {
			return er.eventTooBig()
		}
		if len(er.data) > 0 {
			er.data = append(er.data, '\n')
		}
		er.data = append(er.data, v...)
	default:
		// event:, id:, retry:, comments: not used by completion streams.
	}
	return nil
}

// dispatch decodes the event gathered so far, if any: [DONE] ends the stream; a chunk goes to
// the result, by the fast parser when it can read it and by encoding/json otherwise.
func (er *eventReader) dispatch() error {
	if len(er.data) == 0 {
		return nil
	}
	res := er.res
	arrival := er.c.now().Sub(res.Start)
	payload := bytes.TrimSpace(er.data)
	er.data = er.data[:0]
	if bytes.Equal(payload, doneMarker) {
		res.Done = true
		res.Closed = arrival
		return nil
	}
	if er.fast.parse(payload, &er.fc) {
		return er.fastChunk(payload, arrival)
	}
	return er.jsonChunk(payload, arrival)
}

// fastChunk files a chunk the fast parser read (er.fc): its usage and each of its choices.
func (er *eventReader) fastChunk(payload []byte, arrival time.Duration) error {
	res, fc, onChunk := er.res, &er.fc, er.onChunk
	if fc.usage != nil {
		u := *fc.usage
		res.Usage = &u
	}
	if len(fc.choices) == 0 {
		if fc.usage == nil {
			return &MalformedError{Endpoint: er.endpoint, Field: "choices", Reason: "chunk has neither choices nor usage", Snippet: snippet(payload)}
		}
		if onChunk != nil {
			onChunk(Chunk{Seq: er.seq, Arrival: arrival, Usage: res.Usage})
		}
		er.seq++
		return nil
	}
	for i := range fc.choices {
		ch := &fc.choices[i]
		ids := ch.tokenIDs
		if onChunk != nil && ids != nil {
			ids = append([]int(nil), ids...)
		}
		er.r.choice(res, onChunk, Chunk{Seq: er.seq, Arrival: arrival, Index: ch.index, Text: ch.text, TokenIDs: ids, FinishReason: ch.finishReason, Usage: fc.usage}, nil)
	}
	er.seq++
	return nil
}

// jsonChunk decodes a chunk the fast parser could not read with encoding/json and files it: an
// error event becomes an *APIError, a malformed chunk a *MalformedError.
func (er *eventReader) jsonChunk(payload []byte, arrival time.Duration) error {
	res, onChunk := er.res, er.onChunk
	var ev streamEvent
	if err := json.Unmarshal(payload, &ev); err != nil {
		return decodeError(er.endpoint, payload, err)
	}
	if len(ev.Error) > 0 && !bytes.Equal(ev.Error, []byte("null")) {
		return streamAPIError(er.endpoint, ev.Error)
	}
	if err := checkCompletion(er.endpoint, &ev.CompletionResponse, true); err != nil {
		if me, ok := err.(*MalformedError); ok {
			me.Snippet = snippet(payload)
		}
		return err
	}
	if ev.Usage != nil {
		u := *ev.Usage
		res.Usage = &u
	}
	if len(ev.Choices) == 0 {
		if onChunk != nil {
			onChunk(Chunk{Seq: er.seq, Arrival: arrival, Usage: res.Usage})
		}
		er.seq++
		return nil
	}
	for i := range ev.Choices {
		ch := &ev.Choices[i]
		k := Chunk{Seq: er.seq, Arrival: arrival, Index: ch.Index, Text: ch.Text, TokenIDs: ch.TokenIDs, Logprobs: ch.Logprobs, Usage: ev.Usage}
		if ch.FinishReason != nil {
			k.FinishReason = *ch.FinishReason
		}
		er.r.choice(res, onChunk, k, ch.PromptTokenIDs)
	}
	er.seq++
	return nil
}

// streamAPIError is the *APIError of an error event in a stream (sent with status 200): its
// message, type and code when the error body has them, else the raw body.
func streamAPIError(endpoint string, raw json.RawMessage) error {
	var eb wire.ErrorBody
	ae := &APIError{Endpoint: endpoint, StatusCode: http.StatusOK}
	if json.Unmarshal(raw, &eb) == nil && eb.Message != "" {
		ae.Message, ae.Type = eb.Message, eb.Type
		if eb.Code != 0 {
			ae.StatusCode = eb.Code
		}
	} else {
		ae.Body = snippet(raw)
	}
	return ae
}

// readWhole handles a server that ignored stream=true and sent one JSON completion.
func (c *Client) readWhole(endpoint string, body io.Reader, res *StreamResult, onChunk func(Chunk)) error {
	data, release, err := readBody(endpoint, body, c.opts.MaxBodyBytes)
	defer release()
	if err != nil {
		var le *LimitError
		if errors.As(err, &le) {
			return err
		}
		return fmt.Errorf("%s: reading body: %w", endpoint, err)
	}
	arrival := c.now().Sub(res.Start)
	res.NotStreamed = true
	res.Closed = arrival
	var ev streamEvent
	if err := json.Unmarshal(data, &ev); err != nil {
		return decodeError(endpoint, data, err)
	}
	if err := checkCompletion(endpoint, &ev.CompletionResponse, false); err != nil {
		return err
	}
	if ev.Usage != nil {
		u := *ev.Usage
		res.Usage = &u
	}
	for i := range ev.Choices {
		ch := &ev.Choices[i]
		k := Chunk{Arrival: arrival, Index: ch.Index, Text: ch.Text, TokenIDs: ch.TokenIDs, Logprobs: ch.Logprobs, Usage: ev.Usage}
		if ch.FinishReason != nil {
			k.FinishReason = *ch.FinishReason
		}
		chunkSink{}.choice(res, onChunk, k, ch.PromptTokenIDs)
	}
	return nil
}

// chunkSink folds one choice delta into the stream result and hands it to the callback.
type chunkSink struct{}

func (chunkSink) choice(res *StreamResult, onChunk func(Chunk), k Chunk, promptIDs []int) {
	switch {
	case len(k.TokenIDs) > 0:
		k.Tokens = len(k.TokenIDs)
	case k.Logprobs != nil && len(k.Logprobs.Tokens) > 0:
		k.Tokens = len(k.Logprobs.Tokens)
	case k.Text != "":
		k.Tokens = 1
	}
	k.Content = k.Tokens > 0
	if k.Index == 0 {
		if len(promptIDs) > 0 && res.PromptTokenIDs == nil {
			res.PromptTokenIDs = promptIDs
		}
		if k.Content {
			if len(res.Arrivals) == 0 {
				res.TTFT = k.Arrival
			}
			res.Latency = k.Arrival
			res.Arrivals = append(res.Arrivals, k.Arrival)
			res.ChunkTokens = append(res.ChunkTokens, k.Tokens)
			res.CountedTokens += k.Tokens
			res.text = append(res.text, k.Text...)
			res.TokenIDs = append(res.TokenIDs, k.TokenIDs...)
			if k.Logprobs != nil {
				res.Logprobs = appendLogprobs(res.Logprobs, k.Logprobs)
			}
		}
		if k.FinishReason != "" {
			res.FinishReason = k.FinishReason
		}
	}
	if onChunk != nil {
		onChunk(k)
	}
}

func (c *Client) finish(res *StreamResult) {
	res.Text = string(res.text)
	res.OutputTokens = res.CountedTokens
	if res.Usage != nil {
		res.OutputTokens = res.Usage.CompletionTokens
		res.PromptTokens = res.Usage.PromptTokens
	}
}

func appendLogprobs(dst, src *wire.Logprobs) *wire.Logprobs {
	if dst == nil {
		dst = &wire.Logprobs{}
	}
	dst.Tokens = append(dst.Tokens, src.Tokens...)
	dst.TokenLogprobs = append(dst.TokenLogprobs, src.TokenLogprobs...)
	dst.TopLogprobs = append(dst.TopLogprobs, src.TopLogprobs...)
	dst.TextOffset = append(dst.TextOffset, src.TextOffset...)
	return dst
}
