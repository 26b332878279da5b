package workload

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/reckon-ci/reckon/engine/client"
	"github.com/reckon-ci/reckon/wire"
)

// ForcedSequences returns, per prompt id, the teacher-forced sequence a probe defines: the
// prompt's token ids followed by the greedy continuation's. Every config of a run scores these
// same sequences, so that an early divergence of the free-running outputs cannot hide the rest.
func ForcedSequences(p *wire.NumericsProbe) (map[string][]int, error) {
	out := make(map[string][]int, len(p.Prompts))
	for _, pr := range p.Prompts {
		if len(pr.PromptTokens) == 0 {
			return nil, fmt.Errorf("prompt %q: the server did not return the prompt's token ids, which teacher forcing needs (SGLang input_token_logprobs or vLLM prompt_token_ids)", pr.ID)
		}
		seq := append([]int(nil), pr.PromptTokens...)
		for i, t := range pr.Output {
			if t.Token < 0 {
				return nil, fmt.Errorf("prompt %q: output token %d (%q) has no known id, so it cannot be fed back", pr.ID, i, t.Text)
			}
			seq = append(seq, t.Token)
		}
		out[pr.ID] = seq
	}
	return out, nil
}

// ScoreForced scores each prompt's teacher-forced sequence (seqs, from ForcedSequences of the
// config named from) with top-k logprobs at every position: first one request at a time, then,
// when batch > 1, in waves of batch concurrent requests (the last wave filled up by wrapping
// around the prompt list; the extra answers are dropped), so that the engine runs them as one big
// batch. It fills ForcedFrom, BatchSize and each prompt's ForcedTokens, Forced and ForcedBatched.
//
// SGLang's input_token_logprobs are read in either layout (current: a leading null entry; old,
// ~0.2-0.3: none, the first forced token's id being the one sent), decided by shape; any other
// shape is an error naming the lengths. Ids SGLang reports clipped to 0 keep the forced id and
// are listed in the prompt's Clipped (In "forced"); a 400 answer is an error, never retried.
func ScoreForced(ctx context.Context, c *client.Client, probe *wire.NumericsProbe, seqs map[string][]int, from string, topK, batch int) error {
	if len(probe.Prompts) == 0 {
		return errors.New("teacher forcing: the probe has no prompts")
	}
	for _, pr := range probe.Prompts {
		if len(seqs[pr.ID]) < 2 {
			return fmt.Errorf("teacher forcing: prompt %q: no forced sequence from %s (its probe lacks this prompt or it has fewer than 2 tokens)", pr.ID, from)
		}
	}
	st := &probeState{useGenerate: true}
	for i := range probe.Prompts {
		pr := &probe.Prompts[i]
		seq := seqs[pr.ID]
		sc, clipped, err := scoreSequence(ctx, c, st, seq, topK)
		if err != nil {
			return fmt.Errorf("teacher forcing: prompt %d (%q): %w", i, pr.ID, err)
		}
		pr.ForcedTokens = append([]int(nil), seq...)
		pr.Forced = sc
		pr.Clipped = append(dropClipped(pr.Clipped, "forced"), clipped...)
	}
	probe.ForcedFrom = from
	if batch <= 1 {
		probe.BatchSize = 0
		return nil
	}
	n := len(probe.Prompts)
	for start := 0; start < n; start += batch {
		results := make([][]wire.TokenLogprob, batch)
		errs := make([]error, batch)
		var wg sync.WaitGroup
		for j := 0; j < batch; j++ {
			idx := (start + j) % n
			wg.Add(1)
			go func() {
				defer wg.Done()
				results[j], _, errs[j] = scoreSequence(ctx, c, st.clone(), seqs[probe.Prompts[idx].ID], topK)
			}()
		}
		wg.Wait()
		for j := 0; j < batch && start+j < n; j++ {
			pr := &probe.Prompts[start+j]
			if errs[j] != nil {
				return fmt.Errorf("teacher forcing under load (%d concurrent): prompt %q: %w", batch, pr.ID, errs[j])
			}
			pr.ForcedBatched = results[j]
		}
	}
	probe.BatchSize = batch
	return nil
}

// clone copies what the state has learnt, for use by one concurrent request.
func (st *probeState) clone() *probeState { c := *st; return &c }

// dropClipped removes the entries of one sequence from a clipped-id list (a rescoring replaces
// them).
func dropClipped(cs []wire.ClippedID, in string) []wire.ClippedID {
	out := cs[:0:0]
	for _, c := range cs {
		if c.In != in {
			out = append(out, c)
		}
	}
	return out
}

// scoreSequence returns the logprobs of seq's tokens 1..n-1 given their prefixes, with top-k
// candidates: SGLang's /generate with logprob_start_len 0 where it answers (in the current or the
// old input_token_logprobs layout, see alignInput), else an echo completion (vLLM). The scored
// tokens must be seq's own, except for ids SGLang reports clipped to 0, which are returned.
func scoreSequence(ctx context.Context, c *client.Client, st *probeState, seq []int, topK int) ([]wire.TokenLogprob, []wire.ClippedID, error) {
	one := 1
	temp := 0.0
	if st.useGenerate {
		zero := 0
		resp, err := c.Generate(ctx, wire.GenerateRequest{InputIDs: seq, ReturnLogprob: true, TopLogprobsNum: topK, LogprobStart: &zero,
			SamplingParams: wire.SamplingParams{MaxNewTokens: &one, Temperature: &temp}})
		var ae *client.APIError
		switch {
		case err == nil:
			m := resp.MetaInfo
			entries, tops, err := alignInput(m.InputTokenLogprobs, m.InputTopLogprobs, m.PromptTokens, seq)
			if err != nil {
				return nil, nil, fmt.Errorf("scoring (/generate) a %d-token sequence: %w", len(seq), err)
			}
			if topK > 0 && len(tops) != len(entries) {
				return nil, nil, fmt.Errorf("scoring (/generate): %d input_top_logprobs for %d positions (asked for top %d)", len(tops), len(entries), topK)
			}
			out, err := triples("input", entries, tops, 1)
			if err != nil {
				return nil, nil, fmt.Errorf("scoring (/generate): %w", err)
			}
			clipped, err := sameTokens(out, seq)
			if err != nil {
				return nil, nil, fmt.Errorf("scoring (/generate): %w", err)
			}
			return out, clipped, nil
		case errors.As(err, &ae) && (ae.StatusCode == 404 || ae.StatusCode == 405):
			st.useGenerate = false
		default:
			return nil, nil, fmt.Errorf("scoring (/generate): %w", err)
		}
	}
	k := topK
	resp, err := st.complete(ctx, c, wire.CompletionRequest{Prompt: client.PromptTokens(seq), MaxTokens: &one, Temperature: &temp, Logprobs: &k, Echo: true})
	if err != nil {
		return nil, nil, fmt.Errorf("scoring (echo): %w", err)
	}
	ch := resp.Choices[0]
	if ch.Logprobs == nil || len(ch.Logprobs.Tokens) < len(seq) {
		return nil, nil, fmt.Errorf("scoring (echo): the server returned logprobs for fewer than the %d forced tokens", len(seq))
	}
	vocab := map[string]int{}
	learn(vocab, ch.Logprobs.Tokens[:len(seq)], seq)
	out := make([]wire.TokenLogprob, 0, len(seq)-1)
	for i := 1; i < len(seq); i++ {
		e, err := position(vocab, ch.Logprobs, i, seq[i])
		if err != nil {
			return nil, nil, fmt.Errorf("scoring (echo): %w", err)
		}
		out = append(out, e)
	}
	return out, nil, nil
}

// sameTokens checks that scored position i+1 is seq[i+1]. A position SGLang names as token 0
// for a nonzero forced id is its id clipping (ids >= vocab_size-1 are reported as 0; the logprob
// is the forced token's): the forced id is put back and the position returned.
func sameTokens(scored []wire.TokenLogprob, seq []int) ([]wire.ClippedID, error) {
	ids := make([]int, len(scored)+1)
	ids[0] = seq[0]
	for i, e := range scored {
		ids[i+1] = e.Token
	}
	clipped, err := keepSent("forced", ids, seq, scored, 1)
	if err != nil {
		return nil, fmt.Errorf("the server scored another token than the forced sequence's: %w", err)
	}
	return clipped, nil
}
