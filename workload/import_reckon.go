// import_reckon.go holds the typed access to a decoded result map and the importer of
// reckon's own result format.

package workload

import (
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/reckon-ci/reckon/internal/domain"
)

// ---- typed access to the decoded map ----

// num reads a JSON number (or a non-finite sentinel). ok is false for absent, null or non-numbers.
func num(v any) (f float64, ok bool, nonFinite string) {
	switch x := v.(type) {
	case json.Number:
		f, err := x.Float64()
		return f, err == nil, ""
	case float64:
		return x, true, ""
	case string:
		switch x {
		case sentinelNaN:
			return math.NaN(), false, "NaN"
		case sentinelPosInf:
			return math.Inf(1), false, "Infinity"
		case sentinelNegInf:
			return math.Inf(-1), false, "-Infinity"
		}
	}
	return 0, false, ""
}

// metricSetters maps Result metric keys to their fields.
func (r *Result) metricSetters() map[string]reflect.Value {
	out := map[string]reflect.Value{}
	for _, f := range r.metricFields() {
		out[f.key] = f.v
	}
	return out
}

// importer accumulates one imported result and remembers which metrics were set.
type importer struct {
	r       *Result
	setters map[string]reflect.Value
	set     map[string]bool
	unknown []string
	// err is the first value outside its range (see checkMetric), naming the source field.
	err error
}

func newImporter(format, tool string) *importer {
	r := &Result{Schema: ResultSchema}
	r.Metadata.SourceFormat = format
	r.Metadata.Tool = tool
	return &importer{r: r, setters: r.metricSetters(), set: map[string]bool{}}
}

// metric sets our metric key from a source value (src names the source key in warnings).
func (im *importer) metric(key, src string, v any) {
	f, ok, nf := num(v)
	if nf != "" {
		im.r.warnf("%s is %s in the source: reported as missing", src, nf)
		return
	}
	if !ok {
		if v != nil {
			im.r.warnf("%s: expected a number, got %v: reported as missing", src, v)
		}
		return
	}
	fv, has := im.setters[key]
	if !has {
		im.extra(key, f)
		return
	}
	if err := checkMetric(key, f, fv.Kind() == reflect.Int); err != nil {
		im.fail(src, err)
		return
	}
	if fv.Kind() == reflect.Int {
		fv.SetInt(int64(f))
	} else {
		fv.SetFloat(f)
	}
	im.set[key] = true
}

func (im *importer) extra(key string, f float64) {
	if err := domain.Measured(f, false); err != nil {
		im.fail(key, err)
		return
	}
	if im.r.Extra == nil {
		im.r.Extra = map[string]float64{}
	}
	im.r.Extra[key] = f
}

// result is finish, or the first range error met while importing.
func (im *importer) result() (*Result, error) {
	r := im.finish()
	if im.err != nil {
		return nil, im.err
	}
	return r, nil
}

// finish marks every metric that was not set as missing and reports unknown keys.
func (im *importer) finish() *Result {
	for _, f := range im.r.metricFields() {
		if !im.set[f.key] {
			im.r.setMissing(f.key)
		}
	}
	sort.Strings(im.r.Missing)
	if len(im.unknown) > 0 {
		sort.Strings(im.unknown)
		im.r.warnf("unknown fields (kept in extra when numeric, labels when text): %s", strings.Join(im.unknown, ", "))
	}
	return im.r
}

func str(v any) string {
	switch x := v.(type) {
	case string:
		if strings.HasPrefix(x, sentinelPrefix) {
			return strings.TrimPrefix(x, sentinelPrefix)
		}
		return x
	case json.Number:
		return x.String()
	case bool:
		return strconv.FormatBool(x)
	}
	return ""
}

// requestRate reads a request rate: a number, "inf", or Infinity; 0 means all at once.
func requestRate(v any) (float64, bool) {
	if f, ok, nf := num(v); ok {
		return f, true
	} else if nf == "Infinity" {
		return 0, true
	}
	if s, ok := v.(string); ok && strings.EqualFold(strings.TrimSpace(s), "inf") {
		return 0, true
	}
	return 0, false
}

func floats(v any) ([]float64, bool) {
	arr, ok := v.([]any)
	if !ok {
		return nil, false
	}
	out := make([]float64, 0, len(arr))
	for _, x := range arr {
		f, ok, _ := num(x)
		if !ok {
			f = math.NaN()
		}
		out = append(out, f)
	}
	return out, true
}

// details reads vLLM/SGLang per-request arrays (seconds), when present.
func (im *importer) details(o map[string]any, used map[string]bool) {
	keys := []string{"input_lens", "output_lens", "ttfts", "itls", "latencies", "start_times", "errors", "generated_texts"}
	present := false
	for _, k := range keys {
		if _, ok := o[k]; ok {
			present = true
			used[k] = true
		}
	}
	if !present {
		return
	}
	d := &Details{}
	toInts := func(name string, v any) []int {
		fs, _ := floats(v)
		out := make([]int, len(fs))
		for i, f := range fs {
			if math.IsNaN(f) {
				continue
			}
			if err := domain.Count(f, MaxImportCount); err != nil {
				im.fail(fmt.Sprintf("%s[%d]", name, i), err)
				return nil
			}
			out[i] = int(f)
		}
		return out
	}
	d.InputLens = toInts("input_lens", o["input_lens"])
	d.OutputLens = toInts("output_lens", o["output_lens"])
	d.TTFTs, _ = floats(o["ttfts"])
	d.Latencies, _ = floats(o["latencies"])
	d.StartTimes, _ = floats(o["start_times"])
	if arr, ok := o["itls"].([]any); ok {
		for _, x := range arr {
			fs, _ := floats(x)
			d.ITLs = append(d.ITLs, fs)
		}
	}
	if arr, ok := o["errors"].([]any); ok {
		for _, x := range arr {
			d.Errors = append(d.Errors, str(x))
		}
	}
	im.r.Details = d
}

// statKey matches "<stat>_<metric>_ms" keys such as p99.9_ttft_ms or p50_itl_ms.
func statKey(k string) bool {
	if !strings.HasSuffix(k, "_ms") {
		return false
	}
	for _, m := range []string{"_ttft_ms", "_tpot_ms", "_itl_ms", "_e2el_ms", "_e2e_latency_ms"} {
		if strings.HasSuffix(k, m) {
			return true
		}
	}
	return false
}

// importReckon reads reckon's own result file.
func importReckon(o map[string]any) (*Result, error) {
	raw, err := json.Marshal(o)
	if err != nil {
		return nil, fmt.Errorf("reckon result: %w", err)
	}
	var r Result
	if err := json.Unmarshal(raw, &r); err != nil {
		return nil, fmt.Errorf("reckon result: %w", err)
	}
	// A metric key the file does not have (written by an older reckon) is missing, never 0.
	for _, k := range MetricKeys() {
		if _, ok := o[k]; !ok && r.NCCL == nil {
			r.setMissing(k)
		}
	}
	if r.Metadata.Semantics == nil && r.Metadata.Tool == "reckon" {
		// Written before results recorded their definitions: max_concurrent_requests was then
		// the busiest whole second, now max_concurrent_requests_1s.
		s := ReckonSemantics(r.Metadata.ToolVersion)
		s.Basis = "a reckon result written before semantics were recorded: that reckon's definitions"
		s.PeakConcurrency = DefPeakBusiestSecond
		r.Metadata.Semantics = s
		if !slices.Contains(r.Missing, "max_concurrent_requests") {
			r.MaxConcurrentRequests1s, r.MaxConcurrentRequests = r.MaxConcurrentRequests, 0
			r.Missing = slices.DeleteFunc(r.Missing, func(k string) bool { return k == "max_concurrent_requests_1s" })
			r.setMissing("max_concurrent_requests")
			r.warnf("max_concurrent_requests of this older reckon result is the busiest-second figure: read as max_concurrent_requests_1s")
		}
	}
	return &r, nil
}
