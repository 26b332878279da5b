package core

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"regexp"
	"strconv"
	"strings"
)

// MaxLineBytes is the longest physical line kept; the rest of a longer line is dropped (a
// progress bar without newlines can otherwise grow without bound).
const MaxLineBytes = 1 << 20

// ansiRE matches ANSI colour/control sequences, including the ESC-less remnants ("[1;36m")
// that survive when logs are pasted into issue trackers, and the visible forms "^[[36m" /
// "ESC[36m" of logs passed through cat -v or a pager.
var ansiRE = regexp.MustCompile(`\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[()][0-9A-Za-z]|(?:\^\[|ESC)?\[\d{1,3}(?:;\d{1,3})*m`)

// StripANSI removes terminal colour and control sequences from s.
func StripANSI(s string) string {
	if !strings.Contains(s, "\x1b") && !hasBareSGR(s) {
		return s
	}
	return ansiRE.ReplaceAllString(s, "")
}

// hasBareSGR reports whether s contains an ESC-less colour code such as "[1;36m".
func hasBareSGR(s string) bool {
	for i := strings.IndexByte(s, '['); i >= 0 && i+2 < len(s); {
		j := i + 1
		for j < len(s) && (s[j] >= '0' && s[j] <= '9' || s[j] == ';') {
			j++
		}
		if j > i+1 && j < len(s) && s[j] == 'm' {
			return true
		}
		k := strings.IndexByte(s[i+1:], '[')
		if k < 0 {
			return false
		}
		i += 1 + k
	}
	return false
}

// ScanLines calls fn for every line of r with its 1-based line number. A UTF-8 byte-order mark
// is dropped and UTF-16 text (with its BOM) is converted to UTF-8. Lines are split on
// "\n"; a trailing "\r" is removed, ANSI sequences are stripped and lines longer than
// MaxLineBytes are truncated. A non-nil error from fn stops the scan and is returned.
func ScanLines(r io.Reader, fn func(n int, line string) error) error {
	br := bufio.NewReaderSize(r, 64*1024)
	if dr := decodeBOM(br); dr != io.Reader(br) {
		br = bufio.NewReaderSize(dr, 64*1024)
	}
	n := 0
	var buf []byte
	for {
		chunk, isPrefix, err := br.ReadLine()
		if len(chunk) > 0 || (err == nil && !isPrefix) {
			if len(buf) < MaxLineBytes {
				room := MaxLineBytes - len(buf)
				if len(chunk) > room {
					chunk = chunk[:room]
				}
				buf = append(buf, chunk...)
			}
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				if len(buf) > 0 {
					n++
					if ferr := fn(n, StripANSI(strings.TrimRight(string(buf), "\r"))); ferr != nil {
						return ferr
					}
				}
				return nil
			}
			return fmt.Errorf("read log line %d: %w", n+1, err)
		}
		if isPrefix {
			continue
		}
		n++
		line := StripANSI(strings.TrimRight(string(buf), "\r"))
		buf = buf[:0]
		if ferr := fn(n, line); ferr != nil {
			return ferr
		}
	}
}

// ParseNum parses a decimal number that may contain comma digit grouping ("1,234,567") or a
// leading sign.
func ParseNum(s string) (float64, error) {
	s = strings.ReplaceAll(strings.TrimSpace(s), ",", "")
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, fmt.Errorf("parse number %q: %w", s, err)
	}
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, fmt.Errorf("parse number %q: not finite", s)
	}
	return v, nil
}

// ToGiB converts a value with a unit as engines print it to GiB. "GB" and "GiB" are both
// treated as GiB (the engines compute them with 1024**3); "MB"/"MiB" and "KB"/"KiB" are scaled
// down, "TB"/"TiB" up. An empty unit means GiB.
func ToGiB(v float64, unit string) float64 {
	switch strings.ToUpper(strings.TrimSpace(unit)) {
	case "MB", "MIB", "M":
		return v / 1024
	case "KB", "KIB", "K":
		return v / (1024 * 1024)
	case "TB", "TIB", "T":
		return v * 1024
	case "B":
		return v / (1024 * 1024 * 1024)
	default:
		return v
	}
}

// Round rounds v to 4 decimal places, which is finer than any engine prints and keeps JSON
// output free of float noise from unit conversions and sums.
func Round(v float64) float64 {
	return math.Round(v*1e4) / 1e4
}

// Float returns a pointer to Round(v).
func Float(v float64) *float64 {
	r := Round(v)
	return &r
}

// Int returns a pointer to v.
func Int(v int64) *int64 { return &v }

// String returns a pointer to s.
func String(s string) *string { return &s }

// PerRank collects one number per rank (ranks are opaque keys such as "TP3" or
// "VllmWorker rank=1"; "" is a line without a rank tag) and aggregates over ranks.
type PerRank struct {
	vals map[string]float64
}

func (p *PerRank) init() {
	if p.vals == nil {
		p.vals = map[string]float64{}
	}
}

// First records v for rank unless the rank already has a value.
func (p *PerRank) First(rank string, v float64) {
	p.init()
	if _, ok := p.vals[rank]; !ok {
		p.vals[rank] = v
	}
}

// Last records v for rank, replacing an earlier value.
func (p *PerRank) Last(rank string, v float64) {
	p.init()
	p.vals[rank] = v
}

// Add adds v to the rank's running sum.
func (p *PerRank) Add(rank string, v float64) {
	p.init()
	p.vals[rank] += v
}

// Get returns the rank's value.
func (p *PerRank) Get(rank string) (float64, bool) {
	v, ok := p.vals[rank]
	return v, ok
}

// Len is the number of ranks with a value.
func (p *PerRank) Len() int { return len(p.vals) }

// Min returns the minimum over ranks, or nil when no rank has a value.
func (p *PerRank) Min() *float64 {
	if len(p.vals) == 0 {
		return nil
	}
	m := math.Inf(1)
	for _, v := range p.vals {
		m = math.Min(m, v)
	}
	return Float(m)
}

// Max returns the maximum over ranks, or nil when no rank has a value.
func (p *PerRank) Max() *float64 {
	if len(p.vals) == 0 {
		return nil
	}
	m := math.Inf(-1)
	for _, v := range p.vals {
		m = math.Max(m, v)
	}
	return Float(m)
}

// MinInt is Min rounded to an integer.
func (p *PerRank) MinInt() *int64 {
	m := p.Min()
	if m == nil {
		return nil
	}
	return Int(int64(math.Round(*m)))
}

// Mean accumulates a weighted mean.
type Mean struct {
	sum, weight float64
}

// Add adds v with weight w (w <= 0 counts as 1).
func (m *Mean) Add(v, w float64) {
	if w <= 0 {
		w = 1
	}
	m.sum += v * w
	m.weight += w
}

// Value returns the mean, or nil when nothing was added.
func (m *Mean) Value() *float64 {
	if m.weight == 0 {
		return nil
	}
	return Float(m.sum / m.weight)
}

// Segment is one log record inside a physical line: engines running several ranks, and
// progress bars without newlines, glue several records onto one line.
type Segment struct {
	// Rank is the rank key of the record ("" when the record has no rank tag).
	Rank string
	// Text is the record text, starting at its prefix.
	Text string
}

// SplitSegments cuts line at every match of prefix. key turns a match's submatches into the
// rank key; it may return ok=false for a match that is not a record start (the text then stays
// in the current segment). Text before the first prefix forms a segment with rank inherit.
func SplitSegments(line string, prefix *regexp.Regexp, key func(m []string) (string, bool), inherit string) []Segment {
	locs := prefix.FindAllStringSubmatchIndex(line, -1)
	var segs []Segment
	start, rank := 0, inherit
	for _, loc := range locs {
		m := make([]string, len(loc)/2)
		for i := range m {
			if loc[2*i] >= 0 {
				m[i] = line[loc[2*i]:loc[2*i+1]]
			}
		}
		k, ok := key(m)
		if !ok {
			continue
		}
		if loc[0] > start || (loc[0] == start && start > 0) {
			if t := line[start:loc[0]]; strings.TrimSpace(t) != "" {
				segs = append(segs, Segment{Rank: rank, Text: t})
			}
		}
		start, rank = loc[0], k
	}
	if t := line[start:]; strings.TrimSpace(t) != "" || len(segs) == 0 {
		segs = append(segs, Segment{Rank: rank, Text: t})
	}
	return segs
}

// NumRE is the regular-expression fragment for a number as engines print it (optional sign,
// comma grouping, decimals).
const NumRE = `-?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?`

// UnitRE is the fragment for a memory unit.
const UnitRE = `(?:GiB|GB|MiB|MB|KiB|KB|TiB|TB)`
