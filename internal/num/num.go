// Package num holds the harness's small number helpers, shared by spec, gate, history, suites
// and reporters so that a value reads the same in every message and report: one compact
// formatter, one exact formatter, one percentage formatter, one median, and the one JSON form of
// NaN and the infinities.
package num

import (
	"fmt"
	"math"
	"slices"
	"strconv"
)

// Format formats a value compactly for one-line messages and reports: integers without
// decimals, others with one decimal from 100, two from 1 and three significant digits below;
// NaN and infinities by name.
func Format(v float64) string {
	if w, ok := whole(v); ok {
		return w
	}
	switch {
	case math.Abs(v) >= 100:
		return strconv.FormatFloat(v, 'f', 1, 64)
	case math.Abs(v) >= 1:
		return strconv.FormatFloat(v, 'f', 2, 64)
	default:
		return strconv.FormatFloat(v, 'g', 3, 64)
	}
}

// Exact formats a value the shortest way that reads back as the same float64 ("0.9", "10000",
// "1e-05"), for values a user wrote and for machine-readable properties.
func Exact(v float64) string {
	if w, ok := whole(v); ok {
		return w
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}

// whole formats what needs no digits after the point: NaN and infinities by name, integers
// without a decimal point.
func whole(v float64) (string, bool) {
	switch {
	case math.IsNaN(v):
		return "NaN", true
	case math.IsInf(v, 1):
		return "+Inf", true
	case math.IsInf(v, -1):
		return "-Inf", true
	case v == math.Trunc(v) && math.Abs(v) < 1e15:
		return strconv.FormatFloat(v, 'f', 0, 64), true
	}
	return "", false
}

// Pct formats a relative change given as a fraction (head/base - 1) as a signed percentage:
// -0.571 -> "-57%", 0.034 -> "+3.4%", 0.0042 -> "+0.4%"; "n/a" when it is not finite.
func Pct(change float64) string {
	p := change * 100
	switch a := math.Abs(p); {
	case math.IsNaN(p) || math.IsInf(p, 0):
		return "n/a"
	case a >= 10:
		return fmt.Sprintf("%+.0f%%", p)
	default:
		return fmt.Sprintf("%+.1f%%", p)
	}
}

// Median is the median of xs, which it does not modify; NaN for none.
func Median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return MedianSorted(s)
}

// MedianSorted is the median of an already sorted slice; NaN for none.
func MedianSorted(sorted []float64) float64 {
	n := len(sorted)
	if n == 0 {
		return math.NaN()
	}
	if n%2 == 1 {
		return sorted[n/2]
	}
	return (sorted[n/2-1] + sorted[n/2]) / 2
}
