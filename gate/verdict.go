// Package gate holds reckon's pure decisions: floors and ceilings on what an engine reported,
// numerical equivalence of two configurations' probe outputs, op-level allreduce error checks,
// statistical verdicts on throughput and latency, and stored baselines.
//
// Nothing in this package starts a process or talks to an engine: callers hand it numbers and
// probe files and get back Verdicts. See docs/statistics.md and docs/baselines.md.
package gate

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

// Check kinds, the values of Verdict.Kind. KindHealth (launch, readiness, the engine log) and
// KindMeasurement (a numerics probe or throughput trials that must complete) are judged by the
// suites; the others by this package.
const (
	KindHealth         = "health"
	KindMeasurement    = "measurement"
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
	Name    string             `json:"name"`             // check name
	Kind    string             `json:"kind"`             // one of the Kind* constants
	Config  string             `json:"config,omitempty"` // config ("" for checks spanning configs)
	Outcome Outcome            `json:"outcome"`          // pass, fail, error, ...
	Message string             `json:"message"`          // one line
	Details string             `json:"details,omitempty"`
	Metrics map[string]float64 `json:"metrics,omitempty"` // numbers for reports and JUnit properties
	Stat    *StatResult        `json:"stat,omitempty"`    // set by statistical checks
}

// Status is how a judged check reports (its JUnit element): passed, failed, error or skipped.
type Status string

// Statuses.
const (
	StatusPassed  Status = "passed"
	StatusFailed  Status = "failed"
	StatusError   Status = "error"
	StatusSkipped Status = "skipped"
)

// Policy is how a run treats the checks that decided nothing: under Strict (--strict)
// no_baseline, inconclusive and skipped checks fail; under RequireBaseline (--require-baseline)
// no_baseline fails.
type Policy struct {
	Strict, RequireBaseline bool
}

// Status is the one mapping of an outcome to its status under the policy. flag names the option
// that alone makes it fail ("--strict", "--require-baseline"; "" when the outcome itself decides).
// An outcome this package does not define (a report's not_run, for example) is an error, so
// that it can never pass silently; callers that mean otherwise set the status themselves.
func (p Policy) Status(o Outcome) (st Status, flag string) {
	switch o {
	case Pass:
		return StatusPassed, ""
	case Fail:
		return StatusFailed, ""
	case Error:
		return StatusError, ""
	case NoBaseline:
		switch {
		case p.RequireBaseline:
			return StatusFailed, "--require-baseline"
		case p.Strict:
			return StatusFailed, "--strict"
		}
		return StatusSkipped, ""
	case Inconclusive, Skip:
		if p.Strict {
			return StatusFailed, "--strict"
		}
		return StatusSkipped, ""
	}
	return StatusError, ""
}

// Failed reports whether the verdict should turn the gate red (a fail or an error).
func (v Verdict) Failed() bool { return v.Outcome == Fail || v.Outcome == Error }
