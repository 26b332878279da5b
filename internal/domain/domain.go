// Package domain states the physical range of every number reckon reads from a file it did not
// just write (a results.json, a baseline, the history, a spec): one place, so that the readers
// agree and so that charts and statistics never see a value outside it. A value outside its
// range is an error of the file and field it came from, never something to render.
package domain

import (
	"fmt"
	"math"
)

// MaxMagnitude bounds the absolute value of any measured number reckon accepts: throughput
// (tokens/s), latency (ms), memory (GiB, MiB, bytes of a KV cache), counts and ratios are all
// far below it. A finite value above it (1e308, which overflows every sum and chart axis) is a
// corrupt or hostile file, not a measurement.
const MaxMagnitude = 1e15

// Measured checks one measured value: NaN and infinities are allowed only when allowNonFinite
// (results.json writes a metric that could not be computed as "NaN"); a finite value must lie
// within ±MaxMagnitude. The error says what is wrong; callers prefix the file and field.
func Measured(v float64, allowNonFinite bool) error {
	switch {
	case math.IsNaN(v) || math.IsInf(v, 0):
		if allowNonFinite {
			return nil
		}
		return fmt.Errorf("%v is not a finite number", v)
	case math.Abs(v) > MaxMagnitude:
		return fmt.Errorf("%g is outside the range of a measurement (|value| <= %g)", v, MaxMagnitude)
	}
	return nil
}

// Count checks a count read from a file: a finite, non-negative integer of at most max.
func Count(v float64, max int64) error {
	switch {
	case math.IsNaN(v) || math.IsInf(v, 0):
		return fmt.Errorf("%v is not a finite number", v)
	case v < 0:
		return fmt.Errorf("%g is negative; a count is >= 0", v)
	case v != math.Trunc(v):
		return fmt.Errorf("%g is not a whole number; a count is an integer", v)
	case v > float64(max):
		return fmt.Errorf("%g is more than %d", v, max)
	}
	return nil
}

// Seconds checks a duration in seconds read from a file: finite, non-negative and at most max.
func Seconds(v, max float64) error {
	switch {
	case math.IsNaN(v) || math.IsInf(v, 0):
		return fmt.Errorf("%v is not a finite number", v)
	case v < 0:
		return fmt.Errorf("%gs is negative; a duration is >= 0", v)
	case v > max:
		return fmt.Errorf("%gs is more than %gs", v, max)
	}
	return nil
}
