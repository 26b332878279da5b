// Package client is reckon's HTTP client for OpenAI-compatible serving engines (SGLang, vLLM and
// the reference engine): /v1/completions (plain and streamed as server-sent events), /v1/models,
// SGLang's /generate, /server_info and /flush_cache.
//
// Every answer is checked: a non-2xx status becomes an *APIError, a body that is not what the
// protocol promises (bad JSON, missing fields, NaN) becomes a *MalformedError. Nothing panics.
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/reckon-ci/reckon/wire"
)

// Options configure a Client. The zero value is usable.
type Options struct {
	// HTTPClient sends the requests; nil means a client with a connection pool sized for
	// benchmark concurrency and no overall timeout (Timeout and contexts bound each request).
	HTTPClient *http.Client
	// Timeout bounds each request (headers and body); 0 means only the context bounds it.
	Timeout time.Duration
	// Model is sent as "model" when a request leaves it empty.
	Model string
	// Now returns the current time; nil means time.Now (monotonic). Tests inject a scripted clock.
	Now func() time.Time
	// MetadataTimeout bounds each metadata request (/v1/models, /server_info,
	// /get_server_info, /flush_cache), whatever the context; 0 means DefaultMetadataTimeout.
	MetadataTimeout time.Duration
	// MaxEventBytes caps one server-sent event (a data line, or the data lines of one event
	// joined); 0 means DefaultMaxEventBytes.
	MaxEventBytes int
	// MaxBodyBytes caps a non-streamed answer and the whole of a streamed one; 0 means
	// DefaultMaxBodyBytes.
	MaxBodyBytes int64
}

// Limits applied when the Options leave them zero.
const (
	// DefaultMetadataTimeout bounds a metadata request: a server that streams completions but
	// never answers /server_info must not hang the run.
	DefaultMetadataTimeout = 10 * time.Second
	// DefaultMaxEventBytes caps one server-sent event. A completion chunk is a few hundred
	// bytes (some KiB with top logprobs); 4 MiB keeps 8 streams of huge lines under 100 MB.
	DefaultMaxEventBytes = 4 << 20
	// DefaultMaxBodyBytes caps a response body (prompt logprobs of long prompts are big).
	DefaultMaxBodyBytes = 256 << 20
	// metadataMaxBody caps metadata answers.
	metadataMaxBody = 16 << 20
	// MaxInFlightBodyBytes caps the response bodies that every client of the process holds at
	// once, read or being read (MaxBodyBytes caps one): 8 concurrent requests whose answers are
	// each just under 256 MiB must not take 2 GiB. A response that alone is over it is capped
	// by its own MaxBodyBytes only.
	MaxInFlightBodyBytes = 1 << 30
)

// inFlight is the process's account of the response bodies held (MaxInFlightBodyBytes).
var inFlight = &bodyBudget{total: MaxInFlightBodyBytes}

// bodyBudget counts the bytes of response bodies held by all clients.
type bodyBudget struct {
	total int64
	used  atomic.Int64
}

// take adds n bytes to a response that already holds own; it fails (taking nothing) when that
// brings the total over the budget while other responses hold some of it.
func (b *bodyBudget) take(n, own int64) bool {
	used := b.used.Add(n)
	if used > b.total && used-own-n > 0 {
		b.used.Add(-n)
		return false
	}
	return true
}

// Client talks to one serving engine.
type Client struct {
	base  string
	http  *http.Client
	opts  Options
	now   func() time.Time
	model string
}

// New returns a client for the server at baseURL (e.g. "http://127.0.0.1:30000"; a trailing "/"
// or "/v1" is accepted and removed).
func New(baseURL string, opts Options) *Client {
	base := strings.TrimRight(baseURL, "/")
	base = strings.TrimSuffix(base, "/v1")
	hc := opts.HTTPClient
	if hc == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.MaxIdleConns = 4096
		tr.MaxIdleConnsPerHost = 4096
		tr.MaxConnsPerHost = 0
		tr.DialContext = (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext
		tr.DisableCompression = true
		hc = &http.Client{Transport: tr}
	}
	now := opts.Now
	if now == nil {
		now = time.Now
	}
	if opts.MetadataTimeout <= 0 {
		opts.MetadataTimeout = DefaultMetadataTimeout
	}
	if opts.MaxEventBytes <= 0 {
		opts.MaxEventBytes = DefaultMaxEventBytes
	}
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = DefaultMaxBodyBytes
	}
	return &Client{base: base, http: hc, opts: opts, now: now, model: opts.Model}
}

// BaseURL returns the server address the client talks to.
func (c *Client) BaseURL() string { return c.base }

// Now reads the client's clock (time.Now unless Options.Now was given).
func (c *Client) Now() time.Time { return c.now() }

// Model returns the model name sent when a request names none.
func (c *Client) Model() string { return c.model }

// SetModel changes the model name sent when a request names none.
func (c *Client) SetModel(m string) { c.model = m }

func (c *Client) withTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	if c.opts.Timeout > 0 {
		return context.WithTimeout(ctx, c.opts.Timeout)
	}
	return context.WithCancel(ctx)
}

// newRequest builds an HTTP request with a JSON body (nil body for GET).
func (c *Client) newRequest(ctx context.Context, method, path string, body any) (*http.Request, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, fmt.Errorf("%s %s: encoding request: %w", method, path, err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	return req, nil
}

// readBody reads a whole body, failing with a *LimitError when it is longer than limit or when
// the bodies held by every client together would pass MaxInFlightBodyBytes. The bytes stay
// counted until release is called (when the caller has decoded them); release is never nil.
func readBody(endpoint string, r io.Reader, limit int64) (data []byte, release func(), err error) {
	var held int64
	release = func() {
		inFlight.used.Add(-held)
		held = 0
	}
	var buf bytes.Buffer
	chunk := make([]byte, 64<<10)
	for {
		n, rerr := r.Read(chunk)
		if n > 0 {
			if int64(buf.Len())+int64(n) > limit {
				release()
				return nil, release, &LimitError{Endpoint: endpoint, What: "response body", Limit: limit, Unit: "bytes", Option: "Options.MaxBodyBytes"}
			}
			if !inFlight.take(int64(n), held) {
				release()
				return nil, release, &LimitError{Endpoint: endpoint, What: "response bodies held at once by all requests", Limit: inFlight.total, Unit: "bytes", Option: "client.MaxInFlightBodyBytes"}
			}
			held += int64(n)
			buf.Write(chunk[:n])
		}
		if rerr == io.EOF {
			return buf.Bytes(), release, nil
		}
		if rerr != nil {
			release()
			return buf.Bytes(), release, rerr
		}
	}
}

// doJSON sends a request and decodes a 2xx JSON answer into out (nil: body discarded). A
// completion request is bounded by Options.Timeout; a metadata request by
// Options.MetadataTimeout as well.
func (c *Client) doJSON(ctx context.Context, method, path string, body, out any) error {
	return c.do(ctx, method, path, body, out, false)
}

// doMeta is doJSON for metadata requests.
func (c *Client) doMeta(ctx context.Context, method, path string, body, out any) error {
	return c.do(ctx, method, path, body, out, true)
}

func (c *Client) do(parent context.Context, method, path string, body, out any, meta bool) error {
	ctx, cancel := c.withTimeout(parent)
	defer cancel()
	limit := c.opts.MaxBodyBytes
	if meta {
		var mcancel context.CancelFunc
		ctx, mcancel = context.WithTimeout(ctx, c.opts.MetadataTimeout)
		defer mcancel()
		limit = min(limit, metadataMaxBody)
	}
	endpoint := method + " " + path
	req, err := c.newRequest(ctx, method, path, body)
	if err != nil {
		return err
	}
	timedOut := func(err error) error {
		if meta && parent.Err() == nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
			if c.opts.Timeout > 0 && c.opts.Timeout < c.opts.MetadataTimeout {
				return fmt.Errorf("%s: no complete answer within the request timeout of %s (Options.Timeout): %w", endpoint, c.opts.Timeout, err)
			}
			return fmt.Errorf("%s: no complete answer within the metadata timeout of %s (Options.MetadataTimeout, reckon bench --metadata-timeout): %w", endpoint, c.opts.MetadataTimeout, err)
		}
		return fmt.Errorf("%s: %w", endpoint, err)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return timedOut(err)
	}
	defer resp.Body.Close()
	data, release, err := readBody(endpoint, resp.Body, limit)
	defer release()
	if err != nil {
		var le *LimitError
		if errors.As(err, &le) {
			return err
		}
		return timedOut(fmt.Errorf("reading body: %w", err))
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return apiError(endpoint, resp.StatusCode, data)
	}
	if out == nil {
		return nil
	}
	if err := jsonUnmarshal(data, out); err != nil {
		return decodeError(endpoint, data, err)
	}
	return nil
}

func jsonUnmarshal(data []byte, v any) error { return json.Unmarshal(data, v) }

// decodeError turns a JSON decoding failure into a *MalformedError, naming non-finite literals
// (NaN, Infinity), which Python servers emit but JSON does not allow.
func decodeError(endpoint string, data []byte, err error) error {
	me := &MalformedError{Endpoint: endpoint, Snippet: snippet(data), Err: err, Reason: "invalid JSON"}
	if len(bytes.TrimSpace(data)) == 0 {
		me.Reason = "empty body, expected a JSON object"
		me.Err = nil
	}
	var se *json.SyntaxError
	if errors.As(err, &se) && hasNonFinite(data) {
		me.Reason = "non-finite number (NaN or Infinity) where JSON allows only finite numbers"
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		me.Field = te.Field
		me.Reason = "expected " + te.Type.String() + ", got JSON " + te.Value
		me.Err = nil
	}
	return me
}

func hasNonFinite(b []byte) bool {
	return bytes.Contains(b, []byte("NaN")) || bytes.Contains(b, []byte("Infinity"))
}

// Models returns the ids served at GET /v1/models.
func (c *Client) Models(ctx context.Context) ([]string, error) {
	var ml wire.ModelList
	if err := c.doMeta(ctx, http.MethodGet, "/v1/models", nil, &ml); err != nil {
		return nil, err
	}
	if ml.Data == nil {
		return nil, &MalformedError{Endpoint: "GET /v1/models", Field: "data", Reason: "missing model list"}
	}
	ids := make([]string, 0, len(ml.Data))
	for i, m := range ml.Data {
		if m.ID == "" {
			return nil, &MalformedError{Endpoint: "GET /v1/models", Field: fmt.Sprintf("data[%d].id", i), Reason: "empty model id"}
		}
		ids = append(ids, m.ID)
	}
	return ids, nil
}

// ResolveModel sets the client's model to the first served one when none was given.
func (c *Client) ResolveModel(ctx context.Context) (string, error) {
	if c.model != "" {
		return c.model, nil
	}
	ids, err := c.Models(ctx)
	if err != nil {
		return "", err
	}
	if len(ids) == 0 {
		return "", &MalformedError{Endpoint: "GET /v1/models", Field: "data", Reason: "server lists no model"}
	}
	c.model = ids[0]
	return c.model, nil
}

// Complete sends a non-streaming completion request and checks the answer: at least one choice,
// finite logprobs, logprob arrays of equal length.
func (c *Client) Complete(ctx context.Context, req wire.CompletionRequest) (*wire.CompletionResponse, error) {
	const endpoint = "POST /v1/completions"
	if req.Model == "" {
		req.Model = c.model
	}
	req.Stream = false
	req.StreamOptions = nil
	var out wire.CompletionResponse
	if err := c.doJSON(ctx, http.MethodPost, "/v1/completions", req, &out); err != nil {
		return nil, err
	}
	if err := checkCompletion(endpoint, &out, false); err != nil {
		return nil, err
	}
	return &out, nil
}

// checkCompletion validates a completion body (or, with chunk, one streamed chunk, which may have
// no choices when it carries only usage).
func checkCompletion(endpoint string, r *wire.CompletionResponse, chunk bool) error {
	if len(r.Choices) == 0 && !(chunk && r.Usage != nil) {
		if chunk {
			return &MalformedError{Endpoint: endpoint, Field: "choices", Reason: "chunk has neither choices nor usage"}
		}
		return &MalformedError{Endpoint: endpoint, Field: "choices", Reason: "no choices in the answer"}
	}
	for i := range r.Choices {
		if err := checkLogprobs(endpoint, i, r.Choices[i].Logprobs); err != nil {
			return err
		}
	}
	if u := r.Usage; u != nil && (u.PromptTokens < 0 || u.CompletionTokens < 0) {
		return &MalformedError{Endpoint: endpoint, Field: "usage", Reason: "negative token count"}
	}
	return nil
}

func checkLogprobs(endpoint string, i int, lp *wire.Logprobs) error {
	if lp == nil {
		return nil
	}
	n := len(lp.Tokens)
	if len(lp.TokenLogprobs) != n {
		return &MalformedError{Endpoint: endpoint, Field: fmt.Sprintf("choices[%d].logprobs.token_logprobs", i),
			Reason: fmt.Sprintf("%d entries for %d tokens", len(lp.TokenLogprobs), n)}
	}
	if lp.TopLogprobs != nil && len(lp.TopLogprobs) != n {
		return &MalformedError{Endpoint: endpoint, Field: fmt.Sprintf("choices[%d].logprobs.top_logprobs", i),
			Reason: fmt.Sprintf("%d entries for %d tokens", len(lp.TopLogprobs), n)}
	}
	return nil
}

// Generate sends SGLang's native POST /generate (non-streaming).
func (c *Client) Generate(ctx context.Context, req wire.GenerateRequest) (*wire.GenerateResponse, error) {
	const endpoint = "POST /generate"
	req.Stream = false
	var out wire.GenerateResponse
	if err := c.doJSON(ctx, http.MethodPost, "/generate", req, &out); err != nil {
		return nil, err
	}
	// meta_info is what makes the answer usable; an answer without it is malformed.
	if out.MetaInfo.ID == "" && out.MetaInfo.CompletionTokens == 0 && out.MetaInfo.PromptTokens == 0 && out.Text == "" && len(out.OutputIDs) == 0 {
		return nil, &MalformedError{Endpoint: endpoint, Field: "meta_info", Reason: "answer has no text, output_ids or meta_info"}
	}
	return &out, nil
}

// ServerInfo reads GET /server_info, falling back to the older /get_server_info when the newer
// route is missing (404/405). SGLang keeps per-DP-rank state in internal_states; when the top-level
// avg_spec_accept_length or last_gen_throughput is absent it is taken from internal_states[0].
func (c *Client) ServerInfo(ctx context.Context) (*wire.ServerInfo, error) {
	var info wire.ServerInfo
	err := c.doMeta(ctx, http.MethodGet, "/server_info", nil, &info)
	var ae *APIError
	if errors.As(err, &ae) && (ae.StatusCode == http.StatusNotFound || ae.StatusCode == http.StatusMethodNotAllowed) {
		info = wire.ServerInfo{}
		err = c.doMeta(ctx, http.MethodGet, "/get_server_info", nil, &info)
	}
	if err != nil {
		return nil, err
	}
	if len(info.InternalStates) > 0 {
		st := info.InternalStates[0]
		if info.AvgSpecAcceptLength == nil {
			if v, ok := st["avg_spec_accept_length"].(float64); ok {
				info.AvgSpecAcceptLength = &v
			}
		}
		if info.LastGenThroughput == 0 {
			if v, ok := st["last_gen_throughput"].(float64); ok {
				info.LastGenThroughput = v
			}
		}
		if info.MemoryUsage == nil {
			if mu, ok := st["memory_usage"].(map[string]any); ok {
				m := &wire.MemoryUsage{}
				m.Weight, _ = mu["weight"].(float64)
				m.KVCache, _ = mu["kvcache"].(float64)
				if tc, ok := mu["token_capacity"].(float64); ok {
					m.TokenCapacity = int(tc)
				}
				if g, ok := mu["cuda_graph"].(float64); ok {
					m.CUDAGraph = g
				} else if g, ok := mu["graph"].(float64); ok {
					m.CUDAGraph = g
				}
				info.MemoryUsage = m
			}
		}
	}
	return &info, nil
}

// FlushCache asks the server to drop its prefix (radix) cache: SGLang's /flush_cache (GET in
// older servers, POST in newer ones), falling back to vLLM's POST /reset_prefix_cache.
func (c *Client) FlushCache(ctx context.Context) error {
	err := c.doMeta(ctx, http.MethodPost, "/flush_cache", struct{}{}, nil)
	if err == nil {
		return nil
	}
	var ae *APIError
	if !errors.As(err, &ae) || (ae.StatusCode != http.StatusNotFound && ae.StatusCode != http.StatusMethodNotAllowed) {
		return err
	}
	if ae.StatusCode == http.StatusMethodNotAllowed {
		return c.doMeta(ctx, http.MethodGet, "/flush_cache", nil, nil)
	}
	if err2 := c.doMeta(ctx, http.MethodPost, "/reset_prefix_cache", struct{}{}, nil); err2 != nil {
		return fmt.Errorf("flush cache: /flush_cache: %v; /reset_prefix_cache: %w", err, err2)
	}
	return nil
}

// PromptText returns a JSON prompt for a string.
func PromptText(s string) json.RawMessage {
	b, _ := json.Marshal(s)
	return b
}

// PromptTokens returns a JSON prompt for a list of token ids.
func PromptTokens(ids []int) json.RawMessage {
	if ids == nil {
		ids = []int{}
	}
	b, _ := json.Marshal(ids)
	return b
}
