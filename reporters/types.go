// Package reporters renders one gate run as the four report formats reckon publishes:
//
//   - junit.xml: one <testsuite> per config, plus a "cross-config" suite for checks that span
//     configs; one <testcase> per check (read by every CI system);
//   - results.json: everything measured, lossless (gate.WriteResults; gate.ReadResults reads it
//     back);
//   - summary.md: a Markdown summary for $GITHUB_STEP_SUMMARY and PR comments, failures first;
//   - report.html: a self-contained HTML report with inline SVG charts.
//
// The package renders; it never judges and never starts processes. Its input is a gate.Run, the
// results model the suites fill from the gate's verdicts; the run's verdict, its counts and each
// check's status and category are gate's (see docs/reports.md for the mapping and every field).
package reporters

import (
	"math"
	"strings"

	"github.com/reckon-ci/reckon/gate"
)

// CrossConfig is the JUnit suite name and classname of checks whose gate.Config is empty (checks that
// span configs and name none as their subject).
const CrossConfig = "cross-config"

// provenance is what was tested, for headlines: the commit, the engine's version, reckon's.
func provenance(r *gate.Run) [][2]string {
	var out [][2]string
	if r.GitCommit != "" {
		out = append(out, [2]string{"commit", shortCommit(r.GitCommit)})
	}
	if r.EngineVersion != "" {
		out = append(out, [2]string{"engine", r.EngineVersion})
	}
	if r.ReckonVersion != "" {
		out = append(out, [2]string{"reckon", r.ReckonVersion})
	}
	return out
}

func shortCommit(c string) string {
	head, dirty := strings.CutSuffix(c, "-dirty")
	if len(head) > 12 {
		head = head[:12]
	}
	if dirty {
		head += "-dirty"
	}
	return head
}

// The headline numbers of a statistical check, which the renderers show: the medians of the
// comparison and of this config, head/base and its confidence interval, and the p-value; nil
// for other checks and for a number the comparison did not compute (NaN).
func baseMedian(c *gate.Check) *float64 {
	return statField(c, func(s *gate.StatResult) *float64 { return &s.BaseMedian })
}
func headMedian(c *gate.Check) *float64 {
	return statField(c, func(s *gate.StatResult) *float64 { return &s.HeadMedian })
}
func ratio(c *gate.Check) *float64 {
	return statField(c, func(s *gate.StatResult) *float64 { return &s.Ratio })
}
func ciLow(c *gate.Check) *float64 {
	return statField(c, func(s *gate.StatResult) *float64 { return &s.CILow })
}
func ciHigh(c *gate.Check) *float64 {
	return statField(c, func(s *gate.StatResult) *float64 { return &s.CIHigh })
}
func pValue(c *gate.Check) *float64 {
	return statField(c, func(s *gate.StatResult) *float64 { return &s.PValue })
}

func statField(c *gate.Check, f func(*gate.StatResult) *float64) *float64 {
	if c.Stat == nil || math.IsNaN(*f(c.Stat)) {
		return nil // not a statistical check, or not computed
	}
	return f(c.Stat)
}

// outcomeText is the outcome as reports show it: a statistical check's own decision
// (regression, no_change, improvement, inconclusive), else the verdict's outcome.
func outcomeText(c *gate.Check) string {
	if c.Stat != nil && c.Stat.Outcome != "" {
		return string(c.Stat.Outcome)
	}
	return string(c.Outcome)
}
