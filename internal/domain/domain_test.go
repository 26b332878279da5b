package domain

import (
	"math"
	"strings"
	"testing"
)

func TestMeasured(t *testing.T) {
	for _, tc := range []struct {
		v       float64
		nonFin  bool
		wantErr string
	}{
		{0, false, ""}, {-3.5, false, ""}, {1e15, false, ""}, {-1e15, false, ""},
		{1.5e308, false, "outside the range"}, {math.MaxFloat64, true, "outside the range"}, {-2e15, false, "outside the range"},
		{math.NaN(), false, "not a finite"}, {math.Inf(1), false, "not a finite"},
		{math.NaN(), true, ""}, {math.Inf(-1), true, ""},
	} {
		err := Measured(tc.v, tc.nonFin)
		if (err == nil) != (tc.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
			t.Errorf("Measured(%v, %v) = %v, want %q", tc.v, tc.nonFin, err, tc.wantErr)
		}
	}
}

func TestCountAndSeconds(t *testing.T) {
	for _, tc := range []struct {
		v    float64
		want string
	}{{0, ""}, {7, ""}, {1e300, "more than"}, {-1, "negative"}, {1.5, "whole number"}, {math.NaN(), "finite"}} {
		if err := Count(tc.v, 1<<40); (err == nil) != (tc.want == "") || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("Count(%v) = %v, want %q", tc.v, err, tc.want)
		}
	}
	for _, tc := range []struct {
		v    float64
		want string
	}{{0, ""}, {3.25, ""}, {-0.5, "negative"}, {1e9, "more than"}, {math.Inf(1), "finite"}} {
		if err := Seconds(tc.v, 86400); (err == nil) != (tc.want == "") || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("Seconds(%v) = %v, want %q", tc.v, err, tc.want)
		}
	}
}
