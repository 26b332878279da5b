// Package gate holds reckon's pure decisions: floors and ceilings on what an engine reported,
// numerical equivalence of two configurations' probe outputs, op-level allreduce error checks,
// statistical verdicts on throughput and latency, and stored baselines.
//
// Nothing in this package starts a process or talks to an engine: callers hand it numbers and
// probe files and get back Verdicts. See docs/statistics.md and docs/baselines.md.
package gate

import (
	"errors"
	"github.com/reckon-ci/reckon/spec"
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

// The run's own kinds, values of Verdict.Kind besides the spec's check kinds (spec.CheckKind,
// the one vocabulary of check kinds: spec.KindFloor, spec.KindThroughput, ...): KindHealth
// (launch, readiness, the engine log) and KindMeasurement (a numerics probe or throughput trials
// that must complete), judged by the suites, and KindInterrupted (run.go).
const (
	KindHealth      = "health"
	KindMeasurement = "measurement"
)

// Verdict is the result of one check, shared by the suites and the reporters.
type Verdict struct {
	Name    string  `json:"name"`             // check name
	Kind    string  `json:"kind"`             // a spec.CheckKind, or KindHealth, KindMeasurement, KindInterrupted
	Config  string  `json:"config,omitempty"` // config ("" for checks spanning configs)
	Outcome Outcome `json:"outcome"`          // pass, fail, error, ...
	// Category says what a verdict that is not a pass means (a regression, a broken invariant,
	// an unverified check, ...), set by the code that judges; "" for passes and skips.
	Category Category `json:"category,omitempty"`
	// Against is what the check compared its config with: another config's name, "baseline"
	// (the stored baseline) or "history" (the results history); "" for checks that compare
	// nothing (floors, expectations, health).
	Against string             `json:"against,omitempty"`
	Message string             `json:"message"` // one line
	Details string             `json:"details,omitempty"`
	Metrics map[string]float64 `json:"metrics,omitempty"` // numbers for reports and JUnit properties
	Stat    *StatResult        `json:"stat,omitempty"`    // set by statistical checks
}

// Category is the class of a verdict that did not pass: what it asks of the reader and how it
// colours the run (Run.Verdict, Run.ExitCode).
type Category string

// Categories.
const (
	// CategoryRegression: the config measured worse than what it is compared with (a statistical
	// throughput or latency regression, a relative ratio out of its bounds). Red, exit 1.
	CategoryRegression Category = "regression"
	// CategoryBrokenInvariant: a deterministic property does not hold: a floor or ceiling, an
	// expectation (the engine ran another allreduce than asked), numerical equivalence, the
	// allreduce probe's error bounds, a clean engine log. Red, exit 1.
	CategoryBrokenInvariant Category = "broken_invariant"
	// CategoryUnverified: the check ran but could not prove what it checks: its evidence is
	// missing or ambiguous (the engine did not report the metric, the allreduce that ran cannot
	// be told, an equivalence check cannot tell its subject from its control, a probe checked
	// nothing). Its outcome is an error, yet the gate could not show the engine correct, so it
	// is red like a failure. Red, exit 1.
	CategoryUnverified Category = "unverified"
	// CategoryMeasurement: the measurement a check needs could not be taken (a numerics probe
	// or throughput trials failed, too few trials to compare). Exit 3 unless something failed.
	CategoryMeasurement Category = "measurement"
	// CategoryInfrastructure: the engine did not start, crashed or was not launched; a file
	// could not be read. Exit 3 unless something failed.
	CategoryInfrastructure Category = "infrastructure"
	// CategoryPolicy: the check decided nothing (no baseline, inconclusive, skipped) and the
	// run's policy (--strict, --require-baseline) made that a failure. Red, exit 1.
	CategoryPolicy Category = "policy"
	// CategoryInterrupted: the run was stopped before every check ran (the synthetic check of
	// an interrupted run). Red, exit 1.
	CategoryInterrupted Category = "interrupted"
)

// DefaultCategory is the category of a verdict of kind and outcome whose judge said none: a
// failed relative or statistical check is a regression, another failure a broken invariant
// (a failed measurement check a measurement problem); an error is an infrastructure error
// (a measurement check's, a measurement problem). Passes, skips and undecided outcomes have none.
// It is also how results written before categories existed are read (ReadResults).
func DefaultCategory(kind string, o Outcome) Category {
	switch o {
	case Fail:
		switch kind {
		case string(spec.KindRelative), string(spec.KindThroughput), string(spec.KindLatency):
			return CategoryRegression
		case KindMeasurement:
			return CategoryMeasurement
		}
		return CategoryBrokenInvariant
	case Error:
		switch kind {
		case KindMeasurement:
			return CategoryMeasurement
		case KindInterrupted:
			return CategoryInterrupted
		}
		return CategoryInfrastructure
	}
	return ""
}

// Classified returns v with its category filled from DefaultCategory when the judge set none.
func (v Verdict) Classified() Verdict {
	if v.Category == "" {
		v.Category = DefaultCategory(v.Kind, v.Outcome)
	}
	return v
}

// ErrUnverified marks an error that means a check could not prove what it checks (its evidence
// is missing or ambiguous) rather than that the infrastructure failed; CategoryOf maps it to
// CategoryUnverified. Wrap it: fmt.Errorf("...: %w", ErrUnverified) or Unverified(err).
var ErrUnverified = errors.New("unverified")

type unverifiedError struct{ err error }

func (e unverifiedError) Error() string        { return e.err.Error() }
func (e unverifiedError) Unwrap() []error      { return []error{e.err, ErrUnverified} }
func (e unverifiedError) Is(target error) bool { return target == ErrUnverified }

// Unverified marks err as meaning "could not verify" (see ErrUnverified); nil stays nil.
func Unverified(err error) error {
	if err == nil {
		return nil
	}
	return unverifiedError{err}
}

// CategoryOf is the category of an error verdict built from err: CategoryUnverified when err is
// marked ErrUnverified, else CategoryInfrastructure.
func CategoryOf(err error) Category {
	if errors.Is(err, ErrUnverified) {
		return CategoryUnverified
	}
	return CategoryInfrastructure
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
