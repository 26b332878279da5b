// Package gate holds reckon's pure decisions: floors and ceilings on what an engine reported,
// numerical equivalence of two configurations' probe outputs, op-level allreduce error checks,
// statistical verdicts on throughput and latency, and stored baselines.
//
// Nothing in this package starts a process or talks to an engine: callers hand it numbers and
// probe files and get back Verdicts. See docs/statistics.md and docs/baselines.md.
package gate

import (
	"fmt"
	"math"
	"strconv"
)

// Outcome is the result class of one check.
type Outcome string

// Outcomes. Fail is a regression or a broken invariant; Error means the check could not be
// evaluated (missing or malformed input, infrastructure); Inconclusive means a statistical check
// could not decide with the trials it had; NoBaseline means no stored baseline exists for this
// testbed; Skip means the check was not applicable.
const (
	Pass         Outcome = "pass"
	Fail         Outcome = "fail"
	Error        Outcome = "error"
	Inconclusive Outcome = "inconclusive"
	NoBaseline   Outcome = "no_baseline"
	Skip         Outcome = "skip"
)

// Check kinds, the values of Verdict.Kind.
const (
	KindFloor          = "floor"
	KindRelative       = "relative"
	KindExpect         = "expect"
	KindEquivalence    = "equivalence"
	KindAllReduceProbe = "allreduce_probe"
	KindThroughput     = "throughput"
	KindLatency        = "latency"
)

// Verdict is the result of one check, shared by the suites and the reporters.
type Verdict struct {
	Check   string             `json:"check"`   // check name
	Kind    string             `json:"kind"`    // one of the Kind* constants
	Config  string             `json:"config"`  // config (or "base vs head")
	Outcome Outcome            `json:"outcome"` // pass, fail, error, ...
	Message string             `json:"message"` // one line
	Details string             `json:"details,omitempty"`
	Metrics map[string]float64 `json:"metrics,omitempty"` // numbers for reports and JUnit properties
	Stat    *StatResult        `json:"stat,omitempty"`    // set by statistical checks
}

// Failed reports whether the verdict should turn the gate red (a fail or an error).
func (v Verdict) Failed() bool { return v.Outcome == Fail || v.Outcome == Error }

// fmtNum formats a number compactly for one-line messages: up to 4 significant digits for
// fractional values, integers without a decimal point.
func fmtNum(x float64) string {
	switch {
	case math.IsNaN(x) || math.IsInf(x, 0):
		return strconv.FormatFloat(x, 'g', -1, 64)
	case x == math.Trunc(x) && math.Abs(x) < 1e15:
		return strconv.FormatFloat(x, 'f', 0, 64)
	case math.Abs(x) >= 1e-3 && math.Abs(x) < 1e6:
		return strconv.FormatFloat(x, 'g', 4, 64)
	default:
		return strconv.FormatFloat(x, 'e', 3, 64)
	}
}

// fmtPct formats a fraction as a signed percentage, e.g. -0.571 -> "-57.1%".
func fmtPct(f float64) string {
	p := f * 100
	switch a := math.Abs(p); {
	case a >= 10:
		return fmt.Sprintf("%+.0f%%", p)
	case a >= 1:
		return fmt.Sprintf("%+.1f%%", p)
	default:
		return fmt.Sprintf("%+.2f%%", p)
	}
}
