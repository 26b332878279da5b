// Package sanitize makes text that reckon did not write (engine log lines, engine error
// messages, names and values read from result files) safe to put into one output medium: one
// function per medium (Text, Terminal and CILog are idempotent), so that text from an engine is shown as data and never
// acts on the reader (issue 25, item 5).
//
//   - Text: the base of every medium and all HTML and JUnit XML need (they escape markup
//     themselves): escape sequences (CSI, OSC, DCS, APC, PM, SOS and two-byte ones) and C0/C1
//     control characters other than newline and tab removed, carriage returns turned into
//     newlines, invalid UTF-8 replaced, characters XML 1.0 forbids dropped.
//   - Terminal: Text, and bidirectional-text controls removed (they reorder what the reader
//     sees: "Trojan Source").
//   - CILog: Terminal, and no line can start a CI workflow command: GitHub Actions "::cmd::"
//     (also after blanks) and "##[cmd]", Azure Pipelines "##vso[", Buildkite's "--- ", "+++ ",
//     "~~~ " and "^^^ +++" group markers. Anything reckon prints to stdout or stderr is in a
//     CI log when it runs in CI, so commands printing engine text use CILog.
//   - Markdown: Terminal on one line, Markdown and inline HTML escaped, and what GitHub turns
//     into a notification or a link neutralised: @user and @org/team mentions, #123 and GH-123
//     references, bare URLs, www. and e-mail autolinks (a zero-width space after "@", "#" or
//     "GH-", or inside "://" and "www.").
//   - MarkdownCode: CILog, for text inside a fenced code block (the caller picks the fence).
package sanitize

import (
	"strings"
	"unicode/utf8"
)

// zwsp is a zero-width space: inserted where GitHub would otherwise find a mention, a reference
// or an autolink, it breaks the match and is invisible.
const zwsp = "\u200b"

// Text removes escape sequences and control characters (see the package comment).
func Text(s string) string { return text(s, false) }

// text is Text; keepSGR keeps the Select Graphic Rendition sequences (ESC [ digits and ; m:
// colours and bold) for ConsoleColor.
func text(s string, keepSGR bool) string {
	if s == "" {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); {
		c := s[i]
		if c == 0x1b {
			j := skipEscape(s, i)
			if keepSGR && isSGR(s[i:j]) {
				b.WriteString(s[i:j])
			}
			i = j
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == 0x90 || r == 0x98 || r == 0x9d || r == 0x9e || r == 0x9f {
			// C1 DCS, SOS, OSC, PM, APC (8-bit forms): their string runs to ST or BEL.
			i = skipString(s, i+size)
			continue
		}
		i += size
		switch {
		case r == utf8.RuneError && size == 1:
			b.WriteRune('\uFFFD')
		case r == '\r':
			if i < len(s) && s[i] == '\n' {
				continue // CRLF -> LF
			}
			b.WriteByte('\n')
		case r == '\n' || r == '\t':
			b.WriteRune(r)
		case r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0):
			// C0/C1 control characters: dropped
		case r == 0xFFFE || r == 0xFFFF:
			// not characters in XML 1.0: dropped
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// skipEscape returns the index just past the escape sequence that starts at s[i] == ESC.
func skipEscape(s string, i int) int {
	j := i + 1
	if j >= len(s) {
		return j
	}
	switch s[j] {
	case '[': // CSI: parameters and intermediates, then a final byte in 0x40..0x7e
		j++
		for j < len(s) && (s[j] < 0x40 || s[j] > 0x7e) {
			j++
		}
		return min(j+1, len(s))
	case ']', 'P', 'X', '^', '_': // OSC, DCS, SOS, PM, APC: a string up to BEL or ST
		return skipString(s, j+1)
	default: // two-byte sequence
		return j + 1
	}
}

// isSGR tells a Select Graphic Rendition sequence: ESC [, digits and semicolons, m.
func isSGR(seq string) bool {
	if len(seq) < 3 || seq[1] != '[' || seq[len(seq)-1] != 'm' {
		return false
	}
	for _, c := range []byte(seq[2 : len(seq)-1]) {
		if (c < '0' || c > '9') && c != ';' {
			return false
		}
	}
	return true
}

// skipString returns the index just past the string terminator (BEL, ESC \ or the C1 ST) at or
// after j, or len(s) when the string is not terminated.
func skipString(s string, j int) int {
	for j < len(s) {
		switch {
		case s[j] == 0x07:
			return j + 1
		case s[j] == 0x1b && j+1 < len(s) && s[j+1] == '\\':
			return j + 2
		case strings.HasPrefix(s[j:], "\u009c"):
			return j + len("\u009c")
		}
		j++
	}
	return j
}

// isBidi tells the bidirectional formatting characters: embeddings, overrides, isolates and
// marks.
func isBidi(r rune) bool {
	return (r >= 0x202a && r <= 0x202e) || (r >= 0x2066 && r <= 0x2069) || r == 0x200e || r == 0x200f || r == 0x061c
}

// Terminal is Text with bidirectional-text controls removed: safe to print to a terminal.
func Terminal(s string) string { return dropBidi(Text(s)) }

func dropBidi(s string) string {
	if !strings.ContainsFunc(s, isBidi) {
		return s
	}
	return strings.Map(func(r rune) rune {
		if isBidi(r) {
			return -1
		}
		return r
	}, s)
}

// ciMarkers are the line starts that CI systems read as commands or log structure.
var ciMarkers = []string{"::", "##[", "##vso[", "--- ", "+++ ", "~~~ ", "^^^ +++"}

// CILog is Terminal where no line starts a CI workflow command: any "##[" or "##vso[" (Azure
// Pipelines finds those anywhere in a line) gets a zero-width space between its "#"s, and a
// line that starts with one of the other markers, after blanks, gets a leading "| ".
func CILog(s string) string { return ciLines(Terminal(s)) }

// ConsoleColor is CILog keeping colour (SGR) sequences: for output that reckon colours itself
// on a terminal (Ginkgo's reporter). An engine's own SGR sequences pass too; they can change
// colours only.
func ConsoleColor(s string) string { return ciLines(dropBidi(text(s, true))) }

func ciLines(s string) string {
	if !strings.Contains(s, "::") && !strings.Contains(s, "##") && !strings.ContainsAny(s, "-+~^") {
		return s
	}
	lines := strings.Split(s, "\n")
	for i, line := range lines {
		line = strings.ReplaceAll(line, "##[", "#"+zwsp+"#[")
		line = strings.ReplaceAll(line, "##vso[", "#"+zwsp+"#vso[")
		rest := strings.TrimLeft(Text(line), " \t") // colour codes in front hide no marker
		for _, m := range ciMarkers {
			if strings.HasPrefix(rest, m) {
				line = "| " + line
				break
			}
		}
		lines[i] = line
	}
	return strings.Join(lines, "\n")
}

// MarkdownCode is CILog: text for a fenced code block, where GitHub renders no mention, link
// or markup (the caller picks a fence longer than any backtick run). A summary.md is printed
// to CI logs too, so no line of it may start a workflow command.
func MarkdownCode(s string) string { return CILog(s) }

// Markdown makes s safe as inline Markdown text on one line (see the package comment).
func Markdown(s string) string {
	s = Terminal(s)
	var b strings.Builder
	b.Grow(len(s) + 16)
	for i, r := range s {
		switch r {
		case '\\', '`', '*', '_', '[', ']', '|', '~', '!':
			b.WriteByte('\\')
			b.WriteRune(r)
		case '#':
			b.WriteString(`\#`)
			if i+1 < len(s) && isWordByte(s[i+1]) {
				b.WriteString(zwsp) // #123, #name: no issue reference
			}
		case '@':
			b.WriteByte('@')
			b.WriteString(zwsp) // @user, @org/team, user@host: no mention, no mail link
		case '<':
			b.WriteString("&lt;")
		case '>':
			b.WriteString("&gt;")
		case '&':
			b.WriteString("&amp;")
		case '\n':
			b.WriteByte(' ')
		case ':':
			b.WriteByte(':')
			if strings.HasPrefix(s[i+1:], "//") {
				b.WriteString(zwsp) // https://...: no autolink
			}
		case '.':
			b.WriteByte('.')
			if i >= 3 && strings.EqualFold(s[i-3:i], "www") {
				b.WriteString(zwsp) // www.example.com: no autolink
			}
		case '-':
			b.WriteByte('-')
			if i >= 2 && strings.EqualFold(s[i-2:i], "gh") && i+1 < len(s) && s[i+1] >= '0' && s[i+1] <= '9' {
				b.WriteString(zwsp) // GH-123: no issue reference
			}
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

func isWordByte(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}
