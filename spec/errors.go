package spec

import (
	"fmt"
	"sort"
	"strings"
)

// Error is one problem found in a spec file, at a position in it.
type Error struct {
	File   string // the file name given to Parse or Load
	Line   int    // 1-based; 0 when the problem has no position (e.g. an unreadable file)
	Column int    // 1-based
	Field  string // the field's path, e.g. "configs[1].name"; empty for document-level problems
	Msg    string // what was wrong and what was expected
}

// Error formats the problem as "file:line:col: field: message".
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d:%d", e.Line, e.Column)
	}
	b.WriteString(": ")
	if e.Field != "" {
		b.WriteString(e.Field)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// ErrorList is every problem found in one spec file, in file order. Parse and Load return it
// (as an error) when the spec is invalid, so that all problems can be fixed in one go.
type ErrorList []*Error

// Error joins the problems, one per line.
func (l ErrorList) Error() string {
	lines := make([]string, len(l))
	for i, e := range l {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// Unwrap returns the individual errors, for errors.Is and errors.As.
func (l ErrorList) Unwrap() []error {
	out := make([]error, len(l))
	for i, e := range l {
		out[i] = e
	}
	return out
}

// sort orders the list by position (stable, so that problems at one position keep their order)
// and drops exact duplicates.
func (l ErrorList) sorted() ErrorList {
	sort.SliceStable(l, func(i, j int) bool {
		if l[i].Line != l[j].Line {
			return l[i].Line < l[j].Line
		}
		return l[i].Column < l[j].Column
	})
	out := l[:0]
	seen := map[string]bool{}
	for _, e := range l {
		k := e.Error()
		if seen[k] {
			continue
		}
		seen[k] = true
		out = append(out, e)
	}
	return out
}
