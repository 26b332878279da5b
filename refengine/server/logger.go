package server

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
)

// Logger prints SGLang-format log lines: "[YYYY-MM-DD HH:MM:SS TPn] message", without the TP tag
// when tp == 1. It is safe for concurrent use: each message is written in one piece.
type Logger struct {
	mu  sync.Mutex
	w   io.Writer
	tp  int
	now func() time.Time
}

// NewLogger writes to w for a server with tp ranks.
func NewLogger(w io.Writer, tp int) *Logger {
	return &Logger{w: w, tp: tp, now: time.Now}
}

// Rank prints a line as rank r.
func (l *Logger) Rank(r int, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	ts := l.now().Format("2006-01-02 15:04:05")
	var prefix string
	if l.tp > 1 {
		prefix = fmt.Sprintf("[%s TP%d] ", ts, r)
	} else {
		prefix = fmt.Sprintf("[%s] ", ts)
	}
	// Like Python's logging, a multi-line message (a traceback) gets the prefix on its first line.
	var b strings.Builder
	b.WriteString(prefix)
	b.WriteString(msg)
	b.WriteByte('\n')
	l.mu.Lock()
	defer l.mu.Unlock()
	io.WriteString(l.w, b.String())
}

// Info prints a line as rank 0 (the scheduler's and tokenizer manager's lines).
func (l *Logger) Info(format string, args ...any) { l.Rank(0, format, args...) }

// Raw prints lines without a prefix (uvicorn's lines and tracebacks).
func (l *Logger) Raw(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintf(l.w, format+"\n", args...)
}
