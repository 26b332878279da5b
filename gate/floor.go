package gate

import (
	"fmt"
	"strings"

	"github.com/reckon-ci/reckon/internal/num"
)

// Floor checks an absolute bound on one number the engine reported: value >= *min and
// value <= *max (either bound may be nil). A nil value is an error verdict: the engine did not
// report the metric, so the floor cannot be judged (it is never a silent pass).
func Floor(name, metric string, value *float64, min, max *float64) Verdict {
	v := Verdict{Name: name, Metrics: map[string]float64{}}
	if min == nil && max == nil {
		v.Outcome, v.Category = Error, CategoryUnverified
		v.Message = fmt.Sprintf("%s: floor on %s has neither a minimum nor a maximum", name, metric)
		return v
	}
	if min != nil {
		v.Metrics[metric+".min"] = *min
	}
	if max != nil {
		v.Metrics[metric+".max"] = *max
	}
	if value == nil {
		v.Outcome, v.Category = Error, CategoryUnverified
		v.Message = fmt.Sprintf("%s: engine log did not report %s", name, metric)
		v.Details = "The floor cannot be judged without the value. Check that the engine's log format is " +
			"supported and that the engine started far enough to print it."
		return v
	}
	x := *value
	v.Metrics[metric] = x
	var broken []string
	if min != nil && !(x >= *min) {
		broken = append(broken, fmt.Sprintf("%s %s < minimum %s", metric, num.Format(x), num.Format(*min)))
	}
	if max != nil && !(x <= *max) {
		broken = append(broken, fmt.Sprintf("%s %s > maximum %s", metric, num.Format(x), num.Format(*max)))
	}
	if len(broken) > 0 {
		v.Outcome, v.Category = Fail, CategoryBrokenInvariant
		v.Message = name + ": " + strings.Join(broken, "; ")
		return v
	}
	v.Outcome = Pass
	v.Message = fmt.Sprintf("%s: %s %s within %s", name, metric, num.Format(x), boundsText(min, max))
	return v
}

// Relative checks value against the same metric of another configuration of the run:
// value/other must lie within [*minRatio, *maxRatio] (either bound may be nil). For example
// kv_cache_tokens of custom-ar >= 0.9 x nccl's is Relative(name, "kv_cache_tokens", car, nccl,
// "nccl", &0.9, nil). A missing value on either side is an error, a zero reference value too
// (the ratio is undefined).
func Relative(name, metric string, value, other *float64, otherConfig string, minRatio, maxRatio *float64) Verdict {
	v := Verdict{Name: name, Against: otherConfig, Metrics: map[string]float64{}}
	if minRatio == nil && maxRatio == nil {
		v.Outcome, v.Category = Error, CategoryUnverified
		v.Message = fmt.Sprintf("%s: relative check on %s has neither a minimum nor a maximum ratio", name, metric)
		return v
	}
	if minRatio != nil {
		v.Metrics["ratio.min"] = *minRatio
	}
	if maxRatio != nil {
		v.Metrics["ratio.max"] = *maxRatio
	}
	switch {
	case value == nil:
		v.Outcome, v.Category = Error, CategoryUnverified
		v.Message = fmt.Sprintf("%s: engine log did not report %s", name, metric)
		return v
	case other == nil:
		v.Outcome, v.Category = Error, CategoryUnverified
		v.Message = fmt.Sprintf("%s: engine log of %s did not report %s", name, otherConfig, metric)
		return v
	case *other == 0:
		v.Outcome, v.Category = Error, CategoryUnverified
		v.Message = fmt.Sprintf("%s: %s of %s is 0, the ratio is undefined", name, metric, otherConfig)
		return v
	}
	ratio := *value / *other
	v.Metrics[metric] = *value
	v.Metrics[metric+"."+otherConfig] = *other
	v.Metrics["ratio"] = ratio
	desc := fmt.Sprintf("%s %s vs %s %s (ratio %.3f, %s)", metric, num.Format(*value), otherConfig, num.Format(*other), ratio, num.Pct(ratio-1))
	var broken []string
	if minRatio != nil && !(ratio >= *minRatio) {
		broken = append(broken, fmt.Sprintf("below %.3gx", *minRatio))
	}
	if maxRatio != nil && !(ratio <= *maxRatio) {
		broken = append(broken, fmt.Sprintf("above %.3gx", *maxRatio))
	}
	if len(broken) > 0 {
		v.Outcome, v.Category = Fail, CategoryRegression
		v.Message = fmt.Sprintf("%s: %s: %s", name, desc, strings.Join(broken, ", "))
		return v
	}
	v.Outcome = Pass
	v.Message = fmt.Sprintf("%s: %s within %s", name, desc, ratioBoundsText(minRatio, maxRatio))
	return v
}

// ExpectEqual checks that a reported field has the expected value, e.g. the effective allreduce
// backend the engine logged equals "custom". An empty got means the engine did not report the
// field, which is an error rather than a mismatch.
func ExpectEqual(name, field, got, want string) Verdict {
	v := Verdict{Name: name}
	switch {
	case got == "":
		v.Outcome, v.Category = Error, CategoryUnverified
		v.Message = fmt.Sprintf("%s: engine did not report %s (expected %q)", name, field, want)
	case got != want:
		v.Outcome, v.Category = Fail, CategoryBrokenInvariant
		v.Message = fmt.Sprintf("%s: %s is %q, expected %q", name, field, got, want)
	default:
		v.Outcome = Pass
		v.Message = fmt.Sprintf("%s: %s is %q as expected", name, field, got)
	}
	return v
}

func boundsText(min, max *float64) string {
	switch {
	case min != nil && max != nil:
		return fmt.Sprintf("[%s, %s]", num.Format(*min), num.Format(*max))
	case min != nil:
		return fmt.Sprintf(">= %s", num.Format(*min))
	default:
		return fmt.Sprintf("<= %s", num.Format(*max))
	}
}

func ratioBoundsText(min, max *float64) string {
	switch {
	case min != nil && max != nil:
		return fmt.Sprintf("[%.3gx, %.3gx]", *min, *max)
	case min != nil:
		return fmt.Sprintf(">= %.3gx", *min)
	default:
		return fmt.Sprintf("<= %.3gx", *max)
	}
}
