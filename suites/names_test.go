package suites

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/reckon-ci/reckon/workload"
)

// Valid names never share a derived file: config "a" + workload "w-x" and config "a-w" +
// workload "x" both wrote trials/a-w-x-1.json, and config "a.launch2" shared its log with
// launch 2 of "a".
func TestDerivedFileNamesDoNotCollide(t *testing.T) {
	if a, b := trialFile("o", "a", "w-x", 1), trialFile("o", "a-w", "x", 1); a == b {
		t.Errorf("trials collide: %s", a)
	}
	if a, b := trialFile("o", "a", "w", 11), trialFile("o", "a", "w-1", 1); a == b {
		t.Errorf("trials collide: %s", a)
	}
	if a, b := launchLogFile("o", "a.launch2", 1), launchLogFile("o", "a", 2); a == b {
		t.Errorf("logs collide: %s", a)
	}
	if got := launchLogFile("o", "main", 1); got != filepath.Join("o", "logs", "main.log") {
		t.Errorf("first launch's log %s", got)
	}
	// The longest names a spec allows still fit a file name, with the atomic write's suffix.
	long := strings.Repeat("n", 100)
	if n := len(".") + len(filepath.Base(trialFile("o", long, long, 1000))) + len(".tmp-") + 10; n > 255 {
		t.Errorf("the longest trial file name is %d bytes", n)
	}
}

// A trial where every request failed is a measurement error, never a 0 tok/s sample.
func TestTrialWithNoCompletedRequestFails(t *testing.T) {
	err := trialFailed(&workload.Result{Completed: 0, Failed: 16, Warnings: []string{"16 of 16 requests failed; first errors: [connection refused]"}})
	if err == nil || !strings.Contains(err.Error(), "no request completed (16 failed): 16 of 16 requests failed") {
		t.Errorf("all failed: %v", err)
	}
	if err := trialFailed(&workload.Result{Completed: 15, Failed: 1}); err != nil {
		t.Errorf("one failed of 16: %v", err)
	}
}
