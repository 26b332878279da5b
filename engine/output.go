package engine

// The engine's output: the pump that copies it to the log file, the tail kept in memory for
// LogTail, and the escaping of control characters.

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"unicode/utf8"

	"github.com/reckon-ci/reckon/engine/internal/core"
)

// MaxLogTailBytes caps what LogTail returns: the last lines that fit.
const MaxLogTailBytes = 64 << 10

// LogTail returns the last n lines of the engine's output (n <= 0: all kept lines), at most
// MaxLogTailBytes of them, with control characters escaped.
func (i *Instance) LogTail(n int) string {
	i.mu.Lock()
	defer i.mu.Unlock()
	lines := i.tail
	if n > 0 && len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	size, k := 0, len(lines)
	for k > 0 && size+len(lines[k-1])+1 <= MaxLogTailBytes {
		size += len(lines[k-1]) + 1
		k--
	}
	return strings.Join(lines[k:], "\n")
}

// pump copies the engine's output into the log file, keeps the tail, and watches for the
// ready line and for "address already in use".
func (i *Instance) pump(r *os.File) {
	defer close(i.readerDone)
	defer r.Close()
	var partial []byte
	readySeen, portSeen := false, false
	buf := make([]byte, 64*1024)
	handle := func(line string) {
		if len(line) > maxTailLine {
			line = line[:maxTailLine] + fmt.Sprintf(" [... %d bytes cut]", len(line)-maxTailLine)
		}
		line = escapeControl(core.StripANSI(strings.TrimRight(line, "\r")))
		i.mu.Lock()
		i.tail = append(i.tail, line)
		if len(i.tail) > 2*tailLines {
			i.tail = append([]string(nil), i.tail[len(i.tail)-tailLines:]...)
		}
		i.mu.Unlock()
		if !readySeen && i.adapter.ReadyLine(line) {
			readySeen = true
			close(i.readyLine)
		}
		if !portSeen && !readySeen && addrInUseRE.MatchString(line) {
			portSeen = true
			close(i.addrInUse)
		}
	}
	for {
		n, err := r.Read(buf)
		if n > 0 {
			if _, werr := i.logFile.Write(buf[:n]); werr != nil && !errors.Is(werr, os.ErrClosed) {
				i.log.WithError(werr).Warn("writing engine log")
			}
			data := buf[:n]
			for {
				j := indexByte(data, '\n')
				if j < 0 {
					if len(partial) < 1<<20 {
						partial = append(partial, data...)
					}
					break
				}
				partial = append(partial, data[:j]...)
				handle(string(partial))
				partial = partial[:0]
				data = data[j+1:]
			}
		}
		if err != nil {
			if len(partial) > 0 {
				handle(string(partial))
			}
			if !errors.Is(err, io.EOF) {
				i.log.WithError(err).Warn("reading engine output")
			}
			_ = i.logFile.Sync()
			return
		}
	}
}

// maxTailLine is the longest engine log line kept (in bytes) in the tail.
const maxTailLine = 4096

// escapeControl makes an engine log line safe to print on a terminal and to store in reports:
// control characters (NUL, ESC of OSC title sequences that StripANSI left, VT, BEL, C1 codes,
// DEL) become visible escapes; tabs stay; invalid UTF-8 becomes U+FFFD.
func escapeControl(s string) string {
	clean := true
	for _, r := range s {
		if r == utf8.RuneError || (r < 0x20 && r != '\t') || (r >= 0x7f && r <= 0x9f) {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	for _, r := range s {
		switch {
		case r == '\t':
			b.WriteRune(r)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, "\\x%02x", r)
		case r >= 0x80 && r <= 0x9f:
			fmt.Fprintf(&b, "\\u%04x", r)
		default:
			b.WriteRune(r) // RuneError is written as U+FFFD
		}
	}
	return b.String()
}

func indexByte(b []byte, c byte) int {
	for k, x := range b {
		if x == c {
			return k
		}
	}
	return -1
}
