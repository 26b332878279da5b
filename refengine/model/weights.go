package model

import (
	"hash/fnv"
	"math"
	"math/rand/v2"
)

// Layer holds one transformer layer's full (unsharded) weights. Matrices are row-major with
// shape [in × out], so y = x·W.
type Layer struct {
	AttnNorm []float32 // [H]
	Wq       []float32 // [H × Heads*hd]
	Wk       []float32 // [H × KVHeads*hd]
	Wv       []float32 // [H × KVHeads*hd]
	Wo       []float32 // [Heads*hd × H]
	MLPNorm  []float32 // [H]
	Wg       []float32 // [H × FFN]
	Wu       []float32 // [H × FFN]
	Wd       []float32 // [FFN × H]
}

// Weights is a full model: embeddings, layers, final norm and LM head.
type Weights struct {
	Cfg       Config
	Embed     []float32 // [V × H]
	Layers    []Layer
	FinalNorm []float32 // [H]
	LMHead    []float32 // [H × V]
}

// Generate builds the target model's weights deterministically from cfg.Seed: the same config
// always gives bit-identical weights, on every machine.
func Generate(cfg Config) *Weights {
	H, hd, F, V := cfg.Hidden, cfg.HeadDim(), cfg.FFN, cfg.Vocab
	w := &Weights{Cfg: cfg}
	g := func(name string, n int, std float64) []float32 { return gaussian(cfg.Seed, name, n, std) }
	w.Embed = g("embed", V*H, 1)
	inStd := 1 / math.Sqrt(float64(H))
	rs := cfg.ResidualScale
	for l := 0; l < cfg.Layers; l++ {
		p := "layer" + itoa(l) + "."
		w.Layers = append(w.Layers, Layer{
			AttnNorm: norm(cfg.Seed, p+"attn_norm", H),
			Wq:       g(p+"wq", H*cfg.Heads*hd, inStd),
			Wk:       g(p+"wk", H*cfg.KVHeads*hd, inStd),
			Wv:       g(p+"wv", H*cfg.KVHeads*hd, inStd),
			Wo:       g(p+"wo", cfg.Heads*hd*H, rs/math.Sqrt(float64(cfg.Heads*hd))),
			MLPNorm:  norm(cfg.Seed, p+"mlp_norm", H),
			Wg:       g(p+"wg", H*F, inStd),
			Wu:       g(p+"wu", H*F, inStd),
			Wd:       g(p+"wd", F*H, rs/math.Sqrt(float64(F))),
		})
		rs *= cfg.ResidualDecay
	}
	w.FinalNorm = norm(cfg.Seed, "final_norm", H)
	w.LMHead = g("lm_head", H*V, cfg.LogitScale/math.Sqrt(float64(H)))
	// BOS is never generated; EOS is less likely than an average byte, so that greedy
	// continuations run for a while before they stop.
	// Control bytes and bytes >= 0x80 are rarely generated (their LM-head columns are scaled
	// down), so that the byte-level model writes readable ASCII.
	for k := 0; k < H; k++ {
		for v := 0; v < 256; v++ {
			if !printable(v) {
				w.LMHead[k*V+v] *= 0.25
			}
		}
		w.LMHead[k*V+BOS] = 0
		w.LMHead[k*V+EOS] *= 0.6
	}
	return w
}

// Draft derives the speculative-decoding draft model from the target: its first DraftLayers
// layers with weights rounded to bfloat16, sharing the target's embeddings, final norm and LM
// head (as EAGLE drafts share them). Its predictions agree with the target's most of the time,
// but not always.
func (w *Weights) Draft() *Weights {
	d := &Weights{Cfg: w.Cfg, Embed: w.Embed, FinalNorm: w.FinalNorm, LMHead: w.LMHead}
	d.Cfg.Layers = w.Cfg.DraftLayers
	d.Cfg.Name = w.Cfg.Name + "-draft"
	for l := 0; l < w.Cfg.DraftLayers; l++ {
		src := w.Layers[l]
		d.Layers = append(d.Layers, Layer{
			AttnNorm: bf16Copy(src.AttnNorm), Wq: bf16Copy(src.Wq), Wk: bf16Copy(src.Wk),
			Wv: bf16Copy(src.Wv), Wo: bf16Copy(src.Wo), MLPNorm: bf16Copy(src.MLPNorm),
			Wg: bf16Copy(src.Wg), Wu: bf16Copy(src.Wu), Wd: bf16Copy(src.Wd),
		})
	}
	return d
}

func gaussian(seed uint64, name string, n int, std float64) []float32 {
	h := fnv.New64a()
	h.Write([]byte(name))
	r := rand.New(rand.NewPCG(seed, h.Sum64()))
	out := make([]float32, n)
	for i := range out {
		out[i] = float32(r.NormFloat64() * std)
	}
	return out
}

func norm(seed uint64, name string, n int) []float32 {
	out := gaussian(seed, name, n, 0.1)
	for i := range out {
		out[i] += 1
	}
	return out
}

func bf16Copy(x []float32) []float32 {
	out := make([]float32, len(x))
	for i, v := range x {
		out[i] = RoundBF16(v)
	}
	return out
}

// RoundBF16 rounds v to the nearest bfloat16 value (round to nearest even).
func RoundBF16(v float32) float32 {
	b := math.Float32bits(v)
	if b&0x7f800000 == 0x7f800000 { // Inf or NaN: keep
		return v
	}
	b += 0x7fff + (b>>16)&1
	return math.Float32frombits(b & 0xffff0000)
}

func itoa(i int) string {
	if i == 0 {
		return "0"
	}
	var b [20]byte
	p := len(b)
	for i > 0 {
		p--
		b[p] = byte('0' + i%10)
		i /= 10
	}
	return string(b[p:])
}

func printable(b int) bool { return b == '\n' || (b >= 32 && b < 127) }
