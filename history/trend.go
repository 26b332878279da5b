package history

import (
	"context"
	"github.com/reckon-ci/reckon/spec"
	"slices"
	"strings"

	"github.com/reckon-ci/reckon/gate"
)

// TrendRuns is how many runs a check's trend (its sparkline) shows.
const TrendRuns = 30

// AddTrends sets Trend on each statistical check of run (throughput and latency checks of one
// config and one metric) to its series' last TrendRuns values in the store, and returns how many
// it set. The series is the run's testbed, spec, the check's config and metric, and the
// workload its name names (or the only one there is).
func (s *Store) AddTrends(ctx context.Context, run *gate.Run) (int, error) {
	n := 0
	for i := range run.Checks {
		c := &run.Checks[i]
		if c.Metric() == "" || c.Config == "" || (c.Kind != string(spec.KindThroughput) && c.Kind != string(spec.KindLatency)) {
			continue
		}
		ser, err := s.Series(ctx, Filter{Testbed: run.TestbedKey, Spec: run.SpecName, Config: c.Config, Metric: c.Metric()})
		if err != nil {
			return n, err
		}
		var pick *Series
		words := strings.Fields(c.Name)
		for j := range ser {
			if len(ser) == 1 || slices.Contains(words, ser[j].Key.Workload) {
				pick = &ser[j]
				break
			}
		}
		if pick == nil {
			continue
		}
		v := pick.Values()
		if len(v) > TrendRuns {
			v = v[len(v)-TrendRuns:]
		}
		c.Trend = v
		n++
	}
	return n, nil
}
