package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"path/filepath"
	"sort"

	"github.com/reckon-ci/reckon/gate"
	"github.com/reckon-ci/reckon/spec"
	"github.com/reckon-ci/reckon/suites"
)

// specNeedOptions are spec check's --baselines, --testbed and --history.
type specNeedOptions struct{ dir, testbed, history string }

// specNeedsFor holds the running spec check's options (set by its RunE for the call).
var specNeedsFor specNeedOptions

// specNeed is what one statistical check needs on one testbed to decide its min_effect, planned
// from the noise its stored baseline measured (gate.NeedForMinEffect: the variance model of the
// inconclusive verdict's "would decide").
type specNeed struct {
	Check    string          `json:"check"`
	Testbed  string          `json:"testbed"`
	Baseline string          `json:"baseline"`
	Need     gate.DesignNeed `json:"need"`
}

// String renders the need, e.g. "testbed K: throughput ...: to decide min_effect 5% ...".
func (n specNeed) String() string {
	return fmt.Sprintf("testbed %s: %s: %s", n.Testbed, n.Check, n.Need)
}

// specNeeds plans every statistical check of s against each baseline of s under o.dir (one
// testbed, o.testbed, or every one that has one).
func specNeeds(s *spec.Spec, o specNeedOptions) ([]specNeed, []string) {
	var baselines []*gate.Baseline
	var notes []string
	if o.testbed != "" {
		b, err := gate.LoadBaseline(o.dir, o.testbed, s.Name)
		if err != nil {
			return nil, []string{err.Error()}
		}
		baselines = append(baselines, b)
	} else {
		paths, _ := filepath.Glob(gate.BaselinePath(o.dir, "*", s.Name))
		sort.Strings(paths)
		for _, p := range paths {
			b, err := gate.ReadBaseline(p)
			if err != nil {
				if !errors.Is(err, fs.ErrNotExist) {
					notes = append(notes, err.Error())
				}
				continue
			}
			baselines = append(baselines, b)
		}
		if len(baselines) == 0 && len(notes) == 0 {
			notes = append(notes, fmt.Sprintf("no baseline of spec %s under %s: record one (reckon baseline record) to plan the checks from its noise", s.Name, o.dir))
		}
	}
	prior, perr := gate.TestbedPrior(0)
	if perr != nil {
		notes = append(notes, perr.Error())
	}
	var out []specNeed
	for _, b := range baselines {
		for _, c := range s.StatisticalChecks() {
			n, note := planCheck(s, c, b, prior)
			if note != "" {
				notes = append(notes, fmt.Sprintf("testbed %s: %s: %s", b.TestbedKey, c.Name, note))
				continue
			}
			out = append(out, specNeed{Check: c.Name, Testbed: b.TestbedKey, Baseline: b.Path(), Need: n})
		}
	}
	return out, notes
}

// planCheck plans check c from baseline b: the within- and between-launch noise of the check's
// metric in the configs it compares (pooled), and the design of its workload.
func planCheck(s *spec.Spec, c *spec.Check, b *gate.Baseline, prior gate.LaunchNoise) (gate.DesignNeed, string) {
	p := c.Stat()
	opts := suites.StatOptionsFor(p)
	k, n := 1, 5
	if w, ok := s.Workload(p.Workload); ok {
		k, n = max(1, w.Launches), max(1, w.Trials)
	}
	configs := []string{p.Config}
	if p.AgainstConfig != "" {
		configs = append(configs, p.AgainstConfig)
	}
	var ests []gate.NoiseEstimate
	var wSS float64
	wDF, launches := 0, 0
	for _, name := range configs {
		g := b.LaunchGroups(name, p.Workload, p.Metric)
		if len(g) == 0 {
			continue
		}
		e := gate.EstimateNoise(g)
		ests = append(ests, e)
		launches += e.Launches
		if e.WithinDF > 0 && !math.IsNaN(e.WithinCV) {
			wSS += float64(e.WithinDF) * e.WithinCV * e.WithinCV
			wDF += e.WithinDF
		}
	}
	if len(ests) == 0 {
		return gate.DesignNeed{}, fmt.Sprintf("the baseline has no %s of %v in workload %s", p.Metric, configs, p.Workload)
	}
	within := math.NaN()
	if wDF > 0 {
		within = math.Sqrt(wSS / float64(wDF))
	}
	between, ok := gate.PoolNoise(fmt.Sprintf("measured in the baseline's %d launches", launches), ests...)
	if !ok {
		between = prior
	}
	return gate.NeedForMinEffect(between, within, k, n, opts), ""
}

// printSpecNeeds prints spec check's plan lines (with --baselines).
func printSpecNeeds(w io.Writer, r specCheckResult) {
	for _, n := range r.Needs {
		fmt.Fprintf(w, "  needs on %s\n", n)
	}
	for _, n := range r.NeedNotes {
		fmt.Fprintf(w, "  needs: %s\n", n)
	}
}
