package collective

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"hash/fnv"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/reckon-ci/reckon/wire"
)

// ProbeOptions configures an op-level allreduce probe run.
type ProbeOptions struct {
	WorldSize int      // ranks, >= 2
	Sizes     []int64  // message sizes in bytes per rank
	DTypes    []string // "float32" | "bfloat16"
	Inputs    []string // "random" | "integer"
	Seed      uint64
	Repeats   int // timed runs per algorithm and case; the median is reported
}

// MaxProbeBytes bounds WorldSize*size for one case (each case holds several copies of it).
const MaxProbeBytes = 1 << 30

// ProbeSource is wire.AllReduceProbe.Source for this implementation.
const ProbeSource = "refengine"

// Probe runs every algorithm of Algorithms (ring, one-shot, tree) on every (size, dtype, inputs)
// case and compares each with a float64 reference sum and with each other. The reference
// algorithm of the result is the ring (the NCCL-like algorithm the custom one-shot must match;
// the tree is NCCL's other correct order). ctx is checked between cases.
func Probe(ctx context.Context, o ProbeOptions) (*wire.AllReduceProbe, error) {
	if err := o.validate(); err != nil {
		return nil, err
	}
	p := &wire.AllReduceProbe{
		Schema:    wire.AllReduceProbeSchema,
		Source:    ProbeSource,
		WorldSize: o.WorldSize,
		Device:    "cpu (reference engine, simulated ranks)",
		Reference: string(Ring),
		Results:   []wire.AllReduceProbeCase{},
	}
	for _, size := range o.Sizes {
		for _, dt := range o.DTypes {
			for _, in := range o.Inputs {
				if err := ctx.Err(); err != nil {
					return nil, fmt.Errorf("allreduce probe interrupted: %w", err)
				}
				p.Results = append(p.Results, probeCase(o, size, dt, in))
			}
		}
	}
	return p, nil
}

func (o ProbeOptions) validate() error {
	if o.WorldSize < 2 {
		return fmt.Errorf("--tp %d: expected at least 2 ranks", o.WorldSize)
	}
	if len(o.Sizes) == 0 || len(o.DTypes) == 0 || len(o.Inputs) == 0 {
		return errors.New("expected at least one size, dtype and input kind")
	}
	for _, dt := range o.DTypes {
		if dt != "float32" && dt != "bfloat16" {
			return fmt.Errorf("--dtype %q: expected float32 or bfloat16", dt)
		}
	}
	for _, in := range o.Inputs {
		if in != "random" && in != "integer" {
			return fmt.Errorf("--inputs %q: expected random or integer", in)
		}
	}
	for _, s := range o.Sizes {
		for _, dt := range o.DTypes {
			if s <= 0 || s%dtypeBytes(dt) != 0 {
				return fmt.Errorf("--sizes %d: expected a positive multiple of %d bytes (the %s element size)", s, dtypeBytes(dt), dt)
			}
		}
		if s > MaxProbeBytes/int64(o.WorldSize) {
			return fmt.Errorf("--sizes %s with --tp %d: %s in all, above the probe's limit of %s", formatBytes(s), o.WorldSize, formatBytes(s*int64(o.WorldSize)), formatBytes(MaxProbeBytes))
		}
	}
	if o.Repeats < 1 {
		return fmt.Errorf("--repeats %d: expected at least 1", o.Repeats)
	}
	return nil
}

func dtypeBytes(dt string) int64 {
	if dt == "bfloat16" {
		return 2
	}
	return 4
}

// probeCase measures one (size, dtype, inputs) case.
func probeCase(o ProbeOptions, size int64, dt, inputs string) wire.AllReduceProbeCase {
	n, l := o.WorldSize, int(size/dtypeBytes(dt))
	in := makeInputs(o.Seed, n, l, dt, inputs)

	// ref is the exact-as-float64 sum; mag is the sum of the magnitudes of the addends, the
	// denominator of the relative errors (see relErr).
	ref := make([]float64, l)
	mag := make([]float64, l)
	for r := 0; r < n; r++ {
		for i, v := range in[r] {
			ref[i] += float64(v)
			mag[i] += math.Abs(float64(v))
		}
	}
	refDT := make([]float32, l) // reference rounded once to the dtype, for "exact"
	for i, v := range ref {
		if dt == "bfloat16" {
			refDT[i] = BF16FromFloat64(v)
		} else {
			refDT[i] = float32(v)
		}
	}

	c := wire.AllReduceProbeCase{SizeBytes: size, Elements: int64(l), DType: dt, Inputs: inputs}
	outs := make(map[Algorithm][][]float32, len(Algorithms))
	work := make([][]float32, n)
	for r := range work {
		work[r] = make([]float32, l)
	}
	for _, alg := range Algorithms {
		times := make([]float64, 0, o.Repeats)
		for k := 0; k < o.Repeats; k++ {
			for r := range work {
				copy(work[r], in[r])
			}
			start := time.Now()
			if dt == "bfloat16" {
				run(alg, work, bf16)
			} else {
				run(alg, work, f32)
			}
			times = append(times, float64(time.Since(start).Nanoseconds())/1e3)
		}
		out := make([][]float32, n)
		for r := range out {
			out[r] = append([]float32(nil), work[r]...)
		}
		outs[alg] = out
		res := wire.AllReduceProbeAlgorithm{Name: string(alg), MedianUs: ptr(median(times))}
		res.MaxAbsErr, res.MaxRelErr, res.Exact = score(out, ref, mag, refDT)
		same := true
		for r := 1; r < n && same; r++ {
			for i := range out[r] {
				if math.Float32bits(out[r][i]) != math.Float32bits(out[0][i]) {
					same = false
					break
				}
			}
		}
		res.RanksIdentical = &same
		c.Algorithms = append(c.Algorithms, res)
	}
	for i := 0; i < len(Algorithms); i++ {
		for j := i + 1; j < len(Algorithms); j++ {
			c.Pairs = append(c.Pairs, comparePair(Algorithms[j], Algorithms[i], outs, mag))
		}
	}
	return c
}

// score measures every rank's output against the float64 reference: the largest absolute and
// relative error (relErr) and whether every element equals the reference rounded to the dtype.
func score(out [][]float32, ref, mag []float64, refDT []float32) (maxAbs, maxRel float64, exact bool) {
	exact = true
	for r := range out {
		for i, v := range out[r] {
			d := math.Abs(float64(v) - ref[i])
			maxAbs = max(maxAbs, d)
			maxRel = max(maxRel, relErr(d, mag[i]))
			if v != refDT[i] { // value comparison: +0 == -0, NaN never exact
				exact = false
			}
		}
	}
	return maxAbs, maxRel, exact
}

// comparePair compares a's outputs with b's on every rank; relative differences use the same
// denominator as the errors.
func comparePair(a, b Algorithm, outs map[Algorithm][][]float32, mag []float64) wire.AllReduceProbePair {
	pr := wire.AllReduceProbePair{A: string(a), B: string(b), Identical: true}
	for r := range outs[a] {
		for i, va := range outs[a][r] {
			vb := outs[b][r][i]
			if math.Float32bits(va) != math.Float32bits(vb) {
				pr.Identical = false
			}
			d := math.Abs(float64(va) - float64(vb))
			pr.MaxAbsDiff = max(pr.MaxAbsDiff, d)
			pr.MaxRelDiff = max(pr.MaxRelDiff, relErr(d, mag[i]))
		}
	}
	return pr
}

// makeInputs builds the per-rank inputs of one case, deterministically from the seed and the case.
// random: standard normal values (rounded to bf16 for bfloat16). integer: integers in [-k, k] with
// k = floor(2^p / n) (p = 8 for bf16, 24 for float32, capped at 1024), so every partial sum in any
// order is exactly representable and every algorithm must be exact.
func makeInputs(seed uint64, n, l int, dt, inputs string) [][]float32 {
	h := fnv.New64a()
	fmt.Fprintf(h, "%d/%d/%s/%s", n, l, dt, inputs)
	rng := rand.New(rand.NewPCG(seed, h.Sum64()))
	k := int64(1024)
	if dt == "bfloat16" {
		k = min(k, 256/int64(n))
	}
	in := make([][]float32, n)
	for r := range in {
		in[r] = make([]float32, l)
		for i := range in[r] {
			if inputs == "integer" {
				in[r][i] = float32(rng.Int64N(2*k+1) - k)
			} else {
				in[r][i] = float32(rng.NormFloat64())
			}
		}
		if dt == "bfloat16" {
			RoundBF16(in[r])
		}
	}
	return in
}

// relErr is the contract's relative error of one element: d = |out - ref| divided by mag, the sum
// of the magnitudes of the n addends. Any summation order with unit roundoff u errs by at most
// (n-1)·u·mag, so a correct algorithm stays below (n-1)·u however much the addends cancel. With
// mag = 0 every addend is zero and so must the error be; a non-zero error then counts as 1e300.
func relErr(d, mag float64) float64 {
	if mag > 0 {
		return d / mag
	}
	if d == 0 {
		return 0
	}
	return 1e300
}

func median(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func ptr[T any](v T) *T { return &v }

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
//	probe-allreduce --tp N --sizes LIST [--dtype float32,bfloat16] [--inputs random,integer]
//	                [--seed S] [--repeats K] [--json] [--out FILE]
func RunProbeCLI(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("probe-allreduce", flag.ContinueOnError)
	fs.SetOutput(stderr)
	tp := fs.Int("tp", 0, "number of ranks (tensor-parallel size), at least 2")
	sizes := fs.String("sizes", "", "comma-separated message sizes per rank: bytes or with a unit (1KiB,64KiB,1MiB)")
	dtypes := fs.String("dtype", "float32", "comma-separated dtypes: float32, bfloat16")
	inputs := fs.String("inputs", "random", "comma-separated input kinds: random, integer")
	seed := fs.Uint64("seed", 1, "random seed")
	repeats := fs.Int("repeats", 5, "timed runs per algorithm and case (median reported)")
	asJSON := fs.Bool("json", false, "print the reckon.allreduce-probe/v1 JSON instead of a table")
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
	o := ProbeOptions{WorldSize: *tp, Sizes: sz, DTypes: splitList(*dtypes), Inputs: splitList(*inputs), Seed: *seed, Repeats: *repeats}
	if err := o.validate(); err != nil {
		fmt.Fprintf(stderr, "probe-allreduce: %v\n", err)
		return 2
	}
	p, err := Probe(context.Background(), o)
	if err != nil {
		fmt.Fprintf(stderr, "probe-allreduce: %v\n", err)
		return 3
	}
	data, err := json.MarshalIndent(p, "", "  ")
	if err != nil {
		fmt.Fprintf(stderr, "probe-allreduce: encoding result: %v\n", err)
		return 3
	}
	data = append(data, '\n')
	if *out != "" {
		if err := writeFileAtomic(*out, data); err != nil {
			fmt.Fprintf(stderr, "probe-allreduce: %v\n", err)
			return 3
		}
	}
	if *asJSON {
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
	fmt.Fprintf(stdout, "contract holds: %d cases, every algorithm exact on integer inputs and identical across ranks\n", len(p.Results))
	return 0
}

// ContractViolations lists what the op-level contract forbids in p: an algorithm that is not
// exact on integer inputs, or one that left ranks holding different values.
func ContractViolations(p *wire.AllReduceProbe) []string {
	var v []string
	for _, c := range p.Results {
		for _, a := range c.Algorithms {
			if a.Skipped != "" {
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
	fmt.Fprintln(w, "errors are against the float64 sum; rel = |x-ref| / sum of |addends| (a correct sum stays below (n-1)*unit roundoff)")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "size\tdtype\tinputs\talgorithm\tmax_abs_err\tmax_rel_err\texact\tranks_identical\tmedian_us\t")
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
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%.3g\t%.3g\t%s\t%s\t%s\t\n", formatBytes(c.SizeBytes), c.DType, c.Inputs, a.Name, a.MaxAbsErr, a.MaxRelErr, yesNo(a.Exact), same, med)
		}
		for _, pr := range c.Pairs {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s vs %s\t%.3g\t%.3g\t%s\t\t\t\n", formatBytes(c.SizeBytes), c.DType, c.Inputs, pr.A, pr.B, pr.MaxAbsDiff, pr.MaxRelDiff, "identical="+yesNo(pr.Identical))
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
