package workload

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/reckon-ci/reckon/engine/client"
	"github.com/reckon-ci/reckon/wire"
)

// knownTruncation is the known cause of a /generate answer with fewer output logprobs than
// output tokens.
const knownTruncation = "SGLang speculative decoding v2 returns logprobs for the first output token only (sgl-project/sglang#14046); launch with SGLANG_ENABLE_SPEC_V2=0 or a release that fixed it"

// maxErrorBody bounds the server text quoted in a probe error.
const maxErrorBody = 512

// vLLM's speculative-decoding counters, as /metrics names them.
const (
	metricDrafts         = "vllm:spec_decode_num_drafts_total"
	metricDraftTokens    = "vllm:spec_decode_num_draft_tokens_total"
	metricAcceptedTokens = "vllm:spec_decode_num_accepted_tokens_total"
)

// rejectedError is a 400 answer to a probe completion. vLLM ignores request fields it does not
// know (it only logs them), so a 400 is never caused by return_tokens_as_token_ids: it is a real
// validation error, reported as such, and nothing is retried.
type rejectedError struct{ err *client.APIError }

func (e *rejectedError) Error() string {
	return fmt.Sprintf("%s (the server rejected the request as invalid; vLLM ignores unknown fields, so this is a real validation error such as logprobs above --max-logprobs or a prompt over the context length; not retried)",
		bounded(e.err.Error(), maxErrorBody))
}

func (e *rejectedError) Unwrap() error { return e.err }

// bounded cuts s to at most n bytes (at a rune boundary), marking the cut.
func bounded(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && s[cut]&0xC0 == 0x80 {
		cut--
	}
	return s[:cut] + fmt.Sprintf("... (%d more bytes)", len(s)-cut)
}

// asRejected turns a 400 into a *rejectedError and leaves other errors alone.
func asRejected(err error) error {
	var ae *client.APIError
	if errors.As(err, &ae) && ae.StatusCode == 400 {
		return &rejectedError{err: ae}
	}
	return err
}

// specTally collects the speculative-decoding evidence of a probe's greedy requests.
type specTally struct {
	sum wire.ProbeSpeculative
	// metricsTried: the /metrics read before the first OpenAI request was made.
	metricsTried bool
	// before holds the counters read then (nil when the read failed).
	before map[string]float64
}

// addSGLang records one greedy /generate answer and returns the prompt's evidence (nil when
// the answer carried no spec_verify_ct).
func (t *specTally) addSGLang(m *wire.GenerateMeta) *wire.PromptSpec {
	if t == nil {
		return nil
	}
	t.sum.Requests++
	t.sum.OutputTokens += m.CompletionTokens
	if !m.SpecVerifyReported {
		return nil
	}
	t.sum.VerifyRequests++
	t.sum.VerifySteps += m.SpecVerifyCount
	t.sum.VerifiedTokens += m.CompletionTokens
	ps := &wire.PromptSpec{CompletionTokens: m.CompletionTokens, VerifySteps: m.SpecVerifyCount, AcceptLength: m.SpecAcceptLength,
		AcceptedTokens: m.SpecAcceptTokenNum, DraftTokens: m.SpecDraftTokenNum}
	addPtr := func(dst **int, v *int) {
		if v == nil {
			return
		}
		if *dst == nil {
			*dst = new(int)
		}
		**dst += *v
	}
	addPtr(&t.sum.AcceptedTokens, m.SpecAcceptTokenNum)
	addPtr(&t.sum.DraftTokens, m.SpecDraftTokenNum)
	return ps
}

// addOpenAI records one greedy completion (vLLM).
func (t *specTally) addOpenAI(completionTokens int) {
	if t == nil {
		return
	}
	t.sum.Requests++
	t.sum.OutputTokens += completionTokens
}

// readSpecMetrics reads vLLM's speculative counters; a failure is kept as the note.
func readSpecMetrics(ctx context.Context, c *client.Client) (map[string]float64, error) {
	text, err := c.Metrics(ctx)
	if err != nil {
		return nil, err
	}
	return client.SumSamples(text, metricDrafts, metricDraftTokens, metricAcceptedTokens), nil
}

// beforeOpenAI reads the counters once, before the probe's first OpenAI request.
func (t *specTally) beforeOpenAI(ctx context.Context, c *client.Client) {
	if t == nil || t.metricsTried {
		return
	}
	t.metricsTried = true
	m, err := readSpecMetrics(ctx, c)
	if err != nil {
		t.sum.MetricsNote = "before the probe: " + bounded(err.Error(), maxErrorBody)
		return
	}
	t.before = m
}

// finish reads the counters again (when the first read worked) and returns the summary.
func (t *specTally) finish(ctx context.Context, c *client.Client) *wire.ProbeSpeculative {
	if t == nil {
		return nil
	}
	s := t.sum
	if t.before != nil {
		after, err := readSpecMetrics(ctx, c)
		switch {
		case err != nil:
			s.MetricsNote = "after the probe: " + bounded(err.Error(), maxErrorBody)
		case len(after) == 0 && len(t.before) == 0:
			s.MetricsNote = "/metrics has no vllm:spec_decode_* series (no speculative decoding configured, or not vLLM)"
		default:
			d := func(name string) float64 { return math.Max(0, after[name]-t.before[name]) }
			s.Metrics = &wire.SpecMetricsDelta{Drafts: d(metricDrafts), DraftTokens: d(metricDraftTokens), AcceptedTokens: d(metricAcceptedTokens)}
		}
	}
	if !t.metricsTried && s.Requests > 0 {
		s.MetricsNote = "/metrics not read: the server answers /generate (SGLang), whose evidence is meta_info.spec_verify_ct"
	}
	switch {
	case s.VerifyRequests > 0:
		s.Source = wire.SpecSourceSGLang
	case s.Metrics != nil:
		s.Source = wire.SpecSourceVLLM
	default:
		s.Source = wire.SpecSourceNone
	}
	return &s
}

// alignInput checks the layout of SGLang's input_token_logprobs (asked from logprob_start_len 0)
// and returns it in the current layout, decided by shape rather than by version:
//
//   - current: entry 0 has a null logprob and there are prompt_tokens entries;
//   - old (SGLang ~0.2-0.3): no null, prompt_tokens-1 entries, entry i being prompt token i+1's.
//     The first token's id is then not in the answer: it is taken from sent (the input_ids of
//     the request), and without them the layout is an error.
//
// nTokens is the prompt's length (meta_info.prompt_tokens, or len(sent) when ids were sent).
// Anything else is an error naming the lengths. tops (input_top_logprobs) is aligned likewise.
func alignInput(entries [][]any, tops [][][]any, promptTokens int, sent []int) ([][]any, [][][]any, error) {
	n := promptTokens
	if len(sent) > 0 {
		if n != 0 && n != len(sent) {
			return nil, nil, fmt.Errorf("meta_info.prompt_tokens is %d for the %d input ids sent", n, len(sent))
		}
		n = len(sent)
	}
	if n == 0 {
		return nil, nil, fmt.Errorf("meta_info.prompt_tokens is missing, so the layout of the %d input_token_logprobs entries cannot be checked", len(entries))
	}
	nulls, firstNull := 0, false
	for i, e := range entries {
		if len(e) > 0 && e[0] == nil {
			nulls++
			firstNull = firstNull || i == 0
		}
	}
	switch {
	case firstNull && nulls == 1 && len(entries) == n:
		return entries, tops, nil
	case nulls == 0 && len(entries) == n-1 && n > 1:
		if len(sent) == 0 {
			return nil, nil, fmt.Errorf("meta_info.input_token_logprobs has the old SGLang layout (no leading null, %d entries for %d prompt tokens; entry i is token i+1's), which does not name the first prompt token; send the prompts as token ids", len(entries), n)
		}
		fixed := append([][]any{{nil, float64(sent[0]), nil}}, entries...)
		if len(tops) == len(entries) {
			tops = append([][][]any{nil}, tops...)
		}
		return fixed, tops, nil
	}
	return nil, nil, fmt.Errorf("meta_info.input_token_logprobs has %d entries (%d with a null logprob, first null: %v) for %d prompt tokens: neither the current layout (%d entries, entry 0 null) nor the old one (%d entries, no null)",
		len(entries), nulls, firstNull, n, n, n-1)
}

// keepSent compares the ids the server named with the ids sent. An id reported as 0 for a
// nonzero id sent is SGLang's clipping (ids >= vocab_size-1 are reported as 0): the sent id is
// kept in ids and in the scored entries (entry i-skip is position i), and recorded. Any other
// difference is an error.
func keepSent(in string, ids []int, sent []int, scored []wire.TokenLogprob, skip int) ([]wire.ClippedID, error) {
	var clipped []wire.ClippedID
	for i := range min(len(ids), len(sent)) {
		if ids[i] == sent[i] {
			continue
		}
		if ids[i] != 0 {
			return nil, fmt.Errorf("%s position %d: the server scored token %d where %d was sent", in, i, ids[i], sent[i])
		}
		clipped = append(clipped, wire.ClippedID{In: in, Index: i, Token: sent[i], Reported: ids[i]})
		ids[i] = sent[i]
		if j := i - skip; j >= 0 && j < len(scored) {
			scored[j].Token = sent[i]
		}
	}
	return clipped, nil
}
