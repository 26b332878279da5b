// import_nccl_layout.go holds where the columns of an nccl-tests table row are: from the
// header when there is one, else guessed from the banner and the row itself.

package workload

import (
	"strconv"
	"strings"
)

// ncclGroup is where one measurement's columns are in a table row.
type ncclGroup struct{ time, algbw, busbw, wrong int }

// ncclLayout is the column layout of a table, read from its header or guessed from the row width.
type ncclLayout struct {
	width              int
	size, count, typ   int
	redop, root        int // -1 when absent
	groups             []ncclGroup
	wrongIsErrorColumn bool // older versions print a max relative error instead of #wrong
}

func layoutFromHeader(tokens []string) (ncclLayout, bool) {
	l := ncclLayout{width: len(tokens), size: -1, count: -1, typ: -1, redop: -1, root: -1}
	var g *ncclGroup
	for i, t := range tokens {
		switch strings.ToLower(t) {
		case "size":
			l.size = i
		case "count":
			l.count = i
		case "type":
			l.typ = i
		case "redop":
			l.redop = i
		case "root":
			l.root = i
		case "time":
			l.groups = append(l.groups, ncclGroup{time: i, algbw: -1, busbw: -1, wrong: -1})
			g = &l.groups[len(l.groups)-1]
		case "algbw":
			if g != nil {
				g.algbw = i
			}
		case "busbw":
			if g != nil {
				g.busbw = i
			}
		case "#wrong", "wrong":
			if g != nil {
				g.wrong = i
			}
		case "error":
			if g != nil {
				g.wrong = i
				l.wrongIsErrorColumn = true
			}
		}
	}
	ok := l.size >= 0 && len(l.groups) > 0 && l.groups[0].busbw >= 0
	return l, ok
}

// guessLayout handles a table whose header was lost: 13 columns = current format (redop, root,
// #wrong), 12 = older format (redop, error column), 11 = oldest format (no redop, error column).
func guessLayout(n int) (ncclLayout, bool) {
	switch n {
	case 13:
		return ncclLayout{width: 13, size: 0, count: 1, typ: 2, redop: 3, root: 4, groups: []ncclGroup{{5, 6, 7, 8}, {9, 10, 11, 12}}}, true
	case 12:
		return ncclLayout{width: 12, size: 0, count: 1, typ: 2, redop: 3, root: -1, groups: []ncclGroup{{4, 5, 6, 7}, {8, 9, 10, 11}}, wrongIsErrorColumn: true}, true
	case 11:
		return ncclLayout{width: 11, size: 0, count: 1, typ: 2, redop: -1, root: -1, groups: []ncclGroup{{3, 4, 5, 6}, {7, 8, 9, 10}}, wrongIsErrorColumn: true}, true
	}
	return ncclLayout{}, false
}

// isBanner tells the "out-of-place  in-place" line above a table header.
func isBanner(toks []string) bool {
	for _, t := range toks {
		if t != "out-of-place" && t != "in-place" {
			return false
		}
	}
	return true
}

// bannerOrder reads the "out-of-place  in-place" banner: for each measurement group in the
// table, whether it is the in-place one.
func bannerOrder(body string) []bool {
	oop := strings.Index(body, "out-of-place")
	loc := reInPlace.FindStringIndex(body)
	ip := -1
	if loc != nil {
		ip = loc[1] - len("in-place")
	}
	switch {
	case oop >= 0 && ip >= 0 && ip < oop:
		return []bool{true, false}
	case oop < 0 && ip >= 0:
		return []bool{true}
	case oop >= 0 && ip < 0:
		return []bool{false}
	}
	return []bool{false, true}
}

// rowLayout picks the column layout of one row: the header's, the header's without an empty
// redop column (old alltoall), the header's first groups when the row has fewer measurements,
// or a guess from the width when there was no header.
func rowLayout(toks []string, layout ncclLayout, haveLayout bool) (ncclLayout, bool) {
	if !haveLayout {
		return guessLayout(len(toks))
	}
	if len(toks) >= layout.width {
		return layout, true // equal, or extra per-iteration columns (-I) after the known ones
	}
	l := layout
	if l.redop >= 0 && l.redop < len(toks) {
		if _, err := strconv.ParseFloat(toks[l.redop], 64); err == nil {
			// No reduction operation printed (old alltoall): the columns after it shift left.
			l = l.without(l.redop)
		}
	}
	if len(toks) >= l.width {
		return l, true
	}
	var groups []ncclGroup
	for _, g := range l.groups {
		if g.busbw >= 0 && g.busbw < len(toks) && max(g.time, g.algbw, g.wrong) < len(toks) {
			groups = append(groups, g)
		}
	}
	if len(groups) == 0 {
		return ncclLayout{}, false
	}
	l.groups = groups
	l.width = len(toks)
	return l, true
}

// without returns the layout with column i removed.
func (l ncclLayout) without(i int) ncclLayout {
	shift := func(c int) int {
		switch {
		case c == i:
			return -1
		case c > i:
			return c - 1
		}
		return c
	}
	out := l
	out.width--
	out.size, out.count, out.typ, out.redop, out.root = shift(l.size), shift(l.count), shift(l.typ), shift(l.redop), shift(l.root)
	out.groups = make([]ncclGroup, len(l.groups))
	for k, g := range l.groups {
		out.groups[k] = ncclGroup{shift(g.time), shift(g.algbw), shift(g.busbw), shift(g.wrong)}
	}
	return out
}
