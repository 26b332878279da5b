package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/parser"
	"github.com/spf13/cobra"

	"github.com/reckon-ci/reckon/engine"
	"github.com/reckon-ci/reckon/internal/diag"
	"github.com/reckon-ci/reckon/spec"
	"github.com/reckon-ci/reckon/suites"
)

func init() { rootCmd.AddCommand(newSpecCmd()) }

func newSpecCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "spec",
		Short: "Work with gate specs (the YAML files reckon gate runs)",
	}
	cmd.AddCommand(newSpecCheckCmd())
	return cmd
}

func newSpecCheckCmd() *cobra.Command {
	var asJSON bool
	var needs specNeedOptions
	cmd := &cobra.Command{
		Use:   "check FILE|DIR... [--json] [--baselines DIR] [--history DSN] [--testbed KEY]",
		Short: "Validate gate specs: every problem with its file:line:col, or OK",
		Long: `check loads each spec the way "reckon gate" does and reports every problem at once, one per line,
as file:line:col: field: what was expected (docs/spec.md is the format's reference). It then builds
each config's engine command line with the spec's engine adapter, so that settings the engine would
refuse at launch (e.g. an EAGLE top-k above 1 for vLLM) are found before any GPU is taken.

A directory stands for every .yaml and .yml file under it. A valid file prints "OK" with its spec
name, engine and counts. Paths the run will read (numerics prompts, datasets, probe files, a
command given as a path) that do not exist relative to the current directory are warned about
without failing the file: the gate may run elsewhere. Warnings and errors are printed together,
sorted by position; an error does not hide the rest of the file: the parts the errors point at are
left out and the rest is checked on (its warnings, and the errors found only after loading).

--json prints the resolved spec instead: defaults filled in, generated check names, implied expect
checks, and per config the effective launch settings with the engine's argv (the harness adds
--host and --port at launch), and the diagnostics (errors and warnings in file order, each with its
severity, code, position and field path). One JSON object per file, a JSON array for several files.

--baselines DIR and --history DSN plan each statistical check before any run: the design (launches
x trials per side) that decides its min_effect at its alpha with its power, from the noise the
stored baselines measured or the history's runs teach (the launch noise the gate learns from them);
a check against history replays the nightly detector over the stored nights, the newest as
tonight, and says the smallest drop a healthy night would show it could find.

Exit code 0 when every file is valid, 2 when any file is invalid or unreadable.`,
		Example: `  reckon spec check fixtures/specs/examples/
  reckon spec check --json my-spec.yaml | jq '.launches[] | {config, argv}'
  reckon spec check .reckon/premerge.yaml .reckon/nightly.yaml --history "$RECKON_HISTORY_DSN"`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			specNeedsFor = needs
			defer func() { specNeedsFor = specNeedOptions{} }()
			return runSpecCheck(cmd.OutOrStdout(), asJSON, args)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the resolved spec as JSON (one object per file, an array for several)")
	cmd.Flags().StringVar(&needs.dir, "baselines", "", "directory of stored baselines: say, per statistical check and testbed with a baseline of the spec, how many launches and trials it needs to decide its min_effect")
	cmd.Flags().StringVar(&needs.testbed, "testbed", "", "with --baselines or --history: only this testbed key (default: every testbed with a baseline or runs of the spec)")
	cmd.Flags().StringVar(&needs.history, "history", "", "results history (a file path, sqlite://PATH or postgres://...): say, per statistical check and testbed with runs of the spec, what it needs to decide its min_effect, from the launch noise the stored runs teach (read only)")
	return cmd
}

// specLaunch is a config's effective launch settings and the argv its engine adapter builds.
type specLaunch struct {
	spec.Launch
	Argv []string `json:"argv,omitempty"`
}

// specCheckResult is what `reckon spec check --json` prints for one file. Diagnostics holds its
// errors and warnings together in file order; Errors and Warnings are the same diagnostics split
// by severity (the form earlier versions printed).
type specCheckResult struct {
	File        string         `json:"file"`
	Valid       bool           `json:"valid"`
	Diagnostics spec.ErrorList `json:"diagnostics,omitempty"`
	Errors      spec.ErrorList `json:"errors,omitempty"`
	Warnings    spec.ErrorList `json:"warnings,omitempty"`
	Spec        *spec.Spec     `json:"spec,omitempty"`
	Launches    []specLaunch   `json:"launches,omitempty"`
	// Needs (spec check --baselines) is what each statistical check needs on each testbed with
	// a baseline of the spec to decide its min_effect; NeedNotes why some could not be planned.
	Needs     []specNeed `json:"needs,omitempty"`
	NeedNotes []string   `json:"need_notes,omitempty"`
}

// runSpecCheck validates every file and prints the results; any invalid file makes it return
// exit code 2 (after every file has been reported).
func runSpecCheck(w io.Writer, asJSON bool, args []string) error {
	files, err := expandSpecArgs(args)
	if err != nil {
		return withExitCode(2, err)
	}
	results := make([]specCheckResult, 0, len(files))
	invalid := 0
	for _, f := range files {
		r := checkSpecFile(f)
		if r.Valid && specNeedsFor.dir != "" {
			r.Needs, r.NeedNotes = specNeeds(r.Spec, specNeedsFor)
		}
		if r.Valid && specNeedsFor.history != "" {
			needs, notes := historyNeeds(r.Spec, specNeedsFor)
			r.Needs, r.NeedNotes = append(r.Needs, needs...), append(r.NeedNotes, notes...)
		}
		if !r.Valid {
			invalid++
		}
		results = append(results, r)
	}
	if asJSON {
		var v any = results
		if len(results) == 1 {
			v = results[0]
		}
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		if err := enc.Encode(v); err != nil {
			return withExitCode(3, fmt.Errorf("write JSON: %w", err))
		}
	} else {
		for _, r := range results {
			printSpecCheck(w, r)
		}
	}
	if invalid > 0 {
		return withExitCode(2, fmt.Errorf("%s invalid (of %d checked)", plural(invalid, "spec file"), len(files)))
	}
	return nil
}

// expandSpecArgs replaces each directory argument with the .yaml and .yml files under it (at any
// depth, in lexical order); other arguments are kept as given, so that a missing file is reported
// as unreadable.
func expandSpecArgs(args []string) ([]string, error) {
	var files []string
	for _, a := range args {
		fi, err := os.Stat(a)
		if err != nil || !fi.IsDir() {
			files = append(files, a)
			continue
		}
		n := len(files)
		err = filepath.WalkDir(a, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if ext := filepath.Ext(path); !d.IsDir() && (ext == ".yaml" || ext == ".yml") {
				files = append(files, path)
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("listing specs under %s: %w", a, err)
		}
		if len(files) == n {
			return nil, fmt.Errorf("%s: no .yaml or .yml files in this directory", a)
		}
	}
	return files, nil
}

func printSpecCheck(w io.Writer, r specCheckResult) {
	for _, d := range r.Diagnostics {
		fmt.Fprintln(w, d.Error())
	}
	if !r.Valid {
		return
	}
	s := r.Spec
	implied := 0
	for _, c := range s.Checks {
		if c.Implicit {
			implied++
		}
	}
	checks := plural(len(s.Checks), "check")
	if implied > 0 {
		checks += fmt.Sprintf(" (%d implied by expect)", implied)
	}
	fmt.Fprintf(w, "OK %s: spec %s, %s tp %d, %s, %s, %s\n", r.File, s.Name, s.Engine.Kind, s.Engine.TPSize,
		plural(len(s.Configs), "config"), plural(len(s.Workloads), "workload"), checks)
	for _, d := range s.DerivedTwins {
		fmt.Fprintf(w, "  derived twin %s: %s\n", d.Config, d.Reason)
	}
	// Each config's command line as its engine adapter builds it (the harness adds --host and
	// --port at launch), environment first.
	for _, l := range r.Launches {
		if len(l.Argv) == 0 {
			continue
		}
		fmt.Fprintf(w, "  %s: %s\n", l.Config, commandLine(l.Env, l.Argv))
	}
	printSpecNeeds(w, r)
}

// commandLine renders an environment and argv as one shell-quoted line, e.g.
// "NCCL_ALGO=Tree bin/refengine --tp-size 8 --disable-custom-all-reduce".
func commandLine(env map[string]string, argv []string) string {
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys)+len(argv))
	for _, k := range keys {
		parts = append(parts, k+"="+shellQuote(env[k]))
	}
	for _, a := range argv {
		parts = append(parts, shellQuote(a))
	}
	return strings.Join(parts, " ")
}

// shellQuote quotes s for a POSIX shell when it holds anything but plain word characters.
func shellQuote(s string) string {
	if s == "" {
		return "''"
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./:=,+@%", r)) {
			return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
		}
	}
	return s
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// checkSpecFile loads one spec and builds every config's engine command line; its errors and
// warnings come out together, sorted by position. A spec with errors is still checked for
// everything else (partialSpec): an error never hides the warnings, or the other errors, that the
// rest of the file has.
func checkSpecFile(path string) (r specCheckResult) {
	r.File = path
	var all spec.ErrorList
	defer func() {
		r.Diagnostics = all.Sorted()
		r.Errors, r.Warnings = r.Diagnostics.Only(diag.Error), r.Diagnostics.Only(diag.Warning)
		r.Valid = !r.Diagnostics.HasErrors()
	}()
	s, err := spec.Load(path)
	if err != nil {
		var list spec.ErrorList
		if !errors.As(err, &list) {
			// An unreadable file: the message already names it ("read spec: open x.yaml: ...").
			all = append(all, &spec.Error{Code: spec.CodeUnreadable, File: path, Msg: err.Error()})
			return r
		}
		all = append(all, list...)
		if ps, cut := partialSpec(path, list); ps != nil {
			_, more := checkLoaded(path, ps)
			for _, d := range more {
				// "config X is unused" may only mean that the check naming it was cut.
				unusedConfig := d.Code == spec.CodeUnused && strings.HasPrefix(d.Field, "configs[")
				if !cut[d.Line] && !sameDiag(all, d) && !unusedConfig {
					all = append(all, d)
				}
			}
		}
		return r
	}
	r.Spec = s
	r.Launches, all = checkLoaded(path, s)
	return r
}

// checkLoaded is what spec check finds in a spec that loaded: each config's launch (and the
// problems of building its command line), what the engine kind would drop or never report,
// missing data files, uncalibrated checks and unused configs.
func checkLoaded(path string, s *spec.Spec) (launches []specLaunch, all spec.ErrorList) {
	adapter, err := engine.AdapterFor(s.Engine.Kind)
	if err != nil {
		all = append(all, &spec.Error{Code: spec.CodeValue, File: path, Field: "engine.kind", Msg: err.Error()})
	}
	for i, c := range s.Configs {
		l, err := s.Resolved(c.Name)
		if err != nil {
			all = append(all, &spec.Error{Code: spec.CodeValue, File: path, Line: c.Line, Field: fmt.Sprintf("configs[%d]", i), Msg: err.Error()})
			continue
		}
		sl := specLaunch{Launch: l}
		if adapter != nil {
			argv, err := adapter.Command(suites.LaunchConfig(l))
			if err != nil {
				all = append(all, &spec.Error{Code: spec.CodeUnsupported, File: path, Line: c.Line, Field: fmt.Sprintf("configs[%d]", i),
					Msg: fmt.Sprintf("config %s cannot be launched: %v", c.Name, err)})
			}
			sl.Argv = argv
		}
		launches = append(launches, sl)
	}
	// What the engine kind would drop or never report (suites.EngineProblems: the gate refuses
	// the same spec before launching anything).
	all = append(all, suites.EngineProblems(s)...)
	all = append(all, missingPaths(s)...)
	all = append(all, uncalibratedChecks(s)...)
	all = append(all, unusedConfigs(s)...)
	refinePositions(path, all)
	return launches, all
}

// sameDiag reports whether list already holds d (same position, field and message).
func sameDiag(list spec.ErrorList, d *spec.Error) bool {
	for _, e := range list {
		if e.Line == d.Line && e.Column == d.Column && e.Field == d.Field && e.Msg == d.Msg {
			return true
		}
	}
	return false
}

// partialSpecRounds bounds how often partialSpec blanks out what an error points at and parses
// again (each round may uncover errors the cut made, e.g. a config left without its name).
const partialSpecRounds = 8

// partialSpec is the spec at path with every part an error points at blanked out: the line of
// the error and the lines nested under it (a whole item when the line starts one, "- name: x"),
// replaced by empty lines so that every other line keeps its number. Parsed again until it
// loads, it lets spec check report the warnings and later-stage errors of the rest of the file
// instead of stopping at the first error. cut holds the blanked line numbers, whose own
// diagnostics are the spec's errors already. nil when the errors carry no line or the file still
// does not load after partialSpecRounds rounds. (spec.Parse returns no spec with its errors;
// this stands in for that, from the outside.)
func partialSpec(path string, errs spec.ErrorList) (*spec.Spec, map[int]bool) {
	data, err := readSpecText(path)
	if err != nil {
		return nil, nil
	}
	lines := strings.Split(data, "\n")
	cut := map[int]bool{}
	for round := 0; round < partialSpecRounds; round++ {
		progress := false
		for _, e := range errs {
			if e.Line < 1 || e.Line > len(lines) || cut[e.Line] || e.Severity == diag.Warning {
				continue
			}
			if l, ok := cutFlowEntry(lines[e.Line-1], e.Column); ok {
				lines[e.Line-1] = l // one entry of a {flow: mapping}: the rest of the line stays
			} else {
				for _, n := range blockAt(lines, e.Line) {
					lines[n-1] = ""
					cut[n] = true
				}
			}
			progress = true
		}
		if !progress {
			return nil, nil
		}
		s, err := spec.Parse([]byte(strings.Join(lines, "\n")), path)
		if err == nil {
			s.ResolvePaths(path)
			return s, cut
		}
		if !errors.As(err, &errs) {
			return nil, nil
		}
	}
	return nil, nil
}

// cutFlowEntry blanks out the "key: value" entry of a flow mapping or sequence ("{a: 1, b: 2}")
// that column col (1-based) of line falls in, with its separating comma, keeping every other
// column where it was. ok is false when col is not inside a flow collection.
func cutFlowEntry(line string, col int) (string, bool) {
	if col < 1 || col > len(line) {
		return line, false
	}
	b := []byte(line)
	i := col - 1
	depth := 0
	start := -1
	for j := i - 1; j >= 0; j-- { // back to the separator that opens the entry
		switch b[j] {
		case '}', ']':
			depth++
		case '{', '[':
			if depth == 0 {
				start = j
			} else {
				depth--
			}
		case ',':
			if depth == 0 {
				start = j
			}
		}
		if start >= 0 {
			break
		}
	}
	if start < 0 {
		return line, false
	}
	end := -1
	depth = 0
	for j := i; j < len(b); j++ { // on to the separator that closes it
		switch b[j] {
		case '{', '[':
			depth++
		case '}', ']':
			if depth == 0 {
				end = j
			} else {
				depth--
			}
		case ',':
			if depth == 0 {
				end = j
			}
		}
		if end >= 0 {
			break
		}
	}
	if end < 0 {
		return line, false
	}
	from, to := start+1, end // the entry itself
	switch {
	case b[end] == ',':
		to = end + 1 // "{a: 1, b: 2}": cut "a: 1,"
	case b[start] == ',':
		from = start // "{a: 1, b: 2}": cut ", b: 2"
	}
	for j := from; j < to; j++ {
		b[j] = ' '
	}
	return string(b), true
}

// blockAt is line n (1-based) of lines and the lines nested under it: those after it that are
// blank, comments or indented deeper than it (deeper than its "- " when it starts an item).
func blockAt(lines []string, n int) []int {
	indent := func(l string) int { return len(l) - len(strings.TrimLeft(l, " ")) }
	base := indent(lines[n-1])
	out := []int{n}
	for i := n; i < len(lines); i++ {
		t := strings.TrimSpace(lines[i])
		if t != "" && !strings.HasPrefix(t, "#") && indent(lines[i]) <= base {
			break
		}
		out = append(out, i+1)
	}
	return out
}

// readSpecText reads a spec file for partialSpec (spec.Load has already read it within its
// size limit; this is the same file).
func readSpecText(path string) (string, error) {
	b, err := os.ReadFile(path)
	return string(b), err
}

// unusedConfigs warns about configs that no check names (as its config, one of its configs, the
// config compared against, base, head, twin or oracle; a floor without configs names all) and no
// workload lists: the gate would launch them and judge only that they started.
func unusedConfigs(s *spec.Spec) spec.ErrorList {
	used := map[string]bool{}
	for _, c := range s.Checks {
		if c.Scope() == spec.ScopePerConfig && len(c.ConfigNames()) == 0 {
			return nil // a check on every config
		}
		for _, n := range c.ConfigNames() {
			used[n] = true
		}
	}
	for _, d := range s.DerivedTwins {
		used[d.Config] = true
	}
	var out spec.ErrorList
	for i, c := range s.Configs {
		if used[c.Name] || len(s.WorkloadsFor(c.Name)) > 0 {
			continue
		}
		out = append(out, &spec.Error{Severity: diag.Warning, Code: spec.CodeUnused, File: s.File, Line: c.Line, Field: fmt.Sprintf("configs[%d]", i),
			Msg: fmt.Sprintf("config %s is used by no check and no workload: the gate would launch it and judge only that it started; add a check or an expect, or remove it", c.Name)})
	}
	return out
}

// refinePositions points each diagnostic whose field path names a node deeper than its line
// (e.g. configs[1].speculative.num_draft_tokens reported at the config's line) at that node in
// the file. Diagnostics whose path the file does not hold (an inherited setting) keep theirs.
func refinePositions(path string, list spec.ErrorList) {
	data, err := os.ReadFile(path)
	if err != nil {
		return
	}
	f, err := parser.ParseBytes(data, 0)
	if err != nil {
		return
	}
	for _, d := range list {
		if d.Field == "" || d.File != path && d.File != "" {
			continue
		}
		p, err := yaml.PathString("$." + d.Field)
		if err != nil {
			continue
		}
		n, err := p.FilterFile(f)
		if err != nil || n == nil {
			continue
		}
		if tk := n.GetToken(); tk != nil && tk.Position != nil && tk.Position.Line > d.Line {
			// The value's line, at its key where the line has it (a reader looks there), else at
			// the line's first non-blank column.
			d.Line, d.Column = tk.Position.Line, tk.Position.Column
			if lines := strings.Split(string(data), "\n"); d.Line <= len(lines) {
				l := lines[d.Line-1]
				key := d.Field[strings.LastIndexByte(d.Field, '.')+1:] // "command[0]" -> "command"
				if i := strings.IndexByte(key, '['); i >= 0 {
					key = key[:i]
				}
				if i := strings.Index(l, key+":"); key != "" && i >= 0 {
					d.Column = i + 1
				} else if c := len(l) - len(strings.TrimLeft(l, " -")); c < d.Column {
					d.Column = c + 1
				}
			}
		}
	}
}

// missingPaths lists the files the run will read that do not exist: numerics prompts, workload
// datasets and probe files (spec.Load has made them relative to the spec file), and a command
// given as a path (relative to the current directory). The model is left out: it may be a hub
// id, which looks like a relative path.
func missingPaths(s *spec.Spec) spec.ErrorList {
	var out spec.ErrorList
	warn := func(line int, field, path, what, where string) {
		if path == "" {
			return
		}
		if _, err := os.Stat(path); err != nil {
			out = append(out, &spec.Error{Severity: diag.Warning, Code: spec.CodeMissingPath, File: s.File, Line: line, Field: field,
				Msg: fmt.Sprintf("%s %s does not exist (%s)", what, path, where)})
		}
	}
	const cwd, specDir = "programs are relative to where reckon runs", "data files are relative to the spec file"
	if len(s.Engine.Command) > 0 && strings.ContainsRune(s.Engine.Command[0], '/') {
		warn(0, "engine.command[0]", s.Engine.Command[0], "program", cwd)
	}
	for i, c := range s.Configs {
		if len(c.Command) > 0 && strings.ContainsRune(c.Command[0], '/') {
			warn(c.Line, fmt.Sprintf("configs[%d].command[0]", i), c.Command[0], "program", cwd)
		}
	}
	for i, w := range s.Workloads {
		warn(w.Line, fmt.Sprintf("workloads[%d].dataset", i), w.Dataset, "dataset", specDir)
	}
	if s.Numerics != nil {
		warn(0, "numerics.prompts", s.Numerics.Prompts, "prompts file", specDir)
	}
	for _, c := range s.Checks {
		if p := c.Probe(); p != nil {
			warn(c.Line, "check "+c.Name, p.File, "probe file", specDir)
		}
	}
	return out
}

// uncalibratedChecks warns about equivalence checks without a twin or an oracle: their bound
// comes from the dtype's unit roundoff, not from the spread of a correct algorithm on the same
// inputs, and it cannot tell a 1% bf16 allreduce error from rounding. Also about a spec whose
// numerics skip the under-load pass.
func uncalibratedChecks(s *spec.Spec) spec.ErrorList {
	var out spec.ErrorList
	for _, c := range s.Checks {
		p := c.Equivalence()
		if p == nil || !p.NoTwin {
			continue
		}
		bound := "max_distance " + strconv.FormatFloat(*orDefault(p.MaxDistance, -1), 'g', 4, 64)
		if p.MaxDistance == nil {
			bound = "a bound derived from the dtype's unit roundoff and the tp size (docs/statistics.md)"
		}
		out = append(out, &spec.Error{Severity: diag.Warning, Code: spec.CodeUncalibrated, File: s.File, Line: c.Line, Field: "check " + c.Name,
			Msg: "uncalibrated (twin: none): the verdict uses " + bound + " and cannot tell a 1% bf16 allreduce error from rounding; leave twin out for a derived one, or name a twin (a correct allreduce summing in another order, e.g. NCCL with env NCCL_ALGO: Tree)"})
	}
	if s.Numerics != nil && s.Numerics.BatchSize == 0 {
		out = append(out, &spec.Error{Severity: diag.Warning, Code: spec.CodeUncalibrated, File: s.File, Field: "numerics.batch_size",
			Msg: "0: the under-load pass is off, so faults that appear only in big batches or above a message size go unseen"})
	}
	return out
}

func orDefault(p *float64, d float64) *float64 {
	if p == nil {
		return &d
	}
	return p
}
