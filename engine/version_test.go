package engine_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/reckon-ci/reckon/engine"
)

// TestDetectVersion runs the version command of the sglang adapter (command override: this
// test binary, which answers --version as the RECKON_TESTPROC mode says).
func TestDetectVersion(t *testing.T) {
	lc := func(mode string) engine.LaunchConfig {
		return engine.LaunchConfig{Command: []string{os.Args[0]}, Model: "m", Env: map[string]string{envProc: mode}}
	}
	v, err := engine.DetectVersion(context.Background(), sglangAdapter(), lc("version"))
	if err != nil || v != "0.5.3.post1" {
		t.Fatalf("DetectVersion = %q, %v; want 0.5.3.post1", v, err)
	}
	if _, err := engine.DetectVersion(context.Background(), sglangAdapter(), lc("version-none")); err == nil || !strings.Contains(err.Error(), "printed no version") || !strings.Contains(err.Error(), "usage: engine") {
		t.Errorf("no version: err = %v", err)
	}
	if _, err := engine.DetectVersion(context.Background(), sglangAdapter(), lc("version-fail")); err == nil || !strings.Contains(err.Error(), "exit status 1") || !strings.Contains(err.Error(), "No module named 'sglang'") {
		t.Errorf("failing command: err = %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 800*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = engine.DetectVersion(ctx, sglangAdapter(), lc("version-hang"))
	if err == nil || !strings.Contains(err.Error(), "deadline exceeded") {
		t.Errorf("hanging command: err = %v, want a deadline error", err)
	}
	if d := time.Since(start); d > 4*time.Second {
		t.Errorf("hanging command (with a child holding its output) took %s to give up", d)
	}
}

// A hanging version command is ended after DefaultVersionTimeout even when the run's context
// has a far deadline (reckon gate --timeout 4h), and the error says which limit ended it.
func TestDetectVersionLimitAppliesUnderADeadline(t *testing.T) {
	defer engine.SetVersionTimeout(300 * time.Millisecond)()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Hour)
	defer cancel()
	lc := engine.LaunchConfig{Command: []string{os.Args[0]}, Model: "m", Env: map[string]string{envProc: "version-hang"}}
	_, err := engine.DetectVersion(ctx, sglangAdapter(), lc)
	if err == nil || !strings.Contains(err.Error(), "ran longer than its limit of 300ms (engine.DefaultVersionTimeout)") {
		t.Errorf("err = %v, want the version limit named", err)
	}
}

func TestSpeculativeAlgorithmsByKind(t *testing.T) {
	for _, kind := range engine.Kinds {
		algs, err := engine.SpeculativeAlgorithms(kind)
		if err != nil || len(algs) == 0 {
			t.Errorf("%s: %v %v", kind, algs, err)
		}
	}
	if _, err := engine.SpeculativeAlgorithms("tgi"); err == nil {
		t.Error("unknown kind accepted")
	}
}
