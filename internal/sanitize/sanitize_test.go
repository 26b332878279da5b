package sanitize

import (
	"strings"
	"testing"
)

func TestTextRemovesControlsAndEscapes(t *testing.T) {
	for in, want := range map[string]string{
		"a\x1b]52;c;ZXZpbA==\x07b":     "ab",  // OSC 52: writes the clipboard
		"a\x1b]0;title\x1b\\b":         "ab",  // OSC 0: the window title
		"\x1b[31mred\x1b[0m":           "red", // CSI colors
		"a\x1bPq#0;2;0;0;0\x1b\\b":     "ab",  // DCS (sixel)
		"a\u009d0;title\u009cb":        "ab",  // 8-bit OSC ... ST
		"a\u009b31mb":                  "a31mb",
		"x\r\ny\rz":                    "x\ny\nz",
		"nul\x00bel\x07del\x7f":        "nulbeldel",
		"bad\xffutf8":                  "bad\uFFFDutf8",
		"tab\tand\nnewline stay":       "tab\tand\nnewline stay",
		"unterminated \x1b]0;title...": "unterminated ",
	} {
		if got := Text(in); got != want {
			t.Errorf("Text(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestTerminalRemovesBidi(t *testing.T) {
	in := "access\u202e \u2066// admin\u2069 \u2067x\u200f"
	if got := Terminal(in); strings.ContainsFunc(got, isBidi) || got != "access // admin x" {
		t.Errorf("Terminal = %q", got)
	}
}

func TestCILogNoLineStartsACommand(t *testing.T) {
	in := strings.Join([]string{
		"::add-mask::secret",
		"   ::stop-commands::tok",
		"::set-output name=x::y",
		"\x1b[0m::warning::colored first",
		"##[error]v1 command",
		"text ##vso[task.setvariable variable=x]y",
		"--- :buildkite: group",
		"a normal line :: with colons",
		"## a markdown heading",
	}, "\n")
	out := CILog(in)
	for _, line := range strings.Split(out, "\n") {
		rest := strings.TrimLeft(line, " \t")
		for _, m := range []string{"::", "--- ", "+++ ", "~~~ "} {
			if strings.HasPrefix(rest, m) {
				t.Errorf("line %q starts a CI command", line)
			}
		}
		if strings.Contains(line, "##[") || strings.Contains(line, "##vso[") {
			t.Errorf("line %q holds a ##[ command", line)
		}
	}
	if !strings.Contains(out, "a normal line :: with colons") || !strings.Contains(out, "\n## a markdown heading") {
		t.Errorf("harmless lines changed:\n%s", out)
	}
	if CILog(out) != out {
		t.Errorf("CILog is not idempotent")
	}
}

func TestMarkdownNeutralisesMentionsLinksAndBidi(t *testing.T) {
	in := "ping @octocat and @org/team, see #12 GH-7 https://evil.example/x www.evil.example mail a@b.io ![img](http://x/y.png) [l](u) <b>x</b> \u202eevil"
	out := Markdown(in)
	for _, bad := range []string{"@octocat", "@org", "#12", "GH-7", "https://", "http://", "www.evil", "a@b", "![", "<b>", "\u202e"} {
		if strings.Contains(out, bad) {
			t.Errorf("Markdown left %q in %q", bad, out)
		}
	}
	if strings.Contains(Markdown("line1\nline2"), "\n") {
		t.Error("Markdown keeps a newline")
	}
}

func FuzzSanitizers(f *testing.F) {
	for _, s := range []string{"::add-mask::x", "\x1b]52;c;x\x07", "@a #1 https://x", "\u202e", "a\r\nb"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		term := Terminal(s)
		if strings.ContainsAny(term, "\x1b\x07\r\x00") || strings.ContainsFunc(term, isBidi) {
			t.Fatalf("Terminal(%q) = %q", s, term)
		}
		if Terminal(term) != term {
			t.Fatalf("Terminal not idempotent on %q", s)
		}
		ci := CILog(s)
		for _, line := range strings.Split(ci, "\n") {
			if strings.HasPrefix(strings.TrimLeft(line, " \t"), "::") || strings.Contains(line, "##[") || strings.Contains(line, "##vso[") {
				t.Fatalf("CILog(%q) has line %q", s, line)
			}
		}
		if strings.Contains(Markdown(s), "\n") {
			t.Fatalf("Markdown(%q) has a newline", s)
		}
	})
}

func TestMarkdownEscapesLinkSyntax(t *testing.T) {
	if got := Markdown("[l](u) ![i](v)"); got != `\[l\](u) \!\[i\](v)` {
		t.Errorf("Markdown = %q", got)
	}
}

func TestConsoleColorKeepsOnlyColour(t *testing.T) {
	in := "\x1b[1;31mFAIL\x1b[0m \x1b]52;c;eA==\x07\x1b[2J\n\x1b[33m::add-mask::x"
	got := ConsoleColor(in)
	if got != "\x1b[1;31mFAIL\x1b[0m \n| \x1b[33m::add-mask::x" {
		t.Errorf("ConsoleColor = %q", got)
	}
}
