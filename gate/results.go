package gate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/reckon-ci/reckon/spec"
	"io"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/reckon-ci/reckon/internal/domain"
	"github.com/reckon-ci/reckon/internal/num"
	"github.com/reckon-ci/reckon/internal/safefile"
	"github.com/reckon-ci/reckon/internal/strictjson"
)

// WriteResults writes r as results.json: indented JSON, lossless; a check that did not pass and
// has no category is written with its derived one (Check.EffectiveCategory). Numbers that JSON cannot hold
// (NaN, +Inf, -Inf) are written as the strings "NaN", "+Inf" and "-Inf" and read back as numbers
// by ReadResults, so a failed trial's NaN survives the round trip.
func WriteResults(w io.Writer, r *Run) error {
	if r == nil {
		return errors.New("write results JSON: nil run")
	}
	cp := *r
	if cp.Schema == "" {
		cp.Schema = ResultsSchema
	}
	// Every check that did not pass carries its category, derived when its judge set none.
	cp.Checks = make([]Check, len(r.Checks))
	copy(cp.Checks, r.Checks)
	if r.Checks == nil {
		cp.Checks = nil
	}
	for i := range cp.Checks {
		if cp.Checks[i].Category == "" {
			cp.Checks[i].Category = cp.Checks[i].EffectiveCategory()
		}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(&cp); err != nil {
		return fmt.Errorf("write results JSON: %w", err)
	}
	return nil
}

// MaxResultsBytes bounds the size of a results.json that ReadResults reads.
const MaxResultsBytes = 256 << 20

// ReadResults reads a results.json written by WriteResults. Corrupt JSON, a wrong type and a schema
// this version does not read are reported with the file name, the line and column, and what was
// expected.
func ReadResults(path string) (*Run, error) {
	// Never blocks: a FIFO at the path (a shard's directory is written by the shard job) is
	// refused, as is anything else not a regular file.
	data, err := safefile.ReadNamed(path, MaxResultsBytes)
	if err != nil {
		if errors.Is(err, safefile.ErrTooLarge) {
			return nil, fmt.Errorf("%s: larger than the %d MiB a results file may have", path, MaxResultsBytes>>20)
		}
		return nil, fmt.Errorf("read results: %w", err)
	}
	r, err := DecodeResults(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return r, nil
}

// DecodeResults parses the content of a results.json (see ReadResults).
func DecodeResults(data []byte) (*Run, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, fmt.Errorf("empty file: expected a reckon results JSON object (schema %s)", ResultsSchema)
	}
	var probe struct {
		Schema *string `json:"schema"`
	}
	if err := json.Unmarshal(data, &probe); err != nil {
		return nil, jsonError(data, err)
	}
	if err := duplicateKeyError(data); err != nil {
		return nil, err
	}
	switch {
	case probe.Schema == nil:
		return nil, fmt.Errorf(`no "schema" field: not a reckon results file (expected "schema": %q)`, ResultsSchema)
	case *probe.Schema == ResultsSchema, *probe.Schema == ResultsSchemaV1:
	case strings.HasPrefix(*probe.Schema, "reckon.results/"):
		return nil, fmt.Errorf(`field "schema": %q is not supported by this reckon, which reads %q and %q`, *probe.Schema, ResultsSchema, ResultsSchemaV1)
	default:
		return nil, fmt.Errorf(`field "schema": %q is not a reckon results file (expected %q)`, *probe.Schema, ResultsSchema)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	var in runIn
	if err := dec.Decode(&in); err != nil {
		return nil, jsonError(data, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		line, col := strictjson.LineCol(data, int(dec.InputOffset()))
		return nil, fmt.Errorf("line %d, column %d: unexpected data after the results object", line, col)
	}
	r, err := in.run()
	if err != nil {
		return nil, err
	}
	// Read, a run is the current results model whatever schema it was written in, and is
	// written again as such.
	r.Schema = ResultsSchema
	return r, nil
}

// freeFormFields are the fields of results and baselines whose objects are maps (free-form
// keys, compared exactly when looking for duplicates) rather than structs.
var freeFormFields = map[string]bool{"testbed": true, "engine": true, "baseline_engine": true, "metrics": true, "definition": true}

// duplicateKeyError refuses a document (already parsed as JSON) with a key repeated in one
// object: encoding/json would keep the last silently, so that appending `,"configs":[]` to a
// red results.json would read as a run that judged nothing.
func duplicateKeyError(data []byte) error {
	p, ok := strictjson.DuplicateKey(data, func(field string) bool { return freeFormFields[field] })
	if !ok {
		return nil
	}
	return fmt.Errorf("line %d, column %d: field %q: %s", p.Line, p.Column, p.Path, p.Msg)
}

// jsonError turns a decoding error into one that names the line, column and field.
func jsonError(data []byte, err error) error {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		line, col := strictjson.LineCol(data, int(se.Offset))
		return fmt.Errorf("line %d, column %d: invalid JSON: %v", line, col, se)
	case errors.As(err, &te):
		line, col := strictjson.LineCol(data, int(te.Offset))
		field := wireSegment.ReplaceAllString(te.Field, "")
		if field == "" {
			field = "(top level)"
		}
		return fmt.Errorf("line %d, column %d: field %q: expected %s, found JSON %s", line, col, field, te.Type, te.Value)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return fmt.Errorf("truncated JSON (unexpected end of file): %w", err)
	}
	return fmt.Errorf("invalid results JSON: %w", err)
}

// jfloat is a float64 that JSON-encodes NaN and infinities as strings instead of failing.
type jfloat float64

// MarshalJSON implements json.Marshaler.
func (f jfloat) MarshalJSON() ([]byte, error) {
	return num.AppendJSON(nil, float64(f)), nil
}

// UnmarshalJSON implements json.Unmarshaler.
func (f *jfloat) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		v, err := num.ParseNonFinite(s)
		if err != nil {
			return err
		}
		*f = jfloat(v)
		return nil
	}
	v, err := strconv.ParseFloat(string(b), 64)
	if err != nil {
		return fmt.Errorf("expected a number, found %s", b)
	}
	*f = jfloat(v)
	return nil
}

func toJMap(m map[string]float64) map[string]jfloat {
	if m == nil {
		return nil
	}
	out := make(map[string]jfloat, len(m))
	for k, v := range m {
		out[k] = jfloat(v)
	}
	return out
}

func fromJMap(m map[string]jfloat) map[string]float64 {
	if m == nil {
		return nil
	}
	out := make(map[string]float64, len(m))
	for k, v := range m {
		out[k] = float64(v)
	}
	return out
}

func toJPtr(p *float64) *jfloat {
	if p == nil {
		return nil
	}
	v := jfloat(*p)
	return &v
}

func fromJPtr(p *jfloat) *float64 {
	if p == nil {
		return nil
	}
	v := float64(*p)
	return &v
}

// JSONSafe returns v with every non-finite float inside a JSON-shaped value replaced by one
// that encodes as a string, so that encoding does not fail (they come back as the strings "NaN", "+Inf", "-Inf").
func JSONSafe(v any) any {
	switch x := v.(type) {
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return jfloat(x)
		}
		return x
	case float32:
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			return jfloat(x)
		}
		return x
	case map[string]any:
		if x == nil {
			return x
		}
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = JSONSafe(e)
		}
		return out
	case []any:
		if x == nil {
			return x
		}
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = JSONSafe(e)
		}
		return out
	}
	return v
}

func jsonSafeMap(m map[string]any) map[string]any {
	if m == nil {
		return nil
	}
	return JSONSafe(m).(map[string]any)
}

type trialJSON Trial

// MarshalJSON implements json.Marshaler (non-finite metrics as strings).
func (t Trial) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		trialJSON
		Metrics map[string]jfloat `json:"metrics"`
	}{trialJSON(t), toJMap(t.Metrics)})
}

type configJSON Config

// MarshalJSON implements json.Marshaler (non-finite numbers as strings).
func (c Config) MarshalJSON() ([]byte, error) {
	var peaks []jfloat
	if c.GPUPeakMiB != nil {
		peaks = make([]jfloat, len(c.GPUPeakMiB))
		for i, v := range c.GPUPeakMiB {
			peaks[i] = jfloat(v)
		}
	}
	c.Engine = jsonSafeMap(c.Engine)
	c.BaselineEngine = jsonSafeMap(c.BaselineEngine)
	return json.Marshal(struct {
		configJSON
		GPUPeakMiB []jfloat `json:"gpu_peak_mib,omitempty"`
	}{configJSON(c), peaks})
}

type checkJSON Check

// MarshalJSON implements json.Marshaler (non-finite metrics as strings; the duration also in
// seconds for readers, which ReadResults ignores). A statistical check's whole result is at
// "stat" (StatResult writes its non-finite numbers as null).
func (c Check) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		checkJSON
		Metrics   map[string]jfloat `json:"metrics,omitempty"`
		DurationS float64           `json:"duration_s"`
	}{checkJSON(c), toJMap(c.Metrics), c.Duration.Seconds()})
}

// wireSegment matches the names of the decoding structs that error paths mention.
var wireSegment = regexp.MustCompile(`\.?[a-z]+(JSON|In)\b`)

// The decoding mirror of Run: numbers that WriteJSON may have written as strings ("NaN", "+Inf",
// "-Inf") are read as any and converted, so that type errors elsewhere keep their position.
type runIn struct {
	runJSON
	Configs []configIn `json:"configs"`
	Checks  []checkIn  `json:"checks"`
}

type runJSON Run

type configIn struct {
	configJSON
	Trials     []trialIn `json:"trials,omitempty"`
	GPUPeakMiB []any     `json:"gpu_peak_mib,omitempty"`
}

type trialIn struct {
	trialJSON
	Metrics map[string]any `json:"metrics"`
}

type checkIn struct {
	checkJSON
	Metrics   map[string]any `json:"metrics,omitempty"`
	DurationS *float64       `json:"duration_s"`
	// The statistics summary of schema v1 (ResultsSchemaV1), read into Stat.
	Metric     string `json:"metric,omitempty"`
	BaseMedian any    `json:"base_median,omitempty"`
	HeadMedian any    `json:"head_median,omitempty"`
	Ratio      any    `json:"ratio,omitempty"`
	CILow      any    `json:"ci_low,omitempty"`
	CIHigh     any    `json:"ci_high,omitempty"`
	PValue     any    `json:"p_value,omitempty"`
}

// v1Stat turns a schema v1 check's statistics summary and statistical outcome (regression,
// no_change, improvement, inconclusive) into the whole-result form of v2: Stat holds what v1
// kept, and Outcome becomes the verdict's (fail, pass, inconclusive).
func (ci *checkIn) v1Stat(c *Check, p string) error {
	stat := ci.Metric != "" || c.Kind == string(spec.KindThroughput) || c.Kind == string(spec.KindLatency)
	for _, v := range []any{ci.BaseMedian, ci.HeadMedian, ci.Ratio, ci.CILow, ci.CIHigh, ci.PValue} {
		stat = stat || v != nil
	}
	switch StatOutcome(c.Outcome) {
	case Regression, Improvement, NoChange:
		stat = true
	}
	if !stat {
		return nil
	}
	nan := math.NaN() // what v1 did not record
	st := &StatResult{Metric: ci.Metric, BaseMedian: nan, HeadMedian: nan, Ratio: nan, CILow: nan, CIHigh: nan, PValue: nan}
	for _, f := range []struct {
		dst  *float64
		v    any
		name string
	}{{&st.BaseMedian, ci.BaseMedian, "base_median"}, {&st.HeadMedian, ci.HeadMedian, "head_median"}, {&st.Ratio, ci.Ratio, "ratio"},
		{&st.CILow, ci.CILow, "ci_low"}, {&st.CIHigh, ci.CIHigh, "ci_high"}, {&st.PValue, ci.PValue, "p_value"}} {
		v, err := anyFloatPtr(f.v, p+"."+f.name)
		if err != nil {
			return err
		}
		if v != nil {
			*f.dst = *v
		}
	}
	switch o := StatOutcome(c.Outcome); o {
	case Regression, Improvement, NoChange, Undecided, StatError:
		st.Outcome = o
		c.Outcome = o.Verdict()
	}
	c.Stat = st
	return nil
}

// anyFloat converts a decoded JSON value to a float64: a number, or "NaN", "+Inf", "-Inf".
// A finite number outside the range of a measurement (domain.Measured) is an error.
func anyFloat(v any, field string) (float64, error) {
	switch x := v.(type) {
	case float64:
		if err := domain.Measured(x, true); err != nil {
			return 0, fmt.Errorf("field %q: %w", field, err)
		}
		return x, nil
	case string:
		var f jfloat
		q, _ := json.Marshal(x)
		if err := f.UnmarshalJSON(q); err != nil {
			return 0, fmt.Errorf("field %q: %w", field, err)
		}
		return float64(f), nil
	}
	return 0, fmt.Errorf("field %q: expected a number, NaN, +Inf or -Inf, found %s", field, jsonKind(v))
}

func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case map[string]any:
		return "an object"
	case []any:
		return "an array"
	}
	return fmt.Sprintf("%T", v)
}

func anyFloatPtr(v any, field string) (*float64, error) {
	if v == nil {
		return nil, nil
	}
	f, err := anyFloat(v, field)
	if err != nil {
		return nil, err
	}
	return &f, nil
}

func anyMetrics(m map[string]any, field string) (map[string]float64, error) {
	if m == nil {
		return nil, nil
	}
	out := make(map[string]float64, len(m))
	for k, v := range m {
		f, err := anyFloat(v, field+"."+k)
		if err != nil {
			return nil, err
		}
		out[k] = f
	}
	return out, nil
}

// measuredTree checks every number inside a decoded JSON value (an engine report) against
// domain.Measured.
func measuredTree(v any, field string) error {
	switch x := v.(type) {
	case float64:
		if err := domain.Measured(x, true); err != nil {
			return fmt.Errorf("field %q: %w", field, err)
		}
	case map[string]any:
		for _, k := range sortedKeys(x) {
			if err := measuredTree(x[k], field+"."+k); err != nil {
				return err
			}
		}
	case []any:
		for i, e := range x {
			if err := measuredTree(e, fmt.Sprintf("%s[%d]", field, i)); err != nil {
				return err
			}
		}
	}
	return nil
}

func (in *runIn) run() (*Run, error) {
	r := Run(in.runJSON)
	r.Configs, r.Checks = nil, nil
	if in.Configs != nil {
		r.Configs = make([]Config, len(in.Configs))
	}
	for i := range in.Configs {
		ci := &in.Configs[i]
		c := Config(ci.configJSON)
		c.Trials, c.GPUPeakMiB = nil, nil
		if ci.Trials != nil {
			c.Trials = make([]Trial, len(ci.Trials))
		}
		for j := range ci.Trials {
			t := Trial(ci.Trials[j].trialJSON)
			m, err := anyMetrics(ci.Trials[j].Metrics, fmt.Sprintf("configs[%d].trials[%d].metrics", i, j))
			if err != nil {
				return nil, err
			}
			t.Metrics = m
			c.Trials[j] = t
		}
		if ci.GPUPeakMiB != nil {
			c.GPUPeakMiB = make([]float64, len(ci.GPUPeakMiB))
			for j, v := range ci.GPUPeakMiB {
				f, err := anyFloat(v, fmt.Sprintf("configs[%d].gpu_peak_mib[%d]", i, j))
				if err != nil {
					return nil, err
				}
				c.GPUPeakMiB[j] = f
			}
		}
		for _, m := range []struct {
			name string
			v    map[string]any
		}{{"engine", c.Engine}, {"baseline_engine", c.BaselineEngine}} {
			if err := measuredTree(m.v, fmt.Sprintf("configs[%d].%s", i, m.name)); err != nil {
				return nil, err
			}
		}
		r.Configs[i] = c
	}
	if in.Checks != nil {
		r.Checks = make([]Check, len(in.Checks))
	}
	for i := range in.Checks {
		ci := &in.Checks[i]
		c := Check(ci.checkJSON)
		p := fmt.Sprintf("checks[%d]", i)
		var err error
		if c.Metrics, err = anyMetrics(ci.Metrics, p+".metrics"); err != nil {
			return nil, err
		}
		for j, v := range c.Trend {
			if err := domain.Measured(v, true); err != nil {
				return nil, fmt.Errorf("field %q: %w", fmt.Sprintf("%s.trend[%d]", p, j), err)
			}
		}
		if r.Schema == ResultsSchemaV1 {
			if err := ci.v1Stat(&c, p); err != nil {
				return nil, err
			}
		}
		if c.Category == "" {
			// Written before categories existed (or by hand): derived as the run judged it then.
			c.Category = c.EffectiveCategory()
		}
		if c.Duration == 0 && ci.DurationS != nil {
			// Hand-written files may give only seconds.
			c.Duration = time.Duration(*ci.DurationS * float64(time.Second))
		}
		r.Checks[i] = c
	}
	return &r, nil
}
