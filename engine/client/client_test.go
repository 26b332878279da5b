package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/reckon-ci/reckon/wire"
)

// scriptClock returns base+ticks[i] on its i-th call (the last tick repeats), so that a test knows
// exactly which time the client records for each event.
type scriptClock struct {
	mu    sync.Mutex
	base  time.Time
	ticks []time.Duration
	i     int
}

func (s *scriptClock) Now() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	d := s.ticks[len(s.ticks)-1]
	if s.i < len(s.ticks) {
		d = s.ticks[s.i]
	}
	s.i++
	return s.base.Add(d)
}

func ms(v float64) time.Duration { return time.Duration(v * float64(time.Millisecond)) }

func serve(t *testing.T, h http.HandlerFunc) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

func intp(v int) *int { return &v }

func TestCompleteDecodesLogprobsAndEcho(t *testing.T) {
	var got wire.CompletionRequest
	srv := serve(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/completions" || r.Method != http.MethodPost {
			http.NotFound(w, r)
			return
		}
		if err := json.NewDecoder(r.Body).Decode(&got); err != nil {
			t.Errorf("server could not decode request: %v", err)
		}
		io.WriteString(w, `{"id":"c1","object":"text_completion","model":"m","choices":[{"index":0,"text":"ab c",
			"logprobs":{"tokens":["ab"," c"],"token_logprobs":[null,-0.5],"top_logprobs":[null,{" c":-0.5," d":-1.25}],"text_offset":[0,2]},
			"finish_reason":"length","token_ids":[7,8],"prompt_token_ids":[7]}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`)
	})
	c := New(srv.URL+"/v1/", Options{Model: "m"})
	resp, err := c.Complete(context.Background(), wire.CompletionRequest{Prompt: PromptTokens([]int{7}), MaxTokens: intp(1), Logprobs: intp(2), Echo: true})
	if err != nil {
		t.Fatalf("Complete: %v", err)
	}
	if got.Model != "m" || !got.Echo || got.Stream || string(got.Prompt) != "[7]" {
		t.Errorf("request sent = %+v, want model m, echo, no stream, prompt [7]", got)
	}
	lp := resp.Choices[0].Logprobs
	if lp == nil || lp.TokenLogprobs[0] != nil || *lp.TokenLogprobs[1] != -0.5 || lp.TopLogprobs[1][" d"] != -1.25 {
		t.Errorf("logprobs decoded wrong: %+v", lp)
	}
	if fmt.Sprint(resp.Choices[0].TokenIDs) != "[7 8]" || resp.Usage.CompletionTokens != 1 {
		t.Errorf("token ids / usage wrong: %+v %+v", resp.Choices[0].TokenIDs, resp.Usage)
	}
}

func TestCompleteRejectsMalformedBodies(t *testing.T) {
	cases := []struct {
		name, body string
		status     int
		wantAPI    bool
		wantText   string
	}{
		{"bad json", `{"choices":[`, 200, false, "invalid JSON"},
		{"empty body", ``, 200, false, "empty body"},
		{"NaN literal", `{"choices":[{"index":0,"text":"x","logprobs":{"tokens":["x"],"token_logprobs":[NaN]}}]}`, 200, false, "non-finite"},
		{"no choices", `{"id":"x","choices":[]}`, 200, false, "no choices"},
		{"wrong type", `{"choices":"nope"}`, 200, false, "expected"},
		{"logprob length mismatch", `{"choices":[{"text":"x","logprobs":{"tokens":["x","y"],"token_logprobs":[-1]}}]}`, 200, false, "token_logprobs"},
		{"openai error", `{"error":{"message":"max_tokens too large","type":"BadRequestError","code":400}}`, 400, true, "max_tokens too large"},
		{"plain 500", `Internal Server Error`, 500, true, "HTTP 500: Internal Server Error"},
		{"fastapi detail", `{"detail":"Not Found"}`, 404, true, "Not Found"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := serve(t, func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(tc.status)
				io.WriteString(w, tc.body)
			})
			resp, err := New(srv.URL, Options{}).Complete(context.Background(), wire.CompletionRequest{Prompt: PromptText("hi")})
			if err == nil {
				t.Fatalf("want an error, got response %+v", resp)
			}
			var ae *APIError
			if tc.wantAPI != errors.As(err, &ae) {
				t.Errorf("APIError = %v, want %v (err %v)", !tc.wantAPI, tc.wantAPI, err)
			}
			if !tc.wantAPI && !errors.Is(err, ErrMalformed) {
				t.Errorf("want ErrMalformed, got %T %v", err, err)
			}
			if !strings.Contains(err.Error(), tc.wantText) {
				t.Errorf("error %q does not mention %q", err, tc.wantText)
			}
		})
	}
}

// sseServer writes the given events (each already "data: ..." framed) and flushes after each.
func sseServer(t *testing.T, events ...string) *httptest.Server {
	return serve(t, func(w http.ResponseWriter, r *http.Request) {
		var req wire.CompletionRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || !req.Stream || req.StreamOptions == nil || !req.StreamOptions.IncludeUsage {
			t.Errorf("stream request wrong: %+v (%v)", req, err)
		}
		w.Header().Set("Content-Type", "text/event-stream")
		for _, e := range events {
			io.WriteString(w, e)
			w.(http.Flusher).Flush()
		}
	})
}

func TestStreamRecordsArrivalsTokensAndUsage(t *testing.T) {
	srv := sseServer(t,
		": keep-alive comment\n\n",
		"data: {\"choices\":[{\"index\":0,\"text\":\"Hel\",\"token_ids\":[1],\"finish_reason\":null}]}\n\n",
		"data: {\"choices\":[{\"index\":0,\"text\":\"\",\"finish_reason\":null}]}\n\n", // empty delta: not a token
		"event: message\r\ndata: {\"choices\":[{\"index\":0,\"text\":\"lo w\",\"token_ids\":[2,3],\"finish_reason\":null}]}\r\n\r\n",
		"data: {\"choices\":[{\"index\":0,\"text\":\"orld\",\n",
		"data: \"token_ids\":[4],\"finish_reason\":\"length\"}]}\n\n", // multi-line data field
		"data: {\"choices\":[],\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":4,\"total_tokens\":9}}\n\n",
		"data: [DONE]\n\n",
	)
	// Clock calls: start, then one per dispatched event (5 payloads + [DONE]).
	clk := &scriptClock{base: time.Unix(1000, 0), ticks: []time.Duration{0, ms(120), ms(125), ms(150), ms(190), ms(191), ms(192)}}
	c := New(srv.URL, Options{Now: clk.Now})
	var chunks []Chunk
	res, err := c.Stream(context.Background(), wire.CompletionRequest{Prompt: PromptText("hi"), MaxTokens: intp(4)}, func(k Chunk) { chunks = append(chunks, k) })
	if err != nil {
		t.Fatalf("Stream: %v", err)
	}
	if res.TTFT != ms(120) || res.Latency != ms(190) || res.Closed != ms(192) || !res.Done {
		t.Errorf("TTFT %v latency %v closed %v done %v; want 120ms 190ms 192ms true", res.TTFT, res.Latency, res.Closed, res.Done)
	}
	if fmt.Sprint(res.ITLs()) != "[30ms 40ms]" {
		t.Errorf("ITLs = %v, want [30ms 40ms]", res.ITLs())
	}
	if res.Text != "Hello world" || fmt.Sprint(res.TokenIDs) != "[1 2 3 4]" || fmt.Sprint(res.ChunkTokens) != "[1 2 1]" {
		t.Errorf("text %q ids %v chunk tokens %v", res.Text, res.TokenIDs, res.ChunkTokens)
	}
	if res.OutputTokens != 4 || res.PromptTokens != 5 || res.CountedTokens != 4 || res.FinishReason != "length" {
		t.Errorf("tokens out %d prompt %d counted %d finish %q", res.OutputTokens, res.PromptTokens, res.CountedTokens, res.FinishReason)
	}
	if len(chunks) != 5 || chunks[1].Content || chunks[4].Usage == nil {
		t.Errorf("chunks passed to callback = %+v", chunks)
	}
}

func TestStreamFailures(t *testing.T) {
	cases := []struct {
		name     string
		events   []string
		wantText string
		api      bool
	}{
		{"bad json chunk", []string{"data: {\"choices\":[{\"text\":\"a\"}]}\n\n", "data: {\"choices\":[{\"te\n\n"}, "invalid JSON", false},
		{"NaN in chunk", []string{"data: {\"choices\":[{\"text\":\"a\",\"logprobs\":{\"tokens\":[\"a\"],\"token_logprobs\":[NaN]}}]}\n\n"}, "non-finite", false},
		{"error event", []string{"data: {\"choices\":[{\"text\":\"a\"}]}\n\n", "data: {\"error\":{\"message\":\"engine died\",\"type\":\"InternalServerError\",\"code\":500}}\n\n"}, "engine died", true},
		{"no tokens", []string{"data: {\"choices\":[{\"text\":\"\",\"finish_reason\":\"stop\"}]}\n\n", "data: [DONE]\n\n"}, "without any generated token", false},
		{"chunk without choices or usage", []string{"data: {\"id\":\"x\"}\n\n"}, "neither choices nor usage", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := sseServer(t, tc.events...)
			res, err := New(srv.URL, Options{}).Stream(context.Background(), wire.CompletionRequest{Prompt: PromptText("x")}, nil)
			if err == nil {
				t.Fatalf("want error, got %+v", res)
			}
			if res == nil {
				t.Fatalf("want the partial result with the error")
			}
			var ae *APIError
			if errors.As(err, &ae) != tc.api || (!tc.api && !errors.Is(err, ErrMalformed)) {
				t.Errorf("error type %T (%v), want api=%v", err, err, tc.api)
			}
			if !strings.Contains(err.Error(), tc.wantText) {
				t.Errorf("error %q does not mention %q", err, tc.wantText)
			}
		})
	}
}

func TestStreamHTTPErrorAndTimeout(t *testing.T) {
	srv := serve(t, func(w http.ResponseWriter, r *http.Request) {
		if strings.Contains(r.URL.RawQuery, "slow") {
			// Read the body so that the server notices when the client hangs up.
			_, _ = io.Copy(io.Discard, r.Body)
			<-r.Context().Done()
			return
		}
		w.WriteHeader(http.StatusServiceUnavailable)
		io.WriteString(w, `{"error":{"message":"overloaded","type":"ServiceUnavailable"}}`)
	})
	_, err := New(srv.URL, Options{}).Stream(context.Background(), wire.CompletionRequest{Prompt: PromptText("x")}, nil)
	var ae *APIError
	if !errors.As(err, &ae) || ae.StatusCode != 503 || ae.Message != "overloaded" {
		t.Errorf("want APIError 503 overloaded, got %v", err)
	}

	// A server that never answers: the per-request timeout must end the call with an error.
	slow := New(srv.URL, Options{Timeout: 50 * time.Millisecond})
	slow.base += "/v1/completions?slow=1#"
	_, err = slow.Stream(context.Background(), wire.CompletionRequest{Prompt: PromptText("x")}, nil)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("want deadline exceeded, got %v", err)
	}
}

func TestServerInfoFallbackAndInternalStates(t *testing.T) {
	srv := serve(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/get_server_info":
			io.WriteString(w, `{"tp_size":2,"disable_custom_all_reduce":false,"version":"0.4.9",
				"internal_states":[{"avg_spec_accept_length":3.25,"last_gen_throughput":88.5,
				"memory_usage":{"weight":7.5,"kvcache":10.42,"token_capacity":123456,"graph":0.5}}]}`)
		default:
			http.NotFound(w, r)
		}
	})
	info, err := New(srv.URL, Options{}).ServerInfo(context.Background())
	if err != nil {
		t.Fatalf("ServerInfo: %v", err)
	}
	if info.AvgSpecAcceptLength == nil || *info.AvgSpecAcceptLength != 3.25 || info.LastGenThroughput != 88.5 || info.TPSize != 2 {
		t.Errorf("info = %+v", info)
	}
	if info.MemoryUsage == nil || info.MemoryUsage.TokenCapacity != 123456 || info.MemoryUsage.CUDAGraph != 0.5 {
		t.Errorf("memory usage = %+v", info.MemoryUsage)
	}

	bad := serve(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, `{"tp_size":"two"}`) })
	if _, err := New(bad.URL, Options{}).ServerInfo(context.Background()); !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), "tp_size") {
		t.Errorf("want malformed error naming tp_size, got %v", err)
	}
}

func TestModelsResolveAndFlush(t *testing.T) {
	var flushed []string
	srv := serve(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/models":
			io.WriteString(w, `{"object":"list","data":[{"id":"tiny","object":"model"},{"id":"other"}]}`)
		case "/reset_prefix_cache":
			flushed = append(flushed, r.Method+" "+r.URL.Path)
		default:
			http.NotFound(w, r)
		}
	})
	c := New(srv.URL, Options{})
	m, err := c.ResolveModel(context.Background())
	if err != nil || m != "tiny" || c.Model() != "tiny" {
		t.Errorf("ResolveModel = %q, %v", m, err)
	}
	if err := c.FlushCache(context.Background()); err != nil || len(flushed) != 1 {
		t.Errorf("FlushCache fell back wrongly: %v %v", err, flushed)
	}
	empty := serve(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, `{"object":"list"}`) })
	if _, err := New(empty.URL, Options{}).Models(context.Background()); !errors.Is(err, ErrMalformed) {
		t.Errorf("missing data: want malformed, got %v", err)
	}
}

func TestGenerate(t *testing.T) {
	srv := serve(t, func(w http.ResponseWriter, r *http.Request) {
		var req wire.GenerateRequest
		_ = json.NewDecoder(r.Body).Decode(&req)
		if req.Text == "bad" {
			io.WriteString(w, `{}`)
			return
		}
		io.WriteString(w, `{"text":" world","output_ids":[5,6],"meta_info":{"id":"r1","prompt_tokens":2,"completion_tokens":2,
			"output_token_logprobs":[[-0.1,5,null],[-0.2,6,null]],"e2e_latency":0.05}}`)
	})
	c := New(srv.URL, Options{})
	resp, err := c.Generate(context.Background(), wire.GenerateRequest{Text: "hello", ReturnLogprob: true})
	if err != nil || resp.MetaInfo.CompletionTokens != 2 || len(resp.MetaInfo.OutputTokenLogprobs) != 2 {
		t.Errorf("Generate = %+v, %v", resp, err)
	}
	if _, err := c.Generate(context.Background(), wire.GenerateRequest{Text: "bad"}); !errors.Is(err, ErrMalformed) {
		t.Errorf("empty answer: want malformed, got %v", err)
	}
}

func TestStreamServerThatDoesNotStream(t *testing.T) {
	srv := serve(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"choices":[{"index":0,"text":"abc","token_ids":[1,2,3],"finish_reason":"length"}],"usage":{"prompt_tokens":2,"completion_tokens":3,"total_tokens":5}}`)
	})
	res, err := New(srv.URL, Options{}).Stream(context.Background(), wire.CompletionRequest{Prompt: PromptText("x")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !res.NotStreamed || res.OutputTokens != 3 || res.TTFT != res.Latency || len(res.ITLs()) != 0 || res.Text != "abc" {
		t.Errorf("non-streamed answer: %+v", res)
	}
}

// A server that sends [DONE] but keeps the response open must not hold the client.
func TestStreamDoesNotWaitAfterDone(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	srv := serve(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: {\"choices\":[{\"text\":\"a\"}]}\n\ndata: [DONE]\n\n")
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	res, err := New(srv.URL, Options{}).Stream(context.Background(), wire.CompletionRequest{Prompt: PromptText("x")}, nil)
	if err != nil || !res.Done || res.Text != "a" {
		t.Fatalf("Stream = %+v, %v", res, err)
	}
}

// An event longer than the read buffer (a long text or big logprobs) is assembled whole.
func TestStreamLongEvent(t *testing.T) {
	long := strings.Repeat("x", 200<<10)
	srv := sseServer(t, "data:{\"choices\":[{\"index\":0,\"text\":\""+long+"\"}]}\n\n", "data: [DONE]\n\n")
	res, err := New(srv.URL, Options{}).Stream(context.Background(), wire.CompletionRequest{Prompt: PromptText("x")}, nil)
	if err != nil || len(res.Text) != len(long) || res.OutputTokens != 1 {
		t.Fatalf("long event: %v, %d bytes", err, len(res.Text))
	}
}
