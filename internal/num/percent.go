package num

import (
	"errors"
	"regexp"
	"strconv"
	"strings"
)

// The errors of ParseFraction; callers phrase them for their field or flag.
var (
	// ErrNotFraction: the text is neither a percentage ("5%") nor a plain decimal number.
	ErrNotFraction = errors.New("expected a percentage such as 5% or a fraction such as 0.05")
	// ErrBareWhole: a number without "%" of 1 or more, which would be 100% or more; the writer
	// most likely meant a percentage ("5" for 5%).
	ErrBareWhole = errors.New("a number without % is a fraction and must be below 1")
)

// decimal is a plain decimal number, optionally signed and with an exponent: no hexadecimal,
// no underscores, no NaN or infinities.
var decimal = regexp.MustCompile(`^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$`)

// ParseDecimal reads a plain decimal number (the YAML 1.2 core-schema float syntax: "0.05",
// "1e-2", "-3"), rejecting what strconv.ParseFloat would also take (hexadecimal, underscores,
// NaN, infinities).
func ParseDecimal(s string) (float64, bool) {
	if !decimal.MatchString(s) {
		return 0, false
	}
	f, err := strconv.ParseFloat(s, 64)
	return f, err == nil
}

// ParseFraction is the harness's one reader of shares written by people (a spec's min_effect,
// reckon compare --min-effect, a CV in the environment): "5%" (spaces allowed around the number)
// or a plain fraction "0.05" both give 0.05. A plain number of 1 or more is ErrBareWhole, with
// the value read (so that callers can suggest "5%"); anything else ErrNotFraction. pct reports
// whether the text was a percentage. Ranges are the caller's to check.
func ParseFraction(s string) (f float64, pct bool, err error) {
	t := strings.TrimSpace(s)
	if rest, ok := strings.CutSuffix(t, "%"); ok {
		v, good := ParseDecimal(strings.TrimSpace(rest))
		if !good {
			return 0, true, ErrNotFraction
		}
		return v / 100, true, nil
	}
	v, good := ParseDecimal(t)
	if !good {
		return 0, false, ErrNotFraction
	}
	if v >= 1 {
		return v, false, ErrBareWhole
	}
	return v, false, nil
}
