package enginefacts

import (
	"fmt"
	"strings"
)

// Markdown markers around the generated section of docs/conformance.md.
const (
	BeginMarker = "<!-- BEGIN enginefacts (generated from wire/enginefacts: go test ./wire/enginefacts -run TestDoc -update) -->"
	EndMarker   = "<!-- END enginefacts -->"
)

// Markdown renders the table as the facts section of docs/conformance.md, between BeginMarker
// and EndMarker (both included).
func Markdown() string {
	var b strings.Builder
	b.WriteString(BeginMarker + "\n")
	facts, sources, unverified := Counts()
	fmt.Fprintf(&b, "%d facts, %d sources, %d unverified (an unverified fact never decides a verdict alone).\n\n", facts, sources, unverified)
	b.WriteString("| Fact | Engine | Releases | What the engine does | Values | Sources |\n")
	b.WriteString("|---|---|---|---|---|---|\n")
	for _, f := range All() {
		vals := make([]string, len(f.Values))
		for i, v := range f.Values {
			vals[i] = "`" + v + "`"
		}
		src := "**unverified**"
		if f.Verified() {
			parts := make([]string, len(f.Sources))
			for i, s := range f.Sources {
				p := fmt.Sprintf("%s %s @ %s: “%s”", s.Repo, s.Path, s.Ref, s.Quote)
				if s.Secondary {
					p += " (second-hand)"
				}
				parts[i] = p
			}
			src = strings.Join(parts, "<br>")
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s | %s | %s |\n", f.ID, f.Engine, f.Range(), cell(f.Says), strings.Join(vals, ", "), cell(src))
	}
	b.WriteString(EndMarker + "\n")
	return b.String()
}

// cell escapes a table cell's pipes and newlines.
func cell(s string) string {
	s = strings.ReplaceAll(s, "|", `\|`)
	return strings.ReplaceAll(s, "\n", " ")
}

// Splice replaces the generated section of doc (from BeginMarker to EndMarker) with Markdown();
// a doc without the markers is an error.
func Splice(doc string) (string, error) {
	i := strings.Index(doc, BeginMarker)
	j := strings.Index(doc, EndMarker)
	if i < 0 || j < i {
		return "", fmt.Errorf("no generated facts section (expected %q ... %q)", BeginMarker, EndMarker)
	}
	end := j + len(EndMarker)
	if end < len(doc) && doc[end] == '\n' {
		end++
	}
	return doc[:i] + Markdown() + doc[end:], nil
}
