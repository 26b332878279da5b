package main

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// A hint is text a user reads that names a reckon command line: "record a baseline (reckon
// baseline record --from RESULTS)". Each one must name a command and flags that exist, or the
// user's first try fails (issue 33: `reckon baseline record --spec SPEC` named a flag record does
// not have).

// hintRE finds "reckon" followed by words and flags, up to the end of the quoted or bracketed
// text it sits in.
var hintRE = regexp.MustCompile("\\breckon((?: +[a-z][a-z0-9-]*)+)((?: +[^ \"`()\\\\;|&<>\\n]+)*)")

// flagRE finds a long flag in a hint's arguments.
var flagRE = regexp.MustCompile(`(?:^| |\[)--([a-z][a-z0-9-]*)`)

// hintProblem checks one hint against the command tree: "" when its flags exist (or it does not
// name a reckon subcommand at all, e.g. "reckon keeps --no-ignore-eos"), else what is wrong.
func hintProblem(root *cobra.Command, hint string) string {
	m := hintRE.FindStringSubmatch(hint)
	if m == nil {
		return ""
	}
	words := strings.Fields(m[1])
	cmd, used := root, 0
	for _, w := range words {
		var next *cobra.Command
		for _, c := range cmd.Commands() {
			if c.Name() == w || c.HasAlias(w) {
				next = c
			}
		}
		if next == nil {
			break
		}
		cmd, used = next, used+1
	}
	if used == 0 || cmd.DisableFlagParsing {
		return "" // not a subcommand, or one that parses its own flags (supervise)
	}
	// Words after the command path that are not its arguments end the hint ("reckon merge never
	// overwrites ..."): only flags right after the path or among its arguments are checked.
	rest := strings.Join(words[used:], " ") + m[2]
	if used < len(words) && !strings.HasPrefix(strings.TrimSpace(m[2]), "-") && len(cmd.Commands()) > 0 {
		return "" // prose: "reckon history is ...", not a command line
	}
	var bad []string
	for _, f := range flagRE.FindAllStringSubmatch(rest, -1) {
		name := f[1]
		if name == "help" {
			continue
		}
		if cmd.Flags().Lookup(name) == nil && cmd.InheritedFlags().Lookup(name) == nil && cmd.PersistentFlags().Lookup(name) == nil {
			bad = append(bad, "--"+name)
		}
	}
	if len(bad) == 0 {
		return ""
	}
	return "`" + cmd.CommandPath() + "` has no flag " + strings.Join(bad, ", ")
}

// TestHintProblemCatchesAMadeUpFlag: the checker itself, on the hint of issue 33 and on a true one.
func TestHintProblemCatchesAMadeUpFlag(t *testing.T) {
	for _, tc := range []struct {
		hint string
		bad  bool
	}{
		{"record a baseline on this testbed (reckon baseline record --spec SPEC)", true},
		{"record a baseline on this testbed (reckon baseline record --from RESULTS)", false},
		{"reckon gate --spec s.yaml --no-such-flag", true},
		{"reckon gate --spec s.yaml --out out --log-level debug", false},
		{"reckon calibrate numerics --seeds 4 --first-seed 101", false},
		{"reckon keeps --no-ignore-eos as a way out", false},
	} {
		if got := hintProblem(rootCmd, tc.hint); (got != "") != tc.bad {
			t.Errorf("hintProblem(%q) = %q, want bad=%v", tc.hint, got, tc.bad)
		}
	}
}

// TestHintsNameRealFlags reads every hint in the harness's source (user-facing strings, help
// texts, doc comments), the README, docs/, CI templates and scripts, and checks that each `reckon CMD --flag` it names
// exists in the command tree. Test files are left out (they name wrong flags on purpose).
func TestHintsNameRealFlags(t *testing.T) {
	root := filepath.Join("..", "..")
	var files []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case ".git", "bin", "out", "testdata", "node_modules":
				return filepath.SkipDir
			}
			return nil
		}
		name := d.Name()
		if (strings.HasSuffix(name, ".go") && !strings.HasSuffix(name, "_test.go")) || strings.HasSuffix(name, ".md") || strings.HasSuffix(name, ".yml") || strings.HasSuffix(name, ".yaml") || strings.HasSuffix(name, ".sh") {
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(b), "\n") {
			for _, loc := range hintRE.FindAllStringIndex(line, -1) {
				hint := line[loc[0]:loc[1]]
				if !strings.Contains(hint, "--") {
					continue
				}
				checked++
				if p := hintProblem(rootCmd, hint); p != "" {
					rel, _ := filepath.Rel(root, f)
					t.Errorf("%s:%d: %q: %s", rel, i+1, hint, p)
				}
			}
		}
	}
	if checked < 20 {
		t.Fatalf("checked only %d hints: the scan found nothing to check", checked)
	}
	t.Logf("checked %d hints in %d files", checked, len(files))
}
