package gate

import (
	"fmt"
	"strconv"
	"strings"
)

// ParseBetweenLaunchCV reads a between-launch CV as a testbed states it: "3%" or "0.03" (a
// fraction strictly between 0 and 1). where names the setting in the error, e.g.
// "--between-launch-cv" or "$RECKON_BETWEEN_LAUNCH_CV".
func ParseBetweenLaunchCV(where, s string) (float64, error) {
	t := strings.TrimSpace(s)
	scale := 1.0
	if strings.HasSuffix(t, "%") {
		t, scale = strings.TrimSuffix(t, "%"), 0.01
	}
	x, err := strconv.ParseFloat(strings.TrimSpace(t), 64)
	if err != nil || !(x*scale > 0 && x*scale < 1) {
		return 0, fmt.Errorf("%s %q: expected a between-launch CV such as 3%% or 0.03 (above 0, below 100%%)", where, s)
	}
	return x * scale, nil
}
