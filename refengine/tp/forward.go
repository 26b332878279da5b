// forward.go holds one rank's share of a forward pass: its layers, attention over the paged KV
// store, and the vector kernels they use.

package tp

import (
	"math"
	"sync"

	"github.com/reckon-ci/reckon/refengine/kvcache"
	"github.com/reckon-ci/reckon/refengine/model"
)

// parallel runs fn over [0, n) split into contiguous ranges (multiples of align) among the
// rank's workers; fn gets the worker index and its range.
func (rk *rank) parallel(n, align int, fn func(w, lo, hi int)) {
	W := rk.workers
	if W <= 1 || n < 4*align {
		fn(0, 0, n)
		return
	}
	per := (n/W + align - 1) / align * align
	var wg sync.WaitGroup
	for w := 0; w < W; w++ {
		lo, hi := w*per, min((w+1)*per, n)
		if w == W-1 {
			hi = n
		}
		if lo >= hi {
			continue
		}
		wg.Add(1)
		go func(w, lo, hi int) {
			defer wg.Done()
			fn(w, lo, hi)
		}(w, lo, hi)
	}
	wg.Wait()
}

// matMul is model.MatMul with the rows split among the rank's workers.
func (rk *rank) matMul(out, x, w []float32, T, K, N int) {
	rk.parallel(T, 2, func(_, lo, hi int) {
		model.MatMul(out[lo*N:hi*N], x[lo*K:hi*K], w, hi-lo, K, N)
	})
}

func (rk *rank) forward(g *Group, m ModelID, seqs []SeqInput, T, rows int, logits []float32) {
	s := rk.shards[m]
	kv := rk.kv[m]
	d := dimsOf(s)
	rk.growBuffers(d, T)
	rk.embed(s, seqs, d.H)
	scale := float32(1 / math.Sqrt(float64(d.hd)))
	for l := range s.Layers {
		L := &s.Layers[l]
		rk.attentionBlock(g, s, kv, l, L, seqs, T, d, scale)
		rk.mlpBlock(g, s, L, T, d)
	}
	if rows == 0 {
		return
	}
	rk.logits(s, seqs, rows, logits)
}

// fwdDims are the widths of one rank's share of a layer: the hidden size, the head size, this
// rank's query, key/value and fused QKV widths, and its FFN width.
type fwdDims struct {
	H, hd, qN, kvN, qkvN, F int
}

// dimsOf is the widths of shard s.
func dimsOf(s *model.Shard) fwdDims {
	c := &s.Cfg
	hd := c.HeadDim()
	qN, kvN := s.QHeads*hd, s.KVHeads*hd
	return fwdDims{H: c.Hidden, hd: hd, qN: qN, kvN: kvN, qkvN: qN + 2*kvN, F: s.FFN}
}

// growBuffers sizes the rank's activation buffers for T tokens.
func (rk *rank) growBuffers(d fwdDims, T int) {
	rk.x = grow(rk.x, T*d.H)
	rk.h = grow(rk.h, T*d.H)
	rk.o = grow(rk.o, T*d.H)
	rk.qkv = grow(rk.qkv, T*d.qkvN)
	rk.att = grow(rk.att, T*d.qN)
	rk.gu = grow(rk.gu, T*2*d.F)
	rk.act = grow(rk.act, T*d.F)
}

// embed writes every new token's embedding into rk.x, in sequence order, and records each
// token's sequence and position.
func (rk *rank) embed(s *model.Shard, seqs []SeqInput, H int) {
	x := rk.x
	rk.tokSeq = rk.tokSeq[:0]
	rk.tokPos = rk.tokPos[:0]
	t := 0
	for si, sq := range seqs {
		for i, tok := range sq.Tokens {
			copy(x[t*H:(t+1)*H], s.Embed[tok*H:(tok+1)*H])
			rk.tokSeq = append(rk.tokSeq, si)
			rk.tokPos = append(rk.tokPos, sq.Start+i)
			t++
		}
	}
}

// attentionBlock is layer l's attention: norm, QKV projection, rotary and KV write, attention for
// every token, the output projection, its allreduce, and the residual add.
func (rk *rank) attentionBlock(g *Group, s *model.Shard, kv *kvcache.Store, l int, L *model.ShardLayer, seqs []SeqInput, T int, d fwdDims, scale float32) {
	x, h, o := rk.x, rk.h, rk.o
	H, qN, qkvN := d.H, d.qN, d.qkvN
	model.RMSNorm(h, x, L.AttnNorm, T, H, s.Cfg.NormEps)
	rk.matMul(rk.qkv, h, L.Wqkv, T, H, qkvN)
	rk.ropeAndStore(g, s, kv, l, seqs, d)
	// attention for every token (each reads only its own sequence's earlier positions)
	rk.parallel(T, 1, func(w, lo, hi int) {
		for t := lo; t < hi; t++ {
			sq := &seqs[rk.tokSeq[t]]
			rk.attend(kv, l, sq.Pages, rk.tokPos[t], rk.qkv[t*qkvN:t*qkvN+qN], rk.att[t*qN:(t+1)*qN], s, scale, &rk.sc[w])
		}
	})
	rk.matMul(o, rk.att, L.Wo, T, qN, H)
	g.red.allReduce(rk.id, o, H)
	for i := range x[:T*H] {
		x[i] += o[i]
	}
}

// ropeAndStore applies the rotary embedding to the query and key heads of every new token and
// writes its keys and values into the KV store at layer l.
func (rk *rank) ropeAndStore(g *Group, s *model.Shard, kv *kvcache.Store, l int, seqs []SeqInput, d fwdDims) {
	hd, qN, kvN, qkvN := d.hd, d.qN, d.kvN, d.qkvN
	t0 := 0
	for _, sq := range seqs {
		n := len(sq.Tokens)
		// rotary + KV write for all of this sequence's new tokens
		for i := 0; i < n; i++ {
			row := rk.qkv[(t0+i)*qkvN : (t0+i+1)*qkvN]
			pos := sq.Start + i
			for hh := 0; hh < s.QHeads; hh++ {
				g.rope.Apply(row[hh*hd:(hh+1)*hd], pos)
			}
			for hh := 0; hh < s.KVHeads; hh++ {
				kvec := row[qN+hh*hd : qN+(hh+1)*hd]
				g.rope.Apply(kvec, pos)
				off := kv.Offset(l, sq.Pages, pos, hh)
				copy(kv.K[off:off+hd], kvec)
				copy(kv.V[off:off+hd], row[qN+kvN+hh*hd:qN+kvN+(hh+1)*hd])
			}
		}
		t0 += n
	}
}

// mlpBlock is a layer's MLP: norm, gate/up projection, SiLU-gated product, down projection, its
// allreduce, and the residual add.
func (rk *rank) mlpBlock(g *Group, s *model.Shard, L *model.ShardLayer, T int, d fwdDims) {
	x, h, o := rk.x, rk.h, rk.o
	H, F := d.H, d.F
	model.RMSNorm(h, x, L.MLPNorm, T, H, s.Cfg.NormEps)
	rk.matMul(rk.gu, h, L.Wgu, T, H, 2*F)
	for tt := 0; tt < T; tt++ {
		gr := rk.gu[tt*2*F : tt*2*F+F]
		ur := rk.gu[tt*2*F+F : (tt+1)*2*F]
		ar := rk.act[tt*F : (tt+1)*F]
		for i := range ar {
			ar[i] = model.Silu(gr[i]) * ur[i]
		}
	}
	rk.matMul(o, rk.act, L.Wd, T, F, H)
	g.red.allReduce(rk.id, o, H)
	for i := range x[:T*H] {
		x[i] += o[i]
	}
}

// logits gathers the rows of rk.x that need logits (each sequence's last, or all of its rows),
// normalises them and writes this rank's vocabulary slice of each into logits.
func (rk *rank) logits(s *model.Shard, seqs []SeqInput, rows int, logits []float32) {
	c := &s.Cfg
	H := c.Hidden
	x, h, o := rk.x, rk.h, rk.o
	r, t := 0, 0
	for _, sq := range seqs {
		n := len(sq.Tokens)
		switch sq.Logits {
		case LogitsLast:
			copy(h[r*H:(r+1)*H], x[(t+n-1)*H:(t+n)*H])
			r++
		case LogitsAll:
			copy(h[r*H:(r+n)*H], x[t*H:(t+n)*H])
			r += n
		}
		t += n
	}
	model.RMSNorm(o, h, s.FinalNorm, rows, H, c.NormEps)
	vn := s.VocabHi - s.VocabLo
	rk.lg = grow(rk.lg, rows*vn)
	rk.matMul(rk.lg, o, s.LMHead, rows, H, vn)
	V := c.Vocab
	for i := 0; i < rows; i++ {
		copy(logits[i*V+s.VocabLo:i*V+s.VocabHi], rk.lg[i*vn:(i+1)*vn])
	}
}

// attend computes causal attention for one query token at position pos for all local heads;
// scratch is the calling worker's score buffer. The query heads that share a KV head (GQA) are
// processed together, so each key and value vector is loaded once for the whole group; each
// head's arithmetic (and so its result) is the same as if it were computed alone.
func (rk *rank) attend(kv *kvcache.Store, layer int, pages []int32, pos int, q, out []float32, s *model.Shard, scale float32, scratch *[]float32) {
	hd := s.Cfg.HeadDim()
	n := pos + 1
	ps := kv.PageSize
	stride := s.KVHeads * hd
	var mxBuf, invBuf [16]float32
	for hq0 := 0; hq0 < s.QHeads; {
		kvh := s.KVOfQ[hq0]
		hq1 := hq0 + 1
		for hq1 < s.QHeads && s.KVOfQ[hq1] == kvh {
			hq1++
		}
		G := hq1 - hq0
		mx, inv := mxBuf[:0], invBuf[:0]
		if G > len(mxBuf) {
			mx, inv = make([]float32, 0, G), make([]float32, 0, G)
		}
		for g := 0; g < G; g++ {
			mx = append(mx, float32(math.Inf(-1)))
			inv = append(inv, 0)
		}
		*scratch = grow(*scratch, G*n)
		sc := *scratch
		for j0 := 0; j0 < n; j0 += ps {
			base := kv.Offset(layer, pages, j0, kvh)
			cnt := min(ps, n-j0)
			for jj := 0; jj < cnt; jj++ {
				kvec := kv.K[base+jj*stride : base+jj*stride+hd]
				for g := 0; g < G; g++ {
					d := dot(q[(hq0+g)*hd:(hq0+g+1)*hd], kvec) * scale
					sc[g*n+j0+jj] = d
					if d > mx[g] {
						mx[g] = d
					}
				}
			}
		}
		for g := 0; g < G; g++ {
			row := sc[g*n : (g+1)*n]
			var sum float32
			for j := range row {
				e := float32(math.Exp(float64(row[j] - mx[g])))
				row[j] = e
				sum += e
			}
			inv[g] = 1 / sum
			ov := out[(hq0+g)*hd : (hq0+g+1)*hd]
			for i := range ov {
				ov[i] = 0
			}
		}
		for j0 := 0; j0 < n; j0 += ps {
			base := kv.Offset(layer, pages, j0, kvh)
			cnt := min(ps, n-j0)
			for jj := 0; jj < cnt; jj++ {
				vvec := kv.V[base+jj*stride : base+jj*stride+hd]
				for g := 0; g < G; g++ {
					axpy(out[(hq0+g)*hd:(hq0+g+1)*hd], sc[g*n+j0+jj]*inv[g], vvec)
				}
			}
		}
		hq0 = hq1
	}
}

// dot is the dot product of two equal-length head vectors (unrolled for head size 16).
func dot(a, b []float32) float32 {
	if len(a) == 16 && len(b) == 16 {
		x := (*[16]float32)(a)
		y := (*[16]float32)(b)
		return ((x[0]*y[0] + x[1]*y[1]) + (x[2]*y[2] + x[3]*y[3])) + ((x[4]*y[4] + x[5]*y[5]) + (x[6]*y[6] + x[7]*y[7])) +
			(((x[8]*y[8] + x[9]*y[9]) + (x[10]*y[10] + x[11]*y[11])) + ((x[12]*y[12] + x[13]*y[13]) + (x[14]*y[14] + x[15]*y[15])))
	}
	b = b[:len(a)]
	var d float32
	for i, v := range a {
		d += v * b[i]
	}
	return d
}

// axpy adds p·v to o (equal lengths; unrolled for head size 16).
func axpy(o []float32, p float32, v []float32) {
	if len(o) == 16 && len(v) == 16 {
		x := (*[16]float32)(o)
		y := (*[16]float32)(v)
		x[0] += p * y[0]
		x[1] += p * y[1]
		x[2] += p * y[2]
		x[3] += p * y[3]
		x[4] += p * y[4]
		x[5] += p * y[5]
		x[6] += p * y[6]
		x[7] += p * y[7]
		x[8] += p * y[8]
		x[9] += p * y[9]
		x[10] += p * y[10]
		x[11] += p * y[11]
		x[12] += p * y[12]
		x[13] += p * y[13]
		x[14] += p * y[14]
		x[15] += p * y[15]
		return
	}
	v = v[:len(o)]
	for i := range o {
		o[i] += p * v[i]
	}
}
