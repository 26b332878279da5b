package num

import (
	"errors"
	"testing"
)

func TestParseFraction(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want float64
		pct  bool
		err  error
	}{
		{"5%", 0.05, true, nil},
		{" 2.5 % ", 0.025, true, nil},
		{"0.05", 0.05, false, nil},
		{"1e-2", 0.01, false, nil},
		{"0", 0, false, nil},
		{"-0.1", -0.1, false, nil},
		{"150%", 1.5, true, nil},
		{"5", 5, false, ErrBareWhole},
		{"1", 1, false, ErrBareWhole},
		{"abc", 0, false, ErrNotFraction},
		{"%", 0, true, ErrNotFraction},
		{"NaN%", 0, true, ErrNotFraction},
		{"Inf", 0, false, ErrNotFraction},
		{"0x1p-2", 0, false, ErrNotFraction},
		{"", 0, false, ErrNotFraction},
	} {
		f, pct, err := ParseFraction(tc.in)
		if !errors.Is(err, tc.err) || pct != tc.pct || (err == nil || tc.err == ErrBareWhole) && f != tc.want {
			t.Errorf("ParseFraction(%q) = %v, %v, %v; want %v, %v, %v", tc.in, f, pct, err, tc.want, tc.pct, tc.err)
		}
	}
}
