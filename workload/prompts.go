// prompts.go holds how a run's prompts are made: synthetic lengths, the prompt mode (token
// ids or text) chosen by probing the engine, and text calibration.

package workload

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/reckon-ci/reckon/engine/client"
	"github.com/reckon-ci/reckon/wire"
)

// Prompt modes of synthetic prompts (Options.PromptMode, Workload.PromptMode).
const (
	// PromptAuto sends token ids when the server takes them, else calibrated text.
	PromptAuto = "auto"
	// PromptTokenIDs sends the completions prompt as a list of token ids: exact lengths.
	PromptTokenIDs = "token_ids"
	// PromptText sends text whose length in words is calibrated by the server's usage counts.
	PromptText = "text"
)

// synthetic reports whether the run makes its own prompts.
func (o *Options) synthetic() bool { return o.Prompts == nil && o.Dataset == "" }

// lens returns the synthetic input and output lengths with their defaults.
func (o *Options) lens() (in, out int) {
	in, out = o.InputLen, o.OutputLen
	if in == 0 {
		in = DefaultInputLen
	}
	if out == 0 {
		out = DefaultOutputLen
	}
	return in, out
}

// preparedPrompts are the prompts of a run (warm-up ones first) and what a reader should know
// about them.
type preparedPrompts struct {
	prompts  []Prompt
	name     string
	warnings []string
	// fromDataset counts the prompts whose output length is the dataset's own.
	fromDataset int
}

// preparePrompts chooses the prompts of the run (warm-up ones first), with output lengths set.
// mode and cal say how synthetic prompts are made (PromptTokenIDs, or PromptText with cal).
func (o *Options) preparePrompts(mode string, cal TextCalibration) (*preparedPrompts, error) {
	pp := &preparedPrompts{name: "custom"}
	n := o.NumPrompts
	prompts := o.Prompts
	if prompts == nil && o.Dataset != "" {
		var err error
		if prompts, err = LoadPrompts(o.Dataset); err != nil {
			return nil, err
		}
		pp.name = o.Dataset
		if n == 0 {
			n = len(prompts)
		}
		// Sample in a seeded order, as vLLM samples datasets.
		rng := rand.New(rand.NewPCG(uint64(o.Seed), 0x5851f42d4c957f2d))
		prompts = append([]Prompt(nil), prompts...)
		rng.Shuffle(len(prompts), func(i, j int) { prompts[i], prompts[j] = prompts[j], prompts[i] })
	}
	if n == 0 {
		n = DefaultNumPrompts
		if prompts != nil {
			n = len(prompts)
		}
	}
	total := n + o.Warmup
	if prompts == nil {
		in, out := o.lens()
		pp.name = fmt.Sprintf("synthetic(in=%d,out=%d,range=%g,prefix=%d)", in, out, o.RangeRatio, o.PrefixLen)
		if mode == PromptText {
			prompts = SyntheticCalibratedPrompts(total, in, out, o.PrefixLen, o.RangeRatio, o.Seed, cal)
		} else {
			prompts = SyntheticTokenPrompts(total, in, out, o.PrefixLen, o.RangeRatio, o.Seed)
		}
	}
	if len(prompts) == 0 {
		return nil, errors.New("no prompts to send")
	}
	if o.Dataset != "" && o.Prompts == nil && total > len(prompts) {
		pp.warnings = append(pp.warnings, fmt.Sprintf("dataset %s has %d prompts for %d requests (%d measured + %d warm-up): it is cycled, each prompt sent up to %d times",
			o.Dataset, len(prompts), total, n, o.Warmup, (total+len(prompts)-1)/len(prompts)))
	}
	out := make([]Prompt, total)
	outRng := rand.New(rand.NewPCG(uint64(o.Seed), 0xda942042e4dd58b5))
	for i := range out {
		p := prompts[i%len(prompts)]
		switch {
		case o.OutputLen > 0 && o.Prompts == nil && o.Dataset != "":
			p.OutputLen = sampleLen(outRng, o.OutputLen, o.RangeRatio)
		case o.OutputLen > 0 && p.OutputLen == 0:
			p.OutputLen = o.OutputLen
		case p.OutputLen == 0:
			p.OutputLen = DefaultOutputLen
		case o.Dataset != "" && o.Prompts == nil:
			pp.fromDataset++
		}
		out[i] = p
	}
	if o.Dataset != "" && o.Prompts == nil && o.OutputLen == 0 && pp.fromDataset < total {
		pp.warnings = append(pp.warnings, fmt.Sprintf("%d of %d requests had no output length in dataset %s: they ask for %d tokens", total-pp.fromDataset, total, o.Dataset, DefaultOutputLen))
	}
	if o.Chat {
		for _, p := range out {
			if p.Text == "" {
				return nil, fmt.Errorf("prompt %s is token ids: the chat endpoint sends text messages (use a text dataset, or the completions endpoint)", p.ID)
			}
		}
	}
	pp.prompts = out
	return pp, nil
}

// choosePromptMode decides how synthetic prompts are sent. PromptTokenIDs is taken as given.
// With PromptAuto it sends one
// token-id prompt (max_tokens 1): when the server accepts it and its usage counts exactly the
// ids sent, token ids are used; otherwise text, calibrated by two text probes of the server's
// own usage counts. Probes are not part of any metric.
func (r *runner) choosePromptMode(ctx context.Context) (string, *TextCalibration, []string, error) {
	o := r.o
	mode := o.PromptMode
	if mode == "" {
		mode = PromptAuto
	}
	if o.Chat {
		mode = PromptText // a chat message is text
	}
	if mode == PromptTokenIDs {
		// Asked for explicitly: no probe (a server that refuses ids fails the requests).
		return PromptTokenIDs, nil, nil, nil
	}
	var notes []string
	if mode == PromptAuto {
		ids := SyntheticTokenPrompts(1, 16, 1, 0, 0, o.Seed)[0].TokenIDs
		got, err := r.probeUsage(ctx, client.PromptTokens(ids))
		var api *client.APIError
		switch {
		case err == nil && got == len(ids):
			return PromptTokenIDs, nil, nil, nil
		case err != nil && !(errors.As(err, &api) && api.StatusCode >= 400 && api.StatusCode < 500):
			// Not a refusal but a broken or busy server: the benchmark's requests will say so.
			notes = append(notes, fmt.Sprintf("probing token-id prompts failed (%v): sent as token ids", err))
			return PromptTokenIDs, nil, notes, nil
		case err != nil:
			notes = append(notes, fmt.Sprintf("the server refused token-id prompts (%v): synthetic prompts sent as text, calibrated by the server's usage counts", err))
		default:
			notes = append(notes, fmt.Sprintf("the server counted %d prompt tokens for %d token ids: synthetic prompts sent as text, calibrated by its usage counts", got, len(ids)))
		}
	}
	cal, err := r.calibrateText(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return "", nil, notes, err
		}
		// Uncalibrated: one token per word, and the result says so.
		notes = append(notes, fmt.Sprintf("%v: synthetic text prompts assume one token per word; the real lengths are in details.input_lens", err))
		cal = TextCalibration{PerWord: 1}
	}
	return PromptText, &cal, notes, nil
}

// calibrateText measures the server's tokens per synthetic word from its usage counts of a
// short and a long text prompt.
func (r *runner) calibrateText(ctx context.Context) (TextCalibration, error) {
	rng := rand.New(rand.NewPCG(uint64(r.o.Seed), 0x94d049bb133111eb))
	const w1, w2 = 16, 128
	t1, err := r.probeUsage(ctx, client.PromptText(syntheticText(rng, w1)))
	if err != nil {
		return TextCalibration{}, fmt.Errorf("calibrating text prompts: %w", err)
	}
	t2, err := r.probeUsage(ctx, client.PromptText(syntheticText(rng, w2)))
	if err != nil {
		return TextCalibration{}, fmt.Errorf("calibrating text prompts: %w", err)
	}
	if t1 <= 0 || t2 <= t1 {
		return TextCalibration{}, fmt.Errorf("calibrating text prompts: the server's usage counted %d and %d prompt tokens for %d and %d words (expected a growing count)", t1, t2, w1, w2)
	}
	per := float64(t2-t1) / float64(w2-w1)
	return TextCalibration{PerWord: per, Base: float64(t1) - per*w1}, nil
}

// probeTimeout bounds each prompt-mode probe request.
const probeTimeout = 30 * time.Second

// probeUsage sends one unmeasured request (max_tokens 1) and returns its usage.prompt_tokens.
func (r *runner) probeUsage(ctx context.Context, prompt json.RawMessage) (int, error) {
	timeout := r.o.RequestTimeout
	if timeout <= 0 || timeout > probeTimeout {
		timeout = probeTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if r.o.Chat {
		var text string
		if err := json.Unmarshal(prompt, &text); err != nil {
			return 0, err
		}
		return r.chatUsage(ctx, text)
	}
	one := 1
	temp := 0.0
	res, err := r.c.Stream(ctx, wire.CompletionRequest{Model: r.model, Prompt: prompt, MaxTokens: &one, Temperature: &temp}, nil)
	if err != nil {
		return 0, err
	}
	if res.Usage == nil {
		return 0, errors.New("the server sent no usage counts")
	}
	return res.PromptTokens, nil
}
