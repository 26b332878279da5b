// probe_cli.go holds the probe's command line and reporting: size parsing, RunProbeCLI, the
// contract check and the table it writes.

package collective

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/reckon-ci/reckon/wire"
)

// ParseSizes parses a comma-separated list of byte sizes: plain byte counts or numbers with a
// unit B, KiB, MiB, GiB (powers of 1024) or KB, MB, GB (powers of 1000), e.g. "1KiB,64KiB,1MiB".
func ParseSizes(s string) ([]int64, error) {
	var out []int64
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			return nil, fmt.Errorf("--sizes %q: empty entry", s)
		}
		num, unit := f, ""
		if i := strings.IndexFunc(f, func(r rune) bool { return (r < '0' || r > '9') && r != '.' }); i >= 0 {
			num, unit = f[:i], strings.TrimSpace(f[i:])
		}
		mult, ok := map[string]float64{"": 1, "B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "KB": 1e3, "MB": 1e6, "GB": 1e9}[unit]
		if !ok {
			return nil, fmt.Errorf("--sizes entry %q: unknown unit %q: expected B, KiB, MiB, GiB, KB, MB or GB", f, unit)
		}
		v, err := strconv.ParseFloat(num, 64)
		if err != nil || num == "" {
			return nil, fmt.Errorf("--sizes entry %q: expected a number of bytes with an optional unit (e.g. 4096, 64KiB)", f)
		}
		b := v * mult
		if b != math.Trunc(b) || b <= 0 || b > 1<<40 {
			return nil, fmt.Errorf("--sizes entry %q: expected a positive whole number of bytes", f)
		}
		out = append(out, int64(b))
	}
	return out, nil
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

func formatBytes(b int64) string {
	switch {
	case b >= 1<<30 && b%(1<<30) == 0:
		return fmt.Sprintf("%dGiB", b>>30)
	case b >= 1<<20 && b%(1<<20) == 0:
		return fmt.Sprintf("%dMiB", b>>20)
	case b >= 1<<10 && b%(1<<10) == 0:
		return fmt.Sprintf("%dKiB", b>>10)
	}
	return fmt.Sprintf("%dB", b)
}

// RunProbeCLI runs `refengine probe-allreduce` with args (the arguments after the subcommand name)
// and returns the process exit code: 0 when the probe ran and the contract held, 1 when an
// algorithm was not exact on integer inputs or left ranks with different values, 2 on bad flags,
// 3 when the result could not be written.
//
//	probe-allreduce --tp N --sizes LIST [--dtype float32,bfloat16]
//	                [--inputs random,wide,order_sensitive,integer] [--calls C] [--seed S]
//	                [--repeats K] [--custom-max-bytes B] [--drop-above B] [--scale-fault X]
//	                [--no-controls] [--candidate-fault F] [--json] [--out FILE]
func RunProbeCLI(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("probe-allreduce", flag.ContinueOnError)
	fs.SetOutput(stderr)
	tp := fs.Int("tp", 0, "number of ranks (tensor-parallel size), at least 2")
	sizes := fs.String("sizes", "", "comma-separated message sizes per rank: bytes or with a unit (1KiB,64KiB,1MiB)")
	dtypes := fs.String("dtype", "float32", "comma-separated dtypes: float32, bfloat16")
	inputs := fs.String("inputs", "random", "comma-separated input kinds: random, wide, order_sensitive, integer")
	calls := fs.Int("calls", DefaultProbeCalls, "calls of every algorithm per case at least, each on a fresh payload (at least 2)")
	minSamples := fs.Int("min-samples", DefaultMinSamples, fmt.Sprintf("more calls for small messages, until calls x elements reaches this (at most %d calls)", MaxProbeCalls))
	customMax := fs.String("custom-max-bytes", "0", "the custom path's size limit: one_shot hands larger messages to the ring (0: no limit)")
	dropAbove := fs.String("drop-above", "64KiB", "the drop_peer positive control leaves the last rank out of messages above this size")
	scaleFault := fs.Float64("scale-fault", DefaultScaleFault, "the scale positive control multiplies the output by 1+X")
	noControls := fs.Bool("no-controls", false, "leave the positive controls out (the calibrated rule then rejects the probe)")
	candFault := fs.String("candidate-fault", "", "inject a fault into the candidate itself, to record a broken kernel: scale, drop_peer, stale, fallback, rank_order (every rank sums in its own order) or accumulate_bf16 (a bf16 accumulator)")
	seed := fs.Uint64("seed", 1, "random seed")
	repeats := fs.Int("repeats", 5, "timed runs per algorithm and case (median reported)")
	asJSON := fs.Bool("json", false, "print the reckon.allreduce-probe/v2 JSON instead of a table")
	out := fs.String("out", "", "also write the JSON to this file (atomically)")
	check := fs.String("check", "", "instead of probing, read a probe JSON file (from any probe, e.g. ci/probes/torch_allreduce_probe.py), validate it against the contract and report")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: refengine probe-allreduce --tp N --sizes LIST [--dtype LIST] [--inputs LIST] [--seed S] [--repeats K] [--json] [--out FILE]")
		fmt.Fprintln(stderr, "       refengine probe-allreduce --check FILE [--json]")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "probe-allreduce: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	if *check != "" {
		return runCheck(*check, *asJSON, stdout, stderr)
	}
	if *sizes == "" {
		fmt.Fprintln(stderr, "probe-allreduce: --sizes is required (e.g. --sizes 1KiB,64KiB,1MiB)")
		return 2
	}
	sz, err := ParseSizes(*sizes)
	if err != nil {
		fmt.Fprintf(stderr, "probe-allreduce: %v\n", err)
		return 2
	}
	limits, ok := parseSizeLimits(*customMax, *dropAbove, stderr)
	if !ok {
		return 2
	}
	o := ProbeOptions{WorldSize: *tp, Sizes: sz, DTypes: splitList(*dtypes), Inputs: splitList(*inputs), Seed: *seed, Repeats: *repeats,
		Calls: *calls, MinSamples: *minSamples, CustomMaxBytes: limits[0], DropAbove: limits[1], ScaleFault: *scaleFault, NoControls: *noControls, CandidateFault: *candFault}
	if *scaleFault == 0 {
		fmt.Fprintln(stderr, "probe-allreduce: --scale-fault 0: expected a positive factor (e.g. 0.01)")
		return 2
	}
	if err := o.validate(); err != nil {
		fmt.Fprintf(stderr, "probe-allreduce: %v\n", err)
		return 2
	}
	p, err := Probe(context.Background(), o)
	if err != nil {
		fmt.Fprintf(stderr, "probe-allreduce: %v\n", err)
		return 3
	}
	return reportProbe(p, *out, *asJSON, stdout, stderr)
}

// parseSizeLimits reads --custom-max-bytes and --drop-above (one size each, or 0 for none). On a
// bad value it says so on stderr and returns false.
func parseSizeLimits(customMax, dropAbove string, stderr io.Writer) ([2]int64, bool) {
	var limits [2]int64
	for i, f := range []struct{ name, val string }{{"--custom-max-bytes", customMax}, {"--drop-above", dropAbove}} {
		if f.val == "0" {
			continue
		}
		v, err := ParseSizes(f.val)
		if err != nil || len(v) != 1 {
			fmt.Fprintf(stderr, "probe-allreduce: %s %q: expected one size (e.g. 512KiB), or 0\n", f.name, f.val)
			return limits, false
		}
		limits[i] = v[0]
	}
	return limits, true
}

// reportProbe writes probe p's JSON to out (when set) and, as JSON or a table, to stdout, then
// reports its contract violations, and returns the exit code: 0, 1 on violations, 3 when the
// result could not be written.
func reportProbe(p *wire.AllReduceProbe, out string, asJSON bool, stdout, stderr io.Writer) int {
	data, err := json.MarshalIndent(p, "", "  ")
	if err != nil {
		fmt.Fprintf(stderr, "probe-allreduce: encoding result: %v\n", err)
		return 3
	}
	data = append(data, '\n')
	if out != "" {
		if err := writeFileAtomic(out, data); err != nil {
			fmt.Fprintf(stderr, "probe-allreduce: %v\n", err)
			return 3
		}
	}
	if asJSON {
		if _, err := stdout.Write(data); err != nil {
			fmt.Fprintf(stderr, "probe-allreduce: writing stdout: %v\n", err)
			return 3
		}
	} else if err := WriteProbeTable(stdout, p); err != nil {
		fmt.Fprintf(stderr, "probe-allreduce: writing stdout: %v\n", err)
		return 3
	}
	if v := ContractViolations(p); len(v) > 0 {
		for _, s := range v {
			fmt.Fprintf(stderr, "probe-allreduce: FAIL %s\n", s)
		}
		return 1
	}
	return 0
}

// runCheck validates a probe file and reports like a probe run: 0 when the contract held, 1 on
// violations, 2 when the file is unreadable or malformed.
func runCheck(path string, asJSON bool, stdout, stderr io.Writer) int {
	p, err := ReadProbe(path)
	if err != nil {
		fmt.Fprintf(stderr, "probe-allreduce --check: %v\n", err)
		return 2
	}
	if asJSON {
		data, err := json.MarshalIndent(p, "", "  ")
		if err == nil {
			_, err = stdout.Write(append(data, '\n'))
		}
		if err != nil {
			fmt.Fprintf(stderr, "probe-allreduce --check: writing stdout: %v\n", err)
			return 3
		}
	} else if err := WriteProbeTable(stdout, p); err != nil {
		fmt.Fprintf(stderr, "probe-allreduce --check: writing stdout: %v\n", err)
		return 3
	}
	if v := ContractViolations(p); len(v) > 0 {
		for _, s := range v {
			fmt.Fprintf(stderr, "probe-allreduce: FAIL %s\n", s)
		}
		return 1
	}
	fmt.Fprintf(stdout, "contract holds: %d cases, every algorithm exact on integer inputs and identical across ranks (positive controls excepted; `reckon probe check` judges the calibrated rule)\n", len(p.Results))
	return 0
}

// ContractViolations lists what the op-level contract forbids in p: an algorithm that is not
// exact on integer inputs, or one that left ranks holding different values. Positive controls (a
// fault injected on purpose) are not held to it; `reckon probe check` judges them.
func ContractViolations(p *wire.AllReduceProbe) []string {
	control := map[string]bool{}
	if p.Calibration != nil {
		for _, r := range p.Calibration.Roles {
			control[r.Algorithm] = r.Role == wire.RolePositiveControl
		}
	}
	var v []string
	for _, c := range p.Results {
		for _, a := range c.Algorithms {
			if a.Skipped != "" || control[a.Name] {
				continue
			}
			where := fmt.Sprintf("%s %s %s %s", formatBytes(c.SizeBytes), c.DType, c.Inputs, a.Name)
			if c.Inputs == "integer" && !a.Exact {
				v = append(v, fmt.Sprintf("%s: not exact on integer inputs (max abs err %g)", where, a.MaxAbsErr))
			}
			if a.RanksIdentical != nil && !*a.RanksIdentical {
				v = append(v, where+": ranks hold different results")
			}
		}
	}
	return v
}

// WriteProbeTable renders p as a readable table: one row per algorithm and per pair.
func WriteProbeTable(w io.Writer, p *wire.AllReduceProbe) error {
	fmt.Fprintf(w, "allreduce probe: source=%s world_size=%d reference=%s device=%s\n", p.Source, p.WorldSize, p.Reference, p.Device)
	fmt.Fprintln(w, "errors are against the float64 sum; rel = |x-ref| / sum of |addends| (a correct sum stays below (n-1)*unit roundoff); nrmse and max_ulp against the fixed-order oracle (v2)")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "size\tdtype\tinputs\talgorithm\tmax_abs_err\tmax_rel_err\texact\tranks_identical\tmedian_us\tnrmse\tmax_ulp\tengaged\t")
	for _, c := range p.Results {
		for _, a := range c.Algorithms {
			if a.Skipped != "" {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\tskipped: %s\t\t\t\t\t\n", formatBytes(c.SizeBytes), c.DType, c.Inputs, a.Name, a.Skipped)
				continue
			}
			med, same := "-", "-"
			if a.MedianUs != nil {
				med = fmt.Sprintf("%.1f", *a.MedianUs)
			}
			if a.RanksIdentical != nil {
				same = yesNo(*a.RanksIdentical)
			}
			nrmse, ulp, eng := "-", "-", "-"
			if a.NRMSE != nil {
				nrmse = fmt.Sprintf("%.3g", *a.NRMSE)
			}
			if a.MaxULP != nil {
				ulp = fmt.Sprintf("%g", *a.MaxULP)
			}
			if a.EngagedCalls != nil {
				eng = fmt.Sprintf("%d/%d", *a.EngagedCalls, c.Calls)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%.3g\t%.3g\t%s\t%s\t%s\t%s\t%s\t%s\t\n", formatBytes(c.SizeBytes), c.DType, c.Inputs, a.Name, a.MaxAbsErr, a.MaxRelErr, yesNo(a.Exact), same, med, nrmse, ulp, eng)
		}
		for _, pr := range c.Pairs {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s vs %s\t%.3g\t%.3g\t%s\t\t\t\t\t\t\n", formatBytes(c.SizeBytes), c.DType, c.Inputs, pr.A, pr.B, pr.MaxAbsDiff, pr.MaxRelDiff, "identical="+yesNo(pr.Identical))
		}
	}
	return tw.Flush()
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// writeFileAtomic writes data to a temporary file in path's directory and renames it into place.
func writeFileAtomic(path string, data []byte) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	tmp := f.Name()
	if _, err := f.Write(data); err != nil {
		f.Close()
		os.Remove(tmp)
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}
