package workload

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/reckon-ci/reckon/engine/client"
	"github.com/reckon-ci/reckon/internal/atomicfile"
	"github.com/reckon-ci/reckon/wire"
)

// UnknownToken is the token id of a top-k candidate whose id the server did not reveal (OpenAI
// top_logprobs are keyed by text) and that no other answer mapped to an id; its Text is set.
const UnknownToken = -1

// RunNumericsProbe runs the numerics probe over prompts, one request at a time (batch size 1, so
// that batching cannot change the numbers): for each prompt a greedy completion (temperature 0,
// maxTokens tokens, top-k logprobs) and a teacher-forced pass over the prompt (echo, max_tokens 1,
// top-k logprobs; the generated token is dropped). Token ids come from choices[].token_ids and
// prompt_token_ids (return_token_ids is requested); otherwise texts are mapped to ids seen
// elsewhere in the answers, and ids that cannot be known are UnknownToken with the text kept.
// The caller sets Config (and Engine) on the returned probe.
//
// Every greedy answer must carry a logprob for each generated token (SGLang: as many
// output_token_logprobs as meta_info.completion_tokens and output_ids; vLLM: as many
// logprobs.tokens as usage.completion_tokens); a shorter list is an error, never a shortened
// sequence. A 400 answer is reported as the error it is, not retried.
//
// The probe records, and does not judge, whether speculative decoding ran for its greedy
// requests (NumericsProbe.Speculative): SGLang's per-request meta_info.spec_verify_ct and
// friends, or, for servers without /generate (vLLM), the increase of /metrics'
// vllm:spec_decode_* counters from just before its first completion request to after its last.
func RunNumericsProbe(ctx context.Context, c *client.Client, prompts []Prompt, maxTokens, topK int) (*wire.NumericsProbe, error) {
	if len(prompts) == 0 {
		return nil, fmt.Errorf("numerics probe: no prompts")
	}
	if maxTokens <= 0 {
		return nil, fmt.Errorf("numerics probe: max tokens %d: must be positive", maxTokens)
	}
	if topK < 0 {
		return nil, fmt.Errorf("numerics probe: top-k %d: must not be negative", topK)
	}
	if _, err := c.ResolveModel(ctx); err != nil {
		return nil, fmt.Errorf("numerics probe: finding the served model: %w", err)
	}
	probe := &wire.NumericsProbe{Schema: wire.NumericsSchema, TopK: topK}
	st := &probeState{useGenerate: true, spec: &specTally{}}
	for i, p := range prompts {
		id := p.ID
		if id == "" {
			id = strconv.Itoa(i)
		}
		np, err := probeOne(ctx, c, p, maxTokens, topK, st)
		if err != nil {
			return nil, fmt.Errorf("numerics probe: prompt %d (%q): %w", i, id, err)
		}
		np.ID = id
		probe.Prompts = append(probe.Prompts, *np)
	}
	probe.Speculative = st.spec.finish(ctx, c)
	return probe, nil
}

// probeState remembers what the server turned out to support.
type probeState struct {
	useGenerate bool       // SGLang's /generate answers (not 404/405)
	spec        *specTally // the probe's speculative evidence (nil when scoring)
}

// complete sends a probe completion, asking for token ids (return_token_ids) and for token ids as
// logprob keys (return_tokens_as_token_ids). A 400 is returned as a *rejectedError: vLLM ignores
// fields it does not know, so the request was invalid for another reason and is not retried.
func (st *probeState) complete(ctx context.Context, c *client.Client, req wire.CompletionRequest) (*wire.CompletionResponse, error) {
	req.ReturnTokenIDs = true
	req.ReturnTokensAsTokenIDs = true
	resp, err := c.Complete(ctx, req)
	if err != nil {
		return nil, asRejected(err)
	}
	return resp, nil
}

func probeOne(ctx context.Context, c *client.Client, p Prompt, maxTokens, topK int, st *probeState) (*wire.NumericsPrompt, error) {
	useGenerate := &st.useGenerate
	prompt := client.PromptText(p.Text)
	if len(p.TokenIDs) > 0 {
		prompt = client.PromptTokens(p.TokenIDs)
	}
	temp := 0.0
	k := topK
	vocab := map[string]int{}

	// Greedy generation: SGLang's native /generate reports the top-k candidates with their token
	// ids; servers without it (vLLM) answer 404 and the OpenAI endpoint is used from then on.
	var genOut []wire.TokenLogprob
	var fromGen *generated
	var spec *wire.PromptSpec
	if *useGenerate {
		g, err := greedyViaGenerate(ctx, c, p, maxTokens, topK)
		var ae *client.APIError
		switch {
		case err == nil:
			fromGen = g
			spec = st.spec.addSGLang(&g.meta)
			if g.promptLP != nil {
				np := &wire.NumericsPrompt{Prompt: p.Text, Output: g.out, PromptLogprobs: g.promptLP, PromptTokens: g.promptIDs, Spec: spec, Clipped: g.clipped}
				if np.Prompt == "" {
					np.Prompt = fmt.Sprint(p.TokenIDs)
				}
				return np, nil
			}
			genOut = g.out
		case errors.As(err, &ae) && (ae.StatusCode == 404 || ae.StatusCode == 405):
			*useGenerate = false
		default:
			return nil, fmt.Errorf("greedy generation (/generate): %w", err)
		}
	}
	mt := maxTokens
	if fromGen != nil {
		np, err := teacherForced(ctx, c, st, p, prompt, topK, vocab, genOut)
		if err != nil {
			return nil, err
		}
		np.Spec = spec
		np.Clipped = append(fromGen.clipped, np.Clipped...)
		return np, nil
	}
	st.spec.beforeOpenAI(ctx, c)
	gen, err := st.complete(ctx, c, wire.CompletionRequest{Prompt: prompt, MaxTokens: &mt, Temperature: &temp, Logprobs: &k})
	if err != nil {
		return nil, fmt.Errorf("greedy generation: %w", err)
	}
	gch := gen.Choices[0]
	if gch.Logprobs == nil {
		return nil, fmt.Errorf("greedy generation: the server returned no logprobs (asked for top %d)", topK)
	}
	if len(gch.TokenIDs) > 0 && len(gch.TokenIDs) != len(gch.Logprobs.Tokens) {
		return nil, fmt.Errorf("greedy generation: %d token_ids for %d logprob tokens", len(gch.TokenIDs), len(gch.Logprobs.Tokens))
	}
	generatedN := len(gch.TokenIDs)
	if gen.Usage != nil {
		generatedN = gen.Usage.CompletionTokens
	}
	switch {
	case gen.Usage == nil && len(gch.TokenIDs) == 0:
		return nil, fmt.Errorf("greedy generation: the answer has neither usage.completion_tokens nor token_ids, so the %d logprob tokens cannot be checked for completeness", len(gch.Logprobs.Tokens))
	case len(gch.Logprobs.Tokens) != generatedN:
		return nil, fmt.Errorf("greedy generation: logprobs for %d tokens but usage.completion_tokens is %d: the server did not return a logprob for every generated token", len(gch.Logprobs.Tokens), generatedN)
	}
	st.spec.addOpenAI(generatedN)
	learn(vocab, gch.Logprobs.Tokens, gch.TokenIDs)
	return teacherForced(ctx, c, st, p, prompt, topK, vocab, nil, gch)
}

// teacherForced runs the echo pass and assembles the prompt's probe entry; the greedy output
// comes either already built (genOut, from /generate) or as a completion choice (gch).
func teacherForced(ctx context.Context, c *client.Client, st *probeState, p Prompt, prompt []byte, topK int, vocab map[string]int, genOut []wire.TokenLogprob, gchs ...wire.CompletionChoice) (*wire.NumericsPrompt, error) {
	temp := 0.0
	k := topK
	one := 1
	tf, err := st.complete(ctx, c, wire.CompletionRequest{Prompt: prompt, MaxTokens: &one, Temperature: &temp, Logprobs: &k, Echo: true})
	if err != nil {
		return nil, fmt.Errorf("teacher-forced prompt logprobs (echo): %w", err)
	}
	tch := tf.Choices[0]
	if tch.Logprobs == nil {
		return nil, fmt.Errorf("teacher-forced prompt logprobs (echo): the server returned no logprobs")
	}
	nPrompt := len(tch.PromptTokenIDs)
	promptIDs := tch.PromptTokenIDs
	if nPrompt == 0 && len(p.TokenIDs) > 0 {
		nPrompt, promptIDs = len(p.TokenIDs), p.TokenIDs
	}
	if nPrompt == 0 && tf.Usage != nil {
		nPrompt = tf.Usage.PromptTokens
	}
	if nPrompt == 0 {
		nPrompt = len(tch.Logprobs.Tokens) - tfGenerated(tf)
	}
	if nPrompt <= 0 || nPrompt > len(tch.Logprobs.Tokens) {
		return nil, fmt.Errorf("teacher-forced prompt logprobs (echo): cannot tell the %d prompt tokens among %d logprob entries", nPrompt, len(tch.Logprobs.Tokens))
	}
	if promptIDs != nil {
		learn(vocab, tch.Logprobs.Tokens[:nPrompt], promptIDs)
	}

	out := &wire.NumericsPrompt{Prompt: p.Text, Output: genOut, PromptTokens: promptIDs[:min(len(promptIDs), nPrompt)]}
	if out.Prompt == "" {
		out.Prompt = fmt.Sprint(p.TokenIDs)
	}
	if len(gchs) > 0 {
		gch := gchs[0]
		for i, tok := range gch.Logprobs.Tokens {
			e, err := position(vocab, gch.Logprobs, i, idAt(gch.TokenIDs, i, tok, vocab))
			if err != nil {
				return nil, fmt.Errorf("greedy generation: %w", err)
			}
			out.Output = append(out.Output, e)
		}
	}
	for i := 1; i < nPrompt; i++ {
		e, err := position(vocab, tch.Logprobs, i, idAt(promptIDs, i, tch.Logprobs.Tokens[i], vocab))
		if err != nil {
			return nil, fmt.Errorf("teacher-forced prompt logprobs (echo): %w", err)
		}
		out.PromptLogprobs = append(out.PromptLogprobs, e)
	}
	return out, nil
}

// generated is what greedyViaGenerate read from one /generate answer.
type generated struct {
	// out is the greedy continuation; promptLP the prompt's teacher-forced entries (nil when
	// the answer lacks them or their top-k); promptIDs the prompt's ids (nil when not listed).
	out, promptLP []wire.TokenLogprob
	promptIDs     []int
	meta          wire.GenerateMeta
	clipped       []wire.ClippedID
}

// greedyViaGenerate asks SGLang's /generate for a greedy continuation with top-k logprobs, whose
// entries are [logprob, token_id, text-or-null] triples. The answer must carry one
// output_token_logprobs entry per generated token (meta_info.completion_tokens, and output_ids
// when sent): anything else is an error naming both counts and the known cause.
//
// It also asks for the prompt's logprobs (logprob_start_len 0), checking their layout (see
// alignInput); when the server returns them with their top-k candidates (input_top_logprobs, as
// SGLang does), promptLP holds the teacher-forced entries and the echo pass is not needed.
// promptIDs are the prompt's token ids when the answer lists them (input_token_logprobs); when
// the prompt was sent as ids, those are kept where the server reported a clipped id.
func greedyViaGenerate(ctx context.Context, c *client.Client, p Prompt, maxTokens, topK int) (*generated, error) {
	temp := 0.0
	mt := maxTokens
	zero := 0
	req := wire.GenerateRequest{Text: p.Text, InputIDs: p.TokenIDs, ReturnLogprob: true, TopLogprobsNum: topK, LogprobStart: &zero,
		SamplingParams: wire.SamplingParams{MaxNewTokens: &mt, Temperature: &temp}}
	if len(p.TokenIDs) > 0 {
		req.Text = ""
	}
	resp, err := c.Generate(ctx, req)
	if err != nil {
		return nil, err
	}
	m := resp.MetaInfo
	g := &generated{meta: m}
	if err := outputComplete(resp, topK); err != nil {
		return nil, err
	}
	g.out, err = triples("output", m.OutputTokenLogprobs, m.OutputTopLogprobs, 0)
	if err != nil {
		return nil, err
	}
	if len(resp.OutputIDs) > 0 {
		ids := make([]int, len(g.out))
		for i, e := range g.out {
			ids[i] = e.Token
		}
		if g.clipped, err = keepSent("output", ids, resp.OutputIDs, g.out, 0); err != nil {
			return nil, fmt.Errorf("output_ids against output_token_logprobs: %w", err)
		}
	}
	if len(m.InputTokenLogprobs) == 0 {
		return g, nil
	}
	entries, tops, err := alignInput(m.InputTokenLogprobs, m.InputTopLogprobs, m.PromptTokens, p.TokenIDs)
	if err != nil {
		return nil, err
	}
	g.promptIDs = inputIDs(entries)
	// Prompt positions 1.. (the first prompt token has no logprob), only with their top-k.
	if topK > 0 && len(entries) > 1 && len(tops) == len(entries) {
		g.promptLP, err = triples("input", entries, tops, 1)
		if err != nil {
			return nil, err
		}
	}
	if g.promptIDs != nil && len(p.TokenIDs) > 0 {
		clipped, err := keepSent("prompt", g.promptIDs, p.TokenIDs, g.promptLP, 1)
		if err != nil {
			return nil, err
		}
		g.clipped = append(g.clipped, clipped...)
	}
	return g, nil
}

// outputComplete checks that a /generate answer has a logprob (and, with top-k, a top-k list)
// for every generated token.
func outputComplete(resp *wire.GenerateResponse, topK int) error {
	m := resp.MetaInfo
	n := len(m.OutputTokenLogprobs)
	if n == 0 {
		return fmt.Errorf("/generate returned no output_token_logprobs (asked for return_logprob) for %d completion tokens", m.CompletionTokens)
	}
	short := func(what string, got, want int, of string) error {
		if got < want {
			return fmt.Errorf("/generate returned %s for %d of %d generated tokens (%s): known cause: %s", what, got, want, of, knownTruncation)
		}
		return fmt.Errorf("/generate returned %s for %d tokens but %s is %d", what, got, of, want)
	}
	if n != m.CompletionTokens {
		return short("output_token_logprobs", n, m.CompletionTokens, "meta_info.completion_tokens")
	}
	if len(resp.OutputIDs) > 0 && len(resp.OutputIDs) != n {
		return short("output_token_logprobs", n, len(resp.OutputIDs), "len(output_ids)")
	}
	if topK > 0 && len(m.OutputTopLogprobs) != n {
		return short("output_top_logprobs", len(m.OutputTopLogprobs), n, "output_token_logprobs")
	}
	return nil
}

// inputIDs are the token ids of SGLang input_token_logprobs entries, nil when any is unreadable.
func inputIDs(entries [][]any) []int {
	ids := make([]int, 0, len(entries))
	for _, e := range entries {
		_, id, _, err := triple(e)
		if err != nil {
			return nil
		}
		ids = append(ids, id)
	}
	return ids
}

// triples converts SGLang logprob entries (from index from on) with their top-k lists.
func triples(what string, entries [][]any, tops [][][]any, from int) ([]wire.TokenLogprob, error) {
	out := make([]wire.TokenLogprob, 0, len(entries))
	for i := from; i < len(entries); i++ {
		tri := entries[i]
		lp, id, text, err := triple(tri)
		if err != nil {
			return nil, fmt.Errorf("meta_info.%s_token_logprobs[%d]: %w", what, i, err)
		}
		if lp == nil || math.IsNaN(*lp) || *lp > 1e-6 {
			return nil, fmt.Errorf("meta_info.%s_token_logprobs[%d]: %v is not a log-probability", what, i, tri)
		}
		e := wire.TokenLogprob{Token: id, Text: text, Logprob: *lp}
		if i < len(tops) {
			for j, ctri := range tops[i] {
				clp, cid, ctext, err := triple(ctri)
				if err != nil || clp == nil {
					return nil, fmt.Errorf("meta_info.%s_top_logprobs[%d][%d]: %v: expected [logprob, token_id, text]", what, i, j, ctri)
				}
				e.Top = append(e.Top, wire.TokenCandidate{Token: cid, Text: ctext, Logprob: *clp})
			}
			sort.SliceStable(e.Top, func(a, b int) bool {
				if e.Top[a].Logprob != e.Top[b].Logprob {
					return e.Top[a].Logprob > e.Top[b].Logprob
				}
				return e.Top[a].Token < e.Top[b].Token
			})
		}
		out = append(out, e)
	}
	return out, nil
}

// triple decodes an SGLang logprob entry [logprob-or-null, token_id, text-or-null].
func triple(v []any) (*float64, int, string, error) {
	if len(v) < 2 {
		return nil, 0, "", fmt.Errorf("%v: expected [logprob, token_id, text]", v)
	}
	var lp *float64
	if f, ok := v[0].(float64); ok {
		lp = &f
	} else if v[0] != nil {
		return nil, 0, "", fmt.Errorf("%v: logprob is not a number", v)
	}
	idf, ok := v[1].(float64)
	if !ok || idf < 0 || idf != math.Trunc(idf) {
		return nil, 0, "", fmt.Errorf("%v: token id is not a non-negative integer", v)
	}
	text := ""
	if len(v) > 2 {
		text, _ = v[2].(string)
	}
	return lp, int(idf), text, nil
}

// tfGenerated is how many generated tokens follow the prompt in an echo answer.
func tfGenerated(r *wire.CompletionResponse) int {
	if r.Usage != nil {
		return r.Usage.CompletionTokens
	}
	return len(r.Choices[0].TokenIDs)
}

func learn(vocab map[string]int, texts []string, ids []int) {
	if len(ids) != len(texts) {
		return
	}
	for i, t := range texts {
		vocab[t] = ids[i]
	}
}

func idAt(ids []int, i int, text string, vocab map[string]int) int {
	if i < len(ids) {
		return ids[i]
	}
	return tokenID(text, vocab)
}

// tokenID maps a token text to its id: "token_id:123" (vLLM --return-tokens-as-token-ids), else
// an id seen for that text, else UnknownToken.
func tokenID(text string, vocab map[string]int) int {
	if rest, ok := strings.CutPrefix(text, "token_id:"); ok {
		if id, err := strconv.Atoi(rest); err == nil {
			return id
		}
	}
	if id, ok := vocab[text]; ok {
		return id
	}
	return UnknownToken
}

// displayText is a token's text, empty when the server named the token by id ("token_id:N").
func displayText(s string) string {
	if strings.HasPrefix(s, "token_id:") {
		return ""
	}
	return s
}

func position(vocab map[string]int, lp *wire.Logprobs, i, id int) (wire.TokenLogprob, error) {
	e := wire.TokenLogprob{Token: id, Text: displayText(lp.Tokens[i])}
	if lp.TokenLogprobs[i] == nil {
		return e, fmt.Errorf("position %d (%q): logprob is null", i, lp.Tokens[i])
	}
	e.Logprob = *lp.TokenLogprobs[i]
	if math.IsNaN(e.Logprob) || e.Logprob > 1e-6 {
		return e, fmt.Errorf("position %d (%q): logprob %v is not a log-probability", i, lp.Tokens[i], e.Logprob)
	}
	if i < len(lp.TopLogprobs) {
		for text, v := range lp.TopLogprobs[i] {
			e.Top = append(e.Top, wire.TokenCandidate{Token: tokenID(text, vocab), Text: displayText(text), Logprob: v})
		}
		// Most likely first; ties by id, then text, so that the file is stable.
		sort.Slice(e.Top, func(a, b int) bool {
			if e.Top[a].Logprob != e.Top[b].Logprob {
				return e.Top[a].Logprob > e.Top[b].Logprob
			}
			if e.Top[a].Token != e.Top[b].Token {
				return e.Top[a].Token < e.Top[b].Token
			}
			return e.Top[a].Text < e.Top[b].Text
		})
	}
	return e, nil
}

// WriteNumericsProbe writes a probe file atomically.
func WriteNumericsProbe(path string, p *wire.NumericsProbe) error {
	data, err := jsonIndent(p)
	if err != nil {
		return fmt.Errorf("write numerics probe %s: %w", path, err)
	}
	return atomicfile.WriteFile(path, data)
}
