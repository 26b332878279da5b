package gate

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/reckon-ci/reckon/wire"
)

// EquivalenceTolerance bounds how far a candidate config's numerics may drift from the
// reference config's. Zero fields take DefaultEquivalenceTolerance's values; a negative value
// disables that bound.
type EquivalenceTolerance struct {
	// MaxAbsLogprob bounds max |Δ logprob| over the agreed greedy prefixes and the
	// teacher-forced prompt logprobs.
	MaxAbsLogprob float64 `json:"max_abs_logprob" yaml:"max_abs_logprob"`
	// MeanAbsLogprob bounds the mean |Δ logprob| over the same positions.
	MeanAbsLogprob float64 `json:"mean_abs_logprob" yaml:"mean_abs_logprob"`
	// MinExactMatch is the minimum fraction of prompts whose greedy outputs are identical.
	MinExactMatch float64 `json:"min_exact_match" yaml:"min_exact_match"`
	// TopK is how many of the other side's top candidates a diverging token must be among (the
	// check_logprobs_close rule); 0 means all the candidates the probe recorded.
	TopK int `json:"top_k" yaml:"top_k"`
}

// DefaultEquivalenceTolerance returns the defaults for comparing two allreduce implementations
// at bfloat16 (docs/statistics.md, "Numerical equivalence"): on the reference engine, ring vs
// one-shot differ by a mean |Δ logprob| of up to 0.008 (8 ranks) and a one-shot with a 1e-2
// relative fault by 0.012-0.013, so mean 0.01 separates them; max 0.1 and half of the prompts
// identical catch grosser faults.
func DefaultEquivalenceTolerance() EquivalenceTolerance {
	return EquivalenceTolerance{MaxAbsLogprob: 0.1, MeanAbsLogprob: 0.01, MinExactMatch: 0.5}
}

func (t EquivalenceTolerance) withDefaults() EquivalenceTolerance {
	d := DefaultEquivalenceTolerance()
	if t.MaxAbsLogprob == 0 {
		t.MaxAbsLogprob = d.MaxAbsLogprob
	}
	if t.MeanAbsLogprob == 0 {
		t.MeanAbsLogprob = d.MeanAbsLogprob
	}
	if t.MinExactMatch == 0 {
		t.MinExactMatch = d.MinExactMatch
	}
	return t
}

// logprobPos identifies one compared position.
type logprobPos struct {
	prompt   string
	where    string // "output" or "prompt"
	pos      int
	baseTok  wire.TokenLogprob
	headTok  wire.TokenLogprob
	absDelta float64
}

func (p logprobPos) describe(baseName, headName string) string {
	return fmt.Sprintf("prompt %q %s position %d: %s %s logprob %.4f vs %s %s logprob %.4f (|Δ| %.4f)",
		p.prompt, p.where, p.pos, baseName, tokText(p.baseTok.Token, p.baseTok.Text), p.baseTok.Logprob,
		headName, tokText(p.headTok.Token, p.headTok.Text), p.headTok.Logprob, p.absDelta)
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

// Equivalence compares a candidate config's numerics probe (head) with the reference config's
// (base). Greedy outputs are compared token by token; at the first divergence each side's token
// must be among the other side's top-k candidates (vLLM's check_logprobs_close rule) and the
// sequence stops there. Over the agreed prefixes and the teacher-forced prompt logprobs the max
// and mean |Δ logprob| are bounded, and a minimum fraction of prompts must match exactly. A
// failure names the worst prompt, position, both tokens and both logprobs. Different prompt
// sets are an error.
func Equivalence(base, head *wire.NumericsProbe, tol EquivalenceTolerance) Verdict {
	v := Verdict{Check: "equivalence", Kind: KindEquivalence, Metrics: map[string]float64{}}
	if base == nil || head == nil {
		v.Outcome, v.Message = Error, "equivalence: a numerics probe is missing"
		return v
	}
	baseName, headName := nameOr(base.Config, "base"), nameOr(head.Config, "head")
	v.Config = headName + " vs " + baseName
	v.Check = "equivalence " + v.Config
	t := tol.withDefaults()
	if err := checkProbePair(base, head); err != nil {
		v.Outcome, v.Message = Error, fmt.Sprintf("%s: %v", v.Check, err)
		return v
	}
	headByID := make(map[string]*wire.NumericsPrompt, len(head.Prompts))
	for i := range head.Prompts {
		headByID[head.Prompts[i].ID] = &head.Prompts[i]
	}
	var (
		all      []logprobPos
		divs     []divergence
		exact    int
		ended    []string
		outCount int
	)
	for i := range base.Prompts {
		bp := &base.Prompts[i]
		hp := headByID[bp.ID]
		n := min(len(bp.Output), len(hp.Output))
		diverged := false
		for j := 0; j < n; j++ {
			bt, ht := bp.Output[j], hp.Output[j]
			if bt.Token != ht.Token {
				divs = append(divs, checkDivergence(bp.ID, j, bt, ht, t.TopK, baseName, headName))
				diverged = true
				break
			}
			all = append(all, logprobPos{prompt: bp.ID, where: "output", pos: j, baseTok: bt, headTok: ht, absDelta: math.Abs(bt.Logprob - ht.Logprob)})
			outCount++
		}
		if !diverged {
			if len(bp.Output) == len(hp.Output) {
				exact++
			} else {
				ended = append(ended, fmt.Sprintf("%q (%d vs %d tokens)", bp.ID, len(bp.Output), len(hp.Output)))
			}
		}
		for j := 0; j < len(bp.PromptLogprobs); j++ {
			bt, ht := bp.PromptLogprobs[j], hp.PromptLogprobs[j]
			all = append(all, logprobPos{prompt: bp.ID, where: "prompt", pos: j + 1, baseTok: bt, headTok: ht, absDelta: math.Abs(bt.Logprob - ht.Logprob)})
		}
	}
	nPrompts := len(base.Prompts)
	var maxD, sumD float64
	worst := -1
	for i, p := range all {
		sumD += p.absDelta
		if worst < 0 || p.absDelta > maxD {
			maxD, worst = p.absDelta, i
		}
	}
	meanD := 0.0
	if len(all) > 0 {
		meanD = sumD / float64(len(all))
	}
	exactFrac := float64(exact) / float64(nPrompts)
	var bad []divergence
	for _, d := range divs {
		if !d.ok {
			bad = append(bad, d)
		}
	}
	v.Metrics["prompts"] = float64(nPrompts)
	v.Metrics["compared_positions"] = float64(len(all))
	v.Metrics["compared_output_positions"] = float64(outCount)
	v.Metrics["max_abs_logprob_diff"] = maxD
	v.Metrics["mean_abs_logprob_diff"] = meanD
	v.Metrics["exact_match_fraction"] = exactFrac
	v.Metrics["divergences"] = float64(len(divs))
	v.Metrics["topk_violations"] = float64(len(bad))

	var problems []string
	if len(bad) > 0 {
		d := bad[0]
		problems = append(problems, fmt.Sprintf("prompt %q diverges at output position %d: %s has %s (logprob %.4f), %s has %s (logprob %.4f); %s",
			d.prompt, d.pos, baseName, tokText(d.base.Token, d.base.Text), d.base.Logprob, headName, tokText(d.head.Token, d.head.Text), d.head.Logprob, d.why))
	}
	if t.MaxAbsLogprob > 0 && maxD > t.MaxAbsLogprob {
		problems = append(problems, fmt.Sprintf("max |Δ logprob| %.4f > %.4g at %s", maxD, t.MaxAbsLogprob, all[worst].describe(baseName, headName)))
	}
	if t.MeanAbsLogprob > 0 && meanD > t.MeanAbsLogprob {
		problems = append(problems, fmt.Sprintf("mean |Δ logprob| %.4f > %.4g over %d positions", meanD, t.MeanAbsLogprob, len(all)))
	}
	if t.MinExactMatch > 0 && exactFrac < t.MinExactMatch {
		problems = append(problems, fmt.Sprintf("%d of %d prompts identical (%.0f%% < %.0f%%)", exact, nPrompts, 100*exactFrac, 100*t.MinExactMatch))
	}

	var b strings.Builder
	fmt.Fprintf(&b, "%d prompts; %d identical; %d diverged (%d outside top-k); %d positions compared (%d output, %d prompt)\n",
		nPrompts, exact, len(divs), len(bad), len(all), outCount, len(all)-outCount)
	fmt.Fprintf(&b, "max |Δ logprob| %.5f (limit %g), mean %.5f (limit %g), exact-match %.0f%% (min %.0f%%)\n",
		maxD, t.MaxAbsLogprob, meanD, t.MeanAbsLogprob, 100*exactFrac, 100*t.MinExactMatch)
	if worst >= 0 {
		fmt.Fprintf(&b, "worst position: %s\n", all[worst].describe(baseName, headName))
	}
	for i, d := range divs {
		if i == 10 {
			fmt.Fprintf(&b, "... %d more divergences\n", len(divs)-10)
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
	if len(bad) > 1 {
		fmt.Fprintf(&b, "%d divergences outside top-k in total\n", len(bad))
	}
	v.Details = strings.TrimRight(b.String(), "\n")
	if len(problems) > 0 {
		v.Outcome = Fail
		v.Message = fmt.Sprintf("%s: not equivalent: %s", v.Config, problems[0])
		if len(bad) == 0 && !strings.HasPrefix(problems[0], "max ") && worst >= 0 {
			// Always name the worst position, whatever bound failed first.
			v.Message += "; worst at " + all[worst].describe(baseName, headName)
		}
		if len(problems) > 1 {
			v.Details = "problems:\n- " + strings.Join(problems, "\n- ") + "\n" + v.Details
		}
		return v
	}
	v.Outcome = Pass
	v.Message = fmt.Sprintf("%s: equivalent: max |Δ logprob| %.4f, mean %.5f, %d/%d prompts identical, %d near-tie divergences",
		v.Config, maxD, meanD, exact, nPrompts, len(divs))
	return v
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
