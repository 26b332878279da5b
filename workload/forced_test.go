package workload

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/reckon-ci/reckon/engine/client"
	"github.com/reckon-ci/reckon/wire"
)

// forcedLP is the fake model: the logprob of token tok after a prefix of length n.
func forcedLP(tok, n int) float64 { return -float64(tok%7)/10 - 0.01*float64(n) }

// forcedServer scores input_ids like SGLang's /generate (or, with vllm, answers 404 there and
// scores echo completions). It records the most requests it held at once; with waitFor > 1 each
// scoring request after the first waitAfter waits (up to a second) until that many are in
// flight, as a batch would.
type forcedServer struct {
	vllm    bool
	waitFor int
	// waitAfter: the first requests (the one-at-a-time pass) do not wait.
	waitAfter int
	wrongTok  bool
	// oldLayout answers in SGLang ~0.3's layout (no leading null); clipFrom > 0 reports ids >=
	// clipFrom as 0, as SGLang does for ids >= vocab_size-1.
	oldLayout bool
	clipFrom  int

	mu       sync.Mutex
	inflight int
	maxSeen  int
	cond     *sync.Cond
	requests int
}

func (fs *forcedServer) enter() {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fs.requests++
	fs.inflight++
	fs.maxSeen = max(fs.maxSeen, fs.inflight)
	fs.cond.Broadcast()
	if fs.waitFor > 1 && fs.requests > fs.waitAfter {
		deadline := time.Now().Add(time.Second)
		for fs.maxSeen < fs.waitFor && time.Now().Before(deadline) {
			go func() { time.Sleep(10 * time.Millisecond); fs.cond.Broadcast() }()
			fs.cond.Wait()
		}
	}
}

func (fs *forcedServer) leave() { fs.mu.Lock(); fs.inflight--; fs.mu.Unlock() }

func (fs *forcedServer) handler(t *testing.T) http.Handler {
	fs.cond = sync.NewCond(&fs.mu)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/generate" && !fs.vllm:
			var req wire.GenerateRequest
			if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.LogprobStart == nil || *req.LogprobStart != 0 || !req.ReturnLogprob {
				t.Errorf("scoring request %+v (%v)", req, err)
			}
			fs.enter()
			defer fs.leave()
			var in [][]any
			var tops [][][]any
			for i, tok := range req.InputIDs {
				if i == 0 {
					in, tops = append(in, []any{nil, tok, nil}), append(tops, nil)
					continue
				}
				if fs.wrongTok && i == 2 {
					tok++
				}
				lp := forcedLP(tok, i)
				named := tok
				if fs.clipFrom > 0 && tok >= fs.clipFrom {
					named = 0
				}
				in = append(in, []any{lp, named, nil})
				tops = append(tops, [][]any{{lp, named, nil}, {lp - 1, tok + 1, nil}})
			}
			if fs.oldLayout {
				in, tops = in[1:], tops[1:]
			}
			json.NewEncoder(w).Encode(map[string]any{"text": "x", "meta_info": map[string]any{
				"input_token_logprobs": in, "input_top_logprobs": tops,
				"output_token_logprobs": [][]any{{-0.1, 5, nil}}, "output_top_logprobs": [][][]any{{{-0.1, 5, nil}}}}})
		case r.URL.Path == "/v1/completions" && fs.vllm:
			var req struct {
				Prompt []int `json:"prompt"`
				Echo   bool  `json:"echo"`
			}
			if err := json.NewDecoder(r.Body).Decode(&req); err != nil || !req.Echo {
				t.Errorf("echo request %+v (%v)", req, err)
			}
			fs.enter()
			defer fs.leave()
			var toks, tops []string
			var lps []string
			for i, tok := range req.Prompt {
				toks = append(toks, fmt.Sprintf("%q", fmt.Sprintf("token_id:%d", tok)))
				if i == 0 {
					lps, tops = append(lps, "null"), append(tops, "null")
					continue
				}
				lp := forcedLP(tok, i)
				lps = append(lps, fmt.Sprint(lp))
				tops = append(tops, fmt.Sprintf(`{"token_id:%d":%v,"token_id:%d":%v}`, tok, lp, tok+1, lp-1))
			}
			toks, lps, tops = append(toks, `"token_id:5"`), append(lps, "-0.1"), append(tops, `{"token_id:5":-0.1}`)
			fmt.Fprintf(w, `{"choices":[{"index":0,"text":"x","logprobs":{"tokens":[%s],"token_logprobs":[%s],"top_logprobs":[%s]},"finish_reason":"length"}]}`,
				strings.Join(toks, ","), strings.Join(lps, ","), strings.Join(tops, ","))
		default:
			http.NotFound(w, r)
		}
	})
}

func forcedProbe(n int) (*wire.NumericsProbe, map[string][]int) {
	p := &wire.NumericsProbe{Schema: wire.NumericsSchema}
	for k := 0; k < n; k++ {
		p.Prompts = append(p.Prompts, wire.NumericsPrompt{ID: fmt.Sprintf("p%d", k), PromptTokens: []int{1, 2 + k},
			Output: []wire.TokenLogprob{{Token: 10 + k}, {Token: 20}}})
	}
	seqs, err := ForcedSequences(p)
	if err != nil {
		panic(err)
	}
	return p, seqs
}

func TestScoreForcedSGLangAndVLLM(t *testing.T) {
	for _, vllm := range []bool{false, true} {
		fs := &forcedServer{vllm: vllm, waitFor: 8, waitAfter: 10}
		srv := httptest.NewServer(fs.handler(t))
		p, seqs := forcedProbe(10)
		if got := seqs["p3"]; fmt.Sprint(got) != "[1 5 13 20]" {
			t.Fatalf("forced sequence %v", got)
		}
		err := ScoreForced(context.Background(), client.New(srv.URL, client.Options{Model: "m", Timeout: 10 * time.Second}), p, seqs, "nccl", 2, 8)
		srv.Close()
		if err != nil {
			t.Fatalf("vllm=%v: %v", vllm, err)
		}
		if p.ForcedFrom != "nccl" || p.BatchSize != 8 {
			t.Errorf("header %q %d", p.ForcedFrom, p.BatchSize)
		}
		for _, pr := range p.Prompts {
			if len(pr.Forced) != 3 || len(pr.ForcedBatched) != 3 || fmt.Sprint(pr.ForcedTokens) != fmt.Sprint(seqs[pr.ID]) {
				t.Fatalf("prompt %s: %d forced, %d batched, tokens %v", pr.ID, len(pr.Forced), len(pr.ForcedBatched), pr.ForcedTokens)
			}
			for i, e := range pr.Forced {
				tok := seqs[pr.ID][i+1]
				if e.Token != tok || e.Logprob != forcedLP(tok, i+1) || len(e.Top) != 2 || e.Top[1].Token != tok+1 {
					t.Errorf("vllm=%v prompt %s position %d: %+v", vllm, pr.ID, i+1, e)
				}
			}
		}
		// 10 alone, then two waves of 8 (the second filled up by wrapping around).
		if fs.maxSeen < 8 || fs.requests != 10+16 {
			t.Errorf("vllm=%v: at most %d requests at once (want 8), %d requests (want 26)", vllm, fs.maxSeen, fs.requests)
		}
	}
}

func TestScoreForcedErrors(t *testing.T) {
	fs := &forcedServer{wrongTok: true}
	srv := httptest.NewServer(fs.handler(t))
	defer srv.Close()
	c := client.New(srv.URL, client.Options{Model: "m", Timeout: 10 * time.Second})
	p, seqs := forcedProbe(2)
	if err := ScoreForced(context.Background(), c, p, seqs, "nccl", 2, 0); err == nil || !strings.Contains(err.Error(), "the server scored token") {
		t.Errorf("wrong token: %v", err)
	}
	p, seqs = forcedProbe(2)
	delete(seqs, "p1")
	if err := ScoreForced(context.Background(), c, p, seqs, "nccl", 2, 0); err == nil || !strings.Contains(err.Error(), `prompt "p1": no forced sequence from nccl`) {
		t.Errorf("missing sequence: %v", err)
	}
	bad := &wire.NumericsProbe{Prompts: []wire.NumericsPrompt{{ID: "a", Output: []wire.TokenLogprob{{Token: 1}}}}}
	if _, err := ForcedSequences(bad); err == nil || !strings.Contains(err.Error(), "prompt's token ids") {
		t.Errorf("no prompt ids: %v", err)
	}
	bad.Prompts[0].PromptTokens = []int{1}
	bad.Prompts[0].Output[0].Token = UnknownToken
	if _, err := ForcedSequences(bad); err == nil || !strings.Contains(err.Error(), "no known id") {
		t.Errorf("unknown output id: %v", err)
	}
}

// Old SGLang (no leading null in input_token_logprobs) scores the same as the current layout.
func TestScoreForcedOldSGLangLayout(t *testing.T) {
	fs := &forcedServer{oldLayout: true}
	srv := httptest.NewServer(fs.handler(t))
	defer srv.Close()
	p, seqs := forcedProbe(2)
	if err := ScoreForced(context.Background(), client.New(srv.URL, client.Options{Timeout: 10 * time.Second}), p, seqs, "nccl", 2, 0); err != nil {
		t.Fatal(err)
	}
	f := p.Prompts[1].Forced
	if len(f) != 3 || f[0].Token != 3 || f[0].Logprob != forcedLP(3, 1) || f[2].Token != 20 || f[2].Logprob != forcedLP(20, 3) {
		t.Errorf("forced scores %+v", f)
	}
}

// A forced token SGLang names as 0 (its id clipping) keeps the forced id and is recorded.
func TestScoreForcedClippedID(t *testing.T) {
	fs := &forcedServer{clipFrom: 20}
	srv := httptest.NewServer(fs.handler(t))
	defer srv.Close()
	p, seqs := forcedProbe(1)
	if err := ScoreForced(context.Background(), client.New(srv.URL, client.Options{Timeout: 10 * time.Second}), p, seqs, "nccl", 2, 0); err != nil {
		t.Fatal(err)
	}
	pr := p.Prompts[0]
	if pr.Forced[2].Token != 20 || pr.Forced[2].Logprob != forcedLP(20, 3) {
		t.Errorf("forced scores %+v", pr.Forced)
	}
	if len(pr.Clipped) != 1 || pr.Clipped[0] != (wire.ClippedID{In: "forced", Index: 3, Token: 20, Reported: 0}) {
		t.Errorf("clipped %+v", pr.Clipped)
	}
}

// A layout that is neither current nor old is an error naming the lengths.
func TestScoreForcedBadLayout(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `{"text":"x","meta_info":{"prompt_tokens":4,"input_token_logprobs":[[-1,2,null],[-2,10,null]],"output_token_logprobs":[[-0.1,5,null]]}}`)
	}))
	defer srv.Close()
	p, seqs := forcedProbe(1)
	err := ScoreForced(context.Background(), client.New(srv.URL, client.Options{Timeout: 10 * time.Second}), p, seqs, "nccl", 2, 0)
	if err == nil || !strings.Contains(err.Error(), "2 entries (0 with a null logprob, first null: false) for 4 prompt tokens") || !strings.Contains(err.Error(), `prompt 0 ("p0")`) {
		t.Fatalf("want a layout error, got %v", err)
	}
	t.Logf("error: %v", err)
}
