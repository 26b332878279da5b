package model

import "math"

// ReferenceForward runs the full, unsharded model in float64 over one sequence with plain causal
// attention (no KV cache, no tensor parallelism) and returns the logits of every position
// ([len(tokens)][Vocab]). It is the numerical reference the engine's sharded float32 forward is
// compared against.
func ReferenceForward(w *Weights, tokens []int) [][]float64 {
	c := &w.Cfg
	H, hd, T := c.Hidden, c.HeadDim(), len(tokens)
	x := make([][]float64, T)
	for t, id := range tokens {
		x[t] = make([]float64, H)
		for i := 0; i < H; i++ {
			x[t][i] = float64(w.Embed[id*H+i])
		}
	}
	for li := range w.Layers {
		L := &w.Layers[li]
		q := make([][]float64, T)
		k := make([][]float64, T)
		v := make([][]float64, T)
		for t := 0; t < T; t++ {
			h := refRMSNorm(x[t], L.AttnNorm, c.NormEps)
			q[t] = refMatVec(h, L.Wq, c.Heads*hd)
			k[t] = refMatVec(h, L.Wk, c.KVHeads*hd)
			v[t] = refMatVec(h, L.Wv, c.KVHeads*hd)
			for hh := 0; hh < c.Heads; hh++ {
				refRope(q[t][hh*hd:(hh+1)*hd], t, c.RopeTheta)
			}
			for hh := 0; hh < c.KVHeads; hh++ {
				refRope(k[t][hh*hd:(hh+1)*hd], t, c.RopeTheta)
			}
		}
		for t := 0; t < T; t++ {
			att := refAttention(c, q[t], k, v, t)
			o := refMatVec(att, L.Wo, H)
			for i := range o {
				x[t][i] += o[i]
			}
			d := refMLP(c, L, x[t])
			for i := range d {
				x[t][i] += d[i]
			}
		}
	}
	logits := make([][]float64, T)
	for t := 0; t < T; t++ {
		logits[t] = refMatVec(refRMSNorm(x[t], w.FinalNorm, c.NormEps), w.LMHead, c.Vocab)
	}
	return logits
}

// refMatVec is v times the row-major [len(v) × N] matrix m, in float64.
func refMatVec(v []float64, m []float32, N int) []float64 {
	out := make([]float64, N)
	for k, a := range v {
		row := m[k*N : (k+1)*N]
		for n := range out {
			out[n] += a * float64(row[n])
		}
	}
	return out
}

// refRMSNorm is v normalised by its root mean square (eps added to the mean square) and scaled by g.
func refRMSNorm(v []float64, g []float32, eps float64) []float64 {
	var ss float64
	for _, a := range v {
		ss += a * a
	}
	inv := 1 / math.Sqrt(ss/float64(len(v))+eps)
	out := make([]float64, len(v))
	for i, a := range v {
		out[i] = a * inv * float64(g[i])
	}
	return out
}

// refRope rotates one head v in place by the rotary embedding of position pos (rotate-half
// layout, base theta).
func refRope(v []float64, pos int, theta float64) {
	hd := len(v)
	half := hd / 2
	for i := 0; i < half; i++ {
		a := float64(pos) * math.Pow(theta, -2*float64(i)/float64(hd))
		cs, sn := math.Cos(a), math.Sin(a)
		p, q := v[i], v[i+half]
		v[i] = p*cs - q*sn
		v[i+half] = p*sn + q*cs
	}
}

// refAttention is causal attention of position t's query qt over the keys k and values v of
// positions 0..t, for every head (a query head reads its group's KV head).
func refAttention(c *Config, qt []float64, k, v [][]float64, t int) []float64 {
	hd := c.HeadDim()
	group := c.Heads / c.KVHeads
	scale := 1 / math.Sqrt(float64(hd))
	att := make([]float64, c.Heads*hd)
	for hh := 0; hh < c.Heads; hh++ {
		kv := hh / group
		qv := qt[hh*hd : (hh+1)*hd]
		sc := make([]float64, t+1)
		mx := math.Inf(-1)
		for j := 0; j <= t; j++ {
			var d float64
			for i := 0; i < hd; i++ {
				d += qv[i] * k[j][kv*hd+i]
			}
			sc[j] = d * scale
			mx = math.Max(mx, sc[j])
		}
		var sum float64
		for j := range sc {
			sc[j] = math.Exp(sc[j] - mx)
			sum += sc[j]
		}
		for j := range sc {
			p := sc[j] / sum
			for i := 0; i < hd; i++ {
				att[hh*hd+i] += p * v[j][kv*hd+i]
			}
		}
	}
	return att
}

// refMLP is layer L's SiLU-gated MLP of the residual x (normalised first).
func refMLP(c *Config, L *Layer, x []float64) []float64 {
	h := refRMSNorm(x, L.MLPNorm, c.NormEps)
	g := refMatVec(h, L.Wg, c.FFN)
	u := refMatVec(h, L.Wu, c.FFN)
	for i := range g {
		g[i] = g[i] / (1 + math.Exp(-g[i])) * u[i]
	}
	return refMatVec(g, L.Wd, len(x))
}
