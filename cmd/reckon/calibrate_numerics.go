package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/spf13/cobra"

	"github.com/reckon-ci/reckon/engine"
	"github.com/reckon-ci/reckon/engine/client"
	"github.com/reckon-ci/reckon/gate"
	"github.com/reckon-ci/reckon/spec"
	"github.com/reckon-ci/reckon/wire"
	"github.com/reckon-ci/reckon/workload"
)

// numericsControl is one engine launch of the numerics calibration: a correct allreduce (a
// negative control) or an injected fault (a positive control).
type numericsControl struct {
	Name    string
	Correct bool
	// DTypes lists the dtypes the control runs in (nil: every dtype).
	DTypes []string
	// NCCL: the custom allreduce is disabled (the config is NCCL's ring or tree).
	NCCL bool
	Args []string
	Env  map[string]string
	// Mirrors is the kind of field bug a fault stands for.
	Mirrors string
	// MinTP is the smallest tp size the control means anything at (0: any): a per-rank order
	// or a bf16 accumulator over two ranks adds once, exactly as the correct kernel does.
	MinTP int
	// Oracle marks the custom path's reference kernels (--allreduce-oracle): they calibrate the
	// oracle check and are no candidates of their own.
	Oracle bool
	// Custom: the control runs the custom (one-shot) path, so the oracle check judges it too.
	Custom bool
}

// numericsControls are the calibration's controls, as data. The faults act on the custom
// (one-shot) path only. Message sizes on the reference engine's tiny model: 256 bytes per token
// in bfloat16, 512 in float32; a sequential teacher-forced prompt is about 50 tokens, the
// under-load pass about 400 tokens per step.
var numericsControls = []numericsControl{
	{Name: "ring", Correct: true, NCCL: true},
	{Name: "tree", Correct: true, NCCL: true, Env: map[string]string{"NCCL_ALGO": "Tree"}},
	{Name: "one-shot", Correct: true, Custom: true},
	{Name: "oracle", Correct: true, Oracle: true, Args: []string{"--allreduce-oracle", "forward"}},
	{Name: "oracle reversed", Correct: true, Oracle: true, Args: []string{"--allreduce-oracle", "reverse"}},
	{Name: "error 0.5%", DTypes: []string{"bfloat16"}, Args: []string{"--fault-allreduce-error", "0.005"}, Mirrors: "noisy reduction", Custom: true},
	{Name: "error 1%", DTypes: []string{"bfloat16"}, Args: []string{"--fault-allreduce-error", "0.01"}, Mirrors: "noisy reduction", Custom: true},
	{Name: "error 3%", DTypes: []string{"bfloat16"}, Args: []string{"--fault-allreduce-error", "0.03"}, Mirrors: "noisy reduction", Custom: true},
	{Name: "error 0.01%", DTypes: []string{"float32"}, Args: []string{"--fault-allreduce-error", "0.0001"}, Mirrors: "noisy reduction", Custom: true},
	{Name: "error 0.1%", DTypes: []string{"float32"}, Args: []string{"--fault-allreduce-error", "0.001"}, Mirrors: "noisy reduction", Custom: true},
	{Name: "scale +1%", DTypes: []string{"bfloat16"}, Args: []string{"--fault-allreduce-scale", "0.01"}, Mirrors: "wrong scale factor", Custom: true},
	{Name: "scale +0.1%", DTypes: []string{"float32"}, Args: []string{"--fault-allreduce-scale", "0.001"}, Mirrors: "wrong scale factor", Custom: true},
	{Name: "drop rank above 32KiB", Args: []string{"--fault-allreduce-drop-rank-above", "32KiB"}, Mirrors: "large-message path misses a peer (reached under load only)", Custom: true},
	{Name: "stale above 8KiB", Args: []string{"--fault-allreduce-stale-above", "8KiB"}, Mirrors: "stale buffer / graph replay", Custom: true},
	{Name: "error 1% at >=128 tokens", DTypes: []string{"bfloat16"}, Args: []string{"--fault-allreduce-error", "0.01", "--fault-allreduce-min-batch", "128"}, Mirrors: "big-batch-only bug (under load only)", Custom: true},
	{Name: "error 0.1% at >=128 tokens", DTypes: []string{"float32"}, Args: []string{"--fault-allreduce-error", "0.001", "--fault-allreduce-min-batch", "128"}, Mirrors: "big-batch-only bug (under load only)", Custom: true},
	{Name: "accumulate bf16", DTypes: []string{"bfloat16"}, Args: []string{"--fault-allreduce-accumulate", "bfloat16"}, Mirrors: "one-shot kernel adding bf16 without a float32 accumulator", MinTP: 4, Custom: true},
	{Name: "rank order", Args: []string{"--fault-allreduce-rank-order"}, Mirrors: "ranks summing in their own order (ranks disagree)", MinTP: 4, Custom: true},
	{Name: "rank order, accumulate bf16", DTypes: []string{"bfloat16"}, Args: []string{"--fault-allreduce-rank-order", "--fault-allreduce-accumulate", "bfloat16"}, Mirrors: "ranks summing in their own order in bf16", MinTP: 4, Custom: true},
}

// negativeTriples are the clean comparisons of every cell: (candidate, base, twin), all correct.
var negativeTriples = [][3]string{{"one-shot", "ring", "tree"}, {"tree", "ring", "one-shot"}, {"one-shot", "tree", "ring"}, {"ring", "tree", "one-shot"}}

const (
	numCalBegin = "<!-- numerics-calibration:begin (reckon calibrate numerics --write-docs) -->"
	numCalEnd   = "<!-- numerics-calibration:end -->"
)

func newCalibrateNumericsCmd() *cobra.Command {
	var (
		enginePath, model, promptsPath, tps, dtypes, outDir, writeDocs string
		seeds, firstSeed, maxTokens, topK, batch, parallel             int
		maxRatio                                                       float64
	)
	cmd := &cobra.Command{
		Use:   "numerics [--engine bin/refengine] [--tp 2,4,8] [--dtype bfloat16,float32] [--seeds N] [--write-docs FILE]",
		Short: "Measure the equivalence check's false alarms and detection on the reference engine",
		Long: `calibrate numerics launches the reference engine once per control and weight seed and judges the
probes exactly as the gate's equivalence check does (teacher-forced KL distance, twin ratio with
its bootstrap interval, near-bitwise rule, greedy smoke test). Negative controls are correct
allreduce algorithms against each other (ring, tree via NCCL_ALGO=Tree, one-shot: four
candidate/base/twin triples per cell); positive controls are the engine's allreduce faults at
several magnitudes, judged against base ring with twin tree (the twin check). The oracle check
judges every config on the custom path (the correct one-shot and every fault) against the custom
path's reference kernel (--allreduce-oracle forward) with the same kernel summing in reverse as
its twin. It prints the false-alarm and detection table; --write-docs replaces it between the
numerics calibration markers of that file (docs/statistics.md). Use --first-seed to calibrate on
weight seeds no test uses.`,
		Example: `  reckon calibrate numerics --seeds 10
  reckon calibrate numerics --tp 4 --dtype bfloat16 --seeds 2
  reckon calibrate numerics --seeds 4 --first-seed 101 --parallel 1
  reckon calibrate numerics --seeds 10 --parallel 8 --write-docs docs/statistics.md`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			tpList, err := intList("--tp", tps)
			if err != nil {
				return withExitCode(2, err)
			}
			var dts []string
			for _, d := range strings.Split(dtypes, ",") {
				d = strings.TrimSpace(d)
				if d != "bfloat16" && d != "float32" {
					return withExitCode(2, fmt.Errorf("--dtype %q: expected bfloat16 or float32 (comma-separated)", d))
				}
				dts = append(dts, d)
			}
			if seeds < 1 || firstSeed < 1 || parallel < 1 || topK < 1 || maxTokens < 1 || batch < 0 || (batch > 0 && batch < 8) {
				return withExitCode(2, fmt.Errorf("--seeds, --first-seed, --parallel, --top-logprobs and --max-tokens must be positive, --batch 0 or at least 8 (as numerics.batch_size)"))
			}
			if !(maxRatio > 0) {
				return withExitCode(2, fmt.Errorf("--max-ratio %v: expected a ratio > 0", maxRatio))
			}
			prompts, err := workload.LoadPrompts(promptsPath)
			if err != nil {
				return withExitCode(2, err)
			}
			if _, err := os.Stat(enginePath); err != nil {
				return withExitCode(2, fmt.Errorf("--engine: %w (run make build)", err))
			}
			if outDir == "" {
				d, err := os.MkdirTemp("", "reckon-calibrate-numerics-")
				if err != nil {
					return withExitCode(3, err)
				}
				defer os.RemoveAll(d)
				outDir = d
			}
			// Hundreds of launches: only warnings about them reach the terminal.
			quiet := logrus.New()
			quiet.SetOutput(cmd.ErrOrStderr())
			quiet.SetLevel(logrus.WarnLevel)
			nc := numCal{engine: enginePath, model: model, prompts: prompts, maxTokens: maxTokens, topK: topK, batch: batch, outDir: outDir, maxRatio: maxRatio,
				log: quiet}
			var cells []numCell
			for _, d := range dts {
				for _, tp := range tpList {
					for s := firstSeed; s < firstSeed+seeds; s++ {
						cells = append(cells, numCell{dtype: d, tp: tp, seed: s})
					}
				}
			}
			start := time.Now()
			res, err := nc.run(cmd.Context(), cells, parallel, cmd.ErrOrStderr())
			if err != nil {
				return withExitCode(3, err)
			}
			table := numericsTable(res, firstSeed, seeds, maxRatio, len(prompts))
			fmt.Fprint(cmd.OutOrStdout(), table)
			fmt.Fprintf(cmd.ErrOrStderr(), "calibrated %d cells in %s\n", len(cells), time.Since(start).Round(time.Second))
			if writeDocs != "" {
				if err := replaceBetween(writeDocs, numCalBegin, numCalEnd, table); err != nil {
					return withExitCode(3, err)
				}
				fmt.Fprintf(cmd.ErrOrStderr(), "updated %s\n", writeDocs)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&enginePath, "engine", "bin/refengine", "the reference engine binary")
	f.StringVar(&model, "model", "fixtures/models/tiny.json", "model config of the reference engine")
	f.StringVar(&promptsPath, "prompts", "fixtures/prompts/numerics.jsonl", "numerics prompts (JSONL)")
	f.StringVar(&tps, "tp", "2,4,8", "tensor-parallel sizes")
	f.StringVar(&dtypes, "dtype", "bfloat16,float32", "dtypes")
	f.IntVar(&seeds, "seeds", 10, "weight seeds per (dtype, tp) cell (--weight-seed F..F+N-1)")
	f.IntVar(&firstSeed, "first-seed", 1, "the first weight seed F (held-out runs: seeds no test uses)")
	f.IntVar(&maxTokens, "max-tokens", 24, "greedy continuation length (numerics.max_tokens)")
	f.IntVar(&topK, "top-logprobs", spec.DefaultTopLogprobs, "top-k candidates per position (numerics.top_logprobs)")
	f.IntVar(&batch, "batch", spec.DefaultProbeBatch, "under-load pass: sequences in flight at once (numerics.batch_size; 0: off)")
	f.IntVar(&parallel, "parallel", 1, "cells run at once")
	f.Float64Var(&maxRatio, "max-ratio", gate.DefaultMaxRatio, "the equivalence check's max_ratio")
	f.StringVar(&outDir, "out", "", "keep engine logs and probe files here (default: a temporary directory, removed)")
	f.StringVar(&writeDocs, "write-docs", "", "replace the table between the numerics calibration markers in this markdown file")
	return cmd
}

// numCal runs calibration cells.
type numCal struct {
	engine, model, outDir string
	prompts               []workload.Prompt
	maxTokens, topK       int
	batch                 int
	maxRatio              float64
	log                   logrus.FieldLogger
}

// numCell is one (dtype, tp, weight seed).
type numCell struct {
	dtype    string
	tp, seed int
}

// The calibration's two checks: the twin check (base ring, twin tree; the negatives are the four
// triples of correct algorithms) and the oracle check (base the custom path's reference kernel,
// twin the same kernel summing in reverse; the negative is the correct one-shot).
const (
	checkTwin   = "twin"
	checkOracle = "oracle"
)

// numOutcome is one judged comparison.
type numOutcome struct {
	cell      numCell
	check     string // checkTwin or checkOracle
	candidate string
	negative  bool
	failed    bool
	bitwise   bool
	ratio     float64 // max over the passes (NaN in near-bitwise mode)
	message   string
	metrics   map[string]float64
	// uncalFailed: the comparison fails without its twin (the uncalibrated bound).
	uncalFailed bool
}

func (nc numCal) run(ctx context.Context, cells []numCell, parallel int, progress io.Writer) ([]numOutcome, error) {
	var (
		mu   sync.Mutex
		out  []numOutcome
		errs []error
		wg   sync.WaitGroup
	)
	sem := make(chan struct{}, parallel)
	for _, c := range cells {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			res, err := nc.cell(ctx, c)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, fmt.Errorf("%s tp %d seed %d: %w", c.dtype, c.tp, c.seed, err))
				return
			}
			out = append(out, res...)
			fmt.Fprintf(progress, "%s tp %d seed %d: %d comparisons\n", c.dtype, c.tp, c.seed, len(res))
		}()
	}
	wg.Wait()
	if len(errs) > 0 {
		return nil, errs[0]
	}
	return out, ctx.Err()
}

// cell launches every control of a cell, probes it and judges the comparisons.
func (nc numCal) cell(ctx context.Context, c numCell) ([]numOutcome, error) {
	adapter, err := engine.AdapterFor("sglang")
	if err != nil {
		return nil, err
	}
	probes := map[string]*wire.NumericsProbe{}
	var seqs map[string][]int
	dir := filepath.Join(nc.outDir, fmt.Sprintf("%s-tp%d-seed%d", c.dtype, c.tp, c.seed))
	for _, ctl := range numericsControls {
		if ctl.DTypes != nil && !slices.Contains(ctl.DTypes, c.dtype) || c.tp < ctl.MinTP {
			continue
		}
		lc := engine.LaunchConfig{
			Command: []string{nc.engine}, Model: nc.model, TPSize: c.tp, Host: "127.0.0.1", DisableCustomAllReduce: ctl.NCCL,
			ExtraArgs: append([]string{"--dtype", c.dtype, "--random-seed", "1", "--weight-seed", strconv.Itoa(c.seed)}, ctl.Args...),
			Env:       ctl.Env,
		}
		inst, err := engine.Launch(ctx, adapter, engine.LaunchOptions{Config: lc, LogPath: filepath.Join(dir, fileName(ctl.Name)+".log"),
			ReadyTimeout: time.Minute, StopGrace: 5 * time.Second, Logger: nc.log})
		if err != nil {
			return nil, fmt.Errorf("control %s: %w", ctl.Name, err)
		}
		p, used, err := nc.probe(ctx, inst, seqs)
		stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		_ = inst.Stop(stopCtx)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("control %s: %w", ctl.Name, err)
		}
		// The first control (ring) defines the forced sequences of the cell, as the first config
		// probed does in a gate run.
		seqs = used
		p.Config, p.DType, p.TPSize = ctl.Name, c.dtype, c.tp
		probes[ctl.Name] = p
		if err := workload.WriteNumericsProbe(filepath.Join(dir, fileName(ctl.Name)+".json"), p); err != nil {
			return nil, err
		}
	}
	chk := gate.EquivalenceCheck{TopK: nc.topK, MaxRatio: &nc.maxRatio, DType: c.dtype, TP: c.tp}
	var out []numOutcome
	judge := func(check, cand, base, twin string, negative bool) {
		v := gate.Equivalence(gate.EquivalenceProbes{Base: probes[base], Head: probes[cand], Twin: probes[twin]}, chk)
		o := numOutcome{cell: c, check: check, candidate: cand, negative: negative, failed: v.Outcome != gate.Pass, message: v.Message, ratio: math.NaN(), metrics: v.Metrics}
		if r, ok := v.Metrics["ratio"]; ok {
			o.ratio = r
			if rb, ok := v.Metrics["ratio_batched"]; ok {
				o.ratio = max(o.ratio, rb)
			}
		} else {
			_, o.bitwise = v.Metrics["bitwise_tolerance"]
		}
		// The same comparison without its twin: the uncalibrated fallback bound.
		u := gate.Equivalence(gate.EquivalenceProbes{Base: probes[base], Head: probes[cand]}, gate.EquivalenceCheck{TopK: nc.topK, DType: c.dtype, TP: c.tp})
		o.uncalFailed = u.Outcome != gate.Pass
		out = append(out, o)
	}
	for _, t := range negativeTriples {
		judge(checkTwin, t[0], t[1], t[2], true)
	}
	for _, ctl := range numericsControls {
		if !ctl.Correct && probes[ctl.Name] != nil {
			judge(checkTwin, ctl.Name, "ring", "tree", false)
		}
	}
	// The oracle check: every control on the custom path against the reference kernel, with
	// the reference kernel summing in reverse as the twin.
	for _, ctl := range numericsControls {
		if ctl.Custom && probes[ctl.Name] != nil {
			judge(checkOracle, ctl.Name, "oracle", "oracle reversed", ctl.Correct)
		}
	}
	// Every judged comparison, for analysis beyond the table.
	var lines []byte
	for _, o := range out {
		b, _ := json.Marshal(map[string]any{"dtype": c.dtype, "tp": c.tp, "seed": c.seed, "check": o.check, "candidate": o.candidate, "negative": o.negative,
			"failed": o.failed, "bitwise": o.bitwise, "ratio": finiteOrNil(o.ratio), "message": o.message, "metrics": o.metrics})
		lines = append(append(lines, b...), '\n')
	}
	if err := os.WriteFile(filepath.Join(dir, "outcomes.jsonl"), lines, 0o644); err != nil {
		return nil, err
	}
	return out, nil
}

// probe runs the gate's numerics probe on a launched control: greedy outputs, then the forced
// sequences (the first control's own when seqs is nil).
// It returns the probe and the sequences it was forced on.
func (nc numCal) probe(ctx context.Context, inst *engine.Instance, seqs map[string][]int) (*wire.NumericsProbe, map[string][]int, error) {
	cl := client.New(inst.BaseURL(), client.Options{Model: nc.model})
	p, err := workload.RunNumericsProbe(ctx, cl, nc.prompts, nc.maxTokens, nc.topK)
	if err != nil {
		return nil, nil, err
	}
	if seqs == nil {
		if seqs, err = workload.ForcedSequences(p); err != nil {
			return nil, nil, err
		}
	}
	if err := workload.ScoreForced(ctx, cl, p, seqs, "ring", nc.topK, nc.batch); err != nil {
		return nil, nil, err
	}
	return p, seqs, nil
}

func finiteOrNil(x float64) any {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return nil
	}
	return x
}

func fileName(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '.' {
			return r
		}
		return '_'
	}, s)
}

// numericsTable renders the calibration: per (dtype, tp) the clean comparisons with their false
// alarms and ratio quantiles, then per fault its detection.
func numericsTable(res []numOutcome, firstSeed, seeds int, maxRatio float64, prompts int) string {
	seedsText := fmt.Sprintf("%d weight seeds (%d..%d)", seeds, firstSeed, firstSeed+seeds-1)
	type key struct {
		dtype string
		check string
		tp    int
		name  string
	}
	groups := map[key][]numOutcome{}
	var keys []key
	for _, o := range res {
		k := key{o.cell.dtype, o.check, o.cell.tp, ""}
		if !o.negative {
			k.name = o.candidate
		}
		if _, ok := groups[k]; !ok {
			keys = append(keys, k)
		}
		groups[k] = append(groups[k], o)
	}
	order := map[string]int{}
	for i, c := range numericsControls {
		order[c.Name] = i
	}
	sort.Slice(keys, func(a, b int) bool {
		ka, kb := keys[a], keys[b]
		if ka.dtype != kb.dtype {
			return ka.dtype < kb.dtype
		}
		if ka.check != kb.check {
			return ka.check == checkTwin
		}
		if (ka.name == "") != (kb.name == "") {
			return ka.name == ""
		}
		if ka.name != kb.name {
			return order[ka.name] < order[kb.name]
		}
		return ka.tp < kb.tp
	})
	var b strings.Builder
	fmt.Fprintf(&b, "Numerics calibration: %s per cell, %d prompts, max_ratio %g. Twin check: negative controls are the four correct candidate/base/twin triples of ring, tree (NCCL_ALGO=Tree) and one-shot; positive controls are judged against base ring with twin tree. Oracle check: every config on the custom path (the correct one-shot is the negative control) against base `--allreduce-oracle forward` with twin `--allreduce-oracle reverse`. Ratio: the KL-distance ratio, the larger of the sequential and under-load passes.\n\n", seedsText, prompts, maxRatio)
	b.WriteString("| dtype | check | tp | control | comparisons | failed | near-bitwise | ratio median | ratio p99 (negative) / min (positive) | failed uncalibrated (no twin) |\n|---|---|---:|---|---:|---:|---:|---:|---:|---:|\n")
	neg, negFail := 0, 0
	for _, k := range keys {
		os := groups[k]
		var rs []float64
		failed, bitwise, uncal := 0, 0, 0
		for _, o := range os {
			if o.failed {
				failed++
			}
			if o.uncalFailed {
				uncal++
			}
			if o.bitwise {
				bitwise++
			}
			if !math.IsNaN(o.ratio) {
				rs = append(rs, o.ratio)
			}
		}
		sort.Float64s(rs)
		name := "correct (negative)"
		tail := "–"
		if k.name != "" {
			name = k.name
			if len(rs) > 0 {
				tail = fmt.Sprintf("%.3g", rs[0])
			}
		} else {
			neg += len(os)
			negFail += failed
			if len(rs) > 0 {
				tail = fmt.Sprintf("%.3g", rs[min(len(rs)-1, int(math.Ceil(0.99*float64(len(rs))))-1)])
			}
		}
		med := "–"
		if len(rs) > 0 {
			med = fmt.Sprintf("%.3g", rs[len(rs)/2])
		}
		fmt.Fprintf(&b, "| %s | %s | %d | %s | %d | %d (%.0f%%) | %d | %s | %s | %d (%.0f%%) |\n", k.dtype, k.check, k.tp, name, len(os), failed, 100*float64(failed)/float64(len(os)), bitwise, med, tail,
			uncal, 100*float64(uncal)/float64(len(os)))
	}
	fmt.Fprintf(&b, "\nFalse alarms: %d of %d clean comparisons (%.2f%%).\n", negFail, neg, 100*float64(negFail)/float64(max(neg, 1)))
	return b.String()
}
