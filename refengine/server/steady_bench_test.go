package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sort"
	"sync"
	"testing"
	"time"
)

// Steady-state closed loop of BenchmarkSteadyThroughput: each of c clients sends one streamed
// request after another; client k starts k/c of a request's duration late (staggered, not in
// lockstep waves); the first steadyWarmup is excluded, and the tokens that arrive within the
// next steadyWindow are counted.
const (
	steadyWarmup = 1500 * time.Millisecond
	steadyWindow = 4 * time.Second
)

// BenchmarkSteadyThroughput measures output tokens/s of the default model over HTTP at
// concurrency 1, 8 and 32, tp 1 and 4 (128-token prompts as token ids, 128 output tokens,
// ignore_eos) in a steady closed loop: staggered arrivals, warm-up excluded, a fixed measured
// window. It reports the median over b.N windows; BenchmarkThroughput beside it is the best of
// lockstep waves (every request of a wave starts together), which overstates what a steady load
// gets.
func BenchmarkSteadyThroughput(b *testing.B) {
	for _, tpn := range []int{1, 4} {
		for _, c := range []int{1, 8, 32} {
			b.Run(fmt.Sprintf("tp%d/c%d", tpn, c), func(b *testing.B) {
				ts := start(b, nil, true, "--tp-size", fmt.Sprint(tpn))
				var runs []float64
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					runs = append(runs, steadyLoad(b, ts.url, c, 128, 128, int64(i)))
				}
				sort.Float64s(runs)
				b.ReportMetric(runs[len(runs)/2], "out_tok/s")
			})
		}
	}
}

// steadyLoad runs the steady closed loop against url and returns output tokens/s in the window.
func steadyLoad(b *testing.B, url string, concurrency, promptLen, outLen int, seed int64) float64 {
	b.Helper()
	// One request alone first: its duration spaces the clients' starts.
	t0 := time.Now()
	if _, err := streamTokens(context.Background(), url, promptLen, outLen, seed, nil); err != nil {
		b.Fatal(err)
	}
	stagger := time.Since(t0) / time.Duration(concurrency)
	begin := time.Now()
	from, to := begin.Add(steadyWarmup), begin.Add(steadyWarmup+steadyWindow)
	ctx, cancel := context.WithDeadline(context.Background(), to.Add(time.Second))
	defer cancel()
	var mu sync.Mutex
	counted := 0
	var wg sync.WaitGroup
	for k := 0; k < concurrency; k++ {
		wg.Add(1)
		go func(k int) {
			defer wg.Done()
			time.Sleep(time.Duration(k) * stagger)
			for n := 0; time.Now().Before(to); n++ {
				_, err := streamTokens(ctx, url, promptLen, outLen, seed*1000+int64(k*100000+n), func(at time.Time) {
					if !at.Before(from) && at.Before(to) {
						mu.Lock()
						counted++
						mu.Unlock()
					}
				})
				if err != nil && ctx.Err() == nil {
					b.Error(err)
					return
				}
			}
		}(k)
	}
	// The window's tokens are all in once it has passed; requests still running are cut off.
	time.Sleep(time.Until(to))
	mu.Lock()
	n := counted
	mu.Unlock()
	cancel()
	wg.Wait()
	return float64(n) / steadyWindow.Seconds()
}

// streamTokens sends one streamed completion of a promptLen-token prompt (token ids) and calls
// onToken with the arrival time of each generated token; it returns the tokens received.
func streamTokens(ctx context.Context, url string, promptLen, outLen int, seed int64, onToken func(time.Time)) (int, error) {
	rng := rand.New(rand.NewPCG(uint64(seed), 7))
	ids := make([]int, promptLen)
	for i := range ids {
		ids[i] = 32 + rng.IntN(95)
	}
	body, _ := json.Marshal(map[string]any{"prompt": ids, "max_tokens": outLen, "temperature": 0, "ignore_eos": true, "stream": true})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/completions", bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	n := 0
	for sc.Scan() {
		line := sc.Bytes()
		if !bytes.HasPrefix(line, []byte("data: {")) {
			continue
		}
		var ev struct {
			Choices []struct {
				TokenIDs []int `json:"token_ids"`
			} `json:"choices"`
		}
		if json.Unmarshal(line[len("data: "):], &ev) != nil || len(ev.Choices) == 0 {
			continue
		}
		at := time.Now()
		for range ev.Choices[0].TokenIDs {
			n++
			if onToken != nil {
				onToken(at)
			}
		}
	}
	if err := sc.Err(); err != nil && ctx.Err() == nil {
		return n, err
	}
	return n, nil
}
