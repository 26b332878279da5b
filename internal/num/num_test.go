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

func TestJSONNonFinite(t *testing.T) {
	for _, c := range []struct {
		v    float64
		want string
	}{{math.NaN(), `"NaN"`}, {math.Inf(1), `"+Inf"`}, {math.Inf(-1), `"-Inf"`}, {0.1, "0.1"}, {1e300, "1e+300"}, {-3, "-3"}} {
		if got := string(AppendJSON(nil, c.v)); got != c.want {
			t.Errorf("AppendJSON(%v) = %s, want %s", c.v, got, c.want)
		}
	}
	for s, want := range map[string]float64{"+Inf": math.Inf(1), "Inf": math.Inf(1), "Infinity": math.Inf(1), "-Inf": math.Inf(-1), "-Infinity": math.Inf(-1)} {
		if got, err := ParseNonFinite(s); err != nil || got != want {
			t.Errorf("ParseNonFinite(%q) = %v, %v, want %v", s, got, err, want)
		}
	}
	if got, err := ParseNonFinite("NaN"); err != nil || !math.IsNaN(got) {
		t.Errorf("ParseNonFinite(NaN) = %v, %v", got, err)
	}
	if _, err := ParseNonFinite("nan"); err == nil || err.Error() != `expected a number, NaN, +Inf or -Inf, found "nan"` {
		t.Errorf("ParseNonFinite(nan): %v", err)
	}
}
