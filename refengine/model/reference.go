package model

import "math"

// ReferenceForward runs the full, unsharded model in float64 over one sequence with plain causal
// attention (no KV cache, no tensor parallelism) and returns the logits of every position
// ([len(tokens)][Vocab]). It is the numerical reference the engine's sharded float32 forward is
// compared against.
func ReferenceForward(w *Weights, tokens []int) [][]float64 {
	c := w.Cfg
	H, hd, T := c.Hidden, c.HeadDim(), len(tokens)
	group := c.Heads / c.KVHeads
	x := make([][]float64, T)
	for t, id := range tokens {
		x[t] = make([]float64, H)
		for i := 0; i < H; i++ {
			x[t][i] = float64(w.Embed[id*H+i])
		}
	}
	mm := func(v []float64, m []float32, N int) []float64 {
		out := make([]float64, N)
		for k, a := range v {
			row := m[k*N : (k+1)*N]
			for n := range out {
				out[n] += a * float64(row[n])
			}
		}
		return out
	}
	rms := func(v []float64, g []float32) []float64 {
		var ss float64
		for _, a := range v {
			ss += a * a
		}
		inv := 1 / math.Sqrt(ss/float64(len(v))+c.NormEps)
		out := make([]float64, len(v))
		for i, a := range v {
			out[i] = a * inv * float64(g[i])
		}
		return out
	}
	rope := func(v []float64, pos int) {
		half := hd / 2
		for i := 0; i < half; i++ {
			a := float64(pos) * math.Pow(c.RopeTheta, -2*float64(i)/float64(hd))
			cs, sn := math.Cos(a), math.Sin(a)
			p, q := v[i], v[i+half]
			v[i] = p*cs - q*sn
			v[i+half] = p*sn + q*cs
		}
	}
	for _, L := range w.Layers {
		q := make([][]float64, T)
		k := make([][]float64, T)
		v := make([][]float64, T)
		for t := 0; t < T; t++ {
			h := rms(x[t], L.AttnNorm)
			q[t] = mm(h, L.Wq, c.Heads*hd)
			k[t] = mm(h, L.Wk, c.KVHeads*hd)
			v[t] = mm(h, L.Wv, c.KVHeads*hd)
			for hh := 0; hh < c.Heads; hh++ {
				rope(q[t][hh*hd:(hh+1)*hd], t)
			}
			for hh := 0; hh < c.KVHeads; hh++ {
				rope(k[t][hh*hd:(hh+1)*hd], t)
			}
		}
		scale := 1 / math.Sqrt(float64(hd))
		for t := 0; t < T; t++ {
			att := make([]float64, c.Heads*hd)
			for hh := 0; hh < c.Heads; hh++ {
				kv := hh / group
				qv := q[t][hh*hd : (hh+1)*hd]
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
			o := mm(att, L.Wo, H)
			for i := range o {
				x[t][i] += o[i]
			}
			h := rms(x[t], L.MLPNorm)
			g := mm(h, L.Wg, c.FFN)
			u := mm(h, L.Wu, c.FFN)
			for i := range g {
				g[i] = g[i] / (1 + math.Exp(-g[i])) * u[i]
			}
			d := mm(g, L.Wd, H)
			for i := range d {
				x[t][i] += d[i]
			}
		}
	}
	logits := make([][]float64, T)
	for t := 0; t < T; t++ {
		logits[t] = mm(rms(x[t], w.FinalNorm), w.LMHead, c.Vocab)
	}
	return logits
}
