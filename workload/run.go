package workload

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"sync"
	"time"

	"github.com/sirupsen/logrus"

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
	prompts := pp.prompts
	warm, bench := prompts[:o.Warmup], prompts[o.Warmup:]

	if err := r.warmUp(ctx, warm); err != nil {
		return nil, err
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
	o.describe(res, model, pp, len(bench), mode, cal)
	res.Warnings = append(res.Warnings, modeNotes...)
	res.Warnings = append(res.Warnings, pp.warnings...)
	r.annotate(res)
	res.Details = details(records, o.Details)
	specAcceptLength(ctx, c, &o, res)
	if ctx.Err() != nil {
		res.warnf("run interrupted: %v", ctx.Err())
		return res, fmt.Errorf("workload: run interrupted after %d of %d requests: %w", res.Completed+res.Failed, len(bench), ctx.Err())
	}
	return res, nil
}

// warmUp sends the warm-up requests (none when warm is empty); it fails only when every one of
// them failed.
func (r *runner) warmUp(ctx context.Context, warm []Prompt) error {
	if len(warm) == 0 {
		return nil
	}
	logrus.Debugf("workload: %d warm-up requests", len(warm))
	wrecs := r.dispatch(ctx, warm, make([]time.Duration, len(warm)), r.c.Now(), nil)
	failed := 0
	for _, rec := range wrecs {
		if !rec.Success {
			failed++
		}
	}
	if failed == len(wrecs) {
		return fmt.Errorf("workload: all %d warm-up requests failed: %s", failed, wrecs[0].Err)
	}
	return nil
}

// describe fills res.Metadata: the run's provenance and the workload that was sent (model, pp's
// dataset, nBench benchmark prompts, the synthetic prompt mode and its text calibration cal).
func (o *Options) describe(res *Result, model string, pp *preparedPrompts, nBench int, mode string, cal *TextCalibration) {
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
		Name: o.Metadata.Workload.Name, Dataset: pp.name, NumPrompts: nBench, RequestRate: rate,
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
}

// specAcceptLength sets res's speculative accept length from the server's info, or marks it
// missing (interrupted runs, SkipServerInfo, no server info).
func specAcceptLength(ctx context.Context, c *client.Client, o *Options, res *Result) {
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
