package workload

import (
	"fmt"
	"math"
	"sort"
	"time"
)

// RequestRecord is what one benchmark request did, with client-side times measured from the
// benchmark start (Start) or from the request's own send time (TTFT, Latency, ITLs).
type RequestRecord struct {
	Start   time.Duration
	TTFT    time.Duration
	Latency time.Duration // arrival of the last content chunk
	ITLs    []time.Duration
	// ChunkTokens holds the tokens of each content chunk (len = len(ITLs)+1); nil means one token
	// per chunk.
	ChunkTokens  []int
	PromptTokens int
	OutputTokens int
	Success      bool
	Err          string
}

// Percentile returns the p-th percentile (0..100) of xs with linear interpolation between the
// closest ranks, as numpy.percentile does by default. xs need not be sorted; empty gives NaN.
func Percentile(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	return percentileSorted(s, p)
}

func percentileSorted(s []float64, p float64) float64 {
	if len(s) == 1 {
		return s[0]
	}
	pos := p / 100 * float64(len(s)-1)
	lo := math.Floor(pos)
	hi := math.Ceil(pos)
	if lo == hi {
		return s[int(lo)]
	}
	frac := pos - lo
	return s[int(lo)] + (s[int(hi)]-s[int(lo)])*frac
}

// Mean returns the arithmetic mean (NaN for no values).
func Mean(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	sum := 0.0
	for _, x := range xs {
		sum += x
	}
	return sum / float64(len(xs))
}

// Std returns the population standard deviation (numpy.std, ddof=0).
func Std(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	m := Mean(xs)
	ss := 0.0
	for _, x := range xs {
		d := x - m
		ss += d * d
	}
	return math.Sqrt(ss / float64(len(xs)))
}

// distribution is the six statistics reported for each latency metric.
type distribution struct{ mean, median, std, p90, p95, p99 float64 }

func summarize(xs []float64) distribution {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	return distribution{
		mean: Mean(s), median: percentileSorted(s, 50), std: Std(s),
		p90: percentileSorted(s, 90), p95: percentileSorted(s, 95), p99: percentileSorted(s, 99),
	}
}

func (r *Result) setDist(metric string, xs []float64) {
	var mean, median, std, p90, p95, p99 *float64
	switch metric {
	case "ttft":
		mean, median, std, p90, p95, p99 = &r.MeanTTFTMs, &r.MedianTTFTMs, &r.StdTTFTMs, &r.P90TTFTMs, &r.P95TTFTMs, &r.P99TTFTMs
	case "tpot":
		mean, median, std, p90, p95, p99 = &r.MeanTPOTMs, &r.MedianTPOTMs, &r.StdTPOTMs, &r.P90TPOTMs, &r.P95TPOTMs, &r.P99TPOTMs
	case "itl":
		mean, median, std, p90, p95, p99 = &r.MeanITLMs, &r.MedianITLMs, &r.StdITLMs, &r.P90ITLMs, &r.P95ITLMs, &r.P99ITLMs
	case "e2el":
		mean, median, std, p90, p95, p99 = &r.MeanE2ELMs, &r.MedianE2ELMs, &r.StdE2ELMs, &r.P90E2ELMs, &r.P95E2ELMs, &r.P99E2ELMs
	default:
		panic("workload: unknown metric " + metric)
	}
	if len(xs) == 0 {
		for _, st := range []string{"mean", "median", "std", "p90", "p95", "p99"} {
			r.setMissing(st + "_" + metric + "_ms")
		}
		return
	}
	d := summarize(xs)
	*mean, *median, *std, *p90, *p95, *p99 = d.mean, d.median, d.std, d.p90, d.p95, d.p99
}

func toMs(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// GoodputKeys are the SLO names accepted by --goodput (values in milliseconds).
var GoodputKeys = []string{"ttft", "tpot", "e2el"}

// ParseGoodput parses vLLM-style SLO arguments ("ttft:200", "tpot:50 e2el:3000"; several per
// argument separated by spaces or commas).
func ParseGoodput(args []string) (map[string]float64, error) {
	out := map[string]float64{}
	for _, a := range args {
		for _, f := range splitFields(a) {
			k, v, ok := cutColon(f)
			if !ok {
				return nil, fmt.Errorf("--goodput %q: expected NAME:MILLISECONDS with NAME one of ttft, tpot, e2el", f)
			}
			if !validGoodputKey(k) {
				return nil, fmt.Errorf("--goodput %q: unknown SLO %q (expected ttft, tpot or e2el)", f, k)
			}
			var ms float64
			if _, err := fmt.Sscan(v, &ms); err != nil || ms < 0 || math.IsNaN(ms) || math.IsInf(ms, 0) {
				return nil, fmt.Errorf("--goodput %q: %q is not a non-negative number of milliseconds", f, v)
			}
			out[k] = ms
		}
	}
	return out, nil
}

func validGoodputKey(k string) bool {
	for _, g := range GoodputKeys {
		if g == k {
			return true
		}
	}
	return false
}

func splitFields(s string) []string {
	var out []string
	cur := []rune{}
	for _, c := range s {
		if c == ' ' || c == ',' || c == '\t' {
			if len(cur) > 0 {
				out = append(out, string(cur))
				cur = cur[:0]
			}
			continue
		}
		cur = append(cur, c)
	}
	if len(cur) > 0 {
		out = append(out, string(cur))
	}
	return out
}

func cutColon(s string) (string, string, bool) {
	for i := 0; i < len(s); i++ {
		if s[i] == ':' || s[i] == '=' {
			return s[:i], s[i+1:], i > 0 && i < len(s)-1
		}
	}
	return "", "", false
}

// ComputeMetrics fills a Result's metrics from per-request records and the benchmark duration,
// with the definitions of vLLM's bench serve (docs/metrics.md):
//
//   - throughputs divide totals of successful requests by the duration;
//   - TTFT and E2E latency per successful request; TPOT per request = (E2E − TTFT)/(out − 1),
//     only for requests with more than one output token; ITL = every gap between content chunks,
//     pooled over requests;
//   - statistics: mean, median, population std, p90/p95/p99 by linear interpolation;
//   - goodput: successful requests meeting every given SLO (TPOT taken as 0 when out ≤ 1) per
//     second; nil SLOs leave request_goodput missing;
//   - max_output_tokens_per_s and max_concurrent_requests_1s over 1-second buckets from the
//     first request's start, as vLLM up to 0.28; max_concurrent_requests is the exact peak of
//     overlapping successful requests, as current vLLM; peak_in_flight the same over all requests;
//     concurrency = Σ E2E / duration (SGLang's Little's-law figure).
func ComputeMetrics(records []RequestRecord, duration time.Duration, goodput map[string]float64) *Result {
	r := &Result{Schema: ResultSchema}
	r.Duration = duration.Seconds()
	var ttfts, tpots, itls, e2els []float64
	good := 0
	var firstErr []string
	for i := range records {
		rec := &records[i]
		if !rec.Success {
			r.Failed++
			if len(firstErr) < 3 && rec.Err != "" {
				firstErr = append(firstErr, rec.Err)
			}
			continue
		}
		r.Completed++
		r.TotalInputTokens += rec.PromptTokens
		r.TotalOutputTokens += rec.OutputTokens
		ttft := toMs(rec.TTFT)
		e2el := toMs(rec.Latency)
		ttfts = append(ttfts, ttft)
		e2els = append(e2els, e2el)
		tpot := 0.0
		if rec.OutputTokens > 1 {
			tpot = (e2el - ttft) / float64(rec.OutputTokens-1)
			tpots = append(tpots, tpot)
		}
		for _, g := range rec.ITLs {
			itls = append(itls, toMs(g))
		}
		if goodput != nil && meetsSLOs(goodput, ttft, tpot, e2el) {
			good++
		}
	}
	r.setThroughputs(duration.Seconds(), good, goodput != nil, e2els)
	r.setDist("ttft", ttfts)
	r.setDist("tpot", tpots)
	r.setDist("itl", itls)
	r.setDist("e2el", e2els)
	r.MaxOutputTokensPerS, r.MaxConcurrentRequests1s = perSecondPeaks(records)
	r.MaxConcurrentRequests = peakInFlight(records, true)
	r.PeakInFlight = peakInFlight(records, false)
	if r.Completed == 0 {
		r.setMissing("max_output_tokens_per_s")
		r.setMissing("max_concurrent_requests")
		r.setMissing("max_concurrent_requests_1s")
		r.warnf("no request completed")
	}
	if r.Failed > 0 {
		r.warnf("%d of %d requests failed; first errors: %v", r.Failed, len(records), firstErr)
	}
	return r
}

// meetsSLOs reports whether a request with these TTFT, TPOT and E2E latencies (ms) meets every
// SLO of goodput (keys ttft, tpot, e2el; an absent key is no bound).
func meetsSLOs(goodput map[string]float64, ttft, tpot, e2el float64) bool {
	ok := true
	if slo, has := goodput["ttft"]; has && ttft > slo {
		ok = false
	}
	if slo, has := goodput["tpot"]; has && tpot > slo {
		ok = false
	}
	if slo, has := goodput["e2el"]; has && e2el > slo {
		ok = false
	}
	return ok
}

// setThroughputs sets the per-second figures over a run of sec seconds: request, output and total
// token throughput, goodput (good requests, when SLOs were given: withGoodput) and the Little's-law
// concurrency from the E2E latencies (ms). A zero duration leaves them missing, with a warning.
func (r *Result) setThroughputs(sec float64, good int, withGoodput bool, e2els []float64) {
	if sec > 0 {
		r.RequestThroughput = float64(r.Completed) / sec
		r.OutputThroughput = float64(r.TotalOutputTokens) / sec
		r.TotalTokenThroughput = float64(r.TotalInputTokens+r.TotalOutputTokens) / sec
		if withGoodput {
			r.RequestGoodput = float64(good) / sec
		}
		sum := 0.0
		for _, e := range e2els {
			sum += e
		}
		r.Concurrency = sum / 1000 / sec
	} else {
		r.warnf("benchmark duration is zero: throughputs not computed")
		for _, k := range []string{"request_throughput", "output_throughput", "total_token_throughput", "concurrency"} {
			r.setMissing(k)
		}
	}
	if !withGoodput || sec <= 0 {
		r.setMissing("request_goodput")
	}
}

// perSecondPeaks buckets token arrivals and active requests of successful requests into whole
// seconds from the earliest start, as vLLM does, and returns the busiest buckets.
func perSecondPeaks(records []RequestRecord) (float64, int) {
	minStart := time.Duration(math.MaxInt64)
	maxEnd := time.Duration(0)
	n := 0
	for i := range records {
		rec := &records[i]
		if !rec.Success {
			continue
		}
		n++
		minStart = min(minStart, rec.Start)
		maxEnd = max(maxEnd, rec.Start+rec.Latency)
	}
	if n == 0 {
		return 0, 0
	}
	buckets := int(math.Ceil((maxEnd - minStart).Seconds())) + 1
	tokens := make([]float64, buckets)
	active := make([]int, buckets)
	for i := range records {
		rec := &records[i]
		if !rec.Success {
			continue
		}
		t := rec.Start + rec.TTFT
		add := func(k int, t time.Duration) {
			b := int((t - minStart).Seconds())
			if b >= 0 && b < buckets {
				w := 1
				if rec.ChunkTokens != nil && k < len(rec.ChunkTokens) {
					w = rec.ChunkTokens[k]
				}
				tokens[b] += float64(w)
			}
		}
		add(0, t)
		for k, g := range rec.ITLs {
			t += g
			add(k+1, t)
		}
		s := int((rec.Start - minStart).Seconds())
		e := int((rec.Start + rec.Latency - minStart).Seconds())
		for b := s; b <= e && b < buckets; b++ {
			active[b]++
		}
	}
	maxTok, maxAct := 0.0, 0
	for b := range tokens {
		maxTok = math.Max(maxTok, tokens[b])
		maxAct = max(maxAct, active[b])
	}
	return maxTok, maxAct
}

// peakInFlight is the largest number of requests in flight at one instant over half-open
// [send, end) intervals: of the successful ones when successOnly (current vllm bench serve's
// max_concurrent_requests, serve.py calculate_metrics), else of all (reckon's peak_in_flight).
func peakInFlight(records []RequestRecord, successOnly bool) int {
	type ev struct {
		t time.Duration
		d int
	}
	evs := make([]ev, 0, 2*len(records))
	for _, rec := range records {
		if successOnly && !rec.Success {
			continue
		}
		evs = append(evs, ev{rec.Start, +1}, ev{rec.Start + rec.Latency, -1})
	}
	// Ends sort before starts at the same instant: back-to-back requests do not overlap.
	sort.Slice(evs, func(i, j int) bool {
		if evs[i].t != evs[j].t {
			return evs[i].t < evs[j].t
		}
		return evs[i].d < evs[j].d
	})
	cur, peak := 0, 0
	for _, e := range evs {
		cur += e.d
		peak = max(peak, cur)
	}
	return peak
}
