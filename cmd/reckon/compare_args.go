package main

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/pflag"

	"github.com/reckon-ci/reckon/gate"
	"github.com/reckon-ci/reckon/internal/num"
	"github.com/reckon-ci/reckon/internal/textutil"
)

// defineCompareFlags defines compare's flags on fs (help lists them; parseCompareArgs parses
// them) with o's fields as their values.
func defineCompareFlags(fs *pflag.FlagSet, o *compareOptions) {
	fs.StringSliceVar(&o.base, "base", nil, "base trial files (every argument up to the next flag; or --base=a,b)")
	fs.StringSliceVar(&o.head, "head", nil, "head trial files (every argument up to the next flag; or --head=a,b)")
	fs.BoolVar(&o.json, "json", false, "print JSON instead of a table")
	fs.Float64Var(&o.alpha, "alpha", 0.01, "one-sided significance level of a regression (before Holm), in (0, 0.5)")
	fs.String("min-effect", "2%", "minimum change of the median that counts: a percentage (5%) or a fraction below 1 (0.05)")
	fs.StringVar(&o.gate, "gate", strings.Join(defaultGated, ","), `comma-separated metrics that decide the exit code, or "all"`)
	fs.BoolVar(&o.twoSided, "two-sided", false, "test both directions at alpha/2 each")
	fs.BoolVar(&o.strict, "strict", false, "an error, not a warning, when the two sides' workloads differ")
	fs.StringVar(&o.baseVersion, "base-tool-version", "", "version of the tool that wrote the base files, where the files do not say (vLLM: e.g. 0.25.1); see reckon import --help")
	fs.StringVar(&o.headVersion, "head-tool-version", "", "the same for the head files")
	fs.StringVar(&o.baseConfig, "base-config", "", "with a reckon results.json as --base: the config whose trials are the base (default: its only config with trials)")
	fs.StringVar(&o.headConfig, "head-config", "", "the same for --head")
	fs.StringVar(&o.workload, "workload", "", "with reckon results.json files: the workload whose trials are compared (default: the config's only one)")
	fs.StringVar(&o.betweenCV, "between-launch-cv", "", "between-launch CV prior (e.g. 3%) for launch-unit comparisons that measure none (one launch per side); default $"+gate.BetweenLaunchEnv+", else the gate's default")
}

// parseMinEffect reads a minimum effect as the spec writes it: "5%" or a fraction below 1
// ("0.05"); it returns the fraction.
func parseMinEffect(s string) (float64, error) {
	v, _, err := num.ParseFraction(s)
	switch {
	case errors.Is(err, num.ErrBareWhole):
		t := strings.TrimSpace(s)
		return 0, fmt.Errorf("--min-effect %q: a bare number is a fraction and must be below 1; write %s%% for %s percent", s, t, t)
	case err != nil:
		return 0, fmt.Errorf("--min-effect %q: expected a percentage such as 5%% or a fraction below 1 such as 0.05", s)
	case v < 0 || v >= 1:
		return 0, fmt.Errorf("--min-effect %q: expected an effect in [0%%, 100%%)", s)
	}
	return v, nil
}

// parseCompareArgs parses compare's arguments by hand: --base and --head take every following
// argument up to the next flag, so that shell globs work (--base main/*.json --head pr/*.json).
// help is the FlagSet the command defines (for the flag names and for suggestions).
func parseCompareArgs(help *pflag.FlagSet, args []string) (compareOptions, bool, error) {
	var o compareOptions
	fs := pflag.NewFlagSet("compare", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	defineCompareFlags(fs, &o)
	fs.String("log-format", "text", "log format")
	fs.String("log-level", "info", "log level")
	wantHelp := fs.BoolP("help", "h", false, "help")
	var names []string
	fs.VisitAll(func(f *pflag.Flag) { names = append(names, f.Name) })
	_ = help
	var rest []string
	var into *[]string
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--base" || a == "--head":
			into = &o.base
			if a == "--head" {
				into = &o.head
			}
		case strings.HasPrefix(a, "--base=") || strings.HasPrefix(a, "--head="):
			into = nil
			list := &o.base
			if strings.HasPrefix(a, "--head=") {
				list = &o.head
			}
			for _, p := range strings.Split(a[len("--base="):], ",") {
				if p != "" {
					*list = append(*list, p)
				}
			}
		case strings.HasPrefix(a, "-") && a != "-":
			into = nil
			name := strings.TrimLeft(strings.SplitN(a, "=", 2)[0], "-")
			f := fs.Lookup(name)
			if f == nil && len(name) == 1 {
				f = fs.ShorthandLookup(name)
			}
			if f == nil {
				msg := fmt.Sprintf("unknown flag %s", strings.SplitN(a, "=", 2)[0])
				if near := closestName(name, names); near != "" {
					msg += fmt.Sprintf(" (did you mean --%s?)", near)
				}
				return o, false, errors.New(msg + "; see reckon compare --help")
			}
			rest = append(rest, a)
			// Flags with a separate value consume it.
			if f.Value.Type() != "bool" && !strings.Contains(a, "=") {
				if i+1 >= len(args) {
					return o, false, fmt.Errorf("flag %s needs a value", a)
				}
				i++
				rest = append(rest, args[i])
			}
		case into != nil:
			*into = append(*into, a)
		default:
			return o, false, fmt.Errorf("unexpected argument %q: trial files follow --base or --head", a)
		}
	}
	base, head := o.base, o.head
	if err := fs.Parse(rest); err != nil {
		return o, false, err
	}
	o.base, o.head = base, head
	if *wantHelp {
		return o, true, nil
	}
	me, err := parseMinEffect(fs.Lookup("min-effect").Value.String())
	if err != nil {
		return o, false, err
	}
	o.minEffect = me
	if len(o.base) == 0 || len(o.head) == 0 {
		return o, false, errors.New("compare needs trial files for both --base and --head")
	}
	if !(o.alpha > 0 && o.alpha < 0.5) {
		return o, false, fmt.Errorf("--alpha %v: expected 0 < alpha < 0.5", o.alpha)
	}
	return o, false, nil
}

// closestName is the name in names nearest to s (edit distance at most 2), or "".
func closestName(s string, names []string) string {
	best, bestD := "", 3
	for _, n := range names {
		if d := textutil.EditDistance(s, n, false); d < bestD {
			best, bestD = n, d
		}
	}
	return best
}

// compareRow is one metric of compare's --json output.
