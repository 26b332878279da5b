package memplan

import (
	"strings"
	"testing"
)

func base() Input {
	return Input{
		DeviceBytes: 192 << 20, MemFractionStatic: 0.8, Weights: 3 << 20, GraphReserve: 2 << 20,
		Activations: 12 << 20, KVBytesPerToken: 2048, PageSize: 16,
	}
}

func TestFormula(t *testing.T) {
	p, err := Compute(base())
	if err != nil {
		t.Fatal(err)
	}
	dev, frac := int64(192<<20), 0.8
	static := int64(float64(dev) * frac)
	if p.Static != static {
		t.Errorf("static = %d, want %d", p.Static, static)
	}
	wantBudget := static - (3 << 20) - (2 << 20) - (12 << 20)
	if p.KVBudget != wantBudget {
		t.Errorf("kv budget = %d, want %d", p.KVBudget, wantBudget)
	}
	wantTokens := int(wantBudget/(2048*16)) * 16
	if p.KVTokens != wantTokens || p.KVTokens%16 != 0 {
		t.Errorf("tokens = %d, want %d (a multiple of the page size)", p.KVTokens, wantTokens)
	}
	if p.Used+p.Available != p.DeviceBytes {
		t.Errorf("used %d + available %d != device %d", p.Used, p.Available, p.DeviceBytes)
	}
}

// TestKVShrinksByExactlyTheReserves: turning on the custom allreduce and the graph reserve takes
// exactly their bytes out of the KV budget.
func TestKVShrinksByExactlyTheReserves(t *testing.T) {
	in := base()
	in.GraphReserve = 0
	a, err := Compute(in)
	if err != nil {
		t.Fatal(err)
	}
	in.CustomAR = 768 << 10
	in.GraphReserve = 5 << 20
	b, err := Compute(in)
	if err != nil {
		t.Fatal(err)
	}
	if d := a.KVBudget - b.KVBudget; d != in.CustomAR+in.GraphReserve {
		t.Errorf("KV budget shrank by %d bytes, want exactly custom AR + graph = %d", d, in.CustomAR+in.GraphReserve)
	}
	// and in tokens, up to page rounding
	lost := a.KVTokens - b.KVTokens
	exact := float64(in.CustomAR+in.GraphReserve) / float64(in.KVBytesPerToken)
	if float64(lost) < exact-16 || float64(lost) > exact+16 {
		t.Errorf("KV tokens shrank by %d, want %.0f ± one page", lost, exact)
	}
}

func TestFaultReserveShrinksKV(t *testing.T) {
	a, _ := Compute(base())
	in := base()
	in.FaultReserve = 64 << 20
	b, err := Compute(in)
	if err != nil {
		t.Fatal(err)
	}
	if a.KVBytes-b.KVBytes < 63<<20 {
		t.Errorf("a 64 MiB fault reserve shrank KV only from %d to %d bytes", a.KVBytes, b.KVBytes)
	}
}

func TestNotEnoughMemory(t *testing.T) {
	in := base()
	in.CustomAR = 200 << 20
	_, err := Compute(in)
	if err == nil || !strings.Contains(err.Error(), "Not enough memory") || !strings.Contains(err.Error(), "custom allreduce") {
		t.Fatalf("want a Not enough memory error naming the parts, got %v", err)
	}
	for _, bad := range []Input{{DeviceBytes: 0, MemFractionStatic: 0.5, KVBytesPerToken: 1, PageSize: 1}, {DeviceBytes: 1, MemFractionStatic: 1.5, KVBytesPerToken: 1, PageSize: 1}} {
		if _, err := Compute(bad); err == nil {
			t.Errorf("Compute(%+v): want an error", bad)
		}
	}
}

func TestMaxTotalTokensCaps(t *testing.T) {
	in := base()
	in.MaxTotalTokens = 1000
	p, err := Compute(in)
	if err != nil {
		t.Fatal(err)
	}
	if p.KVTokens != 992 {
		t.Errorf("tokens = %d, want 992 (1000 rounded down to pages of 16)", p.KVTokens)
	}
}
