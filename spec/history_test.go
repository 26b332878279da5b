package spec

import (
	"strings"
	"testing"
)

// `against: history` (docs/history.md): parsed with its history_runs, which no other
// comparison accepts.
func TestAgainstHistory(t *testing.T) {
	const base = `name: h
engine: {kind: sglang, model: m, tp_size: 1}
configs: [{name: nccl}]
workloads: [{name: decode, concurrency: 1, num_prompts: 1, input_len: 1, output_len: 1, trials: 5}]
checks:
`
	s, err := Parse([]byte(base+"  - {kind: throughput, config: nccl, metric: output_throughput, against: history}\n"), "h.yaml")
	if err != nil {
		t.Fatal(err)
	}
	c := s.Checks[0]
	if p := c.Stat(); p.Against != AgainstHistory || p.HistoryRuns != DefaultHistoryRuns || c.Name != "throughput nccl decode output_throughput vs history" || c.Scope() != ScopeCross || len(c.ConfigNames()) != 1 {
		t.Fatalf("check %+v", c)
	}
	s, err = Parse([]byte(base+"  - {kind: latency, config: nccl, metric: p99_ttft_ms, against: history, history_runs: 12}\n"), "h.yaml")
	if err != nil || s.Checks[0].Stat().HistoryRuns != 12 {
		t.Fatalf("history_runs 12: %v %+v", err, s)
	}
	for src, want := range map[string]string{
		"  - {kind: throughput, config: nccl, metric: output_throughput, against: baseline, history_runs: 5}\n": "h.yaml:6:98: checks[0].history_runs: history_runs applies to against: history only (against is baseline)",
		"  - {kind: throughput, config: nccl, metric: output_throughput, against: history, history_runs: 1}\n":  "checks[0].history_runs: expected an integer >= 2, got 1",
		"  - {kind: throughput, config: nccl, metric: output_throughput, against: histroy}\n":                   `expected baseline, history or config:NAME, got "histroy"`,
	} {
		_, err := Parse([]byte(base+src), "h.yaml")
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want %q", strings.TrimSpace(src), err, want)
		}
	}
}
