package num

import (
	"math"
	"testing"
)

func TestFormatters(t *testing.T) {
	for _, c := range []struct{ got, want string }{
		{Format(10000), "10000"}, {Format(123.456), "123.5"}, {Format(10.4234), "10.42"},
		{Format(0.12345), "0.123"}, {Format(math.NaN()), "NaN"},
		{Exact(0.9), "0.9"}, {Exact(1e-5), "1e-05"}, {Exact(3), "3"},
		{Pct(-0.571), "-57%"}, {Pct(0.034), "+3.4%"}, {Pct(0.0042), "+0.4%"}, {Pct(math.Inf(1)), "n/a"},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
	if m := Median([]float64{3, 1, 2, 10}); m != 2.5 {
		t.Errorf("median %v", m)
	}
	if !math.IsNaN(Median(nil)) {
		t.Error("median of none is NaN")
	}
}
