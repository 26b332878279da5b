package main

import (
	"fmt"
	"io"
	"sort"

	"github.com/reckon-ci/reckon/gate"
	"github.com/reckon-ci/reckon/spec"
)

// gatedMetric is one metric a statistical check judges, with the check's options.
type gatedMetric struct {
	config, workload, metric string
	opts                     gate.StatOptions
}

// gatedMetrics lists the metrics the run's statistical checks judge: from the spec the run
// names (when it can be read here), else from the statistical results of the run, else
// output_throughput of every config with the default options. workload "" means every workload.
func gatedMetrics(run *gate.Run) []gatedMetric {
	var out []gatedMetric
	if run.SpecPath != "" {
		if s, err := spec.Load(run.SpecPath); err == nil {
			for _, c := range s.StatisticalChecks() {
				p := c.Stat()
				o := gate.DefaultStatOptions()
				if p.Alpha > 0 {
					o.Alpha = p.Alpha
				}
				if p.MinEffect > 0 {
					o.MinEffect = p.MinEffect
				}
				out = append(out, gatedMetric{p.Config, p.Workload, p.Metric, o})
				if p.Against == spec.AgainstConfig {
					out = append(out, gatedMetric{p.AgainstConfig, p.Workload, p.Metric, o})
				}
			}
			return out
		}
	}
	for _, c := range run.Checks {
		if c.Stat != nil {
			o := gate.StatOptions{Alpha: c.Stat.Alpha, MinEffect: c.Stat.MinEffect, NoChangeMargin: c.Stat.Margin, Confidence: c.Stat.CIConfidence}
			out = append(out, gatedMetric{c.Config, "", c.Stat.Metric, o})
		}
	}
	if len(out) > 0 {
		return out
	}
	for _, c := range run.Configs {
		out = append(out, gatedMetric{c.Name, "", "output_throughput", gate.DefaultStatOptions()})
	}
	return out
}

// noiseProblems measures the noise of every gated metric in b, prints each one's assessment to
// w (a warning when too noisy), and returns the problems.
func noiseProblems(w io.Writer, from string, b *gate.Baseline) []string {
	run, err := gate.ReadResults(from)
	if err != nil {
		return nil
	}
	prior, perr := gate.TestbedPrior(0)
	if perr != nil {
		fmt.Fprintf(w, "warning: %v\n", perr)
	}
	seen := map[string]bool{}
	var problems, lines []string
	for _, g := range gatedMetrics(run) {
		c := b.Config(g.config)
		if c == nil {
			continue
		}
		for _, bw := range c.Workloads {
			if g.workload != "" && bw.Name != g.workload {
				continue
			}
			ms, ok := bw.Metrics[g.metric]
			if !ok {
				continue
			}
			key := g.config + "/" + bw.Name + "/" + g.metric
			if seen[key] {
				continue
			}
			seen[key] = true
			a := gate.AssessNoise(ms.Groups(), g.opts, prior)
			line := fmt.Sprintf("%s: %s", key, a)
			if a.Note != "" {
				line += "; " + a.Note
			}
			if !a.OK {
				problems = append(problems, fmt.Sprintf("%s: ratio interval ±%.1f%% with %d launch(es) of %d trials exceeds the no-change margin %.0f%%; needs %s",
					key, 100*a.HalfWidth, a.Launches, a.TrialsPerLaunch, 100*a.Margin, a.Need))
				line = "warning: " + line
			} else {
				line = "noise: " + line
			}
			lines = append(lines, line)
		}
	}
	sort.Strings(lines)
	for _, l := range lines {
		fmt.Fprintln(w, l)
	}
	return problems
}
