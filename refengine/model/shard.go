package model

// ShardLayer is one layer's weights held by one tensor-parallel rank (Megatron style): the
// column-parallel QKV and gate/up projections of its heads and MLP columns, and the matching
// row-parallel output and down projections, whose partial outputs are summed by an allreduce.
type ShardLayer struct {
	AttnNorm []float32 // [H] (replicated)
	Wqkv     []float32 // [H × (QHeads+2·KVHeads)·hd]: this rank's q, then k, then v columns
	Wo       []float32 // [QHeads·hd × H]
	MLPNorm  []float32 // [H] (replicated)
	Wgu      []float32 // [H × 2·FFN]: this rank's gate columns, then up columns
	Wd       []float32 // [FFN × H]
}

// Shard is the part of a model that one rank holds.
type Shard struct {
	Cfg      Config
	Rank, TP int
	QHeads   int   // local query heads
	KVHeads  int   // local KV heads (replicated across ranks when the model has fewer than tp)
	KVOfQ    []int // local KV head index of each local query head
	FFN      int   // local MLP columns
	Layers   []ShardLayer
	// Embed and FinalNorm are replicated; the LM head is split by vocabulary: this rank computes
	// logits for ids [VocabLo, VocabHi).
	Embed            []float32
	FinalNorm        []float32
	LMHead           []float32 // [H × (VocabHi-VocabLo)]
	VocabLo, VocabHi int
}

// ShardFor extracts rank's shard of w for tp ranks. The caller checks cfg.CheckTP(tp) first.
func ShardFor(w *Weights, rank, tp int) *Shard {
	c := w.Cfg
	H, hd := c.Hidden, c.HeadDim()
	s := &Shard{Cfg: c, Rank: rank, TP: tp, QHeads: c.Heads / tp, FFN: c.FFN / tp}
	group := c.Heads / c.KVHeads // query heads per KV head
	q0 := rank * s.QHeads
	kv0 := q0 / group
	kvLast := (q0 + s.QHeads - 1) / group
	s.KVHeads = kvLast - kv0 + 1
	for j := 0; j < s.QHeads; j++ {
		s.KVOfQ = append(s.KVOfQ, (q0+j)/group-kv0)
	}
	f0 := rank * s.FFN
	for _, L := range w.Layers {
		qkvN := (s.QHeads + 2*s.KVHeads) * hd
		sl := ShardLayer{AttnNorm: L.AttnNorm, MLPNorm: L.MLPNorm}
		sl.Wqkv = make([]float32, H*qkvN)
		for k := 0; k < H; k++ {
			dst := sl.Wqkv[k*qkvN : (k+1)*qkvN]
			n := copy(dst, L.Wq[k*c.Heads*hd+q0*hd:k*c.Heads*hd+(q0+s.QHeads)*hd])
			n += copy(dst[n:], L.Wk[k*c.KVHeads*hd+kv0*hd:k*c.KVHeads*hd+(kv0+s.KVHeads)*hd])
			copy(dst[n:], L.Wv[k*c.KVHeads*hd+kv0*hd:k*c.KVHeads*hd+(kv0+s.KVHeads)*hd])
		}
		sl.Wo = append([]float32(nil), L.Wo[q0*hd*H:(q0+s.QHeads)*hd*H]...)
		sl.Wgu = make([]float32, H*2*s.FFN)
		for k := 0; k < H; k++ {
			dst := sl.Wgu[k*2*s.FFN : (k+1)*2*s.FFN]
			copy(dst, L.Wg[k*c.FFN+f0:k*c.FFN+f0+s.FFN])
			copy(dst[s.FFN:], L.Wu[k*c.FFN+f0:k*c.FFN+f0+s.FFN])
		}
		sl.Wd = append([]float32(nil), L.Wd[f0*H:(f0+s.FFN)*H]...)
		s.Layers = append(s.Layers, sl)
	}
	s.Embed = w.Embed
	s.FinalNorm = w.FinalNorm
	per := (c.Vocab + tp - 1) / tp
	s.VocabLo = min(rank*per, c.Vocab)
	s.VocabHi = min(s.VocabLo+per, c.Vocab)
	vn := s.VocabHi - s.VocabLo
	s.LMHead = make([]float32, H*vn)
	for k := 0; k < H; k++ {
		copy(s.LMHead[k*vn:(k+1)*vn], w.LMHead[k*c.Vocab+s.VocabLo:k*c.Vocab+s.VocabHi])
	}
	return s
}

// Bytes is the memory the shard really holds, in bytes (float32 weights). The embedding table is
// counted on every rank (each rank holds a replica); shared draft tensors are counted by the
// caller once.
func (s *Shard) Bytes() int64 {
	n := int64(len(s.Embed) + len(s.FinalNorm) + len(s.LMHead))
	n += s.LayerParams()
	return 4 * n
}

// LayerParams is the number of layer parameters the shard holds.
func (s *Shard) LayerParams() int64 {
	var n int64
	for _, l := range s.Layers {
		n += int64(len(l.AttnNorm) + len(l.Wqkv) + len(l.Wo) + len(l.MLPNorm) + len(l.Wgu) + len(l.Wd))
	}
	return n
}
