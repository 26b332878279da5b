package suites

import (
	"strings"
	"testing"
)

// TestReleaseMismatch: the launch check says when the engine runs another release than the one
// its flags were built for; suffixes and main-branch builds do not count as a difference.
func TestReleaseMismatch(t *testing.T) {
	for _, c := range []struct {
		builtFor, reported string
		differs            bool
	}{
		{"0.12.0", "0.12.0", false},
		{"0.12", "0.12.0", false},
		{"0.12.0", "0.12.0rc2.dev47+g1234abc", false},
		{"latest", "0.0.0.dev1+grefengine", false},
		{"", "0.22.1", false},     // nothing was assumed
		{"0.12.0", "", false},     // the engine did not say
		{"0.12.0", "junk", false}, // unreadable: nothing to compare
		{"0.12.0", "0.10.2", true},
		{"0.0.0.dev1+g5dd2c243e", "0.4.10", true},
	} {
		got := releaseMismatch(c.builtFor, c.reported)
		if (got != "") != c.differs || (c.differs && !strings.Contains(got, "set engine.version")) {
			t.Errorf("releaseMismatch(%q, %q) = %q", c.builtFor, c.reported, got)
		}
	}
}
