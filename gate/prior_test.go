package gate

import (
	"strings"
	"testing"
)

func TestParseBetweenLaunchCV(t *testing.T) {
	for s, want := range map[string]float64{"5%": 0.05, " 0.03 ": 0.03, "2.5 %": 0.025} {
		if got, err := ParseBetweenLaunchCV("--between-launch-cv", s); err != nil || got != want {
			t.Errorf("%q: %v, %v; want %v", s, got, err, want)
		}
	}
	for _, s := range []string{"", "0", "-1%", "100%", "1.5", "abc", "NaN"} {
		if _, err := ParseBetweenLaunchCV("--between-launch-cv", s); err == nil || !strings.HasPrefix(err.Error(), "--between-launch-cv ") {
			t.Errorf("%q: %v", s, err)
		}
	}
}

// A caller's value (reckon gate --between-launch-cv) wins over the environment's, which wins
// over the default.
func TestTestbedPriorPrecedence(t *testing.T) {
	t.Setenv(BetweenLaunchEnv, "4%")
	if p, err := TestbedPrior(0.06); err != nil || p.CV != 0.06 || !p.Prior {
		t.Errorf("flag: %+v %v", p, err)
	}
	if p, err := TestbedPrior(0); err != nil || p.CV != 0.04 || !strings.Contains(p.Source, BetweenLaunchEnv) {
		t.Errorf("env: %+v %v", p, err)
	}
	t.Setenv(BetweenLaunchEnv, "")
	if p, _ := TestbedPrior(0); p.CV != DefaultBetweenLaunchCV {
		t.Errorf("default: %+v", p)
	}
	t.Setenv(BetweenLaunchEnv, "300%")
	if _, err := TestbedPrior(0); err == nil || !strings.Contains(err.Error(), "$"+BetweenLaunchEnv) {
		t.Errorf("bad env: %v", err)
	}
}
