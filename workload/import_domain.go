package workload

import (
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"

	"github.com/reckon-ci/reckon/internal/domain"
)

// The ranges every number read by an importer must lie in (issue 25, item 3). A value outside
// its range is an error of the file, the record (line or element) and the field it came from,
// never a number to convert: int64(1e300) is -9223372036854775808.
const (
	// MaxImportBytes is the largest result file Import reads: it is refused, unread, when larger.
	// An honest file is far smaller (vllm bench serve --save-detailed with 10,000 prompts of
	// 1,000 output tokens is about 200 MB of per-token latencies only with more of both).
	MaxImportBytes = 256 << 20
	// MaxImportRecords is the most results one file may hold (JSONL lines, array elements,
	// printed summaries, nccl-tests runs): a sweep has tens, never tens of thousands.
	MaxImportRecords = 10_000
	// MaxImportCount bounds every count: requests, tokens, prompts, concurrency, lengths,
	// nccl-tests sizes and element counts (10^12 tokens is far more than any benchmark run).
	MaxImportCount = 1_000_000_000_000
	// MaxImportSeconds bounds a benchmark's duration: 10^7 s is about 116 days.
	MaxImportSeconds = 1e7
)

// countKeys are the metric fields that count (requests, tokens, concurrency): whole numbers.
// Every Int field of Result is one; the list documents them.
var countKeys = map[string]bool{
	"completed": true, "failed": true, "total_input_tokens": true, "total_output_tokens": true,
	"max_concurrency": true, "max_concurrent_requests": true, "max_concurrent_requests_1s": true,
	"peak_in_flight": true,
}

// latencyKey tells a latency statistic (ms): a negative one is dropped with a warning by
// dropPlaceholderStats (a tool's placeholder), not refused.
func latencyKey(key string) bool {
	return strings.HasSuffix(key, "_ms")
}

// checkMetric checks value v of metric key (one of Result's fields) against its range.
func checkMetric(key string, v float64, isInt bool) error {
	switch {
	case isInt || countKeys[key]:
		return domain.Count(v, MaxImportCount)
	case key == "duration":
		return domain.Seconds(v, MaxImportSeconds)
	case latencyKey(key):
		return domain.Measured(v, false)
	}
	if err := domain.Measured(v, false); err != nil {
		return err
	}
	if v < 0 {
		return fmt.Errorf("%g is negative; %s is >= 0", v, key)
	}
	return nil
}

// fail records the first range error of the result being imported, naming the source field.
func (im *importer) fail(field string, err error) {
	if im.err == nil {
		im.err = fmt.Errorf("%s: %w", field, err)
	}
}

// count reads a count (a whole number in [0, max]) from v, given as a JSON number or a numeric
// string; ok is false when v is absent, null or not a number. A number outside the range is a
// range error of field.
func (im *importer) count(field string, v any, max int64) (int, bool) {
	n, ok, err := countOf(v, max)
	if err != nil {
		im.fail(field, err)
		return 0, false
	}
	return n, ok
}

// countOf is count without an importer: the error says what is wrong with the value.
func countOf(v any, max int64) (int, bool, error) {
	f, ok, nf := num(v)
	if nf != "" {
		return 0, false, fmt.Errorf("%s is not a finite number", nf)
	}
	if !ok {
		s, isStr := v.(string)
		if !isStr {
			return 0, false, nil
		}
		n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
		if err != nil {
			return 0, false, nil
		}
		f = float64(n)
	}
	if err := domain.Count(f, max); err != nil {
		return 0, false, err
	}
	return int(f), true, nil
}

// measured reads a finite number >= 0 of at most domain.MaxMagnitude (a rate, a bandwidth, a
// time); ok is false when v is absent, null or not a number.
func (im *importer) measured(field string, v any) (float64, bool) {
	f, ok, err := nonNegative(v)
	if err != nil {
		im.fail(field, err)
		return 0, false
	}
	return f, ok
}

// nonNegative is measured without an importer.
func nonNegative(v any) (float64, bool, error) {
	f, ok, nf := num(v)
	if nf != "" {
		return 0, false, fmt.Errorf("%s is not a finite number", nf)
	}
	if !ok {
		return 0, false, nil
	}
	if err := domain.Measured(f, false); err != nil {
		return 0, false, err
	}
	if f < 0 {
		return 0, false, fmt.Errorf("%g is negative; it is >= 0", f)
	}
	return f, true, nil
}

// checkDetails checks the per-request arrays: lengths are counts, times finite and within
// domain.MaxMagnitude (an element that was not a number is NaN: not measured).
func checkDetails(d *Details) error {
	if d == nil {
		return nil
	}
	floatsOK := func(name string, xs []float64) error {
		for i, x := range xs {
			if math.IsNaN(x) {
				continue
			}
			if err := domain.Measured(x, false); err != nil {
				return fmt.Errorf("%s[%d]: %w", name, i, err)
			}
		}
		return nil
	}
	for _, a := range []struct {
		name string
		xs   []float64
	}{{"ttfts", d.TTFTs}, {"latencies", d.Latencies}, {"start_times", d.StartTimes}} {
		if err := floatsOK(a.name, a.xs); err != nil {
			return err
		}
	}
	for i, xs := range d.ITLs {
		if err := floatsOK(fmt.Sprintf("itls[%d]", i), xs); err != nil {
			return err
		}
	}
	return nil
}

// checkResult checks every number of an imported result against its range: the metric fields
// that are not missing, extra, the workload settings and the nccl-tests rows. It is the last
// word for every format (reckon's own results are read by encoding/json, not by an importer).
func checkResult(r *Result) error {
	missing := map[string]bool{}
	for _, k := range r.Missing {
		missing[k] = true
	}
	if r.NCCL == nil {
		for _, f := range r.metricFields() {
			if missing[f.key] {
				continue
			}
			var v float64
			isInt := f.v.Kind() == reflect.Int
			if isInt {
				v = float64(f.v.Int())
			} else {
				v = f.v.Float()
			}
			if latencyKey(f.key) && v < 0 {
				return fmt.Errorf("%s: %g is negative; a latency is >= 0", f.key, v)
			}
			if err := checkMetric(f.key, v, isInt); err != nil {
				return fmt.Errorf("%s: %w", f.key, err)
			}
		}
	}
	for k, v := range r.Extra {
		if err := domain.Measured(v, false); err != nil {
			return fmt.Errorf("%s: %w", k, err)
		}
	}
	w := r.Metadata.Workload
	for _, c := range []struct {
		name string
		v    int
	}{{"num_prompts", w.NumPrompts}, {"max_concurrency", w.MaxConcurrency}, {"input_len", w.InputLen},
		{"output_len", w.OutputLen}, {"prefix_len", w.PrefixLen}, {"warmup", w.Warmup}} {
		if err := domain.Count(float64(c.v), MaxImportCount); err != nil {
			return fmt.Errorf("workload.%s: %w", c.name, err)
		}
	}
	for _, c := range []struct {
		name string
		v    float64
	}{{"request_rate", w.RequestRate}, {"burstiness", w.Burstiness}, {"range_ratio", w.RangeRatio}} {
		if err := domain.Measured(c.v, false); err != nil {
			return fmt.Errorf("workload.%s: %w", c.name, err)
		}
		if c.v < 0 {
			return fmt.Errorf("workload.%s: %g is negative; it is >= 0", c.name, c.v)
		}
	}
	if err := checkDetails(r.Details); err != nil {
		return err
	}
	if n := r.NCCL; n != nil {
		if err := domain.Measured(n.AvgBusBWGBps, false); err != nil || n.AvgBusBWGBps < 0 {
			return fmt.Errorf("avg_busbw_gbps: %g is not a bandwidth (finite, >= 0)", n.AvgBusBWGBps)
		}
		for i, row := range n.Rows {
			if row.SizeBytes < 0 || row.SizeBytes > MaxImportCount || row.Count < 0 || row.Count > MaxImportCount {
				return fmt.Errorf("row %d: size %d / count %d: a size and a count are in [0, %d]", i+1, row.SizeBytes, row.Count, int64(MaxImportCount))
			}
			for _, m := range []*NCCLMeasure{&row.OutOfPlace, row.InPlace} {
				if m == nil {
					continue
				}
				for _, x := range []struct {
					name string
					v    float64
				}{{"time", m.TimeUs}, {"algbw", m.AlgBWGBps}, {"busbw", m.BusBWGBps}} {
					if err := domain.Measured(x.v, false); err != nil || x.v < 0 {
						return fmt.Errorf("row %d (size %d): %s %g is outside [0, %g]", i+1, row.SizeBytes, x.name, x.v, float64(domain.MaxMagnitude))
					}
				}
				if m.Wrong != nil && (*m.Wrong < 0 || *m.Wrong > MaxImportCount) {
					return fmt.Errorf("row %d (size %d): #wrong %d is not a count in [0, %d]", i+1, row.SizeBytes, *m.Wrong, int64(MaxImportCount))
				}
			}
		}
	}
	return nil
}
