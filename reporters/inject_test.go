package reporters

import (
	"github.com/reckon-ci/reckon/spec"
	"strings"
	"testing"

	"github.com/reckon-ci/reckon/gate"
)

// hostileEngineText is an engine log that tries every medium: terminal escapes (OSC 52 writes
// the clipboard, OSC 0 the title), CI workflow commands, GitHub mentions, references, links and
// bidi controls.
const hostileEngineText = "\x1b]52;c;ZXZpbA==\x07\x1b]0;pwned\x07ERROR boom\n" +
	"::add-mask::hide-everything\n  ::stop-commands::tok\n##[set-output name=x]y\n##vso[task.setvariable variable=v]1\n" +
	"cc @octocat @org/team see #12 https://evil.example www.evil.example ![i](http://x/i.png) \u202eevil\n"

// Issue 25, item 5: engine text reaches summary.md and junit.xml only as data.
func TestEngineTextIsDataInMarkdownAndJUnit(t *testing.T) {
	r := &gate.Run{SpecName: "inject", Configs: []gate.Config{{Name: "a", LaunchError: hostileEngineText, LogTail: hostileEngineText}},
		Checks: []gate.Check{
			{Verdict: gate.Verdict{Name: "f", Config: "a", Kind: string(spec.KindFloor), Message: "engine said: " + hostileEngineText, Details: hostileEngineText}, Status: gate.StatusFailed},
			{Verdict: gate.Verdict{Name: "h", Config: "a", Kind: gate.KindHealth, Message: "died"}, Status: gate.StatusError},
		}}
	md := renderMarkdown(r, MaxMarkdownBytes)
	xml := string(junitOf(t, r))
	for name, out := range map[string]string{"summary.md": md, "junit.xml": xml} {
		for _, bad := range []string{"\x1b", "\x07", "\u202e", "##[", "##vso["} {
			if strings.Contains(out, bad) {
				t.Errorf("%s holds %q", name, bad)
			}
		}
		for _, line := range strings.Split(out, "\n") {
			if strings.HasPrefix(strings.TrimLeft(line, " \t"), "::") {
				t.Errorf("%s line starts a workflow command: %q", name, line)
			}
		}
	}
	// Outside the fenced log tail no mention, reference or autolink survives.
	var prose []string
	inFence := false
	for _, line := range strings.Split(md, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			inFence = !inFence
			continue
		}
		if !inFence {
			prose = append(prose, line)
		}
	}
	text := strings.Join(prose, "\n")
	for _, bad := range []string{"@octocat", "@org/team", "#12", "https://evil", "www.evil", "![i]"} {
		if strings.Contains(text, bad) {
			t.Errorf("summary.md prose holds %q:\n%s", bad, text)
		}
	}
}
