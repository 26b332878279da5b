package gate

import (
	"math"
	"testing"
)

func TestWilson(t *testing.T) {
	for _, c := range []struct {
		k, n   int
		lo, hi float64
	}{
		{0, 60, 0, 0.0602}, // 0/60 bounds the rate at about 6%
		{0, 200, 0, 0.0188},
		{60, 60, 0.9398, 1},
		{5, 100, 0.0215, 0.1118},
	} {
		lo, hi := Wilson(c.k, c.n)
		if math.Abs(lo-c.lo) > 5e-4 || math.Abs(hi-c.hi) > 5e-4 {
			t.Errorf("Wilson(%d, %d) = %.4f–%.4f, want %.4f–%.4f", c.k, c.n, lo, hi, c.lo, c.hi)
		}
		if h := wilsonHigh(c.k, c.n); c.k < c.n && math.Abs(h-hi) > 1e-12 {
			t.Errorf("wilsonHigh(%d, %d) = %v, Wilson's %v", c.k, c.n, h, hi)
		}
	}
	if got := RateWithInterval(0, 200); got != "0/200 (0.0–1.9%)" {
		t.Errorf("RateWithInterval(0, 200) = %q", got)
	}
}
