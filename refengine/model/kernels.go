package model

import "math"

// MatMul computes out[T×N] = x[T×K] · w[K×N] (row-major). Each output element is accumulated in
// the same order whatever T is (k in blocks of four, in order), so a row's result does not depend
// on the other rows of the batch. Rows are processed two at a time so that each loaded weight
// is used twice.
func MatMul(out, x, w []float32, T, K, N int) {
	out = out[:T*N]
	for i := range out {
		out[i] = 0
	}
	t := 0
	for ; t+2 <= T; t += 2 {
		matMul2(out[t*N:(t+2)*N], x[t*K:(t+2)*K], w, K, N)
	}
	for ; t < T; t++ {
		matMul1(out[t*N:(t+1)*N], x[t*K:(t+1)*K], w, K, N)
	}
}

func matMul1(o, xr, w []float32, K, N int) {
	k := 0
	for ; k+4 <= K; k += 4 {
		a0, a1, a2, a3 := xr[k], xr[k+1], xr[k+2], xr[k+3]
		w0 := w[k*N : k*N+N]
		w1 := w[(k+1)*N : (k+1)*N+N]
		w2 := w[(k+2)*N : (k+2)*N+N]
		w3 := w[(k+3)*N : (k+3)*N+N]
		w0, w1, w2, w3 = w0[:len(o)], w1[:len(o)], w2[:len(o)], w3[:len(o)]
		for n := range o {
			o[n] += a0*w0[n] + a1*w1[n] + a2*w2[n] + a3*w3[n]
		}
	}
	for ; k < K; k++ {
		a := xr[k]
		wr := w[k*N : k*N+N]
		wr = wr[:len(o)]
		for n := range o {
			o[n] += a * wr[n]
		}
	}
}

func matMul2(o, xr, w []float32, K, N int) {
	o0, o1 := o[:N], o[N:2*N]
	x0, x1 := xr[:K], xr[K:2*K]
	k := 0
	for ; k+4 <= K; k += 4 {
		w0 := w[k*N : k*N+N]
		w1 := w[(k+1)*N : (k+1)*N+N]
		w2 := w[(k+2)*N : (k+2)*N+N]
		w3 := w[(k+3)*N : (k+3)*N+N]
		w0, w1, w2, w3 = w0[:len(o0)], w1[:len(o0)], w2[:len(o0)], w3[:len(o0)]
		o1 = o1[:len(o0)]
		a0, a1, a2, a3 := x0[k], x0[k+1], x0[k+2], x0[k+3]
		b0, b1, b2, b3 := x1[k], x1[k+1], x1[k+2], x1[k+3]
		for n := range o0 {
			v0, v1, v2, v3 := w0[n], w1[n], w2[n], w3[n]
			o0[n] += a0*v0 + a1*v1 + a2*v2 + a3*v3
			o1[n] += b0*v0 + b1*v1 + b2*v2 + b3*v3
		}
	}
	for ; k < K; k++ {
		wr := w[k*N : k*N+N]
		wr = wr[:len(o0)]
		o1 = o1[:len(o0)]
		a, b := x0[k], x1[k]
		for n := range o0 {
			v := wr[n]
			o0[n] += a * v
			o1[n] += b * v
		}
	}
}

// RMSNorm writes out[t] = x[t] / rms(x[t]) * g for each of the T rows of width H.
func RMSNorm(out, x, g []float32, T, H int, eps float64) {
	for t := 0; t < T; t++ {
		xr := x[t*H : t*H+H]
		var ss float32
		for _, v := range xr {
			ss += v * v
		}
		inv := float32(1 / math.Sqrt(float64(ss)/float64(H)+eps))
		o := out[t*H : t*H+H]
		g := g[:len(o)]
		xr = xr[:len(o)]
		for i := range o {
			o[i] = xr[i] * inv * g[i]
		}
	}
}

// Rope holds rotary-embedding tables: cos and sin of pos·θ^(-2i/d) for each position and pair.
type Rope struct {
	Half     int
	Cos, Sin []float32 // [MaxPos × Half]
}

// NewRope builds the rotary tables for head dimension hd.
func NewRope(hd, maxPos int, theta float64) *Rope {
	half := hd / 2
	r := &Rope{Half: half, Cos: make([]float32, maxPos*half), Sin: make([]float32, maxPos*half)}
	for p := 0; p < maxPos; p++ {
		for i := 0; i < half; i++ {
			a := float64(p) * math.Pow(theta, -2*float64(i)/float64(hd))
			r.Cos[p*half+i] = float32(math.Cos(a))
			r.Sin[p*half+i] = float32(math.Sin(a))
		}
	}
	return r
}

// Apply rotates the head vector v (length 2·Half) in place for position pos (NeoX pairing:
// element i is paired with element i+Half).
func (r *Rope) Apply(v []float32, pos int) {
	h := r.Half
	c := r.Cos[pos*h : pos*h+h]
	s := r.Sin[pos*h : pos*h+h]
	a := v[:h]
	b := v[h : 2*h]
	for i := 0; i < h; i++ {
		x, y := a[i], b[i]
		a[i] = x*c[i] - y*s[i]
		b[i] = x*s[i] + y*c[i]
	}
}

// Silu is x·sigmoid(x).
func Silu(x float32) float32 { return x / (1 + float32(math.Exp(float64(-x)))) }
