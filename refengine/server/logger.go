package server

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"
)

// Level is a Python logging level (the numbers of Python's logging module).
type Level int

// The levels the engines' --log-level, --uvicorn-log-level and VLLM_LOGGING_LEVEL take.
const (
	LevelDebug    Level = 10
	LevelInfo     Level = 20
	LevelWarning  Level = 30
	LevelError    Level = 40
	LevelCritical Level = 50
)

// ParseLevel reads a level name as Python's logging does (any case; "trace" is uvicorn's level
// below debug; "warn" and "fatal" are logging's aliases).
func ParseLevel(s string) (Level, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "trace", "debug":
		return LevelDebug, nil
	case "", "info":
		return LevelInfo, nil
	case "warning", "warn":
		return LevelWarning, nil
	case "error":
		return LevelError, nil
	case "critical", "fatal":
		return LevelCritical, nil
	}
	return 0, fmt.Errorf("%q is not a log level (expected debug, info, warning, error or critical)", s)
}

// levelOf maps vLLM's level words (levelInfo, ...) to a Level.
func levelOf(word string) Level {
	switch word {
	case levelWarning:
		return LevelWarning
	case levelError:
		return LevelError
	}
	return LevelInfo
}

// Logger prints SGLang-format log lines: "[YYYY-MM-DD HH:MM:SS TPn] message", without the TP tag
// when tp == 1, and vLLM-format lines. Lines below the logger's level are not printed (SGLang's
// --log-level, vLLM's VLLM_LOGGING_LEVEL); uvicorn's lines have their own level (SGLang passes
// --log-level to uvicorn, vLLM --uvicorn-log-level). It is safe for concurrent use: each message
// is written in one piece.
type Logger struct {
	mu      sync.Mutex
	w       io.Writer
	tp      int
	now     func() time.Time
	pid     int
	level   Level
	uvLevel Level
}

// NewLogger writes to w for a server with tp ranks, at level info.
func NewLogger(w io.Writer, tp int) *Logger {
	return &Logger{w: w, tp: tp, now: time.Now, pid: os.Getpid(), level: LevelInfo, uvLevel: LevelInfo}
}

// SetLevels sets the lowest level printed: level for the engine's lines, uvicorn for uvicorn's.
func (l *Logger) SetLevels(level, uvicorn Level) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.level, l.uvLevel = level, uvicorn
}

func (l *Logger) enabled(lv Level) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return lv >= l.level
}

func (l *Logger) uvicornEnabled(lv Level) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return lv >= l.uvLevel
}

// VLLM prints a line in vLLM's format: "(TAG pid=P) LEVEL MM-DD HH:MM:SS [LOC] message". A
// multi-line message (a traceback) gets the process tag on every line, as vLLM's worker output
// prefixing does, and the level and location on the first.
func (l *Logger) VLLM(tag, level, loc, format string, args ...any) {
	if !l.enabled(levelOf(level)) {
		return
	}
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

// VLLMRaw prints a line with only vLLM's process tag (progress bars, uvicorn's errors).
func (l *Logger) VLLMRaw(tag, format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintf(l.w, "(%s pid=%d) "+format+"\n", append([]any{tag, l.pid}, args...)...)
}

// VLLMUvicorn prints one of uvicorn's INFO lines under vLLM's process tag, unless
// --uvicorn-log-level is above info.
func (l *Logger) VLLMUvicorn(tag, format string, args ...any) {
	if l.uvicornEnabled(LevelInfo) {
		l.VLLMRaw(tag, format, args...)
	}
}

// Rank prints an INFO line as rank r.
func (l *Logger) Rank(r int, format string, args ...any) {
	l.RankAt(LevelInfo, r, format, args...)
}

// RankAt prints a line of the given level as rank r (SGLang's format has no level word).
func (l *Logger) RankAt(lv Level, r int, format string, args ...any) {
	if !l.enabled(lv) {
		return
	}
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

// Info prints an INFO line as rank 0 (the scheduler's and tokenizer manager's lines).
func (l *Logger) Info(format string, args ...any) { l.Rank(0, format, args...) }

// Warn prints a WARNING line as rank 0.
func (l *Logger) Warn(format string, args ...any) { l.RankAt(LevelWarning, 0, format, args...) }

// Error prints an ERROR line as rank 0 (exceptions and tracebacks).
func (l *Logger) Error(format string, args ...any) { l.RankAt(LevelError, 0, format, args...) }

// Raw prints lines without a prefix (progress bars, tracebacks), whatever the level.
func (l *Logger) Raw(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintf(l.w, format+"\n", args...)
}

// Uvicorn prints one of uvicorn's INFO lines without a prefix (the SGLang dialect), unless the
// uvicorn level is above info.
func (l *Logger) Uvicorn(format string, args ...any) {
	if l.uvicornEnabled(LevelInfo) {
		l.Raw(format, args...)
	}
}
