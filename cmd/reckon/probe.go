package main

import (
	"encoding/json"
	"fmt"
	"github.com/reckon-ci/reckon/spec"
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
		Short: "Judge op-level allreduce probe files (the reckon.allreduce-probe/v2 contract, and v1)",
	}
	cmd.AddCommand(newProbeCheckCmd())
	return cmd
}

func newProbeCheckCmd() *cobra.Command {
	var asJSON bool
	var tolFlags []string
	cal := gate.DefaultAllReduceCalibration()
	cmd := &cobra.Command{
		Use:   "check FILE... [--max-nrmse-ratio X] [--floor-ulp N] [--max-rel-err DTYPE=X] [--json]",
		Short: "Check an allreduce probe JSON: the calibrated rule (v2) or the fixed per-dtype bounds (v1)",
		Long: `check reads one or more allreduce probe files (written by 'refengine probe-allreduce --json'
or by ci/probes/torch_allreduce_probe.py on GPUs or on CPUs with gloo; see docs/allreduce-probe.md),
strictly: an unknown, missing or mistyped field, NaN, or a broken rule of the contract is reported
with its file, line and JSON path. Then it judges each file.

A calibrated probe (reckon.allreduce-probe/v2) is judged by the calibrated rule: in every case
where a candidate took its custom path, its NRMSE against the fixed-order oracle (all_gather,
float32 sum in rank order, one rounding) is at most --max-nrmse-ratio (default 1.5) times the best
correct algorithm's (the reference and the twins); where those equal the oracle bit for bit (2
ranks) it is within --floor-ulp (default 1) ULP of it; it is exact on integer inputs; its custom
path was taken in every call up to its size limit; every negative control (reference, twins)
passes the same rule and every positive control (a fault injected around the candidate) fails it.
A probe without twins or positive controls is rejected.

An older probe (reckon.allreduce-probe/v1) is judged by the fixed rule, and its verdict says so:
on random inputs every algorithm's maximum relative error against the float64 reference must be
within its dtype's tolerance (default: the rounding bound of any correct summation order over the
probe's world size, e.g. for 8 ranks float32 4.2e-7, float16 3.4e-3, bfloat16 2.8e-2); on integer
inputs every algorithm must be bit-exact; every rank must hold the same result. --max-rel-err
overrides apply to both rules.
Exit code 1 when any file fails (or its controls do not behave), 2 when a file cannot be read or
is not a valid probe file (the other files are still judged and printed).`,
		Example: `  refengine probe-allreduce --tp 8 --sizes 1KiB,1MiB --dtype bfloat16 --inputs random,integer --json > probe.json
  reckon probe check probe.json
  reckon probe check --max-nrmse-ratio 2 gpu-probe.json
  reckon probe check --max-rel-err bfloat16=1e-2 old-v1-probe.json`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			tol, err := parseToleranceFlags(tolFlags)
			if err != nil {
				return withExitCode(2, err)
			}
			if !(cal.MaxNRMSERatio >= 1) || math.IsInf(cal.MaxNRMSERatio, 0) {
				return withExitCode(2, fmt.Errorf("--max-nrmse-ratio %g: expected a finite ratio of at least 1 (a candidate is allowed that many times the best correct algorithm's NRMSE)", cal.MaxNRMSERatio))
			}
			if !(cal.FloorULP >= 0) || math.IsInf(cal.FloorULP, 0) {
				return withExitCode(2, fmt.Errorf("--floor-ulp %g: expected a finite number of ULPs, at least 0", cal.FloorULP))
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
					if p.Schema == wire.AllReduceProbeSchema {
						v = gate.AllReduceProbeCheckCalibrated(p, tol, nil, cal)
					} else {
						v = gate.AllReduceProbeCheck(p, tol)
					}
					v.Name = path
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
	cmd.Flags().Float64Var(&cal.MaxNRMSERatio, "max-nrmse-ratio", cal.MaxNRMSERatio, "calibrated rule (v2): a candidate's NRMSE against the oracle may be at most this many times the best correct algorithm's")
	cmd.Flags().Float64Var(&cal.FloorULP, "floor-ulp", cal.FloorULP, "calibrated rule (v2): max ULP distance to the oracle where every correct algorithm equals it bitwise (2 ranks)")
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
		Name:    path,
		Kind:    string(spec.KindAllReduceProbe),
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
		if _, err := fmt.Fprintf(out, "%s  %s: %s\n", strings.ToUpper(string(v.Outcome)), v.Name, v.Message); err != nil {
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
