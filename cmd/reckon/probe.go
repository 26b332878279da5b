package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/reckon-ci/reckon/gate"
	"github.com/reckon-ci/reckon/wire"
)

func init() { rootCmd.AddCommand(newProbeCmd()) }

func newProbeCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "probe",
		Short: "Judge op-level allreduce probe files (the reckon.allreduce-probe/v1 contract)",
	}
	cmd.AddCommand(newProbeCheckCmd())
	return cmd
}

func newProbeCheckCmd() *cobra.Command {
	var asJSON bool
	var tolFlags []string
	cmd := &cobra.Command{
		Use:   "check FILE... [--max-rel-err DTYPE=X] [--json]",
		Short: "Check an allreduce probe JSON: every algorithm within its dtype's tolerance, exact on integer inputs",
		Long: `check reads one or more probe files in the reckon.allreduce-probe/v1 format (written by
'refengine probe-allreduce --json' or by ci/probes/torch_allreduce_probe.py on GPUs; see
docs/allreduce-probe.md), strictly: an unknown, missing or mistyped field, NaN, or a broken rule
of the contract is reported with its file, line and JSON path. Then it judges each file: on random
inputs every algorithm's maximum relative error against the float64 reference must be within its
dtype's tolerance (default: the rounding bound of any correct summation order over the probe's
world size, e.g. for 8 ranks float32 4.2e-7, float16 3.4e-3, bfloat16 2.8e-2); on integer inputs
every algorithm must be bit-exact; every rank must hold the same result.
Exit code 1 when any file fails, 2 when a file cannot be read or is not a valid probe file (the
other files are still judged and printed).`,
		Example: `  refengine probe-allreduce --tp 8 --sizes 1KiB,1MiB --dtype bfloat16 --inputs random,integer --json > probe.json
  reckon probe check probe.json
  reckon probe check --max-rel-err bfloat16=1e-2 gpu-probe.json`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			tol, err := parseToleranceFlags(tolFlags)
			if err != nil {
				return withExitCode(2, err)
			}
			var verdicts []gate.Verdict
			failed, unreadable := 0, 0
			for _, path := range args {
				var v gate.Verdict
				p, err := wire.ReadAllReduceProbe(path)
				if err != nil {
					unreadable++
					v = unreadableProbeVerdict(path, err)
				} else {
					v = gate.AllReduceProbeCheck(p, tol)
					v.Check = path
				}
				if v.Failed() {
					failed++
				}
				verdicts = append(verdicts, v)
			}
			if err := printProbeVerdicts(cmd.OutOrStdout(), verdicts, asJSON); err != nil {
				return withExitCode(3, fmt.Errorf("writing the verdicts: %w", err))
			}
			switch {
			case unreadable > 0:
				return withExitCode(2, fmt.Errorf("%d of %d probe files could not be read or do not follow %s", unreadable, len(args), wire.AllReduceProbeSchema))
			case failed > 0:
				return withExitCode(1, nil)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the verdicts as JSON")
	cmd.Flags().StringArrayVar(&tolFlags, "max-rel-err", nil, "tolerance override DTYPE=X for random inputs (repeatable; DTYPE float32, bfloat16 or float16)")
	return cmd
}

// parseToleranceFlags parses --max-rel-err DTYPE=X overrides. Dtypes without one get the gate's
// default for each probe's world size.
func parseToleranceFlags(flags []string) (map[string]gate.Tolerance, error) {
	tol := map[string]gate.Tolerance{}
	for _, f := range flags {
		dt, val, ok := strings.Cut(f, "=")
		x, err := strconv.ParseFloat(strings.TrimSpace(val), 64)
		if !ok || err != nil || !(x > 0) || math.IsInf(x, 0) {
			return nil, fmt.Errorf("--max-rel-err %q: expected DTYPE=POSITIVE_NUMBER, e.g. bfloat16=2e-2", f)
		}
		dt = strings.TrimSpace(dt)
		switch dt {
		case "float32", "bfloat16", "float16":
		default:
			return nil, fmt.Errorf("--max-rel-err %q: dtype %q, expected float32, bfloat16 or float16", f, dt)
		}
		tol[dt] = gate.Tolerance{MaxRelErr: x}
	}
	return tol, nil
}

// unreadableProbeVerdict is the error verdict of a file that could not be read or decoded: the
// first line of err as the message, the rest (one problem per line) as details.
func unreadableProbeVerdict(path string, err error) gate.Verdict {
	msg, details, _ := strings.Cut(err.Error(), "\n")
	msg = strings.TrimPrefix(msg, path+": ") // the verdict's check already names the file
	return gate.Verdict{
		Check:   path,
		Kind:    gate.KindAllReduceProbe,
		Outcome: gate.Error,
		Message: msg,
		Details: strings.TrimRight(details, "\n"),
	}
}

func printProbeVerdicts(out io.Writer, verdicts []gate.Verdict, asJSON bool) error {
	if asJSON {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(verdicts)
	}
	for _, v := range verdicts {
		if _, err := fmt.Fprintf(out, "%s  %s: %s\n", strings.ToUpper(string(v.Outcome)), v.Check, v.Message); err != nil {
			return err
		}
		if v.Details != "" {
			fmt.Fprintln(out, indent(v.Details, "    "))
		}
		keys := make([]string, 0, len(v.Metrics))
		for k := range v.Metrics {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			fmt.Fprintf(out, "    %s = %g\n", k, v.Metrics[k])
		}
	}
	return nil
}

func indent(s, pre string) string {
	return pre + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n"+pre)
}
