package gate

import "fmt"

// NightsScanned is how many trailing nights (tonight and the history's newest runs) the nightly
// detector tests for a regression that has no change point yet: a drop from night N is tested
// on nights N, N+1 and N+2 with one, two and three nights after it, each span at
// alpha/NightsScanned (Bonferroni), so a regression too small for one night is found within three.
const NightsScanned = 5

// CompareNights is the nightly detector (docs/history.md, "The nightly detector"): tonight's
// launches (head) against a series' history, runs (each run one launch, oldest first) of which
// runs[:openFrom] are the reference and runs[openFrom:] the runs since an open regression
// (openFrom = len(runs) when none). With an open regression, the runs since it and tonight are
// tested against the reference: red until fixed or accepted. Otherwise the newest k-1 runs and
// tonight, for k = 1..NightsScanned (as long as minRef reference runs remain), are tested
// against the runs before them, each at opts.Alpha/k: the first regression found (smallest p) is
// the verdict; without one, the span of the most nights, with what it could have found
// (opts.Detect). note says what was tested; span is how many nights (tonight included) the
// verdict's head holds.
func CompareNights(runs [][]float64, openFrom int, head [][]float64, m Metric, opts StatOptions, prior LaunchNoise, minRef int) (r StatResult, note string, span int) {
	if openFrom > 0 && openFrom < len(runs) {
		o := confirmOptions(opts)
		h := append(append([][]float64{}, runs[openFrom:]...), head...)
		r = CompareLaunches(runs[:openFrom], h, m, o, prior)
		return r, fmt.Sprintf("open regression: its %d night(s) and tonight tested against the %d nights before it at alpha %.2g", len(runs)-openFrom, openFrom, o.Alpha), len(runs) - openFrom + 1
	}
	minRef = max(2, minRef)
	k := scanSpans(len(runs), minRef)
	o := opts.withDefaults()
	alpha := o.Alpha
	o.Alpha = alpha / float64(k)
	o.Detect = true
	var best, widest StatResult
	bestK := 0
	for j := 1; j <= k; j++ {
		cut := len(runs) - (j - 1)
		h := append(append([][]float64{}, runs[cut:]...), head...)
		res := CompareLaunches(runs[:cut], h, m, o, prior)
		if res.Outcome == Regression && (bestK == 0 || res.PWorse < best.PWorse) {
			best, bestK = res, j
		}
		widest = res
	}
	if bestK > 0 {
		return best, fmt.Sprintf("regression over the last %d night(s) (tonight and %d before) against the %d before them; each span of 1..%d nights tested at alpha %.2g/%d",
			bestK, bestK-1, len(runs)-(bestK-1), k, alpha, k), bestK
	}
	return widest, fmt.Sprintf("no regression over the last 1..%d night(s), each span tested at alpha %.2g/%d; the sensitivity stated is that of the last %d against the %d before them",
		k, alpha, k, k, len(runs)-(k-1)), k
}

// scanSpans is how many trailing spans the scan tests over n stored runs: up to NightsScanned,
// as long as minRef runs remain before the longest.
func scanSpans(n, minRef int) int {
	k := 1
	for k < NightsScanned && n-k >= minRef {
		k++
	}
	return k
}

// confirmOptions are the options an open regression is confirmed with each night: the check's
// alpha (one test of the one hypothesis the scan raised), so a real regression, tested on more
// nights each night, stays red, and a false alarm's one extreme night is soon outweighed.
func confirmOptions(opts StatOptions) StatOptions {
	o := opts.withDefaults()
	o.Detect = true
	return o
}

// OpenRegression replays the nightly detector over a series' stored runs (each one launch,
// oldest first, all of one level as far as improvements and acceptances tell): night i is
// judged against runs[:i] as CompareNights judged it then. It returns the index of the first run
// of the regression still open after the last run (len(runs) when none): a night the scan found
// red opens one (from the first night of the span it was found in), and it stays open while the
// runs since it, each night, are still a regression against the runs before it. The replay makes
// the verdict a function of the stored runs alone: the same history gives the same verdict.
func OpenRegression(runs [][]float64, m Metric, opts StatOptions, prior LaunchNoise, minRef int) int {
	minRef = max(2, minRef)
	open := -1
	for i := minRef; i < len(runs); i++ {
		from := i
		if open >= 0 {
			from = open
		}
		r, _, span := CompareNights(runs[:i], from, runs[i:i+1], m, opts, prior, minRef)
		switch {
		case open >= 0 && r.Outcome != Regression:
			open = -1
		case open < 0 && r.Outcome == Regression:
			open = i - (span - 1)
		}
	}
	if open < 0 {
		return len(runs)
	}
	return open
}
