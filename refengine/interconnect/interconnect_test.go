package interconnect

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/reckon-ci/reckon/refengine/collective"
)

const tokenBytes = 128 * 4 // default tiny model: hidden 128 float32 per token per allreduce

func TestFormulasOnHandComputedCases(t *testing.T) {
	m := Model{Topology: NVLink, LinkGBps: 10, LatencyUs: 5} // 10 GB/s = 10000 bytes/us
	pcie := Model{Topology: PCIe, LinkGBps: 4, BusGBps: 2, LatencyUs: 20, TransferUs: 3}
	pcieConc := pcie
	pcieConc.ConcurrentTransfers = 2
	cases := []struct {
		name  string
		m     Model
		alg   collective.Algorithm
		bytes int64
		n     int
		want  time.Duration
	}{
		// ring: 2(n-1)*(a + B/n/link) = 6*(5 + 40000/4/10000) = 6*6 = 36us
		{"nvlink ring n4", m, collective.Ring, 40000, 4, 36 * time.Microsecond},
		// one-shot nvlink: a + (n-1)*B/link = 5 + 3*40000/10000 = 17us
		{"nvlink one-shot n4", m, collective.OneShot, 40000, 4, 17 * time.Microsecond},
		// ring pcie: 2*(20 + 8000/2/4000) = 2*21 = 42us
		{"pcie ring n2", pcie, collective.Ring, 8000, 2, 42 * time.Microsecond},
		// one-shot pcie: a + n(n-1)*(transfer + B/bus) = 20 + 2*(3 + 8000/2000) = 34us
		{"pcie one-shot n2", pcie, collective.OneShot, 8000, 2, 34 * time.Microsecond},
		// n=8: 20 + 56*(3 + 2000/2000) = 244us
		{"pcie one-shot n8", pcie, collective.OneShot, 2000, 8, 244 * time.Microsecond},
		// with 2 concurrent transfers only n(n-1)-2 queue: n2 none (20 + 2*4 = 28us), n8 54 of
		// 56 (20 + 54*3 + 56*1 = 238us)
		{"pcie one-shot n2 concurrent", pcieConc, collective.OneShot, 8000, 2, 28 * time.Microsecond},
		{"pcie one-shot n8 concurrent", pcieConc, collective.OneShot, 2000, 8, 238 * time.Microsecond},
		{"one rank", m, collective.Ring, 1 << 20, 1, 0},
		{"zero bytes", pcie, collective.OneShot, 0, 8, 0},
		// tree: 2*ceil(log2 n)*a + 2*B/link = 2*2*5 + 2*40000/10000 = 28us; n=3 has depth 2 too,
		// n=8 depth 3: 30 + 8 = 38us
		{"nvlink tree n4", m, collective.Tree, 40000, 4, 28 * time.Microsecond},
		{"nvlink tree n3", m, collective.Tree, 40000, 3, 28 * time.Microsecond},
		{"nvlink tree n8", m, collective.Tree, 40000, 8, 38 * time.Microsecond},
		{"pcie tree n2", pcie, collective.Tree, 8000, 2, 44 * time.Microsecond},
		{"unknown algorithm", m, "nvls", 1000, 4, 0},
	}
	for _, c := range cases {
		if got := c.m.AllReduceTime(c.alg, c.bytes, c.n); got != c.want {
			t.Errorf("%s: AllReduceTime = %v, want %v", c.name, got, c.want)
		}
	}
}

// TestDefaultOrderings pins the shape the reference engine must reproduce from the field.
func TestDefaultOrderings(t *testing.T) {
	nv, pc := Default(NVLink), Default(PCIe)
	for _, n := range []int{2, 4, 8} {
		for tokens := int64(1); tokens <= 32; tokens *= 2 { // decode batches
			b := tokens * tokenBytes
			if os, ring := nv.AllReduceTime(collective.OneShot, b, n), nv.AllReduceTime(collective.Ring, b, n); !(os < ring) {
				t.Errorf("nvlink tp%d decode %d tokens: one-shot %v not faster than ring %v", n, tokens, os, ring)
			}
		}
	}
	for tokens := int64(1); tokens <= 4096; tokens *= 2 { // decode and prefill on 8 PCIe GPUs
		b := tokens * tokenBytes
		os, ring := pc.AllReduceTime(collective.OneShot, b, 8), pc.AllReduceTime(collective.Ring, b, 8)
		if float64(os) < 1.3*float64(ring) {
			t.Errorf("pcie tp8 %d tokens: forced one-shot %v is not clearly slower than ring %v", tokens, os, ring)
		}
	}
	// Latencies of tens of microseconds: one decode allreduce must cost between 5us and 1ms,
	// except the forced one-shot on 8 PCIe GPUs (the configuration the engines refuse), which
	// must dominate a CPU step (a few ms) without stalling it (under 5ms).
	for _, m := range []Model{nv, pc} {
		for _, alg := range collective.Algorithms {
			limit := time.Millisecond
			if m.Topology == PCIe && alg == collective.OneShot {
				limit = 5 * time.Millisecond
			}
			if d := m.AllReduceTime(alg, 32*tokenBytes, 8); d < 5*time.Microsecond || d > limit {
				t.Errorf("%s %s decode allreduce %v outside 5us..1ms: would not matter to a CPU engine or would swamp it", m.Topology, alg, d)
			}
		}
	}
	// Large messages: on NVLink the ring wins eventually (one-shot moves (n-1)B per rank).
	if c := nv.Crossover(8, 1<<30); c <= 32*tokenBytes || c >= 1<<30 {
		t.Errorf("nvlink tp8 crossover at %d bytes: want above decode sizes and below 1 GiB", c)
	}
	if c := nv.Crossover(2, 1<<30); c != 0 {
		t.Errorf("nvlink tp2: ring should never beat one-shot (one latency less, same bytes), crossover %d", c)
	}
}

// TestOrderingsFailOnBadConstants shows the ordering checks above catch a wrong model: with a fast
// bus and no per-transfer cost, forced one-shot on PCIe would look faster than the ring.
func TestOrderingsFailOnBadConstants(t *testing.T) {
	bad := Default(PCIe)
	bad.BusGBps, bad.TransferUs = 100, 0
	if os, ring := bad.AllReduceTime(collective.OneShot, tokenBytes, 8), bad.AllReduceTime(collective.Ring, tokenBytes, 8); os >= ring {
		t.Fatalf("expected the bad model to favour one-shot (os %v, ring %v)", os, ring)
	}
}

func TestParse(t *testing.T) {
	for in, want := range map[string]Topology{"nvlink": NVLink, "PCIe": PCIe, " pcie ": PCIe} {
		if got, err := Parse(in); err != nil || got != want {
			t.Errorf("Parse(%q) = %q, %v", in, got, err)
		}
	}
	if _, err := Parse("infiniband"); err == nil || !strings.Contains(err.Error(), "nvlink") {
		t.Errorf("Parse(infiniband) = %v, want an error listing the accepted values", err)
	}
}

func TestValidate(t *testing.T) {
	for _, tp := range []Topology{NVLink, PCIe} {
		if err := Default(tp).Validate(); err != nil {
			t.Errorf("Default(%s) invalid: %v", tp, err)
		}
	}
	if err := Default("token-ring").Validate(); err == nil {
		t.Error("unknown topology validated")
	}
	m := Default(PCIe)
	m.BusGBps = 0
	if err := m.Validate(); err == nil || !strings.Contains(err.Error(), "bus") {
		t.Errorf("zero bus bandwidth: %v", err)
	}
	m = Default(NVLink)
	m.LatencyUs = -1
	if err := m.Validate(); err == nil {
		t.Error("negative latency validated")
	}
}

func TestDescribe(t *testing.T) {
	for _, tp := range []Topology{NVLink, PCIe} {
		d := Default(tp).Describe()
		if strings.Contains(d, "\n") || !strings.Contains(d, string(tp)) || !strings.Contains(d, "ring=") || !strings.Contains(d, "one_shot=") {
			t.Errorf("Describe(%s) = %q: want one line naming the topology and both formulas", tp, d)
		}
	}
	if d := Default(PCIe).Describe(); !strings.Contains(d, "bus=2GB/s") || !strings.Contains(d, "transfer=40us") || !strings.Contains(d, "concurrent=2") {
		t.Errorf("pcie Describe lacks its constants: %q", d)
	}
}

// TestDocsShowDescribe pins docs/interconnect.md to the code: its example start-up line must be
// what Describe prints for the default PCIe model, and its constants table must hold the defaults.
func TestDocsShowDescribe(t *testing.T) {
	data, err := os.ReadFile("../../docs/interconnect.md")
	if err != nil {
		t.Fatalf("reading the model's documentation: %v", err)
	}
	doc := string(data)
	if d := Default(PCIe).Describe(); !strings.Contains(doc, d) {
		t.Errorf("docs/interconnect.md does not show the current start-up line:\n%s", d)
	}
	nv, pc := Default(NVLink), Default(PCIe)
	for _, row := range []string{
		fmt.Sprintf("| nvlink | %g | – | %g | – | – |", nv.LinkGBps, nv.LatencyUs),
		fmt.Sprintf("| pcie | %g | %g | %g | %g | %d |", pc.LinkGBps, pc.BusGBps, pc.LatencyUs, pc.TransferUs, pc.ConcurrentTransfers),
	} {
		if !strings.Contains(doc, row) {
			t.Errorf("docs/interconnect.md constants table lacks %q", row)
		}
	}
}
