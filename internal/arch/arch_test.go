package arch

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"
)

// module is the module path; harness packages are the ones under it.
const module = "github.com/reckon-ci/reckon"

// rule is one arrow of docs/design.md ("Imports between packages") as data. From selects the
// importing packages; an import of a harness package breaks the rule when it matches one of
// Deny, or, when Only is set, matches none of Only. Patterns are module-relative: "gate" is that
// package alone, "engine/..." is engine and every package below it.
type rule struct {
	From []string
	Deny []string
	Only []string
	Why  string
}

// rules are the arrows docs/design.md states. Imports outside the module (the standard library,
// third-party modules) are not judged; test files are not judged.
var rules = []rule{
	{
		From: []string{"refengine/...", "cmd/refengine"},
		Only: []string{"refengine/...", "wire/..."},
		Why:  "refengine stands alone: it imports nothing of the harness except wire",
	},
	{
		From: []string{"engine/..."},
		Deny: []string{"gate/...", "reporters/...", "suites/...", "history/..."},
		Why:  "engine never imports gate, reporters, suites or history (engine never judges)",
	},
	{
		From: []string{"gate/..."},
		Deny: []string{"engine/...", "workload/...", "suites/...", "history/..."},
		Why:  "gate never imports engine, workload, suites or history (gate never starts processes)",
	},
	{
		From: []string{"reporters/..."},
		Deny: []string{"engine/..."},
		Why:  "reporters never import engine",
	},
	{
		From: []string{"wire/...", "internal/..."},
		Only: []string{"internal/..."},
		Why:  "wire and internal/* are shared by every package, so they import no harness package except internal/*",
	},
	{
		From: []string{"..."},
		Deny: []string{"refengine/..."},
		Why:  "the harness reaches the reference engine only over HTTP and its command line",
	},
}

// match reports whether the module-relative path p matches pattern ("x" or "x/..." or "...").
func match(pattern, p string) bool {
	if pattern == "..." {
		return true
	}
	if base, ok := strings.CutSuffix(pattern, "/..."); ok {
		return p == base || strings.HasPrefix(p, base+"/")
	}
	return p == pattern
}

func matchAny(patterns []string, p string) bool {
	return slices.ContainsFunc(patterns, func(pat string) bool { return match(pat, p) })
}

// exempt: packages a rule's From matches but that the rule does not cover. The catch-all rule
// against importing refengine does not apply to refengine itself or to its main package.
func exempt(r rule, p string) bool {
	return slices.Contains(r.From, "...") && (match("refengine/...", p) || p == "cmd/refengine")
}

// violations returns one line per import of graph (module-relative package -> module-relative
// harness imports) that breaks a rule, sorted.
func violations(graph map[string][]string, rules []rule) []string {
	var out []string
	for pkg, imports := range graph {
		for _, r := range rules {
			if !matchAny(r.From, pkg) || exempt(r, pkg) {
				continue
			}
			for _, imp := range imports {
				bad := matchAny(r.Deny, imp) || (r.Only != nil && !matchAny(r.Only, imp))
				if bad {
					out = append(out, fmt.Sprintf("%s imports %s: %s", pkg, imp, r.Why))
				}
			}
		}
	}
	sort.Strings(out)
	return out
}

func TestViolationsOnSyntheticGraph(t *testing.T) {
	good := map[string][]string{
		"cmd/reckon":          {"engine", "gate", "reporters", "suites", "wire"},
		"cmd/refengine":       {"refengine/server"},
		"refengine/server":    {"refengine/collective", "wire"},
		"engine":              {"engine/sglang", "internal/atomicfile"},
		"gate":                {"internal/metric", "wire"},
		"reporters":           {"gate", "internal/metric"},
		"wire":                {"internal/num"},
		"internal/metric":     nil,
		"internal/atomicfile": nil,
	}
	if v := violations(good, rules); len(v) != 0 {
		t.Fatalf("a graph that keeps every arrow was judged broken:\n%s", strings.Join(v, "\n"))
	}
	cases := []struct {
		from, to, why string
	}{
		{"refengine/server", "internal/num", "refengine stands alone"},
		{"refengine/model", "engine/client", "refengine stands alone"},
		{"cmd/refengine", "spec", "refengine stands alone"},
		{"engine/sglang", "gate", "engine never imports gate"},
		{"engine", "history", "engine never imports gate"},
		{"gate", "workload", "gate never imports engine"},
		{"gate", "engine/client", "gate never imports engine"},
		{"reporters", "engine", "reporters never import engine"},
		{"wire", "spec", "wire and internal/*"},
		{"internal/metric", "gate", "wire and internal/*"},
		{"suites", "refengine/server", "only over HTTP"},
	}
	for _, c := range cases {
		g := map[string][]string{}
		for k, v := range good {
			g[k] = v
		}
		g[c.from] = append(slices.Clone(g[c.from]), c.to)
		v := violations(g, rules)
		want := fmt.Sprintf("%s imports %s: ", c.from, c.to)
		if len(v) != 1 || !strings.HasPrefix(v[0], want) || !strings.Contains(v[0], c.why) {
			t.Errorf("%s -> %s: violations = %q, want one starting %q and saying %q", c.from, c.to, v, want, c.why)
		}
	}
}

// listed is the part of `go list -json` this test reads.
type listed struct {
	ImportPath string
	Imports    []string
	Error      *struct{ Err string }
}

// importGraph runs `go list -json ./...` at the module root for goos and returns each harness
// package's non-test imports of harness packages, module-relative.
func importGraph(t *testing.T, goos string) map[string][]string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "list", "-e", "-json=ImportPath,Imports,Error", "./...")
	cmd.Dir = root
	cmd.Env = append(cmd.Environ(), "GOOS="+goos)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("go list -json ./... (GOOS=%s) in %s: %v\n%s", goos, root, err, stderr.String())
	}
	graph := map[string][]string{}
	dec := json.NewDecoder(&stdout)
	for {
		var p listed
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("go list -json (GOOS=%s): decoding its output: %v", goos, err)
		}
		if p.Error != nil {
			t.Fatalf("go list (GOOS=%s): package %s: %s", goos, p.ImportPath, p.Error.Err)
		}
		rel, ok := relative(p.ImportPath)
		if !ok {
			t.Fatalf("go list (GOOS=%s) listed %s, which is outside module %s", goos, p.ImportPath, module)
		}
		graph[rel] = nil
		for _, imp := range p.Imports {
			if r, ok := relative(imp); ok {
				graph[rel] = append(graph[rel], r)
			}
		}
	}
	if len(graph) < 10 {
		t.Fatalf("go list (GOOS=%s) listed only %d packages; expected the whole module", goos, len(graph))
	}
	return graph
}

// relative returns a module import path relative to the module ("." for the root).
func relative(importPath string) (string, bool) {
	if importPath == module {
		return ".", true
	}
	rel, ok := strings.CutPrefix(importPath, module+"/")
	return rel, ok
}

// TestImportArrows fails when a non-test import of any package breaks docs/design.md's arrows.
// The engine supervisor has per-platform files, so the graph is read for Linux and for macOS.
func TestImportArrows(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list over the module")
	}
	for _, goos := range []string{"linux", "darwin"} {
		g := importGraph(t, goos)
		for _, want := range []string{"refengine/server", "engine", "gate", "reporters", "wire", "suites"} {
			if _, ok := g[want]; !ok {
				t.Fatalf("GOOS=%s: package %s missing from go list's graph; is the test running at the module root?", goos, want)
			}
		}
		if v := violations(g, rules); len(v) > 0 {
			t.Errorf("GOOS=%s: imports that break docs/design.md's arrows:\n%s", goos, strings.Join(v, "\n"))
		}
	}
}
