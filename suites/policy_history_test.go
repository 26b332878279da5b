package suites

import (
	"testing"

	"github.com/reckon-ci/reckon/gate"
)

// --require-baseline concerns stored baselines: a check against the history with too few nights
// is no_baseline, failed by --strict only, so the nightly's bootstrap nights (no --strict) keep
// --require-baseline for their baseline checks and still pass the history checks' bootstrap.
func TestRequireBaselineLeavesHistoryChecksToStrict(t *testing.T) {
	s := mustSpec(t, `name: t
engine: {kind: sglang, model: m, tp_size: 2}
configs: [{name: a}]
workloads:
  - {name: w, concurrency: 1, num_prompts: 1, input_len: 1, output_len: 1, trials: 5}
checks:
  - {kind: throughput, config: a, metric: output_throughput, against: history}
  - {kind: throughput, config: a, metric: p99_ttft_ms, against: baseline}
`)
	hist, base := s.Checks[0].Name, s.Checks[1].Name
	for _, tc := range []struct {
		strict, require bool
		name            string
		want            gate.Status
	}{
		{false, true, hist, gate.StatusSkipped},
		{false, true, base, gate.StatusFailed},
		{true, true, hist, gate.StatusFailed},
		{true, false, hist, gate.StatusFailed},
		{false, false, base, gate.StatusSkipped},
	} {
		fw := &framework{spec: s, opts: Options{Strict: tc.strict, RequireBaseline: tc.require}}
		if got, _ := fw.policyFor(tc.name).Status(gate.NoBaseline); got != tc.want {
			t.Errorf("strict %v, require-baseline %v, %s: no_baseline is %s, want %s", tc.strict, tc.require, tc.name, got, tc.want)
		}
	}
}
