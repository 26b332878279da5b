package workload

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/sirupsen/logrus"
	"golang.org/x/term"

	"github.com/reckon-ci/reckon/engine/client"
	"github.com/reckon-ci/reckon/wire"
)

// Version is the tool version written into results (set by the CLI from its build version).
var Version = "dev"

// Defaults used when Options leave a length or count at zero.
const (
	DefaultNumPrompts = 100
	DefaultInputLen   = 256
	DefaultOutputLen  = 128
)

// Options describe one benchmark run.
type Options struct {
	// Concurrency caps the requests in flight (closed loop when RequestRate is 0); 0 = no cap.
	Concurrency int
	// RequestRate is the mean arrival rate in requests/s (open loop); 0 or +Inf sends all at once.
	RequestRate float64
	// Burstiness is the gamma shape of inter-arrival times (1 = Poisson, the default; lower is
	// burstier), as vLLM's --burstiness.
	Burstiness float64
	NumPrompts int
	// InputLen and OutputLen size synthetic prompts in tokens; OutputLen, when set, also
	// overrides dataset output lengths (0 keeps a dataset's own, such as ShareGPT's replies).
	// RangeRatio spreads both uniformly over [L(1-r), L(1+r)], as vLLM's --random-range-ratio.
	InputLen, OutputLen int
	RangeRatio          float64
	// PrefixLen is a shared prefix of this many tokens put before every synthetic prompt (vLLM's
	// --random-prefix-len): a synthetic prompt has PrefixLen + InputLen tokens.
	PrefixLen int
	// PromptMode is how synthetic prompts are sent: PromptAuto (token ids when the server takes
	// them, else text calibrated by its usage counts), PromptTokenIDs or PromptText.
	PromptMode string
	// Dataset is a prompt file (see LoadPrompts); empty means synthetic prompts.
	Dataset string
	// Prompts, when set, are used instead of Dataset or synthetic prompts.
	Prompts []Prompt
	// Warmup requests run first and are excluded from every metric.
	Warmup int
	Seed   int64
	// RequestTimeout bounds each request; 0 = none (the context still bounds the run).
	RequestTimeout time.Duration
	// Goodput SLOs in milliseconds by "ttft", "tpot", "e2el"; nil leaves request_goodput missing.
	Goodput map[string]float64
	// IgnoreEOS asks the server to generate exactly max_tokens tokens.
	IgnoreEOS bool
	// Chat sends every request to the chat completions endpoint (/v1/chat/completions) as one
	// user message; prompts are then text (synthetic ones calibrated by the server's usage
	// counts, which include its chat template).
	Chat bool
	// Temperature and TopP are the sampling settings sent with every request; nil Temperature
	// means 0 (greedy) unless ServerDefaultTemperature, nil TopP leaves the server's default.
	Temperature, TopP *float64
	// ServerDefaultTemperature sends no temperature when Temperature is nil, so that the
	// server's (model's) default applies, as current vllm bench serve does without --temperature
	// (serve.py: "no longer sets temperature==0 (greedy) in requests by default").
	ServerDefaultTemperature bool
	// Model is sent with each request; empty means the first model of /v1/models.
	Model string
	// Progress receives a progress bar (terminal) or periodic plain lines; nil = silent.
	Progress io.Writer
	// Details keeps per-request data in Result.Details.
	Details bool
	// Metadata is copied into the result (engine, config, testbed, labels).
	Metadata Metadata
	// SkipServerInfo skips reading /server_info after the run (spec accept length).
	SkipServerInfo bool
}

func (o *Options) validate() error {
	switch {
	case o.Concurrency < 0:
		return fmt.Errorf("concurrency %d: must be >= 0", o.Concurrency)
	case o.RequestRate < 0 || math.IsNaN(o.RequestRate):
		return fmt.Errorf("request rate %v: must be > 0 (or 0/inf for all at once)", o.RequestRate)
	case o.Burstiness < 0 || math.IsNaN(o.Burstiness) || math.IsInf(o.Burstiness, 0):
		return fmt.Errorf("burstiness %v: must be a positive number", o.Burstiness)
	case o.NumPrompts < 0, o.InputLen < 0, o.OutputLen < 0, o.Warmup < 0:
		return fmt.Errorf("num-prompts, input-len, output-len and warmup must not be negative")
	case o.RangeRatio < 0 || o.RangeRatio >= 1:
		return fmt.Errorf("range ratio %v: must be in [0, 1)", o.RangeRatio)
	case o.RequestTimeout < 0:
		return fmt.Errorf("request timeout %v: must not be negative", o.RequestTimeout)
	case o.PrefixLen < 0:
		return fmt.Errorf("prefix length %d: must not be negative", o.PrefixLen)
	case o.PromptMode != "" && o.PromptMode != PromptAuto && o.PromptMode != PromptTokenIDs && o.PromptMode != PromptText:
		return fmt.Errorf("prompt mode %q: expected %s, %s or %s", o.PromptMode, PromptAuto, PromptTokenIDs, PromptText)
	case o.Temperature != nil && (*o.Temperature < 0 || math.IsNaN(*o.Temperature)):
		return fmt.Errorf("temperature %v: must be >= 0", *o.Temperature)
	case o.TopP != nil && !(*o.TopP > 0 && *o.TopP <= 1):
		return fmt.Errorf("top_p %v: must be in (0, 1]", *o.TopP)
	}
	for k, v := range o.Goodput {
		if !validGoodputKey(k) {
			return fmt.Errorf("goodput SLO %q: expected ttft, tpot or e2el", k)
		}
		if v < 0 || math.IsNaN(v) {
			return fmt.Errorf("goodput SLO %s:%v: must be a non-negative number of milliseconds", k, v)
		}
	}
	return nil
}

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

// arrivalOffsets returns when each request is sent, from the benchmark start: all zero for an
// infinite rate, else cumulative gamma(shape=burstiness, scale=1/(rate·burstiness)) gaps,
// rescaled so that the last arrival is at n/rate as vLLM does.
func arrivalOffsets(n int, rate, burstiness float64, seed int64) []time.Duration {
	out := make([]time.Duration, n)
	if rate <= 0 || math.IsInf(rate, 1) || n == 0 {
		return out
	}
	if burstiness <= 0 {
		burstiness = 1
	}
	rng := rand.New(rand.NewPCG(uint64(seed), 0x2545f4914f6cdd1d))
	gaps := make([]float64, n)
	sum := 0.0
	for i := range gaps {
		gaps[i] = gammaSample(rng, burstiness) / (rate * burstiness)
		sum += gaps[i]
	}
	scale := 1.0
	if sum > 0 {
		scale = (float64(n) / rate) / sum
	}
	t := 0.0
	for i := range gaps {
		t += gaps[i] * scale
		out[i] = time.Duration(t * float64(time.Second))
	}
	return out
}

// gammaSample draws from Gamma(shape, 1) (Marsaglia and Tsang; boosted for shape < 1).
func gammaSample(rng *rand.Rand, shape float64) float64 {
	if shape < 1 {
		u := rng.Float64()
		for u == 0 {
			u = rng.Float64()
		}
		return gammaSample(rng, shape+1) * math.Pow(u, 1/shape)
	}
	d := shape - 1.0/3
	c := 1 / math.Sqrt(9*d)
	for {
		x := rng.NormFloat64()
		v := 1 + c*x
		if v <= 0 {
			continue
		}
		v = v * v * v
		u := rng.Float64()
		if u < 1-0.0331*x*x*x*x || math.Log(u) < 0.5*x*x+d*(1-v+math.Log(v)) {
			return d * v
		}
	}
}

// ErrBadOptions is matched (errors.Is) by errors of Run that come from its options or dataset
// rather than from the server.
var ErrBadOptions = errors.New("bad workload options")

type optionsError struct{ err error }

func (e *optionsError) Error() string        { return "workload: " + e.err.Error() }
func (e *optionsError) Unwrap() error        { return e.err }
func (e *optionsError) Is(target error) bool { return target == ErrBadOptions }

// Run drives the server with the workload of o and returns the measured result. Failed requests
// are counted, never fatal. When ctx ends early the partial result is returned with the error.
func Run(ctx context.Context, c *client.Client, o Options) (*Result, error) {
	if err := o.validate(); err != nil {
		return nil, &optionsError{err}
	}
	// A dataset is read before the first request: a bad one is the caller's mistake.
	var pp *preparedPrompts
	var err error
	if !o.synthetic() {
		if pp, err = o.preparePrompts("", TextCalibration{}); err != nil {
			return nil, &optionsError{err}
		}
	}
	model := o.Model
	if model == "" {
		if model, err = c.ResolveModel(ctx); err != nil {
			return nil, fmt.Errorf("workload: finding the served model: %w", err)
		}
	}
	r := &runner{c: c, o: &o, model: model}
	mode, cal := "", (*TextCalibration)(nil)
	var modeNotes []string
	if o.synthetic() {
		if mode, cal, modeNotes, err = r.choosePromptMode(ctx); err != nil {
			return nil, fmt.Errorf("workload: synthetic prompts: %w", err)
		}
	}
	var calv TextCalibration
	if cal != nil {
		calv = *cal
	}
	if pp == nil {
		if pp, err = o.preparePrompts(mode, calv); err != nil {
			return nil, &optionsError{err}
		}
	}
	prompts, dsName := pp.prompts, pp.name
	warm, bench := prompts[:o.Warmup], prompts[o.Warmup:]

	if len(warm) > 0 {
		logrus.Debugf("workload: %d warm-up requests", len(warm))
		wrecs := r.dispatch(ctx, warm, make([]time.Duration, len(warm)), c.Now(), nil)
		failed := 0
		for _, rec := range wrecs {
			if !rec.Success {
				failed++
			}
		}
		if failed == len(wrecs) {
			return nil, fmt.Errorf("workload: all %d warm-up requests failed: %s", failed, wrecs[0].Err)
		}
	}
	if ctx.Err() != nil {
		return nil, fmt.Errorf("workload: %w", ctx.Err())
	}
	offsets := arrivalOffsets(len(bench), o.RequestRate, o.Burstiness, o.Seed)
	prog := newProgress(o.Progress, len(bench))
	start := c.Now()
	records := r.dispatch(ctx, bench, offsets, start, prog)
	duration := c.Now().Sub(start)
	prog.finish()

	res := ComputeMetrics(records, duration, o.Goodput)
	res.MaxConcurrency = o.Concurrency
	rate := o.RequestRate
	if math.IsInf(rate, 1) {
		rate = 0
	}
	burst := o.Burstiness
	if burst == 0 {
		burst = 1
	}
	res.Metadata = o.Metadata
	res.Metadata.Model = model
	ignoreEOS := o.IgnoreEOS
	seed := o.Seed
	res.Metadata.Seed = &seed
	res.Metadata.Semantics = ReckonSemantics(Version)
	res.Metadata.Tool = "reckon"
	res.Metadata.ToolVersion = Version
	res.Metadata.SourceFormat = "reckon"
	if res.Metadata.Date == "" {
		res.Metadata.Date = time.Now().UTC().Format(time.RFC3339)
	}
	res.Metadata.Workload = Workload{
		Name: o.Metadata.Workload.Name, Dataset: dsName, NumPrompts: len(bench), RequestRate: rate,
		Burstiness: burst, MaxConcurrency: o.Concurrency, InputLen: o.InputLen, OutputLen: o.OutputLen,
		RangeRatio: o.RangeRatio, Warmup: o.Warmup, IgnoreEOS: &ignoreEOS, Temperature: o.sentTemperature(), TopP: o.TopP,
		TemperatureServerDefault: o.sentTemperature() == nil,
		Goodput:                  o.Goodput, PrefixLen: o.PrefixLen, PromptMode: mode, TextCalibration: cal,
	}
	if o.Chat {
		res.Metadata.Workload.Endpoint = ChatPath
	}
	if o.synthetic() {
		in, out := o.lens()
		res.Metadata.Workload.InputLen, res.Metadata.Workload.OutputLen = in, out
		res.Metadata.Workload.InputLens, res.Metadata.Workload.OutputLens = ReckonLenRange(in, o.RangeRatio), ReckonLenRange(out, o.RangeRatio)
	}
	if pp.fromDataset > 0 {
		res.Metadata.Workload.OutputLenSource = "dataset"
	}
	res.Warnings = append(res.Warnings, modeNotes...)
	res.Warnings = append(res.Warnings, pp.warnings...)
	r.annotate(res)
	res.Details = details(records, o.Details)
	if ctx.Err() == nil && !o.SkipServerInfo {
		if info, err := c.ServerInfo(ctx); err == nil && info.AvgSpecAcceptLength != nil {
			res.SpecAcceptLength = *info.AvgSpecAcceptLength
		} else {
			if err != nil {
				logrus.Debugf("workload: no server info for spec accept length: %v", err)
			}
			res.setMissing("spec_accept_length")
		}
	} else {
		res.setMissing("spec_accept_length")
	}
	if ctx.Err() != nil {
		res.warnf("run interrupted: %v", ctx.Err())
		return res, fmt.Errorf("workload: run interrupted after %d of %d requests: %w", res.Completed+res.Failed, len(bench), ctx.Err())
	}
	return res, nil
}

type runner struct {
	c     *client.Client
	o     *Options
	model string

	mu          sync.Mutex
	noUsage     int
	shortCount  int
	notStreamed int
}

// dispatch sends prompts at their offsets from start (open loop), never more than
// o.Concurrency at once (closed loop), and returns one record per prompt.
func (r *runner) dispatch(ctx context.Context, prompts []Prompt, offsets []time.Duration, start time.Time, prog *progress) []RequestRecord {
	records := make([]RequestRecord, len(prompts))
	var sem chan struct{}
	if r.o.Concurrency > 0 {
		sem = make(chan struct{}, r.o.Concurrency)
	}
	var wg sync.WaitGroup
	timer := time.NewTimer(0)
	<-timer.C
	defer timer.Stop()
	for i := range prompts {
		if d := time.Until(start.Add(offsets[i])); offsets[i] > 0 && d > 0 {
			timer.Reset(d)
			select {
			case <-ctx.Done():
			case <-timer.C:
			}
		}
		if sem != nil {
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
			}
		}
		if ctx.Err() != nil {
			for j := i; j < len(prompts); j++ {
				records[j] = RequestRecord{Err: "not sent: " + ctx.Err().Error(), Start: -1}
			}
			break
		}
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			records[i] = r.one(ctx, prompts[i], start)
			if sem != nil {
				<-sem
			}
			prog.add(records[i].Success)
		}(i)
	}
	wg.Wait()
	// Requests never sent do not count as failures of the server.
	out := records[:0]
	for _, rec := range records {
		if rec.Start >= 0 {
			out = append(out, rec)
		}
	}
	return out
}

func (r *runner) one(ctx context.Context, p Prompt, start time.Time) RequestRecord {
	if r.o.Chat {
		return r.chatOne(ctx, p, start)
	}
	if r.o.RequestTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, r.o.RequestTimeout)
		defer cancel()
	}
	maxTok := p.OutputLen
	req := wire.CompletionRequest{Model: r.model, MaxTokens: &maxTok, Temperature: r.o.sentTemperature(), TopP: r.o.TopP, IgnoreEOS: r.o.IgnoreEOS}
	if len(p.TokenIDs) > 0 {
		req.Prompt = client.PromptTokens(p.TokenIDs)
	} else {
		req.Prompt = client.PromptText(p.Text)
	}
	res, err := r.c.Stream(ctx, req, nil)
	rec := RequestRecord{}
	if res != nil {
		rec.Start = res.Start.Sub(start)
	}
	if err != nil {
		rec.Err = err.Error()
		if res != nil {
			rec.Latency = r.c.Now().Sub(res.Start)
		}
		return rec
	}
	rec.Success = true
	rec.TTFT, rec.Latency = res.TTFT, res.Latency
	rec.ITLs = res.ITLs()
	rec.ChunkTokens = res.ChunkTokens
	rec.OutputTokens = res.OutputTokens
	rec.PromptTokens = res.PromptTokens
	if res.NotStreamed {
		r.mu.Lock()
		r.notStreamed++
		r.mu.Unlock()
	}
	if res.Usage == nil {
		rec.PromptTokens = p.InputLen
		r.mu.Lock()
		r.noUsage++
		r.mu.Unlock()
	}
	if r.o.IgnoreEOS && rec.OutputTokens < maxTok {
		r.mu.Lock()
		r.shortCount++
		r.mu.Unlock()
	}
	return rec
}

func (r *runner) annotate(res *Result) {
	if r.noUsage > 0 {
		res.warnf("%d requests had no usage event: output tokens counted from stream events, input tokens from the dataset (0 when unknown)", r.noUsage)
	}
	if r.notStreamed > 0 {
		res.warnf("%d requests were answered with one JSON body instead of a stream: their TTFT equals their E2E latency and they add no ITL", r.notStreamed)
	}
	if r.shortCount > 0 {
		res.warnf("%d requests returned fewer tokens than max_tokens although ignore_eos was set", r.shortCount)
	}
}

// temperature is the temperature sent: t, or 0 (greedy) when unset.
// sentTemperature is the temperature sent with every request: Temperature, else 0 (greedy),
// else nil (none sent: the server's default) with ServerDefaultTemperature.
func (o *Options) sentTemperature() *float64 {
	if o.Temperature != nil {
		t := *o.Temperature
		return &t
	}
	if o.ServerDefaultTemperature {
		return nil
	}
	t := 0.0
	return &t
}

// details returns the per-request data of the run: the real input and output lengths of every
// request (as the server counted them) always, the timings too when all is set.
func details(records []RequestRecord, all bool) *Details {
	d := &Details{InputLens: []int{}, OutputLens: []int{}}
	for _, rec := range records {
		d.InputLens = append(d.InputLens, rec.PromptTokens)
		d.OutputLens = append(d.OutputLens, rec.OutputTokens)
		if !all {
			continue
		}
		d.TTFTs = append(d.TTFTs, rec.TTFT.Seconds())
		itl := make([]float64, len(rec.ITLs))
		for i, g := range rec.ITLs {
			itl[i] = g.Seconds()
		}
		d.ITLs = append(d.ITLs, itl)
		d.Latencies = append(d.Latencies, rec.Latency.Seconds())
		d.StartTimes = append(d.StartTimes, rec.Start.Seconds())
		d.Errors = append(d.Errors, rec.Err)
	}
	return d
}

// progress reports completions: a bar on a terminal, a plain line every 10% otherwise.
type progress struct {
	mu     sync.Mutex
	bar    *progressbar.ProgressBar
	w      io.Writer
	total  int
	done   int
	failed int
	next   int
	start  time.Time
}

func newProgress(w io.Writer, total int) *progress {
	if w == nil || total == 0 {
		return nil
	}
	p := &progress{w: w, total: total, start: time.Now(), next: max(1, total/10)}
	if f, ok := w.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		p.bar = progressbar.NewOptions(total, progressbar.OptionSetWriter(w), progressbar.OptionSetDescription("requests"),
			progressbar.OptionShowCount(), progressbar.OptionSetPredictTime(true), progressbar.OptionClearOnFinish())
	}
	return p
}

func (p *progress) add(ok bool) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.done++
	if !ok {
		p.failed++
	}
	if p.bar != nil {
		_ = p.bar.Add(1)
		return
	}
	if p.done >= p.next || p.done == p.total {
		fmt.Fprintf(p.w, "bench: %d/%d requests done (%d failed) in %.1fs\n", p.done, p.total, p.failed, time.Since(p.start).Seconds())
		p.next += max(1, p.total/10)
	}
}

func (p *progress) finish() {
	if p == nil || p.bar == nil {
		return
	}
	_ = p.bar.Finish()
}
