package server

import (
	"fmt"
	"io"
	"os"
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
	pid int
}

// NewLogger writes to w for a server with tp ranks.
func NewLogger(w io.Writer, tp int) *Logger {
	return &Logger{w: w, tp: tp, now: time.Now, pid: os.Getpid()}
}

// VLLM prints a line in vLLM's format: "(TAG pid=P) LEVEL MM-DD HH:MM:SS [LOC] message". A
// multi-line message (a traceback) gets the process tag on every line, as vLLM's worker output
// prefixing does, and the level and location on the first.
func (l *Logger) VLLM(tag, level, loc, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	ts := l.now().Format("01-02 15:04:05")
	proc := fmt.Sprintf("(%s pid=%d) ", tag, l.pid)
	var b strings.Builder
	for i, line := range strings.Split(msg, "\n") {
		b.WriteString(proc)
		if i == 0 {
			fmt.Fprintf(&b, "%s %s [%s] ", level, ts, loc)
		}
		b.WriteString(line)
		b.WriteByte('\n')
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	io.WriteString(l.w, b.String())
}

// VLLMRaw prints a line with only vLLM's process tag (uvicorn's lines, progress bars).
func (l *Logger) VLLMRaw(tag, format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintf(l.w, "(%s pid=%d) "+format+"\n", append([]any{tag, l.pid}, args...)...)
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
