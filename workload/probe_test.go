package workload

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/reckon-ci/reckon/engine/client"
	"github.com/reckon-ci/reckon/wire"
)

// probeServer answers the probe's two requests for the prompt "a b" (ids 1 2): greedy output
// " c d" (ids 3 4) and an echo pass. withIDs controls whether token ids are sent.
func probeServer(t *testing.T, withIDs, withLogprobs bool) *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/models" {
			io.WriteString(w, `{"data":[{"id":"ref"}]}`)
			return
		}
		if r.URL.Path != "/v1/completions" {
			http.NotFound(w, r) // a vLLM-like server: no /generate
			return
		}
		var req wire.CompletionRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			t.Errorf("decode: %v", err)
		}
		if req.Temperature == nil || *req.Temperature != 0 || req.Logprobs == nil || *req.Logprobs != 2 || !req.ReturnTokenIDs {
			t.Errorf("probe request not greedy with top-2 logprobs: %+v", req)
		}
		ids := func(s string) string {
			if withIDs {
				return s
			}
			return ""
		}
		lp := `"logprobs":null,`
		if req.Echo {
			if withLogprobs {
				lp = `"logprobs":{"tokens":["a"," b"," c"],"token_logprobs":[null,-1.5,-0.25],"top_logprobs":[null,{" b":-1.5," x":-0.5},{" c":-0.25," d":-2}]},`
			}
			fmt.Fprintf(w, `{"choices":[{"index":0,"text":"a b c",%s"finish_reason":"length"%s}],"usage":{"prompt_tokens":2,"completion_tokens":1,"total_tokens":3}}`,
				lp, ids(`,"token_ids":[3],"prompt_token_ids":[1,2]`))
			return
		}
		if withLogprobs {
			lp = `"logprobs":{"tokens":[" c"," d"],"token_logprobs":[-0.25,-0.125],"top_logprobs":[{" c":-0.25," d":-2},{" d":-0.125," b":-3}]},`
		}
		fmt.Fprintf(w, `{"choices":[{"index":0,"text":" c d",%s"finish_reason":"length"%s}],"usage":{"prompt_tokens":2,"completion_tokens":2,"total_tokens":4}}`,
			lp, ids(`,"token_ids":[3,4]`))
	}))
}

func TestNumericsProbeWithTokenIDs(t *testing.T) {
	srv := probeServer(t, true, true)
	defer srv.Close()
	p, err := RunNumericsProbe(context.Background(), client.New(srv.URL, client.Options{}), []Prompt{{ID: "p1", Text: "a b"}}, 2, 2)
	if err != nil {
		t.Fatalf("probe: %v", err)
	}
	if p.Schema != wire.NumericsSchema || p.TopK != 2 || len(p.Prompts) != 1 {
		t.Fatalf("probe = %+v", p)
	}
	np := p.Prompts[0]
	if np.ID != "p1" || len(np.Output) != 2 || np.Output[0].Token != 3 || np.Output[1].Token != 4 || np.Output[1].Logprob != -0.125 {
		t.Errorf("output = %+v", np.Output)
	}
	// Top candidates sorted by logprob; " d" and " b" get ids learnt from other answers.
	top := np.Output[1].Top
	if len(top) != 2 || top[0].Token != 4 || top[1].Token != 2 || top[1].Logprob != -3 {
		t.Errorf("top = %+v", top)
	}
	// Prompt logprobs omit the first token: one entry, for " b" (id 2).
	if len(np.PromptLogprobs) != 1 || np.PromptLogprobs[0].Token != 2 || np.PromptLogprobs[0].Logprob != -1.5 {
		t.Errorf("prompt logprobs = %+v", np.PromptLogprobs)
	}
	// " x" was never seen with an id.
	if tp := np.PromptLogprobs[0].Top; tp[0].Text != " x" || tp[0].Token != UnknownToken {
		t.Errorf("unknown candidate = %+v", tp)
	}
}

func TestNumericsProbeWithoutTokenIDs(t *testing.T) {
	srv := probeServer(t, false, true)
	defer srv.Close()
	p, err := RunNumericsProbe(context.Background(), client.New(srv.URL, client.Options{}), []Prompt{{Text: "a b"}}, 2, 2)
	if err != nil {
		t.Fatalf("probe: %v", err)
	}
	np := p.Prompts[0]
	if np.Output[0].Token != UnknownToken || np.Output[0].Text != " c" || len(np.PromptLogprobs) != 1 {
		t.Errorf("without ids the text must be kept and ids unknown: %+v", np)
	}
}

func TestNumericsProbeFailsWithoutLogprobs(t *testing.T) {
	srv := probeServer(t, true, false)
	defer srv.Close()
	_, err := RunNumericsProbe(context.Background(), client.New(srv.URL, client.Options{}), []Prompt{{ID: "x", Text: "a b"}}, 2, 2)
	if err == nil || !strings.Contains(err.Error(), "no logprobs") || !strings.Contains(err.Error(), `"x"`) {
		t.Errorf("want an error naming the prompt and the missing logprobs, got %v", err)
	}
}

func TestNumericsPromptFixtureLoads(t *testing.T) {
	ps, err := LoadPrompts("../fixtures/prompts/numerics.jsonl")
	if err != nil {
		t.Fatalf("LoadPrompts: %v", err)
	}
	if len(ps) < 16 || len(ps) > 64 {
		t.Errorf("%d numerics prompts, want 16..64", len(ps))
	}
	seen := map[string]bool{}
	for _, p := range ps {
		if seen[p.ID] {
			t.Errorf("duplicate prompt id %q", p.ID)
		}
		seen[p.ID] = true
	}
}

func TestNumericsProbeUsesGenerateWhenServed(t *testing.T) {
	var gens, comps int
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/models":
			io.WriteString(w, `{"data":[{"id":"ref"}]}`)
		case "/generate":
			gens++
			var req wire.GenerateRequest
			_ = json.NewDecoder(r.Body).Decode(&req)
			if !req.ReturnLogprob || req.TopLogprobsNum != 2 || req.SamplingParams.Temperature == nil || *req.SamplingParams.Temperature != 0 {
				t.Errorf("generate request %+v", req)
			}
			io.WriteString(w, `{"text":" c d","output_ids":[3,4],"meta_info":{"id":"g","prompt_tokens":2,"completion_tokens":2,
				"output_token_logprobs":[[-0.25,3,null],[-0.125,4,null]],
				"output_top_logprobs":[[[-2,4,null],[-0.25,3,null]],[[-0.125,4,null],[-3,2,null]]]}}`)
		default:
			comps++
			io.WriteString(w, `{"choices":[{"index":0,"text":"a b c","logprobs":{"tokens":["a"," b"," c"],"token_logprobs":[null,-1.5,-0.25],"top_logprobs":[null,{" b":-1.5},{" c":-0.25}]},"token_ids":[3],"prompt_token_ids":[1,2]}],"usage":{"prompt_tokens":2,"completion_tokens":1,"total_tokens":3}}`)
		}
	}))
	defer srv.Close()
	p, err := RunNumericsProbe(context.Background(), client.New(srv.URL, client.Options{}), []Prompt{{ID: "a", Text: "a b"}, {ID: "b", Text: "a b"}}, 2, 2)
	if err != nil {
		t.Fatal(err)
	}
	if gens != 2 || comps != 2 {
		t.Errorf("%d /generate and %d completion calls, want 2 and 2 (greedy on /generate, echo on completions)", gens, comps)
	}
	o := p.Prompts[0].Output
	if len(o) != 2 || o[0].Token != 3 || o[0].Top[0].Token != 3 || o[0].Top[1].Token != 4 || o[1].Top[1].Logprob != -3 {
		t.Errorf("output from /generate = %+v", o)
	}
	if len(p.Prompts[1].PromptLogprobs) != 1 || p.Prompts[1].PromptLogprobs[0].Token != 2 {
		t.Errorf("prompt logprobs = %+v", p.Prompts[1].PromptLogprobs)
	}
}

// A vLLM-like server: no /generate; with return_tokens_as_token_ids the logprob tokens are named
// "token_id:N", so that every top-k candidate has its id.
func TestNumericsProbeTokenIDNames(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/models":
			io.WriteString(w, `{"data":[{"id":"v"}]}`)
			return
		case "/v1/completions":
		default:
			http.NotFound(w, r)
			return
		}
		var req wire.CompletionRequest
		_ = json.NewDecoder(r.Body).Decode(&req)
		if !req.ReturnTokensAsTokenIDs {
			t.Errorf("probe did not ask for token ids as names")
		}
		if req.Echo {
			io.WriteString(w, `{"choices":[{"index":0,"text":"ab c","logprobs":{"tokens":["token_id:1","token_id:2","token_id:3"],"token_logprobs":[null,-1.5,-0.25],
				"top_logprobs":[null,{"token_id:2":-1.5,"token_id:9":-0.5},{"token_id:3":-0.25}]}}],"usage":{"prompt_tokens":2,"completion_tokens":1,"total_tokens":3}}`)
			return
		}
		io.WriteString(w, `{"choices":[{"index":0,"text":" c","logprobs":{"tokens":["token_id:3"],"token_logprobs":[-0.25],"top_logprobs":[{"token_id:3":-0.25,"token_id:7":-2}]}}],"usage":{"prompt_tokens":2,"completion_tokens":1,"total_tokens":3}}`)
	}))
	defer srv.Close()
	p, err := RunNumericsProbe(context.Background(), client.New(srv.URL, client.Options{}), []Prompt{{ID: "x", Text: "ab"}}, 1, 2)
	if err != nil {
		t.Fatal(err)
	}
	np := p.Prompts[0]
	if np.Output[0].Token != 3 || np.Output[0].Text != "" || np.Output[0].Top[1].Token != 7 {
		t.Errorf("output %+v", np.Output)
	}
	if np.PromptLogprobs[0].Token != 2 || np.PromptLogprobs[0].Top[0].Token != 9 {
		t.Errorf("prompt logprobs %+v", np.PromptLogprobs)
	}
}

// A 400 is a real validation error (vLLM ignores unknown fields): the probe reports it, with the
// server's message cut to a bounded length, and sends nothing more.
func TestNumericsProbe400IsAnError(t *testing.T) {
	sent := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/models":
			io.WriteString(w, `{"data":[{"id":"v"}]}`)
		case "/v1/completions":
			sent++
			w.WriteHeader(400)
			fmt.Fprintf(w, `{"object":"error","message":"logprobs: requested 20 logprobs, max allowed is 5 (--max-logprobs) %s","type":"BadRequestError","code":400}`, strings.Repeat("x", 4000))
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	_, err := RunNumericsProbe(context.Background(), client.New(srv.URL, client.Options{}), []Prompt{{Text: "a"}, {Text: "a"}}, 1, 1)
	if err == nil {
		t.Fatal("a 400 was accepted")
	}
	msg := err.Error()
	t.Logf("error: %.300s", msg)
	for _, want := range []string{"prompt 0", "HTTP 400", "max allowed is 5", "real validation error", "not retried", "more bytes"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error lacks %q: %s", want, msg)
		}
	}
	if len(msg) > 1500 {
		t.Errorf("error is %d bytes: the body is not bounded", len(msg))
	}
	if sent != 1 {
		t.Errorf("%d completion requests after a 400, want 1 (no retry)", sent)
	}
}

// A real SGLang server returns the prompt's top-k too: one /generate call per prompt suffices.
func TestNumericsProbeSGLangPromptTopK(t *testing.T) {
	comps := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/models":
			io.WriteString(w, `{"data":[{"id":"s"}]}`)
		case "/generate":
			var req wire.GenerateRequest
			_ = json.NewDecoder(r.Body).Decode(&req)
			if req.LogprobStart == nil || *req.LogprobStart != 0 {
				t.Errorf("logprob_start_len not 0: %+v", req.LogprobStart)
			}
			io.WriteString(w, `{"text":" c","output_ids":[3],"meta_info":{"id":"g","prompt_tokens":2,"completion_tokens":1,
				"input_token_logprobs":[[null,1,null],[-1.5,2,null]],
				"input_top_logprobs":[null,[[-0.5,9,null],[-1.5,2,null]]],
				"output_token_logprobs":[[-0.25,3,null]],"output_top_logprobs":[[[-0.25,3,null],[-2,7,null]]]}}`)
		default:
			comps++
			http.Error(w, "unexpected", 500)
		}
	}))
	defer srv.Close()
	p, err := RunNumericsProbe(context.Background(), client.New(srv.URL, client.Options{}), []Prompt{{ID: "s", Text: "ab"}}, 1, 2)
	if err != nil {
		t.Fatal(err)
	}
	np := p.Prompts[0]
	if comps != 0 || len(np.PromptLogprobs) != 1 || np.PromptLogprobs[0].Token != 2 || np.PromptLogprobs[0].Top[0].Token != 9 || np.Output[0].Top[1].Token != 7 {
		t.Errorf("completions calls %d, probe %+v", comps, np)
	}
}
