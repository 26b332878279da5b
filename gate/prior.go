package gate

import (
	"fmt"

	"github.com/reckon-ci/reckon/internal/num"
)

// ParseBetweenLaunchCV reads a between-launch CV as a testbed states it: "3%" or "0.03" (a
// fraction strictly between 0 and 1). where names the setting in the error, e.g.
// "--between-launch-cv" or "$RECKON_BETWEEN_LAUNCH_CV".
func ParseBetweenLaunchCV(where, s string) (float64, error) {
	x, _, err := num.ParseFraction(s)
	if err != nil || !(x > 0 && x < 1) {
		return 0, fmt.Errorf("%s %q: expected a between-launch CV such as 3%% or 0.03 (above 0, below 100%%)", where, s)
	}
	return x, nil
}
