package gate

import (
	"encoding/json"
	"fmt"
	"math"

	"github.com/reckon-ci/reckon/internal/num"
)

// The JSON form of StatResult: lossless, with non-finite numbers as strings (internal/num).

// floatFields are the result's float fields by JSON key.
func (r *StatResult) floatFields() map[string]*float64 {
	return map[string]*float64{"base_median": &r.BaseMedian, "head_median": &r.HeadMedian, "ratio": &r.Ratio,
		"change": &r.Change, "worse": &r.Worse, "hl_ratio": &r.HLRatio, "ci_low": &r.CILow, "ci_high": &r.CIHigh,
		"ci_confidence": &r.CIConfidence, "p_worse": &r.PWorse, "p_better": &r.PBetter, "rank_p_worse": &r.RankPWorse,
		"rank_p_better": &r.RankPBetter, "adj_p_worse": &r.AdjPWorse, "adj_p_better": &r.AdjPBetter, "p_value": &r.PValue,
		"alpha": &r.Alpha, "min_effect": &r.MinEffect, "no_change_margin": &r.Margin, "rank_alpha": &r.RankAlpha}
}

// MarshalJSON writes the result with non-finite numbers (an error result's NaN ratio, for
// example) as the strings "NaN", "+Inf" and "-Inf", which encoding/json cannot otherwise
// encode; UnmarshalJSON reads them back, so the record is lossless.
func (r StatResult) MarshalJSON() ([]byte, error) {
	type plain StatResult
	data, err := json.Marshal(plain(r))
	if err == nil {
		return data, nil
	}
	clean := r
	bad := map[string]json.RawMessage{}
	for k, f := range clean.floatFields() {
		if math.IsNaN(*f) || math.IsInf(*f, 0) {
			bad[k] = num.AppendJSON(nil, *f)
			*f = 0
		}
	}
	var m map[string]any
	if data, err = json.Marshal(plain(clean)); err != nil {
		return nil, err
	}
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, err
	}
	for k, v := range bad {
		m[k] = v
	}
	return json.Marshal(m)
}

// UnmarshalJSON implements json.Unmarshaler, reading non-finite numbers written as strings
// (and null, which earlier versions wrote for them, as NaN).
func (r *StatResult) UnmarshalJSON(b []byte) error {
	type plain StatResult
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	special := map[string]float64{}
	for k := range r.floatFields() {
		v, ok := raw[k]
		if !ok {
			continue
		}
		var str string
		switch {
		case string(v) == "null":
			special[k] = math.NaN()
		case json.Unmarshal(v, &str) == nil:
			f, err := num.ParseNonFinite(str)
			if err != nil {
				return fmt.Errorf("field %q: %w", k, err)
			}
			special[k] = f
		default:
			continue
		}
		delete(raw, k)
	}
	clean, err := json.Marshal(raw)
	if err != nil {
		return err
	}
	var p plain
	if err := json.Unmarshal(clean, &p); err != nil {
		return err
	}
	*r = StatResult(p)
	fields := r.floatFields()
	for k, f := range special {
		*fields[k] = f
	}
	return nil
}
