package reporters

import (
	"github.com/reckon-ci/reckon/gate"

	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/reckon-ci/reckon/internal/sanitize"

	"github.com/reckon-ci/reckon/internal/num"
)

// cleanText makes engine text safe for every report format (sanitize.Text): escape sequences
// and control characters removed, carriage returns turned into newlines, invalid UTF-8 replaced.
func cleanText(s string) string { return sanitize.Text(s) }

// oneLine cleans s and folds it onto a single line of at most maxRunes runes.
func oneLine(s string, maxRunes int) string {
	s = strings.Join(strings.Fields(cleanText(s)), " ")
	if utf8.RuneCountInString(s) <= maxRunes {
		return s
	}
	r := []rune(s)
	return string(r[:maxRunes-1]) + "…"
}

// fitMessage cleans a verdict's message (or a next step) and folds it onto one line of about
// maxRunes runes without ever cutting its last clause, where the fix or the next step is ("...
// (sgl-project/sglang#14046); launch with SGLANG_ENABLE_SPEC_V2=0 or a release that fixed it"):
// a message too long loses the middle of its detail instead, marked with "…". The tail it keeps
// is made of whole clauses (split after "; " and ": "): as many of the last ones as fit in two
// thirds of maxRunes, and always the last one, unless that one alone is longer than 2*maxRunes
// runes (engine text, not a sentence of ours), which keeps its last maxRunes/2 runes. Every
// report shortens verdicts through it.
func fitMessage(s string, maxRunes int) string { return FitMessage(s, maxRunes) }

// FitMessage is fitMessage for the commands that quote a verdict outside the reports (reckon
// baseline record's refusal): one way of shortening a verdict, the fix kept whole.
func FitMessage(s string, maxRunes int) string {
	s = strings.Join(strings.Fields(cleanText(s)), " ")
	r := []rune(s)
	if len(r) <= maxRunes {
		return s
	}
	tailRunes := keptTail(s, maxRunes)
	headRunes := max(maxRunes-tailRunes-3, maxRunes/4)
	if headRunes+tailRunes+3 >= len(r) {
		return s
	}
	return strings.TrimRight(string(r[:headRunes]), " ") + " … " + strings.TrimLeft(string(r[len(r)-tailRunes:]), " ")
}

// keptTail is how many runes at the end of s fitMessage keeps whole (see there).
func keptTail(s string, maxRunes int) int {
	var starts []int // rune offsets where a clause starts, last clause first
	rs := []rune(s)
	for i := len(rs) - 2; i > 0; i-- {
		if rs[i] == ' ' && (rs[i-1] == ';' || rs[i-1] == ':') {
			starts = append(starts, i+1)
		}
	}
	if len(starts) == 0 {
		return maxRunes / 2
	}
	last := len(rs) - starts[0]
	if last > 2*maxRunes {
		return maxRunes / 2
	}
	keep := last
	for _, st := range starts[1:] {
		if len(rs)-st > maxRunes*2/3 {
			break
		}
		keep = len(rs) - st
	}
	return keep
}

// clip shortens s to at most maxBytes bytes (on rune boundaries), keeping its head and its tail
// (where a log's error usually is) and saying how much was cut.
func clip(s string, maxBytes int) string {
	if len(s) <= maxBytes {
		return s
	}
	head := maxBytes / 4
	tail := maxBytes - head
	for head > 0 && !utf8.RuneStart(s[head]) {
		head--
	}
	start := len(s) - tail
	for start < len(s) && !utf8.RuneStart(s[start]) {
		start++
	}
	return s[:head] + fmt.Sprintf("\n[... %d bytes cut ...]\n", start-head) + s[start:]
}

// lastLines returns the last n lines of s.
func lastLines(s string, n int) string {
	s = strings.TrimRight(s, "\n")
	idx := len(s)
	for k := 0; k < n; k++ {
		j := strings.LastIndexByte(s[:idx], '\n')
		if j < 0 {
			return s
		}
		idx = j
	}
	return s[idx+1:]
}

// fmtDuration formats d for humans, rounded to what matters.
func fmtDuration(d float64) string {
	switch {
	case d <= 0:
		return "0s"
	case d < 1:
		return fmt.Sprintf("%.0fms", d*1000)
	case d < 60:
		return fmt.Sprintf("%.1fs", d)
	case d < 3600:
		return fmt.Sprintf("%dm%02ds", int(d)/60, int(d)%60)
	default:
		return fmt.Sprintf("%dh%02dm", int(d)/3600, (int(d)%3600)/60)
	}
}

// finite reports whether v is a usable number.
func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// mapNum reads a numeric value from a JSON-shaped map (float64, int kinds, or a numeric string).
func mapNum(m map[string]any, key string) (float64, bool) {
	v, ok := m[key]
	if !ok {
		return 0, false
	}
	switch x := v.(type) {
	case float64:
		return x, finite(x)
	case float32:
		return float64(x), finite(float64(x))
	case int:
		return float64(x), true
	case int64:
		return float64(x), true
	case int32:
		return float64(x), true
	case uint64:
		return float64(x), true
	case interface{ Float64() (float64, error) }: // json.Number
		f, err := x.Float64()
		return f, err == nil && finite(f)
	case string:
		f, err := strconv.ParseFloat(x, 64)
		return f, err == nil && finite(f)
	}
	return 0, false
}

// str reads a value from a JSON-shaped map as text.
func str(m map[string]any, key string) string {
	v, ok := m[key]
	if !ok || v == nil {
		return ""
	}
	if s, ok := v.(string); ok {
		return s
	}
	if f, ok := mapNum(m, key); ok {
		return num.Format(f)
	}
	return fmt.Sprint(v)
}

// errorLabel is how the reports name an errored check's category: "infrastructure error",
// "measurement error", "unverified: could not prove what it checks" or "interrupted".
func errorLabel(c *gate.Check) string {
	switch c.EffectiveCategory() {
	case gate.CategoryUnverified:
		return "unverified: could not prove what it checks"
	case gate.CategoryMeasurement:
		return "measurement error"
	case gate.CategoryInterrupted:
		return "interrupted"
	}
	return "infrastructure error"
}
