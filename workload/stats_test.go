package workload

import (
	"math"
	"sort"
	"testing"
	"time"
)

func msd(v float64) time.Duration { return time.Duration(v * float64(time.Millisecond)) }

func near(t *testing.T, name string, got, want float64) {
	t.Helper()
	if math.Abs(got-want) > 1e-6*math.Max(1, math.Abs(want)) {
		t.Errorf("%s = %.9g, want %.9g", name, got, want)
	}
}

func TestPercentileMatchesNumpyLinear(t *testing.T) {
	// numpy.percentile([1, 2, 3, 4, 10], q): 50 -> 3, 90 -> 7.6, 99 -> 9.76, 0 -> 1, 100 -> 10.
	xs := []float64{10, 1, 3, 2, 4}
	for q, want := range map[float64]float64{50: 3, 90: 7.6, 99: 9.76, 0: 1, 100: 10, 25: 2} {
		near(t, "p", Percentile(xs, q), want)
	}
	// A nearest-rank implementation would give 10 for p90: make sure we do not.
	if Percentile(xs, 90) == 10 {
		t.Errorf("p90 is nearest-rank, want linear interpolation")
	}
	if !math.IsNaN(Percentile(nil, 50)) {
		t.Errorf("percentile of nothing must be NaN")
	}
	near(t, "std", Std([]float64{2, 4, 4, 4, 5, 5, 7, 9}), 2) // population std (ddof=0)
}

// scripted holds four requests with hand-computed expectations (see docs/metrics.md).
func scripted() []RequestRecord {
	return []RequestRecord{
		// A: TTFT 100, gaps 20 30 50 -> E2E 200, 4 tokens: TPOT (200-100)/3.
		{Start: 0, TTFT: msd(100), Latency: msd(200), ITLs: []time.Duration{msd(20), msd(30), msd(50)}, PromptTokens: 10, OutputTokens: 4, Success: true},
		// B: TTFT 150, one gap 40 -> E2E 190, 2 tokens: TPOT 40.
		{Start: msd(50), TTFT: msd(150), Latency: msd(190), ITLs: []time.Duration{msd(40)}, PromptTokens: 20, OutputTokens: 2, Success: true},
		// C: a single token: no TPOT, no ITL.
		{Start: msd(100), TTFT: msd(80), Latency: msd(80), PromptTokens: 5, OutputTokens: 1, Success: true},
		// D: failed.
		{Start: msd(300), Latency: msd(10), Err: "HTTP 500"},
	}
}

func TestComputeMetricsHandComputed(t *testing.T) {
	r := ComputeMetrics(scripted(), 2*time.Second, map[string]float64{"ttft": 120, "tpot": 35})
	if r.Completed != 3 || r.Failed != 1 || r.TotalInputTokens != 35 || r.TotalOutputTokens != 7 {
		t.Fatalf("counts: %+v", r)
	}
	near(t, "request_throughput", r.RequestThroughput, 1.5)
	near(t, "output_throughput", r.OutputThroughput, 3.5)
	near(t, "total_token_throughput", r.TotalTokenThroughput, 21)
	// Goodput: A meets both SLOs, B misses TTFT, C meets TTFT and counts TPOT as 0.
	near(t, "request_goodput", r.RequestGoodput, 1.0)
	near(t, "concurrency", r.Concurrency, 0.235)

	near(t, "mean_ttft", r.MeanTTFTMs, 110)
	near(t, "median_ttft", r.MedianTTFTMs, 100)
	near(t, "std_ttft", r.StdTTFTMs, math.Sqrt(2600.0/3))
	near(t, "p90_ttft", r.P90TTFTMs, 140)
	near(t, "p95_ttft", r.P95TTFTMs, 145)
	near(t, "p99_ttft", r.P99TTFTMs, 149)

	// TPOT excludes the first token and single-token requests.
	near(t, "mean_tpot", r.MeanTPOTMs, (100.0/3+40)/2)
	near(t, "median_tpot", r.MedianTPOTMs, (100.0/3+40)/2)
	near(t, "std_tpot", r.StdTPOTMs, (40-100.0/3)/2)
	near(t, "p99_tpot", r.P99TPOTMs, 100.0/3+0.99*(40-100.0/3))

	// ITL pools every chunk gap of every request: [20 30 50 40].
	near(t, "mean_itl", r.MeanITLMs, 35)
	near(t, "median_itl", r.MedianITLMs, 35)
	near(t, "std_itl", r.StdITLMs, math.Sqrt(125))
	near(t, "p90_itl", r.P90ITLMs, 47)
	near(t, "p99_itl", r.P99ITLMs, 49.7)

	near(t, "mean_e2el", r.MeanE2ELMs, 470.0/3)
	near(t, "median_e2el", r.MedianE2ELMs, 190)
	near(t, "p90_e2el", r.P90E2ELMs, 198)

	if r.MaxConcurrentRequests != 3 || r.PeakInFlight != 3 || r.MaxOutputTokensPerS != 7 {
		t.Errorf("max_concurrent_requests %d peak_in_flight %d max_output_tokens_per_s %v; want 3 3 7",
			r.MaxConcurrentRequests, r.PeakInFlight, r.MaxOutputTokensPerS)
	}
	m := r.Metrics()
	if _, ok := m["request_goodput"]; !ok {
		t.Errorf("request_goodput missing from Metrics with SLOs given")
	}
	if _, ok := m["spec_accept_length"]; !ok {
		// ComputeMetrics alone does not know about the server: Run marks it missing.
		t.Logf("spec_accept_length present as zero in ComputeMetrics output (Run decides)")
	}
}

func TestComputeMetricsWrongDefinitionsWouldFail(t *testing.T) {
	r := ComputeMetrics(scripted(), 2*time.Second, nil)
	// TPOT including the first token (guidellm's definition) would be 200/4=50 and 190/2=95.
	if math.Abs(r.MeanTPOTMs-72.5) < 1e-9 {
		t.Errorf("TPOT includes the first token")
	}
	// ITL as a per-request average (AIPerf's definition) would average 33.3 and 40.
	if math.Abs(r.MeanITLMs-(100.0/3+40)/2) < 1e-9 {
		t.Errorf("ITL averaged per request instead of pooled")
	}
	// Without SLOs goodput is not measured: missing, not zero.
	if _, ok := r.Metrics()["request_goodput"]; ok {
		t.Errorf("request_goodput reported without SLOs")
	}
}

func TestComputeMetricsNothingCompleted(t *testing.T) {
	r := ComputeMetrics([]RequestRecord{{Err: "boom"}, {Err: "boom"}}, time.Second, nil)
	m := r.Metrics()
	for _, k := range []string{"median_ttft_ms", "p99_itl_ms", "mean_tpot_ms", "max_concurrent_requests"} {
		if _, ok := m[k]; ok {
			t.Errorf("%s reported although nothing completed", k)
		}
	}
	if m["failed"] != 2 || m["completed"] != 0 || len(r.Warnings) == 0 {
		t.Errorf("failed/completed/warnings wrong: %v %v", m, r.Warnings)
	}
}

func TestPerSecondPeaks(t *testing.T) {
	recs := []RequestRecord{
		// tokens at 0.5 s (2 tokens), 0.9 s, 1.2 s; active in seconds 0 and 1.
		{Start: 0, TTFT: msd(500), ITLs: []time.Duration{msd(400), msd(300)}, ChunkTokens: []int{2, 1, 1}, Latency: msd(1200), OutputTokens: 4, Success: true},
		// token at 0.95+0.1 = 1.05 s; active in second 0 and 1.
		{Start: msd(950), TTFT: msd(100), Latency: msd(100), OutputTokens: 1, Success: true},
		// starts in second 2 after the others ended.
		{Start: msd(2100), TTFT: msd(100), Latency: msd(100), OutputTokens: 1, Success: true},
	}
	tok, act := perSecondPeaks(recs)
	if tok != 3 || act != 2 {
		t.Errorf("peaks = %v tokens/s, %d requests; want 3 (bucket 0: 2+1) and 2", tok, act)
	}
	if p := peakInFlight(recs, false); p != 2 {
		t.Errorf("peak in flight = %d, want 2", p)
	}
}

func TestParseGoodput(t *testing.T) {
	g, err := ParseGoodput([]string{"ttft:200", "tpot:50,e2el:3000.5"})
	if err != nil || g["ttft"] != 200 || g["tpot"] != 50 || g["e2el"] != 3000.5 {
		t.Errorf("ParseGoodput = %v, %v", g, err)
	}
	for _, bad := range []string{"ttft", "itl:5", "ttft:-1", "ttft:abc", ":5"} {
		if _, err := ParseGoodput([]string{bad}); err == nil {
			t.Errorf("ParseGoodput(%q) accepted", bad)
		}
	}
}

func TestArrivalOffsets(t *testing.T) {
	a := arrivalOffsets(2000, 10, 1, 7)
	b := arrivalOffsets(2000, 10, 1, 7)
	if a[1999] != b[1999] || a[5] != b[5] {
		t.Fatalf("same seed gave different schedules")
	}
	// Rescaled as vLLM: the last arrival is at n/rate.
	if d := a[1999] - 200*time.Second; d < -time.Millisecond || d > time.Millisecond {
		t.Errorf("last arrival %v, want 200s", a[1999])
	}
	if !sort.SliceIsSorted(a, func(i, j int) bool { return a[i] < a[j] }) {
		t.Errorf("arrivals not increasing")
	}
	// Poisson gaps: coefficient of variation ~1; burstiness 0.25 gives CV ~2.
	cv := func(off []time.Duration) float64 {
		var gaps []float64
		prev := time.Duration(0)
		for _, o := range off {
			gaps = append(gaps, (o - prev).Seconds())
			prev = o
		}
		return Std(gaps) / Mean(gaps)
	}
	if c := cv(a); c < 0.9 || c > 1.1 {
		t.Errorf("Poisson CV = %.3f, want about 1", c)
	}
	if c := cv(arrivalOffsets(2000, 10, 0.25, 7)); c < 1.8 || c > 2.2 {
		t.Errorf("burstiness 0.25 CV = %.3f, want about 2", c)
	}
	if z := arrivalOffsets(5, 0, 1, 1); z[4] != 0 {
		t.Errorf("infinite rate must send everything at once")
	}
}
