package device

import (
	"math"
	"testing"
	"time"

	"github.com/reckon-ci/reckon/refengine/collective"
	"github.com/reckon-ci/reckon/refengine/interconnect"
)

func TestTables(t *testing.T) {
	for _, n := range GPUNames() {
		g, err := LookupGPU(n)
		if err != nil || g.MemoryBytes <= 0 || g.HBMGBps <= 0 || g.BF16TFLOPS <= 0 || g.Source == "" {
			t.Errorf("gpu %s: %+v %v", n, g, err)
		}
	}
	if _, err := LookupGPU("a100"); err == nil {
		t.Error("unknown GPU accepted")
	}
	if _, err := LookupModel("gpt-5"); err == nil {
		t.Error("unknown model accepted")
	}
	k, err := LookupModel("Kimi-K2.5-INT4")
	if err != nil {
		t.Fatal(err)
	}
	// About 595 GB of weights, 74 GB per GPU at tp 8; MLA's KV cache 70,272 bytes per token.
	if w := float64(k.WeightBytes()) / 1e9; w < 585 || w > 605 {
		t.Errorf("kimi weights %.1f GB", w)
	}
	if k.KVPerRank(8) != 61*576*2 {
		t.Errorf("kimi KV per rank %d", k.KVPerRank(8))
	}
	l, _ := LookupModel("llama-3.1-70b")
	if w := float64(l.WeightBytes()) / 1e9; w < 139 || w > 143 {
		t.Errorf("llama 70b weights %.1f GB", w)
	}
	if l.KVPerRank(4) != 80*8*128*2*2/4 {
		t.Errorf("llama KV per rank %d", l.KVPerRank(4))
	}
}

func TestExpertsTouched(t *testing.T) {
	k, _ := LookupModel("kimi-k2.5-int4")
	prev := 0.0
	for _, n := range []int{1, 4, 16, 64, 1024} {
		e := k.ExpertsTouched(n)
		if e <= prev || e > float64(k.Experts) {
			t.Errorf("%d tokens touch %v experts (previous %v)", n, e, prev)
		}
		prev = e
	}
	if e := k.ExpertsTouched(1); math.Abs(e-8) > 1e-9 {
		t.Errorf("one token touches %v experts, want 8", e)
	}
}

func TestForwardDecodeIsBandwidthBound(t *testing.T) {
	gpu, _ := LookupGPU("h100")
	m, _ := LookupModel("llama-3.1-70b")
	tm := Timer{GPU: gpu, Model: m, TP: 4, Comm: Comm{Interconnect: interconnect.GPUScale(interconnect.NVLink)}}
	c := tm.Forward(Work{Tokens: 8, ContextTokens: 8 * 100, AttnPairs: 8 * 100, LogitRows: 8})
	// (dense + LM head) / 4 ranks, plus the KV read, at 80% of 3.35 TB/s.
	want := float64(m.DenseBytes+m.LMHeadBytes)/4 + 800*float64(m.KVPerRank(4))
	if math.Abs(float64(c.ReadBytes)-want) > 1 {
		t.Errorf("read %d bytes, want %.0f", c.ReadBytes, want)
	}
	wantT := want/(3350e9*MemEfficiency) + 100e-6
	if math.Abs(c.Compute.Seconds()-wantT) > 1e-6 {
		t.Errorf("compute %v, want %.6fs", c.Compute, wantT)
	}
	// 160 allreduces of 8 tokens x 8192 x 2 bytes, ring over 4 ranks.
	per := interconnect.GPUScale(interconnect.NVLink).AllReduceTime(collective.Ring, 8*8192*2, 4)
	if c.Comm != 160*per {
		t.Errorf("comm %v, want 160 x %v", c.Comm, per)
	}
	// A long prefill is FLOP-bound.
	p := tm.Forward(Work{Tokens: 4096, ContextTokens: 4096, AttnPairs: 4096 * 4096 / 2, LogitRows: 1})
	if flopT := p.FLOPs / (gpu.BF16TFLOPS * 1e12 * FLOPEfficiency); math.Abs(p.Compute.Seconds()-flopT-100e-6) > 1e-6 {
		t.Errorf("prefill compute %v, FLOP time %.6fs", p.Compute, flopT)
	}
	if (Timer{GPU: gpu, Model: m, TP: 4}).Forward(Work{}).Total() != 0 {
		t.Error("an empty forward costs time")
	}
}

func TestCommSelection(t *testing.T) {
	ic := interconnect.GPUScale(interconnect.PCIe)
	nccl := Comm{Interconnect: ic}
	custom := Comm{Interconnect: ic, Custom: true, CustomMaxBytes: 1 << 20}
	small, large := int64(16<<10), int64(4<<20)
	if got, want := custom.AllReduce(small, 8), ic.AllReduceTime(collective.OneShot, small, 8); got != want {
		t.Errorf("custom small: %v, want one-shot %v", got, want)
	}
	if got, want := custom.AllReduce(large, 8), ic.AllReduceTime(collective.Ring, large, 8); got != want {
		t.Errorf("custom large: %v, want ring %v (too large for the buffer)", got, want)
	}
	if got, want := nccl.AllReduce(small, 8), ic.AllReduceTime(collective.Ring, small, 8); got != want {
		t.Errorf("nccl: %v, want ring %v", got, want)
	}
	tree := Comm{Interconnect: ic, NCCL: collective.Tree}
	if got, want := tree.AllReduce(small, 8), ic.AllReduceTime(collective.Tree, small, 8); got != want {
		t.Errorf("tree: %v, want %v", got, want)
	}
	// On 8 PCIe GPUs the forced one-shot is slower than the ring for decode-sized messages.
	if custom.AllReduce(small, 8) <= nccl.AllReduce(small, 8) {
		t.Errorf("PCIe tp8: one-shot %v not slower than ring %v", custom.AllReduce(small, 8), nccl.AllReduce(small, 8))
	}
}

func TestDraftAndSpecRound(t *testing.T) {
	gpu, _ := LookupGPU("rtx-pro-6000")
	m, _ := LookupModel("kimi-k2.5-int4")
	tm := Timer{GPU: gpu, Model: m, TP: 8, Comm: Comm{Interconnect: interconnect.GPUScale(interconnect.PCIe)}}
	d := tm.Forward(Work{Draft: true, Tokens: 1, ContextTokens: 100, AttnPairs: 100})
	tg := tm.Forward(Work{Tokens: 1, ContextTokens: 100, AttnPairs: 100, LogitRows: 1})
	if d.Total() >= tg.Total()/10 {
		t.Errorf("draft forward %v is not much cheaper than the target's %v", d.Total(), tg.Total())
	}
	if d.Comm != 2*tm.Comm.AllReduce(int64(m.Hidden*m.ActBytes), 8) {
		t.Errorf("draft comm %v: want two allreduces", d.Comm)
	}
	if tm.SpecRound().Compute != time.Duration(m.SpecRoundOverheadUs*1000) {
		t.Errorf("spec round %v", tm.SpecRound())
	}
	// Verifying 4 tokens reads more experts than decoding 1.
	v := tm.Forward(Work{Tokens: 4, ContextTokens: 104, AttnPairs: 4 * 104, LogitRows: 4})
	if v.ReadBytes <= tg.ReadBytes {
		t.Errorf("verify reads %d bytes, decode %d", v.ReadBytes, tg.ReadBytes)
	}
}
