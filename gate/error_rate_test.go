package gate

import (
	"strings"
	"testing"
)

func TestErrorRate(t *testing.T) {
	two := []LaunchRequests{{Launch: 1, Trials: 2, Completed: 200}, {Launch: 2, Trials: 2, Completed: 160, Failed: 40}}
	v := ErrorRate("e", "decode", two, 0.01)
	if v.Outcome != Fail || v.Category != CategoryBrokenInvariant {
		t.Fatalf("burst in launch 2: %+v", v)
	}
	for _, want := range []string{"error rate 10% > max 1% (40 failed of 400 requests over 4 trials of decode in 2 launches; failures in launch 2: 40 of 200)"} {
		if !strings.Contains(v.Message, want) {
			t.Errorf("message %q lacks %q", v.Message, want)
		}
	}
	if v.Metrics["trials"] != 4 || v.Metrics["error_rate"] != 0.1 {
		t.Errorf("metrics %v", v.Metrics)
	}
	if v := ErrorRate("e", "decode", two, 0.1); v.Outcome != Pass || !strings.HasPrefix(v.Message, "error rate 10% <= max 10% (") {
		t.Errorf("at the max: %+v", v)
	}
	clean := []LaunchRequests{{Launch: 1, Trials: 2, Completed: 200}}
	if v := ErrorRate("e", "decode", clean, 0); v.Outcome != Pass {
		t.Errorf("no failure under max 0: %+v", v)
	}
	if v := ErrorRate("e", "decode", []LaunchRequests{{Launch: 1, Trials: 1, Completed: 99, Failed: 1}}, 0); v.Outcome != Fail {
		t.Errorf("one failure under max 0: %+v", v)
	}
	for _, none := range [][]LaunchRequests{nil, {{Launch: 1, Trials: 2}}} {
		if v := ErrorRate("e", "decode", none, 0.01); v.Outcome != Error || v.Category != CategoryUnverified {
			t.Errorf("nothing exercised (%v): %+v", none, v)
		}
	}
}
