package workload

import (
	"context"
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
	// InputLen and OutputLen size synthetic prompts; OutputLen, when set, also overrides dataset
	// output lengths. RangeRatio spreads both uniformly over [L(1-r), L(1+r)].
	InputLen, OutputLen int
	RangeRatio          float64
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
	// IgnoreEOS asks the server to generate exactly max_tokens tokens (set it for benchmarks:
	// the CLI does by default).
	IgnoreEOS bool
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

// preparePrompts chooses the prompts of the run (warm-up ones first), with output lengths set.
func (o *Options) preparePrompts() ([]Prompt, string, error) {
	n := o.NumPrompts
	prompts := o.Prompts
	name := "custom"
	if prompts == nil && o.Dataset != "" {
		var err error
		if prompts, err = LoadPrompts(o.Dataset); err != nil {
			return nil, "", err
		}
		name = o.Dataset
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
		in, out := o.InputLen, o.OutputLen
		if in == 0 {
			in = DefaultInputLen
		}
		if out == 0 {
			out = DefaultOutputLen
		}
		name = fmt.Sprintf("synthetic(in=%d,out=%d,range=%g)", in, out, o.RangeRatio)
		prompts = SyntheticPrompts(total, in, out, o.RangeRatio, o.Seed)
	}
	if len(prompts) == 0 {
		return nil, "", errors.New("no prompts to send")
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
		}
		out[i] = p
	}
	return out, name, nil
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
	prompts, dsName, err := o.preparePrompts()
	if err != nil {
		return nil, &optionsError{err}
	}
	model := o.Model
	if model == "" {
		if model, err = c.ResolveModel(ctx); err != nil {
			return nil, fmt.Errorf("workload: finding the served model: %w", err)
		}
	}
	warm, bench := prompts[:o.Warmup], prompts[o.Warmup:]
	r := &runner{c: c, o: &o, model: model}

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
	res.Metadata.Seed = o.Seed
	res.Metadata.Tool = "reckon"
	res.Metadata.ToolVersion = Version
	res.Metadata.SourceFormat = "reckon"
	if res.Metadata.Date == "" {
		res.Metadata.Date = time.Now().UTC().Format(time.RFC3339)
	}
	res.Metadata.Workload = Workload{
		Name: o.Metadata.Workload.Name, Dataset: dsName, NumPrompts: len(bench), RequestRate: rate,
		Burstiness: burst, MaxConcurrency: o.Concurrency, InputLen: o.InputLen, OutputLen: o.OutputLen,
		RangeRatio: o.RangeRatio, Warmup: o.Warmup, IgnoreEOS: o.IgnoreEOS, Temperature: 0, Goodput: o.Goodput,
	}
	r.annotate(res)
	if o.Details {
		res.Details = details(records)
	}
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
	if r.o.RequestTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, r.o.RequestTimeout)
		defer cancel()
	}
	temp := 0.0
	maxTok := p.OutputLen
	req := wire.CompletionRequest{Model: r.model, MaxTokens: &maxTok, Temperature: &temp, IgnoreEOS: r.o.IgnoreEOS}
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

func details(records []RequestRecord) *Details {
	d := &Details{}
	for _, rec := range records {
		d.InputLens = append(d.InputLens, rec.PromptTokens)
		d.OutputLens = append(d.OutputLens, rec.OutputTokens)
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
