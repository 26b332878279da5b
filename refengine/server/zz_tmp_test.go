package server

import "testing"

func BenchmarkZZSpec1(b *testing.B) {
	var cs [][]string
	for _, base := range [][]string{{"--tp-size", "8", "--topology", "pcie", "--disable-custom-all-reduce"}, {"--tp-size", "4", "--topology", "pcie", "--disable-custom-all-reduce"}, {"--tp-size", "4"}} {
		cs = append(cs, base, append(append([]string{}, base...), "--speculative-algorithm", "EAGLE3"))
	}
	ts := make([]*testServer, len(cs))
	for i, c := range cs {
		ts[i] = start(b, nil, true, c...)
	}
	best := make([]float64, len(cs))
	for r := 0; r < 3; r++ {
		for i := range cs {
			best[i] = max(best[i], ts[i].load(b, 1, 4, 64, 32))
		}
	}
	for i, c := range cs {
		b.Logf("c1 %v: %.0f tok/s accept %.2f", c, best[i], ts[i].e.Sched.Stats().AvgAcceptLength())
	}
}
