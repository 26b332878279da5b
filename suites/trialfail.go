package suites

import (
	"fmt"
	"strings"

	"github.com/reckon-ci/reckon/workload"
)

// trialFailed says why a trial measured nothing: none of its requests completed (each failed
// or timed out). Such a trial is a measurement error, not a 0 tok/s sample: its zeros would
// otherwise pass the measurement and drag a statistic or a stored baseline down.
func trialFailed(res *workload.Result) error {
	if res.Completed > 0 {
		return nil
	}
	why := ""
	for _, w := range res.Warnings {
		if strings.Contains(w, "failed") {
			why = ": " + w
			break
		}
	}
	return fmt.Errorf("no request completed (%d failed)%s", res.Failed, why)
}
