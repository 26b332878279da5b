package server

import (
	"bytes"
	"testing"
	"time"
)

func TestLoggerPrefix(t *testing.T) {
	at := func() time.Time { return time.Date(2026, 11, 29, 9, 30, 1, 0, time.UTC) }
	var one, many bytes.Buffer
	l1, l4 := NewLogger(&one, 1), NewLogger(&many, 4)
	l1.now, l4.now = at, at
	l1.Info("KV Cache is allocated. #tokens: %d", 5)
	l4.Rank(3, "Load weight begin. avail mem=%.4f GB", 0.5)
	l4.Info("Scheduler hit an exception: Traceback (most recent call last):\n  File \"x\"\nRuntimeError: y")
	if got := one.String(); got != "[2026-11-29 09:30:01] KV Cache is allocated. #tokens: 5\n" {
		t.Errorf("tp 1 line %q", got)
	}
	want := "[2026-11-29 09:30:01 TP3] Load weight begin. avail mem=0.5000 GB\n" +
		"[2026-11-29 09:30:01 TP0] Scheduler hit an exception: Traceback (most recent call last):\n  File \"x\"\nRuntimeError: y\n"
	if got := many.String(); got != want {
		t.Errorf("tp 4 lines %q, want %q", got, want)
	}
}
