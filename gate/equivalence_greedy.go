package gate

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/reckon-ci/reckon/wire"
)

// The pieces of Equivalence that compare two probes: their shapes and forced sequences, and
// their free-running greedy outputs up to the first divergence.

// greedyResult compares the free-running greedy outputs up to each prompt's first divergence.
type greedyResult struct {
	divs, bad []divergence
	exact     int
	exactFrac float64
	abs       []float64 // trimmed |Δ logprob| over the agreed prefixes
	details   string
}

func compareGreedy(base, head *wire.NumericsProbe, topK int, baseName, headName string) greedyResult {
	var g greedyResult
	headByID := make(map[string]*wire.NumericsPrompt, len(head.Prompts))
	for i := range head.Prompts {
		headByID[head.Prompts[i].ID] = &head.Prompts[i]
	}
	var ended []string
	agreed := 0
	for i := range base.Prompts {
		bp := &base.Prompts[i]
		hp := headByID[bp.ID]
		n := min(len(bp.Output), len(hp.Output))
		diverged := false
		for j := 0; j < n; j++ {
			bt, ht := bp.Output[j], hp.Output[j]
			if bt.Token != ht.Token {
				d := checkDivergence(bp.ID, j, bt, ht, topK, baseName, headName)
				g.divs = append(g.divs, d)
				if !d.ok {
					g.bad = append(g.bad, d)
				}
				diverged = true
				break
			}
			agreed++
			if bt.Logprob >= trimLogprob {
				g.abs = append(g.abs, math.Abs(bt.Logprob-ht.Logprob))
			}
		}
		if !diverged {
			if len(bp.Output) == len(hp.Output) {
				g.exact++
			} else {
				ended = append(ended, fmt.Sprintf("%q (%d vs %d tokens)", bp.ID, len(bp.Output), len(hp.Output)))
			}
		}
	}
	g.exactFrac = float64(g.exact) / float64(max(1, len(base.Prompts)))
	var b strings.Builder
	fmt.Fprintf(&b, "\ngreedy outputs (free-running): %d prompts; %d identical; %d diverged (%d outside top-k); %d agreed positions before divergences\n",
		len(base.Prompts), g.exact, len(g.divs), len(g.bad), agreed)
	for i, d := range g.divs {
		if i == 10 {
			fmt.Fprintf(&b, "... %d more divergences\n", len(g.divs)-10)
			break
		}
		state := "accepted (near-tie: each token in the other's top-k)"
		if !d.ok {
			state = "REJECTED: " + d.why
		}
		fmt.Fprintf(&b, "divergence: prompt %q output position %d: %s %s (%.4f) vs %s %s (%.4f): %s\n",
			d.prompt, d.pos, baseName, tokText(d.base.Token, d.base.Text), d.base.Logprob, headName, tokText(d.head.Token, d.head.Text), d.head.Logprob, state)
	}
	if len(ended) > 0 {
		sort.Strings(ended)
		fmt.Fprintf(&b, "agreed but of different length (one side stopped early): %s\n", strings.Join(ended, ", "))
	}
	g.details = b.String()
	return g
}

// checkForcedPair checks that two probes scored the same teacher-forced sequences.
func checkForcedPair(base, other *wire.NumericsProbe) error {
	if base.ForcedFrom != other.ForcedFrom {
		return fmt.Errorf("the probes of %s and %s were teacher-forced on different sequences (from %q and %q); they must come from one run",
			nameOr(base.Config, "?"), nameOr(other.Config, "?"), base.ForcedFrom, other.ForcedFrom)
	}
	byID := map[string]*wire.NumericsPrompt{}
	for i := range other.Prompts {
		byID[other.Prompts[i].ID] = &other.Prompts[i]
	}
	for i := range base.Prompts {
		bp := &base.Prompts[i]
		op := byID[bp.ID]
		if len(bp.Forced) == 0 || len(op.Forced) == 0 {
			return fmt.Errorf("prompt %q has no teacher-forced scores in the probe of %s (a probe file from before teacher forcing? re-run the gate)", bp.ID, nameOr(map[bool]string{true: base.Config, false: other.Config}[len(bp.Forced) == 0], "?"))
		}
		if len(bp.ForcedTokens) != len(op.ForcedTokens) || len(bp.Forced) != len(bp.ForcedTokens)-1 || len(op.Forced) != len(op.ForcedTokens)-1 {
			return fmt.Errorf("prompt %q: forced sequences of %d and %d tokens with %d and %d scores", bp.ID, len(bp.ForcedTokens), len(op.ForcedTokens), len(bp.Forced), len(op.Forced))
		}
		for j := range bp.ForcedTokens {
			if bp.ForcedTokens[j] != op.ForcedTokens[j] {
				return fmt.Errorf("prompt %q: forced token %d is %d in %s and %d in %s", bp.ID, j, bp.ForcedTokens[j], nameOr(base.Config, "?"), op.ForcedTokens[j], nameOr(other.Config, "?"))
			}
		}
		if len(bp.ForcedBatched) > 0 && len(op.ForcedBatched) > 0 && (len(bp.ForcedBatched) != len(bp.Forced) || len(op.ForcedBatched) != len(op.Forced)) {
			return fmt.Errorf("prompt %q: %d scores under load for %d alone", bp.ID, len(op.ForcedBatched), len(op.Forced))
		}
	}
	return nil
}
func nameOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// checkProbePair validates the two probes: schema, same prompt ids and text, same prompt tokens.
func checkProbePair(base, head *wire.NumericsProbe) error {
	for _, p := range []*wire.NumericsProbe{base, head} {
		if p.Schema != "" && p.Schema != wire.NumericsSchema {
			return fmt.Errorf("probe of %s has schema %q; expected %q", nameOr(p.Config, "?"), p.Schema, wire.NumericsSchema)
		}
		if len(p.Prompts) == 0 {
			return fmt.Errorf("probe of %s has no prompts", nameOr(p.Config, "?"))
		}
		seen := map[string]bool{}
		for i, pr := range p.Prompts {
			if pr.ID == "" {
				return fmt.Errorf("probe of %s: prompts[%d] has no id", nameOr(p.Config, "?"), i)
			}
			if seen[pr.ID] {
				return fmt.Errorf("probe of %s: prompt id %q appears twice", nameOr(p.Config, "?"), pr.ID)
			}
			seen[pr.ID] = true
		}
	}
	headByID := map[string]*wire.NumericsPrompt{}
	for i := range head.Prompts {
		headByID[head.Prompts[i].ID] = &head.Prompts[i]
	}
	var missing, extra []string
	for i := range base.Prompts {
		bp := &base.Prompts[i]
		hp, ok := headByID[bp.ID]
		if !ok {
			missing = append(missing, bp.ID)
			continue
		}
		if bp.Prompt != hp.Prompt {
			return fmt.Errorf("prompt %q has different text in the two probes", bp.ID)
		}
		if len(bp.PromptLogprobs) != len(hp.PromptLogprobs) {
			return fmt.Errorf("prompt %q: %d prompt logprobs vs %d; the prompts were tokenized differently or one probe lacks them",
				bp.ID, len(bp.PromptLogprobs), len(hp.PromptLogprobs))
		}
		for j := range bp.PromptLogprobs {
			if bp.PromptLogprobs[j].Token != hp.PromptLogprobs[j].Token {
				return fmt.Errorf("prompt %q: prompt token %d is %d vs %d; the prompts were tokenized differently",
					bp.ID, j+1, bp.PromptLogprobs[j].Token, hp.PromptLogprobs[j].Token)
			}
		}
	}
	if len(head.Prompts) != len(base.Prompts)-len(missing) {
		baseIDs := map[string]bool{}
		for _, p := range base.Prompts {
			baseIDs[p.ID] = true
		}
		for _, p := range head.Prompts {
			if !baseIDs[p.ID] {
				extra = append(extra, p.ID)
			}
		}
	}
	if len(missing) > 0 || len(extra) > 0 {
		return fmt.Errorf("the probes cover different prompts: %s lacks %s; %s has extra %s",
			nameOr(head.Config, "head"), listOrNone(missing), nameOr(head.Config, "head"), listOrNone(extra))
	}
	return nil
}

func listOrNone(ids []string) string {
	if len(ids) == 0 {
		return "none"
	}
	if len(ids) > 5 {
		return fmt.Sprintf("%q and %d more", ids[:5], len(ids)-5)
	}
	return fmt.Sprintf("%q", ids)
}

// checkDivergence applies the check_logprobs_close rule at the first differing position: the
// base token must be in head's top-k and the head token in base's top-k.
func checkDivergence(prompt string, pos int, bt, ht wire.TokenLogprob, k int, baseName, headName string) divergence {
	d := divergence{prompt: prompt, pos: pos, base: bt, head: ht, ok: true}
	var why []string
	if len(bt.Top) == 0 || len(ht.Top) == 0 {
		d.ok = false
		d.why = "the probe recorded no top-k candidates at this position, so the near-tie rule cannot be checked"
		return d
	}
	if !inTopK(bt.Token, ht.Top, k) {
		why = append(why, fmt.Sprintf("%s's token %d is not in %s's top-%d", baseName, bt.Token, headName, topLen(ht.Top, k)))
	}
	if !inTopK(ht.Token, bt.Top, k) {
		why = append(why, fmt.Sprintf("%s's token %d is not in %s's top-%d", headName, ht.Token, baseName, topLen(bt.Top, k)))
	}
	if len(why) > 0 {
		d.ok = false
		d.why = strings.Join(why, " and ")
	}
	return d
}

func topLen(top []wire.TokenCandidate, k int) int {
	if k > 0 && k < len(top) {
		return k
	}
	return len(top)
}

// inTopK reports whether tok is among the k most likely candidates (all when k <= 0).
func inTopK(tok int, top []wire.TokenCandidate, k int) bool {
	cands := top
	if k > 0 && k < len(top) {
		cands = append([]wire.TokenCandidate(nil), top...)
		sort.SliceStable(cands, func(a, b int) bool { return cands[a].Logprob > cands[b].Logprob })
		cands = cands[:k]
	}
	for _, c := range cands {
		if c.Token == tok {
			return true
		}
	}
	return false
}

func tokText(id int, text string) string {
	if text == "" {
		return fmt.Sprintf("token %d", id)
	}
	return fmt.Sprintf("token %d %q", id, text)
}

// divergence is the first position where the greedy outputs differ.
type divergence struct {
	prompt     string
	pos        int
	base, head wire.TokenLogprob
	ok         bool   // each token is in the other side's top-k
	why        string // when !ok
}

// finite keeps a metric JSON-encodable: +Inf (a distance over a trusted distance of exactly 0)
// becomes the largest float64.
func finite(x float64) float64 {
	switch {
	case math.IsInf(x, 1):
		return math.MaxFloat64
	case math.IsInf(x, -1):
		return -math.MaxFloat64
	case math.IsNaN(x):
		return 0
	}
	return x
}
