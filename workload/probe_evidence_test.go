package workload

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/reckon-ci/reckon/engine/client"
	"github.com/reckon-ci/reckon/wire"
)

// sglangServer answers /generate with body(req) and fails the test on any completion request
// (SGLang's prompt top-k makes the echo pass unnecessary).
func sglangServer(t *testing.T, body func(req wire.GenerateRequest) string) *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/models":
			io.WriteString(w, `{"data":[{"id":"s"}]}`)
		case "/generate":
			var req wire.GenerateRequest
			if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
				t.Errorf("decode: %v", err)
			}
			io.WriteString(w, body(req))
		default:
			t.Errorf("unexpected request %s", r.URL.Path)
			http.NotFound(w, r)
		}
	}))
}

func newClient(url string) *client.Client {
	return client.New(url, client.Options{Timeout: 10 * time.Second, MetadataTimeout: 5 * time.Second})
}

// The current SGLang layout for the prompt 100 101 102 103: a leading null, prompt_tokens entries.
const currentInput = `"input_token_logprobs":[[null,100,null],[-1,101,null],[-2,102,null],[-3,103,null]],
	"input_top_logprobs":[null,[[-1,101,null]],[[-2,102,null]],[[-3,103,null]]]`

// The old layout (SGLang ~0.2-0.3): no null, prompt_tokens-1 entries, entry i is token i+1's.
const oldInput = `"input_token_logprobs":[[-1,101,null],[-2,102,null],[-3,103,null]],
	"input_top_logprobs":[[[-1,101,null]],[[-2,102,null]],[[-3,103,null]]]`

// full is a complete greedy answer of 3 tokens (200 201 202) with the given extra meta_info.
func full(input, extra string) string {
	return `{"text":"xyz","output_ids":[200,201,202],"meta_info":{"id":"g","prompt_tokens":4,"completion_tokens":3,` + input + `,
		"output_token_logprobs":[[-0.1,200,null],[-0.2,201,null],[-0.3,202,null]],
		"output_top_logprobs":[[[-0.1,200,null]],[[-0.2,201,null]],[[-0.3,202,null]]]` + extra + `}}`
}

// The #14046 shape: speculative v2 with logprobs returns the first output token's logprob only,
// while output_ids and completion_tokens stay complete. The probe must fail, naming the prompt,
// both counts and the cause, not return a shortened output.
func TestProbeRejectsSpecV2TruncatedLogprobs(t *testing.T) {
	srv := sglangServer(t, func(wire.GenerateRequest) string {
		return `{"text":"xyz","output_ids":[200,201,202],"meta_info":{"id":"g","prompt_tokens":4,"completion_tokens":3,` + currentInput + `,
			"output_token_logprobs":[[-0.1,200,null]],"output_top_logprobs":[[[-0.1,200,null]]],"spec_verify_ct":1}}`
	})
	defer srv.Close()
	p, err := RunNumericsProbe(context.Background(), newClient(srv.URL), []Prompt{{ID: "q", TokenIDs: []int{100, 101, 102, 103}}}, 3, 1)
	if err == nil {
		t.Fatalf("truncated logprobs accepted: output %+v", p.Prompts[0].Output)
	}
	t.Logf("error: %v", err)
	for _, want := range []string{`prompt 0 ("q")`, "for 1 of 3 generated tokens", "completion_tokens", "sgl-project/sglang#14046", "SGLANG_ENABLE_SPEC_V2=0"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q", want)
		}
	}
}

func TestProbeRejectsOutputIDsMismatch(t *testing.T) {
	srv := sglangServer(t, func(wire.GenerateRequest) string {
		return strings.Replace(full(currentInput, ""), `"output_ids":[200,201,202]`, `"output_ids":[200,201,202,203]`, 1)
	})
	defer srv.Close()
	_, err := RunNumericsProbe(context.Background(), newClient(srv.URL), []Prompt{{ID: "q", TokenIDs: []int{100, 101, 102, 103}}}, 4, 1)
	if err == nil || !strings.Contains(err.Error(), "for 3 of 4 generated tokens (len(output_ids))") {
		t.Fatalf("want an output_ids count error, got %v", err)
	}
}

func TestProbeSGLangLayouts(t *testing.T) {
	ids := []int{100, 101, 102, 103}
	for _, tc := range []struct {
		name   string
		input  string
		prompt Prompt
		err    string
	}{
		{name: "current, text", input: currentInput, prompt: Prompt{Text: "abcd"}},
		{name: "current, ids", input: currentInput, prompt: Prompt{TokenIDs: ids}},
		{name: "old, ids", input: oldInput, prompt: Prompt{TokenIDs: ids}},
		{name: "old, text", input: oldInput, prompt: Prompt{Text: "abcd"},
			err: "old SGLang layout (no leading null, 3 entries for 4 prompt tokens; entry i is token i+1's), which does not name the first prompt token"},
		{name: "neither", input: `"input_token_logprobs":[[null,100,null],[-1,101,null]],"input_top_logprobs":[null,[[-1,101,null]]]`, prompt: Prompt{Text: "abcd"},
			err: "2 entries (1 with a null logprob, first null: true) for 4 prompt tokens: neither the current layout (4 entries, entry 0 null) nor the old one (3 entries, no null)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := sglangServer(t, func(wire.GenerateRequest) string { return full(tc.input, "") })
			defer srv.Close()
			p, err := RunNumericsProbe(context.Background(), newClient(srv.URL), []Prompt{tc.prompt}, 3, 1)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) || !strings.Contains(err.Error(), "prompt 0") {
					t.Fatalf("want %q, got %v", tc.err, err)
				}
				t.Logf("error: %v", err)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			np := p.Prompts[0]
			if fmt.Sprint(np.PromptTokens) != "[100 101 102 103]" {
				t.Errorf("prompt tokens %v", np.PromptTokens)
			}
			if len(np.PromptLogprobs) != 3 || np.PromptLogprobs[0].Token != 101 || np.PromptLogprobs[0].Logprob != -1 || np.PromptLogprobs[2].Token != 103 {
				t.Errorf("prompt logprobs %+v", np.PromptLogprobs)
			}
			if len(np.Output) != 3 || np.Output[2].Token != 202 {
				t.Errorf("output %+v", np.Output)
			}
			seqs, err := ForcedSequences(p)
			if err != nil || fmt.Sprint(seqs["0"]) != "[100 101 102 103 200 201 202]" {
				t.Errorf("forced sequence %v (%v)", seqs, err)
			}
		})
	}
}

// SGLang reports input ids >= vocab_size-1 as 0: the probe keeps the id it sent and records it.
func TestProbeKeepsClippedPromptIDs(t *testing.T) {
	srv := sglangServer(t, func(wire.GenerateRequest) string {
		return full(strings.Replace(currentInput, "[-3,103,null]],\n\t\"input_top", "[-3,0,null]],\n\t\"input_top", 1), "")
	})
	defer srv.Close()
	p, err := RunNumericsProbe(context.Background(), newClient(srv.URL), []Prompt{{TokenIDs: []int{100, 101, 102, 103}}}, 3, 1)
	if err != nil {
		t.Fatal(err)
	}
	np := p.Prompts[0]
	if np.PromptTokens[3] != 103 || np.PromptLogprobs[2].Token != 103 {
		t.Errorf("clipped id not restored: %v %+v", np.PromptTokens, np.PromptLogprobs)
	}
	if len(np.Clipped) != 1 || np.Clipped[0] != (wire.ClippedID{In: "prompt", Index: 3, Token: 103, Reported: 0}) {
		t.Errorf("clipped = %+v", np.Clipped)
	}
}

func TestProbeRecordsSGLangSpecEvidence(t *testing.T) {
	for _, tc := range []struct {
		name, extra string
		source      string
		ran         bool
		reason      string
	}{
		// 3 tokens: 1 from prefill, 2 from one verify step: a draft token was accepted.
		{name: "accepted", extra: `,"spec_verify_ct":1`, source: wire.SpecSourceSGLang, ran: true, reason: "more than one token per step"},
		{name: "accept num", extra: `,"spec_verify_ct":2,"spec_accept_length":1.5,"spec_accept_token_num":1.0,"spec_draft_token_num":6`,
			source: wire.SpecSourceSGLang, ran: true, reason: "accepted 2 draft tokens"},
		// 3 tokens in 2 verify steps and nothing accepted: one token per step.
		{name: "none accepted", extra: `,"spec_verify_ct":2,"spec_accept_token_num":0`, source: wire.SpecSourceSGLang, reason: "no draft token was accepted"},
		{name: "zero steps", extra: `,"spec_verify_ct":0`, source: wire.SpecSourceSGLang, reason: "no verify step ran"},
		{name: "no spec_verify_ct", source: wire.SpecSourceNone, reason: "no evidence"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := sglangServer(t, func(wire.GenerateRequest) string { return full(currentInput, tc.extra) })
			defer srv.Close()
			p, err := RunNumericsProbe(context.Background(), newClient(srv.URL), []Prompt{{Text: "a"}, {Text: "b"}}, 3, 1)
			if err != nil {
				t.Fatal(err)
			}
			s := p.Speculative
			if s == nil || s.Source != tc.source || s.Requests != 2 || s.OutputTokens != 6 {
				t.Fatalf("summary %+v", s)
			}
			ran, why := s.Ran()
			t.Logf("Ran() = %v, %q", ran, why)
			if ran != tc.ran || !strings.Contains(why, tc.reason) {
				t.Errorf("Ran() = %v %q, want %v with %q", ran, why, tc.ran, tc.reason)
			}
			if tc.source == wire.SpecSourceSGLang && (p.Prompts[0].Spec == nil || p.Prompts[0].Spec.CompletionTokens != 3) {
				t.Errorf("per-prompt evidence %+v", p.Prompts[0].Spec)
			}
			if tc.source == wire.SpecSourceNone && p.Prompts[0].Spec != nil {
				t.Errorf("per-prompt evidence without spec_verify_ct: %+v", p.Prompts[0].Spec)
			}
		})
	}
}

// vllmServer is a vLLM-like server (no /generate) for the prompt "a b" (ids 1 2) with greedy
// output ids 3 4; each greedy completion adds drafts to the spec counters of /metrics
// (metrics: "" no /metrics, "moving", "still" or "absent": /metrics without spec counters).
// shortLogprobs returns logprobs for the first output token only.
func vllmServer(t *testing.T, metrics string, shortLogprobs bool) (*httptest.Server, *atomic.Int64) {
	var drafts atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/models":
			io.WriteString(w, `{"data":[{"id":"v"}]}`)
		case "/metrics":
			if metrics == "" {
				http.NotFound(w, r)
				return
			}
			io.WriteString(w, "# HELP vllm:num_requests_running x\nvllm:num_requests_running{engine=\"0\",model_name=\"v\"} 0\n")
			if metrics == "absent" {
				return
			}
			d := drafts.Load()
			fmt.Fprintf(w, "# TYPE vllm:spec_decode_num_drafts counter\nvllm:spec_decode_num_drafts_total{engine=\"0\",model_name=\"v\"} %d\nvllm:spec_decode_num_drafts_total{engine=\"1\",model_name=\"v\"} 5\n", d)
			fmt.Fprintf(w, "vllm:spec_decode_num_draft_tokens_total{engine=\"0\",model_name=\"v\"} %d\nvllm:spec_decode_num_accepted_tokens_total{engine=\"0\",model_name=\"v\"} %d\n", 3*d, d)
		case "/v1/completions":
			var req wire.CompletionRequest
			_ = json.NewDecoder(r.Body).Decode(&req)
			if !req.ReturnTokensAsTokenIDs || !req.ReturnTokenIDs {
				t.Errorf("request lacks return_tokens_as_token_ids / return_token_ids: %+v", req)
			}
			if req.Echo {
				io.WriteString(w, `{"choices":[{"index":0,"text":"","logprobs":{"tokens":["token_id:1","token_id:2","token_id:3"],"token_logprobs":[null,-1.5,-0.25],
					"top_logprobs":[null,{"token_id:2":-1.5},{"token_id:3":-0.25}]},"token_ids":[3],"prompt_token_ids":[1,2]}],"usage":{"prompt_tokens":2,"completion_tokens":1,"total_tokens":3}}`)
				return
			}
			if metrics == "moving" {
				drafts.Add(1)
			}
			lp := `"tokens":["token_id:3","token_id:4"],"token_logprobs":[-0.25,-0.125],"top_logprobs":[{"token_id:3":-0.25},{"token_id:4":-0.125}]`
			if shortLogprobs {
				lp = `"tokens":["token_id:3"],"token_logprobs":[-0.25],"top_logprobs":[{"token_id:3":-0.25}]`
			}
			io.WriteString(w, `{"choices":[{"index":0,"text":"","logprobs":{`+lp+`}}],"usage":{"prompt_tokens":2,"completion_tokens":2,"total_tokens":4}}`)
		default:
			http.NotFound(w, r)
		}
	}))
	return srv, &drafts
}

func TestProbeRecordsVLLMSpecMetrics(t *testing.T) {
	for _, tc := range []struct {
		metrics string
		source  string
		ran     bool
		reason  string
		note    string
	}{
		{metrics: "moving", source: wire.SpecSourceVLLM, ran: true, reason: "vLLM ran 2 drafts (6 draft tokens, 2 accepted)"},
		{metrics: "still", source: wire.SpecSourceVLLM, reason: "did not rise during the probe's 2 requests (4 output tokens); vLLM before about 0.14 does not speculate"},
		{metrics: "absent", source: wire.SpecSourceNone, reason: "no evidence", note: "no vllm:spec_decode_* series"},
		{metrics: "", source: wire.SpecSourceNone, reason: "no evidence", note: "HTTP 404"},
	} {
		t.Run("metrics="+tc.metrics, func(t *testing.T) {
			srv, _ := vllmServer(t, tc.metrics, false)
			defer srv.Close()
			p, err := RunNumericsProbe(context.Background(), newClient(srv.URL), []Prompt{{Text: "a b"}, {Text: "a b"}}, 2, 1)
			if err != nil {
				t.Fatal(err)
			}
			s := p.Speculative
			if s == nil || s.Source != tc.source || s.Requests != 2 || s.OutputTokens != 4 || !strings.Contains(s.MetricsNote, tc.note) {
				t.Fatalf("summary %+v", s)
			}
			ran, why := s.Ran()
			t.Logf("Ran() = %v, %q", ran, why)
			if ran != tc.ran || !strings.Contains(why, tc.reason) {
				t.Errorf("Ran() = %v %q, want %v with %q", ran, why, tc.ran, tc.reason)
			}
			if tc.metrics == "still" && (s.Metrics == nil || *s.Metrics != (wire.SpecMetricsDelta{})) {
				t.Errorf("still counters: delta %+v", s.Metrics)
			}
		})
	}
}

func TestProbeRejectsVLLMShortLogprobs(t *testing.T) {
	srv, _ := vllmServer(t, "moving", true)
	defer srv.Close()
	_, err := RunNumericsProbe(context.Background(), newClient(srv.URL), []Prompt{{ID: "z", Text: "a b"}}, 2, 1)
	if err == nil || !strings.Contains(err.Error(), `prompt 0 ("z")`) || !strings.Contains(err.Error(), "logprobs for 1 tokens but usage.completion_tokens is 2") {
		t.Fatalf("want a completeness error, got %v", err)
	}
}
