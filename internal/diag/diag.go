// Package diag is the harness's one diagnostic type: a problem (an error) or a doubt (a warning)
// found in a file a user wrote or a tool produced, with its position, the path of the field it
// concerns and a stable code that tests and machines key on, while people read the message.
// Errors and warnings share one type and one list, so that they can be printed together in
// file order.
package diag

import (
	"fmt"
	"sort"
	"strings"
)

// Severity says whether a diagnostic makes its file invalid. The zero value is Error.
type Severity int

const (
	// Error: the file is invalid.
	Error Severity = iota
	// Warning: the file is valid, but something in it may fail or mislead at run time.
	Warning
)

// String is "error" or "warning".
func (s Severity) String() string {
	if s == Warning {
		return "warning"
	}
	return "error"
}

// MarshalText writes the severity as "error" or "warning".
func (s Severity) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText reads "error" or "warning".
func (s *Severity) UnmarshalText(b []byte) error {
	switch string(b) {
	case "error":
		*s = Error
	case "warning":
		*s = Warning
	default:
		return fmt.Errorf("severity %q: expected error or warning", b)
	}
	return nil
}

// Diagnostic is one problem or doubt, at a position in a file.
type Diagnostic struct {
	// Severity: Error (the zero value) or Warning.
	Severity Severity `json:"severity"`
	// Code names the kind of problem for machines and tests ("unknown-field", "type",
	// "missing-path"); each package that emits diagnostics documents its codes.
	Code string `json:"code,omitempty"`
	// File is the file's name as the user gave it.
	File string `json:"file"`
	// Line and Column locate the problem (1-based); 0 when unknown, e.g. an unreadable file or a
	// setting that has no position of its own.
	Line   int `json:"line,omitempty"`
	Column int `json:"column,omitempty"`
	// Field is the path of the field concerned ("configs[1].name", "results[3].max_rel_err");
	// "" for the document itself.
	Field string `json:"field,omitempty"`
	// Msg is the summary: what is wrong and what was expected, in one line.
	Msg string `json:"message"`
	// Detail, when set, explains further; it is printed on the lines after the summary.
	Detail string `json:"detail,omitempty"`
}

// Error formats the diagnostic as "file:line:col: field: message", with "warning: " before the
// field for a warning, the line and column only when known, and the detail, if any, on the next
// lines indented by two spaces.
func (d *Diagnostic) Error() string {
	var b strings.Builder
	b.WriteString(d.File)
	if d.Line > 0 {
		fmt.Fprintf(&b, ":%d", d.Line)
		if d.Column > 0 {
			fmt.Fprintf(&b, ":%d", d.Column)
		}
	}
	b.WriteString(": ")
	if d.Severity == Warning {
		b.WriteString("warning: ")
	}
	if d.Field != "" {
		b.WriteString(d.Field)
		b.WriteString(": ")
	}
	b.WriteString(d.Msg)
	if d.Detail != "" {
		b.WriteString("\n  " + strings.ReplaceAll(d.Detail, "\n", "\n  "))
	}
	return b.String()
}

// List is every diagnostic found in a file (or several), usually in file order. As an error it
// stands for all of them at once, so that every problem can be fixed in one go.
type List []*Diagnostic

// Error joins the diagnostics, one per line.
func (l List) Error() string {
	lines := make([]string, len(l))
	for i, d := range l {
		lines[i] = d.Error()
	}
	return strings.Join(lines, "\n")
}

// Unwrap returns the individual diagnostics, for errors.Is and errors.As.
func (l List) Unwrap() []error {
	out := make([]error, len(l))
	for i, d := range l {
		out[i] = d
	}
	return out
}

// HasErrors reports whether any diagnostic of l is an error.
func (l List) HasErrors() bool {
	for _, d := range l {
		if d.Severity == Error {
			return true
		}
	}
	return false
}

// Only returns the diagnostics of l with severity s, in l's order.
func (l List) Only(s Severity) List {
	var out List
	for _, d := range l {
		if d.Severity == s {
			out = append(out, d)
		}
	}
	return out
}

// Sorted orders l in place in file order: by file, then line, then column (diagnostics without
// a position first), stable so that diagnostics at one position keep their order; it drops exact
// duplicates and returns the result.
func (l List) Sorted() List {
	sort.SliceStable(l, func(i, j int) bool {
		a, b := l[i], l[j]
		if a.File != b.File {
			return a.File < b.File
		}
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		return a.Column < b.Column
	})
	out := l[:0]
	seen := map[string]bool{}
	for _, d := range l {
		k := d.Error()
		if seen[k] {
			continue
		}
		seen[k] = true
		out = append(out, d)
	}
	return out
}
