package gate

import "fmt"

// Counts is the tally of check statuses in a run. The buckets are disjoint and sum to Total:
// Unverified holds the errored checks whose category is CategoryUnverified, Errors the other
// errored checks (infrastructure, measurement, an interrupted run); Inconclusive, NoBaseline and
// NotRun are the skipped checks of those outcomes (under --strict the first two are failures and
// counted in Failed); Skipped holds the other skipped checks.
type Counts struct {
	Total, Passed, Failed, Errors, Unverified, Inconclusive, NoBaseline, Skipped, NotRun int
}

// String is the closing line's tally, e.g. "12 passed, 1 failed, 0 errors, 1 inconclusive,
// 0 no baseline, 2 skipped, 0 not run". The unverified count follows the errors only when there
// are unverified checks ("0 errors, 1 unverified, ..."), so that the line of a run without them
// reads as it always did.
func (c Counts) String() string {
	errs := plural(c.Errors, "error")
	if c.Unverified > 0 {
		errs += fmt.Sprintf(", %d unverified", c.Unverified)
	}
	return fmt.Sprintf("%d passed, %d failed, %s, %d inconclusive, %d no baseline, %d skipped, %d not run",
		c.Passed, c.Failed, errs, c.Inconclusive, c.NoBaseline, c.Skipped, c.NotRun)
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}

// Count tallies r's checks by (normalised) status, including the synthetic error checks every
// report adds for an interrupted run and for a failed launch that no check reports
// (EffectiveChecks).
func (r *Run) Count() Counts {
	return CountChecks(r.EffectiveChecks())
}

// CountChecks tallies checks by (normalised) status and, for errors, category.
func CountChecks(checks []Check) Counts {
	var c Counts
	for i := range checks {
		c.Total++
		switch checks[i].EffectiveStatus() {
		case StatusPassed:
			c.Passed++
		case StatusFailed:
			c.Failed++
		case StatusSkipped:
			switch checks[i].Outcome {
			case Inconclusive:
				c.Inconclusive++
			case NoBaseline:
				c.NoBaseline++
			case OutcomeNotRun:
				c.NotRun++
			default:
				c.Skipped++
			}
		default:
			if checks[i].EffectiveCategory() == CategoryUnverified {
				c.Unverified++
			} else {
				c.Errors++
			}
		}
	}
	return c
}

// Verdicts of a whole run (Run.Verdict), in the order they take precedence.
const (
	// RunInterrupted: the run was stopped before every check ran (red, exit 1).
	RunInterrupted = "INTERRUPTED"
	// RunFail: at least one check failed (red, exit 1).
	RunFail = "FAIL"
	// RunUnverified: no check failed, but at least one could not prove what it checks, for
	// example an equivalence check that cannot tell its subject from its control (red, exit 1).
	RunUnverified = "UNVERIFIED"
	// RunInfra: no check failed or was unverified, but some errored: an engine did not start, a
	// measurement could not be taken (red, exit 3).
	RunInfra = "INFRASTRUCTURE ERROR"
	// RunNothing: no check passed: nothing was verified (red, exit 1).
	RunNothing = "NOTHING VERIFIED"
	// RunPass: every check judged passed or was skipped for a stated reason (green, exit 0).
	RunPass = "PASS"
)

// Exit codes of a finished run (Run.ExitCode); reckon's other codes (2: bad input) are the
// command line's.
const (
	ExitGreen = 0
	ExitRed   = 1
	ExitInfra = 3
)

// Verdict is the run's one-word verdict, the same in the closing line, summary.md and
// report.html: a run is green (RunPass) only when it was not interrupted, no check failed,
// was unverified or errored, and at least one check passed.
func (r *Run) Verdict() string {
	c := r.Count()
	switch {
	case r.Interrupted:
		return RunInterrupted
	case c.Failed > 0:
		return RunFail
	case c.Unverified > 0:
		return RunUnverified
	case c.Errors > 0:
		return RunInfra
	case c.Passed == 0:
		return RunNothing
	}
	return RunPass
}

// Green reports whether the run passes the gate (Verdict is RunPass).
func (r *Run) Green() bool {
	return r.Verdict() == RunPass
}

// ExitCode is the documented exit code of a finished run: ExitGreen (0) when it is green,
// ExitInfra (3) when only infrastructure or measurement errors keep it from green, else ExitRed
// (1): a check failed or was unverified, the run was interrupted, or it verified nothing.
func (r *Run) ExitCode() int {
	switch r.Verdict() {
	case RunPass:
		return ExitGreen
	case RunInfra:
		return ExitInfra
	}
	return ExitRed
}
