package main

import (
	"encoding/json"
	"fmt"
	"os"
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
docs/allreduce-probe.md) and judges each: on random inputs every algorithm's maximum relative error
against the float64 reference must be within the dtype's tolerance (defaults: float32 1e-5,
float16 5e-3, bfloat16 2e-2); on integer inputs every algorithm must be bit-exact.
Exit code 1 when any file fails, 2 when a file cannot be read or is not a probe file.`,
		Example: `  refengine probe-allreduce --tp 8 --sizes 1KiB,1MiB --dtype bfloat16 --inputs random,integer --json > probe.json
  reckon probe check probe.json
  reckon probe check --max-rel-err bfloat16=1e-2 gpu-probe.json`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			tol := gate.DefaultAllReduceTolerances()
			for _, f := range tolFlags {
				dt, val, ok := strings.Cut(f, "=")
				x, err := strconv.ParseFloat(val, 64)
				if !ok || err != nil || x <= 0 {
					return withExitCode(2, fmt.Errorf("--max-rel-err %q: expected DTYPE=POSITIVE_NUMBER, e.g. bfloat16=2e-2", f))
				}
				tol[dt] = gate.Tolerance{MaxRelErr: x}
			}
			var verdicts []gate.Verdict
			failed := false
			for _, path := range args {
				p, err := readProbe(path)
				if err != nil {
					return withExitCode(2, err)
				}
				v := gate.AllReduceProbeCheck(p, tol)
				v.Check = path
				verdicts = append(verdicts, v)
				failed = failed || v.Failed()
			}
			out := cmd.OutOrStdout()
			if asJSON {
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				if err := enc.Encode(verdicts); err != nil {
					return err
				}
			} else {
				for _, v := range verdicts {
					fmt.Fprintf(out, "%s  %s: %s\n", strings.ToUpper(string(v.Outcome)), v.Check, v.Message)
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
			}
			if failed {
				return withExitCode(1, nil)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the verdicts as JSON")
	cmd.Flags().StringArrayVar(&tolFlags, "max-rel-err", nil, "tolerance override DTYPE=X (repeatable)")
	return cmd
}

func readProbe(path string) (*wire.AllReduceProbe, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read probe: %w", err)
	}
	var p wire.AllReduceProbe
	dec := json.NewDecoder(strings.NewReader(string(b)))
	if err := dec.Decode(&p); err != nil {
		return nil, fmt.Errorf("%s: not a probe JSON file: %w", path, err)
	}
	if p.Schema != wire.AllReduceProbeSchema {
		return nil, fmt.Errorf("%s: schema %q, expected %q", path, p.Schema, wire.AllReduceProbeSchema)
	}
	if len(p.Results) == 0 {
		return nil, fmt.Errorf("%s: results: empty, expected at least one (size, dtype, inputs) case", path)
	}
	return &p, nil
}

func indent(s, pre string) string {
	return pre + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n"+pre)
}
