package num

import (
	"fmt"
	"math"
	"strconv"
)

// The harness's JSON files (results.json, baselines) hold NaN and the infinities, which JSON
// numbers cannot, as the strings "NaN", "+Inf" and "-Inf".

// AppendJSON appends v to b as a JSON value: the shortest number that reads back as v, or, when
// v is not finite, the string "NaN", "+Inf" or "-Inf".
func AppendJSON(b []byte, v float64) []byte {
	switch {
	case math.IsNaN(v):
		return append(b, `"NaN"`...)
	case math.IsInf(v, 1):
		return append(b, `"+Inf"`...)
	case math.IsInf(v, -1):
		return append(b, `"-Inf"`...)
	}
	return strconv.AppendFloat(b, v, 'g', -1, 64)
}

// ParseNonFinite reads the string form of a non-finite number: "NaN", "+Inf" (or "Inf",
// "Infinity"), "-Inf" (or "-Infinity").
func ParseNonFinite(s string) (float64, error) {
	switch s {
	case "NaN":
		return math.NaN(), nil
	case "+Inf", "Inf", "Infinity":
		return math.Inf(1), nil
	case "-Inf", "-Infinity":
		return math.Inf(-1), nil
	}
	return 0, fmt.Errorf("expected a number, NaN, +Inf or -Inf, found %q", s)
}
