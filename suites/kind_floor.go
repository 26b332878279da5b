package suites

import (
	"github.com/reckon-ci/reckon/gate"
	"github.com/reckon-ci/reckon/internal/metric"
	"github.com/reckon-ci/reckon/spec"
)

// metricPeakGPUMem is the floor metric measured by GPU memory sampling rather than read from the
// engine log (the registry's only GPUSampler metric).
const metricPeakGPUMem = metric.PeakGPUMemGiB

// lateMetrics are judged after a config's measurements, from a fresh read of its log.
var lateMetrics = map[string]bool{metricPeakGPUMem: true, metric.SpecAcceptLength: true}

// floorKind: a floor or ceiling on what one config's engine reported (its log and endpoints),
// on its peak GPU memory, or on the median of a result metric over its trials; judged in each
// config's container the check names.
type floorKind struct{ configScoped }

func init() { registerConfigKind(floorKind{}, spec.KindFloor) }

func (floorKind) labels(*spec.Check) []string { return []string{labelMemory} }

// late: metrics that only exist after traffic (peak GPU memory, speculative accept length,
// result metrics) are judged after the config's measurements.
func (floorKind) late(c *spec.Check) bool { return lateMetrics[c.Floor().Metric] || c.IsResultFloor() }

// needs: a late floor needs the config's traffic, except peak GPU memory, which sampling
// measures from the launch on.
func (k floorKind) needs(s *spec.Spec, c *spec.Check, config string) []need {
	p := c.Floor()
	if k.late(c) && p.Metric != metricPeakGPUMem {
		return trafficNeed(s, config)
	}
	return nil
}

func (floorKind) judge(ev *evidence, c *spec.Check) gate.Verdict {
	p := c.Floor()
	if c.IsResultFloor() {
		return resultFloorVerdict(ev, c)
	}
	v, err := engineValue(ev, p.Metric)
	if err != nil {
		return errVerdict(c, ev.name, err)
	}
	if v == nil {
		if err := ev.infraError(); err != nil {
			return errVerdict(c, ev.name, err)
		}
	}
	out := gate.Floor(c.Name, p.Metric, v, p.Min, p.Max)
	out.Config = ev.name
	return out // its words: reporters.Sentence, when the entry is recorded
}
