package device

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/reckon-ci/reckon/refengine/collective"
	"github.com/reckon-ci/reckon/refengine/interconnect"
)

// Model is a modelled ("virtual") model: the size of the model whose step times the device clock
// charges while the CPU computes the engine's real (tiny) model. Sizes are of the whole model;
// the per-rank share under tensor parallelism is computed. The memory plan uses them too when the
// engine runs with --modelled-memory.
type Model struct {
	// Name is the table key (lower case).
	Name string
	// Layers is the number of transformer layers; a forward runs two allreduces per layer.
	Layers int
	// Hidden is the residual width: an allreduce moves tokens × Hidden × ActBytes bytes per rank.
	Hidden int
	// ActBytes is the activation element size (2: bf16).
	ActBytes int
	// DenseBytes are the weights every forward reads whatever its tokens: attention, dense MLPs,
	// shared experts, norms (not the embedding or the LM head).
	DenseBytes int64
	// DenseParams are the parameters behind DenseBytes (2 FLOPs each per token).
	DenseParams int64
	// MoELayers, Experts and ExpertsPerToken describe the routed experts; ExpertBytes and
	// ExpertParams are one expert of one layer. A forward of T tokens reads the distinct experts
	// its tokens route to: Experts × (1 − (1 − ExpertsPerToken/Experts)^T) per layer in
	// expectation (uniform routing).
	MoELayers, Experts, ExpertsPerToken int
	ExpertBytes, ExpertParams           int64
	// LMHeadBytes and LMHeadParams are the output projection, read by a forward that needs logits.
	LMHeadBytes, LMHeadParams int64
	// OtherBytes are weights held but not read per step (the input embedding, a vision encoder).
	OtherBytes int64
	// KVBytesPerToken is the whole model's KV cache per token (all layers). KVReplicated: every
	// rank holds all of it (MLA's latent cache); otherwise it is split over the ranks.
	KVBytesPerToken int64
	KVReplicated    bool
	// AttnDim is the query width per layer (heads × head dim) for attention FLOPs.
	AttnDim int
	// ActivationBytesPerToken is the activation workspace per token of the largest step, per rank
	// (memory plan).
	ActivationBytesPerToken int64
	// ForwardOverheadUs is the fixed cost of one forward: CUDA-graph replay or kernel launches and
	// the host's scheduling of the step.
	ForwardOverheadUs float64
	// SpecRoundOverheadUs is the host-side cost of one speculative round (draft inputs, verify
	// bookkeeping, accepting and freeing KV slots) that the device does not overlap.
	SpecRoundOverheadUs float64
	// Draft is the speculative-decoding draft model (EAGLE-3 head) of this size.
	Draft DraftModel
	// Source says where the shape comes from.
	Source string
}

// DraftModel is a modelled speculative draft model (dense; sharded like the target).
type DraftModel struct {
	Layers          int
	Bytes           int64 // weights, whole model
	Params          int64 // parameters read per token (2 FLOPs each)
	KVBytesPerToken int64 // whole model, split over the ranks
}

// WeightBytes is the whole model's weights (target only).
func (m Model) WeightBytes() int64 {
	return m.DenseBytes + int64(m.MoELayers)*int64(m.Experts)*m.ExpertBytes + m.LMHeadBytes + m.OtherBytes
}

// KVPerRank is rank-local KV bytes per token of the target at tp ranks.
func (m Model) KVPerRank(tp int) int64 {
	if m.KVReplicated || tp <= 1 {
		return m.KVBytesPerToken
	}
	return m.KVBytesPerToken / int64(tp)
}

const (
	gb = int64(1_000_000_000)
)

// llama70B is Llama-3.1-70B in bf16 (meta-llama/Llama-3.1-70B config.json: 80 layers, hidden
// 8192, 64 query and 8 KV heads of 128, FFN 28,672, vocabulary 128,256).
func llama70B() Model {
	const L, H, F, V = 80, 8192, 28672, 128256
	perLayer := int64(H*H+2*H*1024+H*H) + int64(3*H*F) // q, k+v, o, gate/up/down
	dense := int64(L) * perLayer
	return Model{Name: "llama-3.1-70b", Layers: L, Hidden: H, ActBytes: 2,
		DenseBytes: 2 * dense, DenseParams: dense,
		LMHeadBytes: 2 * V * H, LMHeadParams: V * H, OtherBytes: 2 * V * H,
		KVBytesPerToken: 2 * L * 8 * 128 * 2, AttnDim: 64 * 128,
		ActivationBytesPerToken: 2 * (3*H + 2*F/8),
		ForwardOverheadUs:       100,
		Draft:                   DraftModel{Layers: 1, Bytes: 2 * (perLayer + 2*H*H), Params: perLayer + 2*H*H, KVBytesPerToken: 2 * 8 * 128 * 2},
		Source:                  "meta-llama/Llama-3.1-70B config.json, bf16 weights; EAGLE-3 head: one decoder layer plus its 2H->H fusion"}
}

// kimiK25Int4 is a Kimi-K2.5-sized MoE with INT4 routed experts (moonshotai/Kimi-K2.5 and
// Kimi-K2-Instruct config.json: 61 layers (the first dense), hidden 7168, 384 routed experts of
// intermediate 2048 with 8 per token plus one shared, MLA (q_lora 1536, kv_lora 512, rope 64, 64
// heads of 128+64, v 128), vocabulary 163,840; routed experts W4A16 with a bf16 scale per 32
// weights (0.5625 bytes per weight), everything else bf16; about 595 GB in all).
func kimiK25Int4() Model {
	const L, H, V = 61, 7168, 163840
	attn := int64(H*1536+1536*64*192+H*576+512*64*256+64*128*H) + 2*H // MLA projections, norms
	expert := int64(3 * H * 2048)
	shared := int64(60) * expert
	denseMLP := int64(3 * H * 18432)
	denseParams := int64(L)*attn + shared + denseMLP
	draftLayer := int64(2*H*64*128+2*H*8*128+64*128*H) + int64(3*H*18432) + int64(2*H*H) // EAGLE-3 layer (2H input) + fc
	return Model{Name: "kimi-k2.5-int4", Layers: L, Hidden: H, ActBytes: 2,
		DenseBytes: 2 * denseParams, DenseParams: denseParams,
		MoELayers: 60, Experts: 384, ExpertsPerToken: 8,
		ExpertBytes: expert * 9 / 16, ExpertParams: expert,
		LMHeadBytes: 2 * V * H, LMHeadParams: V * H,
		OtherBytes:      2*V*H + 800_000_000, // embedding + MoonViT vision encoder (~0.4 B params)
		KVBytesPerToken: L * 576 * 2, KVReplicated: true, AttnDim: 64 * 192,
		ActivationBytesPerToken: 2 * (4*H + 8*2*2048),
		ForwardOverheadUs:       100,
		SpecRoundOverheadUs:     34300,
		Draft:                   DraftModel{Layers: 1, Bytes: 2 * (draftLayer + 32000*H), Params: draftLayer + 32000*H, KVBytesPerToken: 2 * 8 * 128 * 2},
		Source:                  "moonshotai/Kimi-K2.5 config.json (text model as Kimi-K2: 61 layers, 384 experts, MLA); INT4 routed experts (W4A16, group 32); EAGLE-3 head with a 32k draft vocabulary"}
}

var models = map[string]func() Model{"llama-3.1-70b": llama70B, "kimi-k2.5-int4": kimiK25Int4}

// LookupModel returns the table's modelled model of that name (case-insensitive).
func LookupModel(name string) (Model, error) {
	f, ok := models[strings.ToLower(strings.TrimSpace(name))]
	if !ok {
		var names []string
		for k := range models {
			names = append(names, k)
		}
		sort.Strings(names)
		return Model{}, fmt.Errorf("unknown modelled model %q: expected one of %s", name, strings.Join(names, ", "))
	}
	return f(), nil
}

// Work is what one forward of the engine's real model did; the device clock charges the modelled
// model's time for the same work.
type Work struct {
	// Draft: the forward ran the draft model (else the target).
	Draft bool
	// Tokens are the new tokens processed (all sequences).
	Tokens int
	// ContextTokens are the KV positions attended, summed over the sequences (each sequence's
	// cache is read once per forward).
	ContextTokens int64
	// AttnPairs are the (query, key) pairs of attention: per sequence, new tokens × context.
	AttnPairs int64
	// LogitRows is how many rows of logits the forward produced (0: no LM head).
	LogitRows int
}

// Comm is the modelled communication of the modelled model's allreduces: the interconnect model
// and the allreduce selection the engine applied (custom one-shot up to CustomMaxBytes, else
// NCCL's algorithm).
type Comm struct {
	Interconnect   interconnect.Model
	Custom         bool
	CustomMaxBytes int64
	NCCL           collective.Algorithm
}

// AllReduce is the modelled time of one allreduce of bytes per rank over ranks ranks.
func (c Comm) AllReduce(bytes int64, ranks int) time.Duration {
	alg := c.NCCL
	if alg == "" {
		alg = collective.Ring
	}
	if c.Custom && bytes <= c.CustomMaxBytes {
		alg = collective.OneShot
	}
	return c.Interconnect.AllReduceTime(alg, bytes, ranks)
}

// Timer computes modelled forward times: Model on TP ranks of GPU, communicating through Comm.
type Timer struct {
	GPU   GPU
	Model Model
	TP    int
	Comm  Comm
}

// StepCost is the modelled time of some work: device compute (the longer of memory traffic and
// FLOPs, plus the fixed forward overhead) and communication.
type StepCost struct {
	Compute, Comm time.Duration
	// ReadBytes and FLOPs are per rank.
	ReadBytes int64
	FLOPs     float64
}

// Total is Compute + Comm.
func (c StepCost) Total() time.Duration { return c.Compute + c.Comm }

// Add sums two costs.
func (c StepCost) Add(o StepCost) StepCost {
	return StepCost{Compute: c.Compute + o.Compute, Comm: c.Comm + o.Comm, ReadBytes: c.ReadBytes + o.ReadBytes, FLOPs: c.FLOPs + o.FLOPs}
}

// ExpertsTouched is the expected number of distinct routed experts of one layer that tokens
// tokens route to (uniform routing).
func (m Model) ExpertsTouched(tokens int) float64 {
	if m.Experts == 0 || tokens <= 0 {
		return 0
	}
	e := float64(m.Experts)
	return e * (1 - math.Pow(1-float64(m.ExpertsPerToken)/e, float64(tokens)))
}

// Forward is the modelled cost of one forward that did w.
func (t Timer) Forward(w Work) StepCost {
	if w.Tokens <= 0 {
		return StepCost{}
	}
	n := max(1, t.TP)
	m := t.Model
	tokens := float64(w.Tokens)
	var read, flops float64
	layers := m.Layers
	if w.Draft {
		d := m.Draft
		layers = d.Layers
		read = float64(d.Bytes)/float64(n) + float64(w.ContextTokens)*float64(d.KVBytesPerToken)/float64(n)
		flops = 2 * tokens * float64(d.Params) / float64(n)
		flops += 4 * float64(w.AttnPairs) * float64(m.AttnDim) * float64(d.Layers) / float64(n)
	} else {
		read = float64(m.DenseBytes) / float64(n)
		read += m.ExpertsTouched(w.Tokens) * float64(m.MoELayers) * float64(m.ExpertBytes) / float64(n)
		if w.LogitRows > 0 {
			read += float64(m.LMHeadBytes) / float64(n)
			flops += 2 * float64(w.LogitRows) * float64(m.LMHeadParams) / float64(n)
		}
		read += float64(w.ContextTokens) * float64(m.KVPerRank(n))
		flops += 2 * tokens * (float64(m.DenseParams) + float64(m.ExpertsPerToken*m.MoELayers)*float64(m.ExpertParams)) / float64(n)
		flops += 4 * float64(w.AttnPairs) * float64(m.AttnDim) * float64(m.Layers) / float64(n)
	}
	memT := read / (t.GPU.HBMGBps * 1e9 * MemEfficiency)
	flopT := flops / (t.GPU.BF16TFLOPS * 1e12 * FLOPEfficiency)
	sec := math.Max(memT, flopT) + m.ForwardOverheadUs*1e-6
	c := StepCost{Compute: time.Duration(sec * float64(time.Second)), ReadBytes: int64(read), FLOPs: flops}
	if n > 1 {
		per := t.Comm.AllReduce(int64(w.Tokens)*int64(m.Hidden)*int64(m.ActBytes), n)
		c.Comm = time.Duration(2*layers) * per
	}
	return c
}

// SpecRound is the modelled fixed cost of one speculative (draft, then verify) round.
func (t Timer) SpecRound() StepCost {
	return StepCost{Compute: time.Duration(t.Model.SpecRoundOverheadUs * float64(time.Microsecond))}
}

// Describe is one line for the start-up log and /server_info.
func (t Timer) Describe() string {
	return fmt.Sprintf("device clock (modelled, not measured): model=%s (%.1f GB of weights, %.1f GB per rank at tp %d) on gpu=%s (%.0f GB/s x %.2f, %.1f bf16 TFLOP/s x %.2f); "+
		"step = max(real CPU compute, slowdown x noise x (max(bytes/bandwidth, FLOPs/throughput) + %.0fus + modelled allreduces))",
		t.Model.Name, float64(t.Model.WeightBytes())/1e9, float64(t.Model.WeightBytes())/1e9/float64(max(1, t.TP)), t.TP,
		t.GPU.Name, t.GPU.HBMGBps, MemEfficiency, t.GPU.BF16TFLOPS, FLOPEfficiency, t.Model.ForwardOverheadUs)
}
