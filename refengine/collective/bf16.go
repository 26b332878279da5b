package collective

import "math"

// RoundBF16 rounds every element of x to the nearest bfloat16 value (round to nearest, ties to
// even), in place. NaN stays NaN (quiet, sign kept), ±Inf stays ±Inf, and finite values beyond the
// largest bf16 round to ±Inf as a hardware conversion does.
func RoundBF16(x []float32) {
	for i, v := range x {
		x[i] = roundBF16(v)
	}
}

// roundBF16 rounds one float32 to bf16 (RNE).
func roundBF16(v float32) float32 {
	b := math.Float32bits(v)
	if b&0x7f800000 == 0x7f800000 { // Inf or NaN
		if b&0x007fffff != 0 {
			// NaN: keep sign and the top payload bits, force quiet so truncation cannot make Inf.
			return math.Float32frombits(b&0xffff0000 | 0x00400000)
		}
		return v
	}
	b += 0x7fff + (b>>16)&1
	return math.Float32frombits(b & 0xffff0000)
}

// BF16FromFloat64 rounds x to the nearest bf16 value (RNE) in one step, without the double
// rounding of float64 -> float32 -> bf16, and returns it as a float32.
func BF16FromFloat64(x float64) float32 {
	f := float32(x)
	if math.IsNaN(x) || math.IsInf(float64(f), 0) || float64(f) == x {
		return roundBF16(f)
	}
	b := math.Float32bits(f)
	if b&0xffff != 0x8000 {
		// f is not on a bf16 midpoint, so rounding f gives the same answer as rounding x.
		return roundBF16(f)
	}
	// f is exactly halfway between two bf16 values, but x is not: round toward x.
	lo := math.Float32frombits(b & 0xffff0000)             // the bf16 value nearer zero
	hi := math.Float32frombits((b & 0xffff0000) + 0x10000) // the one farther from zero
	if math.Abs(x) < math.Abs(float64(f)) {
		return lo
	}
	return hi
}
