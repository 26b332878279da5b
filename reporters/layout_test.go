package reporters

import (
	"bytes"
	"regexp"
	"strings"
	"testing"
)

// TestHTMLTablesFitTheWidth: report.html must not scroll sideways at 1280 px (issue 33: the
// Configs table, with a config's whole command line in its first cell, was wider). Without a
// browser (browser_test.go measures scrollWidth where Chromium is installed) this checks what
// makes it fit: table cells may break anywhere (a long argv or config name wraps), code in a cell
// is not kept on one line, nothing in a table forbids wrapping, and every table sits in a box
// that scrolls on its own rather than widening the page.
func TestHTMLTablesFitTheWidth(t *testing.T) {
	r := sampleRun()
	r.Configs[0].Args = append(r.Configs[0].Args, strings.Repeat("--a-very-long-engine-flag=value,", 40))
	r.Configs[0].Name = strings.Repeat("long-config-name-", 8)
	h := htmlOf(t, r)
	style := h[strings.Index(h, "<style>"):strings.Index(h, "</style>")]
	for _, want := range []string{
		"th,td{border:1px solid #dde1e6;padding:4px 8px;text-align:left;vertical-align:top;overflow-wrap:anywhere}",
		"td code{white-space:normal;overflow-wrap:anywhere}",
		".tablewrap{max-width:100%;overflow-x:auto}",
		"main{max-width:1100px;",
	} {
		if !strings.Contains(style, want) {
			t.Errorf("report.html's style lacks %q", want)
		}
	}
	if regexp.MustCompile(`(td|th|table|code)[^{}]*\{[^}]*white-space:\s*(nowrap|pre)[;}]`).MatchString(style) {
		t.Errorf("a table rule forbids wrapping")
	}
	if n, wrapped := strings.Count(h, "<table"), strings.Count(h, `<div class="tablewrap"><table`); n == 0 || n != wrapped {
		t.Errorf("%d tables, %d of them in a .tablewrap box", n, wrapped)
	}
}

// goType finds a Go identifier of the harness (gate.Run, suites.Config, ...) in user-facing text.
var goType = regexp.MustCompile(`\b(gate|reporters|suites|spec|engine|history|workload|testbed|wire|client|core)\.[A-Z][A-Za-z]+\b`)

// TestLabelsNameNoGoTypes: what a person reads in report.html, summary.md and the terminal names
// no Go type (issue 33: an expander was labelled "gate.Run and testbed").
func TestLabelsNameNoGoTypes(t *testing.T) {
	r := sampleRun()
	var md, term bytes.Buffer
	if err := WriteMarkdown(&md, r); err != nil {
		t.Fatal(err)
	}
	if err := WriteTerminal(&term, r, TerminalOptions{}); err != nil {
		t.Fatal(err)
	}
	for name, text := range map[string]string{"report.html": htmlOf(t, r), "summary.md": md.String(), "terminal": term.String()} {
		if m := goType.FindAllString(text, -1); len(m) > 0 {
			t.Errorf("%s names Go types: %v", name, m)
		}
	}
	if !goType.MatchString("<summary>gate.Run and testbed</summary>") {
		t.Errorf("the check does not catch the label of issue 33")
	}
}
