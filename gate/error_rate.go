package gate

import (
	"fmt"
	"strings"

	"github.com/reckon-ci/reckon/internal/num"
)

// LaunchRequests counts the requests of one launch's trials of a workload: the evidence an
// error-rate check judges.
type LaunchRequests struct {
	Launch    int // 1-based
	Trials    int
	Completed float64
	Failed    float64
}

// ErrorRate judges the share of failed requests over every launch's trials: failed /
// (completed + failed) must be at most max (a fraction in [0, 1]; 0 allows none). No trial, or
// trials that sent no request, prove nothing was exercised: an error (unverified), never a pass.
// The message names each launch that had failures, so that a burst in one launch shows.
func ErrorRate(name, workload string, launches []LaunchRequests, max float64) Verdict {
	v := Verdict{Name: name, Metrics: map[string]float64{"error_rate.max": max}}
	var trials int
	var completed, failed float64
	var burst []string
	for _, l := range launches {
		trials += l.Trials
		completed += l.Completed
		failed += l.Failed
		if l.Failed > 0 {
			burst = append(burst, fmt.Sprintf("launch %d: %s of %s", l.Launch, num.Format(l.Failed), num.Format(l.Completed+l.Failed)))
		}
	}
	total := completed + failed
	if trials == 0 || total == 0 {
		v.Outcome, v.Category = Error, CategoryUnverified
		v.Message = fmt.Sprintf("no requests of %s were recorded (%d trials): the error rate proves nothing", workload, trials)
		return v
	}
	rate := failed / total
	v.Metrics["error_rate"] = rate
	v.Metrics["failed"] = failed
	v.Metrics["completed"] = completed
	v.Metrics["trials"] = float64(trials)
	evidence := fmt.Sprintf("%s failed of %s requests over %d trials of %s in %d launches",
		num.Format(failed), num.Format(total), trials, workload, len(launches))
	if len(burst) > 0 {
		evidence += "; failures in " + strings.Join(burst, ", ")
	}
	if rate > max {
		v.Outcome, v.Category = Fail, CategoryBrokenInvariant
		v.Message = fmt.Sprintf("error rate %s%% > max %s%% (%s)", num.Format(rate*100), num.Format(max*100), evidence)
		return v
	}
	v.Outcome = Pass
	v.Message = fmt.Sprintf("error rate %s%% <= max %s%% (%s)", num.Format(rate*100), num.Format(max*100), evidence)
	return v
}
