package workload

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/reckon-ci/reckon/engine/client"
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
	for i, p := range prompts {
		id := p.ID
		if id == "" {
			id = strconv.Itoa(i)
		}
		np, err := probeOne(ctx, c, p, maxTokens, topK)
		if err != nil {
			return nil, fmt.Errorf("numerics probe: prompt %q: %w", id, err)
		}
		np.ID = id
		probe.Prompts = append(probe.Prompts, *np)
	}
	return probe, nil
}

func probeOne(ctx context.Context, c *client.Client, p Prompt, maxTokens, topK int) (*wire.NumericsPrompt, error) {
	prompt := client.PromptText(p.Text)
	if len(p.TokenIDs) > 0 {
		prompt = client.PromptTokens(p.TokenIDs)
	}
	temp := 0.0
	k := topK
	vocab := map[string]int{}

	// Greedy generation.
	mt := maxTokens
	gen, err := c.Complete(ctx, wire.CompletionRequest{Prompt: prompt, MaxTokens: &mt, Temperature: &temp, Logprobs: &k, ReturnTokenIDs: true})
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
	learn(vocab, gch.Logprobs.Tokens, gch.TokenIDs)

	// Teacher-forced prompt logprobs.
	one := 1
	tf, err := c.Complete(ctx, wire.CompletionRequest{Prompt: prompt, MaxTokens: &one, Temperature: &temp, Logprobs: &k, Echo: true, ReturnTokenIDs: true})
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

	out := &wire.NumericsPrompt{Prompt: p.Text}
	if out.Prompt == "" {
		out.Prompt = fmt.Sprint(p.TokenIDs)
	}
	for i, tok := range gch.Logprobs.Tokens {
		e, err := position(vocab, gch.Logprobs, i, idAt(gch.TokenIDs, i, tok, vocab))
		if err != nil {
			return nil, fmt.Errorf("greedy generation: %w", err)
		}
		out.Output = append(out.Output, e)
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

func position(vocab map[string]int, lp *wire.Logprobs, i, id int) (wire.TokenLogprob, error) {
	e := wire.TokenLogprob{Token: id, Text: lp.Tokens[i]}
	if lp.TokenLogprobs[i] == nil {
		return e, fmt.Errorf("position %d (%q): logprob is null", i, lp.Tokens[i])
	}
	e.Logprob = *lp.TokenLogprobs[i]
	if math.IsNaN(e.Logprob) || e.Logprob > 1e-6 {
		return e, fmt.Errorf("position %d (%q): logprob %v is not a log-probability", i, lp.Tokens[i], e.Logprob)
	}
	if i < len(lp.TopLogprobs) {
		for text, v := range lp.TopLogprobs[i] {
			e.Top = append(e.Top, wire.TokenCandidate{Token: tokenID(text, vocab), Text: text, Logprob: v})
		}
		// Most likely first; ties by text so that the file is stable.
		sort.Slice(e.Top, func(a, b int) bool {
			if e.Top[a].Logprob != e.Top[b].Logprob {
				return e.Top[a].Logprob > e.Top[b].Logprob
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
	return writeFileAtomic(path, data)
}
