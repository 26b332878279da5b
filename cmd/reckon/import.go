package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/reckon-ci/reckon/workload"
)

func init() { rootCmd.AddCommand(newImportCmd()) }

func newImportCmd() *cobra.Command {
	var asJSON, all, last bool
	var out, toolVersion string
	cmd := &cobra.Command{
		Use:   "import FILE",
		Short: "Read another tool's result file into reckon's result format",
		Long: `Read a result file of vllm bench serve (JSON, or JSONL with --append-result, including the old
"request_goodput:" key), sglang.bench_serving (JSONL with Infinity/NaN literals), GenAI-Perf/AIPerf
(profile_export_*.json aggregates), a log holding vLLM's or SGLang's printed "Serving Benchmark
Result" summary (values as printed), nccl-tests (text output or -J JSON) or reckon itself. The
format is detected from the content. Metrics the file does not report are listed as missing, never guessed.

A file with several results (SGLang's appended JSONL, vLLM --append-result, a sweep summary,
nccl-tests runs appended) gives every one of them, each its own trial, labelled "run" with its
place in the file and its request rate / concurrency; --last keeps only the last one. A metric
the file does not have is absent (null in --json, listed under missing), never 0.

Each record keeps the tool's own meaning (docs/metrics.md): a field whose meaning differs from
reckon's is converted with its definition (SGLang's --random-range-ratio into the interval it
drew lengths from, workload.input_lens/output_lens) and kept under the tool's own name
(workload.tool_settings); a setting the file does not record (ignore_eos, temperature, seed) is
absent, never a default; metadata.semantics says which tool and version definitions it was read
with and how the version was known. vLLM's files record no version, and its
max_concurrent_requests changed meaning after 0.28 (busiest whole second, then the exact peak):
--tool-version 0.25.1 says which; without it the value is kept as vllm_max_concurrent_requests
unless it exceeds max_concurrency (then it can only be the busiest-second figure).

Without --json a summary is printed; with --json the normalized result (an array when the file
holds several; for nccl-tests: per-row size_bytes, algbw_gbps, busbw_gbps and wrong,
out-of-place and in-place, and avg_busbw_gbps).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if all && last {
				return withExitCode(2, fmt.Errorf("--all and --last contradict each other: give one"))
			}
			var results []*workload.Result
			if last {
				r, err := workload.ImportFileWith(args[0], workload.ImportOptions{ToolVersion: toolVersion})
				if err != nil {
					return withExitCode(2, err)
				}
				results = []*workload.Result{r}
			} else {
				rs, err := workload.ImportAllWith(args[0], workload.ImportOptions{ToolVersion: toolVersion})
				if err != nil {
					return withExitCode(2, err)
				}
				results = rs
			}
			if out != "" {
				var err error
				if len(results) == 1 {
					err = workload.WriteResult(out, results[0])
				} else {
					err = workload.WriteResults(out, results)
				}
				if err != nil {
					return withExitCode(3, err)
				}
			}
			w := cmd.OutOrStdout()
			if asJSON {
				var v any = results[0]
				if len(results) > 1 {
					v = results
				}
				if len(results) == 1 && results[0].NCCL != nil {
					v = ncclJSON(results[0])
				}
				if len(results) > 1 {
					// One element at a time: the output of thousands of results is never one
					// buffer (the same bytes as encoding the array with this indent).
					if err := encodeArray(w, results); err != nil {
						return withExitCode(3, fmt.Errorf("writing JSON: %w", err))
					}
					return nil
				}
				enc := json.NewEncoder(w)
				enc.SetIndent("", "  ")
				if err := enc.Encode(v); err != nil {
					return withExitCode(3, fmt.Errorf("writing JSON: %w", err))
				}
				return nil
			}
			for i, r := range results {
				if i > 0 {
					fmt.Fprintln(w)
				}
				printSummary(w, r)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the normalized result as JSON")
	cmd.Flags().BoolVar(&all, "all", false, "every result of a file with several (the default; kept for old scripts)")
	cmd.Flags().BoolVar(&last, "last", false, "only the last result of a file with several")
	cmd.Flags().StringVar(&toolVersion, "tool-version", "", "version of the tool that wrote the file, where its definitions changed and the file does not say (vLLM: e.g. 0.25.1)")
	cmd.Flags().StringVar(&out, "out", "", "also write the normalized result(s) to this file (atomically; a JSON array when several)")
	return cmd
}

// encodeArray writes rs as an indented JSON array, element by element.
func encodeArray(w io.Writer, rs []*workload.Result) error {
	bw := bufio.NewWriter(w)
	bw.WriteString("[\n")
	for i, r := range rs {
		b, err := json.MarshalIndent(r, "  ", "  ")
		if err != nil {
			return err
		}
		bw.WriteString("  ")
		bw.Write(b)
		if i < len(rs)-1 {
			bw.WriteByte(',')
		}
		bw.WriteByte('\n')
	}
	bw.WriteString("]\n")
	return bw.Flush()
}

// ncclRowJSON is the per-row shape `reckon import --json` prints for nccl-tests.
type ncclRowJSON struct {
	SizeBytes int64  `json:"size_bytes"`
	Count     int64  `json:"count"`
	Type      string `json:"type"`
	RedOp     string `json:"redop,omitempty"`
	// OutOfPlace is null for tables that measured in place only.
	OutOfPlace *ncclMeasureJSON `json:"out_of_place"`
	InPlace    *ncclMeasureJSON `json:"in_place,omitempty"`
}

type ncclMeasureJSON struct {
	TimeUs    float64  `json:"time_us"`
	AlgBWGBps float64  `json:"algbw_gbps"`
	BusBWGBps float64  `json:"busbw_gbps"`
	Wrong     *int64   `json:"wrong"`
	Error     *float64 `json:"error,omitempty"`
}

func ncclJSON(r *workload.Result) any {
	n := r.NCCL
	rows := make([]ncclRowJSON, 0, len(n.Rows))
	conv := func(m workload.NCCLMeasure) ncclMeasureJSON {
		return ncclMeasureJSON{TimeUs: m.TimeUs, AlgBWGBps: m.AlgBWGBps, BusBWGBps: m.BusBWGBps, Wrong: m.Wrong, Error: m.Error}
	}
	for _, row := range n.Rows {
		j := ncclRowJSON{SizeBytes: row.SizeBytes, Count: row.Count, Type: row.Type, RedOp: row.RedOp}
		if !(row.InPlace != nil && row.OutOfPlace == (workload.NCCLMeasure{})) {
			op := conv(row.OutOfPlace)
			j.OutOfPlace = &op
		}
		if row.InPlace != nil {
			ip := conv(*row.InPlace)
			j.InPlace = &ip
		}
		rows = append(rows, j)
	}
	var avg *float64
	missing := false
	for _, k := range r.Missing {
		if k == "avg_busbw_gbps" {
			missing = true
		}
	}
	if !missing {
		v := n.AvgBusBWGBps
		avg = &v
	}
	return struct {
		SourceFormat   string        `json:"source_format"`
		SourceFile     string        `json:"source_file,omitempty"`
		Collective     string        `json:"collective,omitempty"`
		Rows           []ncclRowJSON `json:"rows"`
		AvgBusBWGBps   *float64      `json:"avg_busbw_gbps"`
		AvgBusBWStatus string        `json:"avg_busbw_status,omitempty"`
		OutOfBounds    int           `json:"out_of_bounds"`
		WrongTotal     int           `json:"wrong_total"`
		Validated      bool          `json:"validated"`
		Missing        []string      `json:"missing,omitempty"`
		Warnings       []string      `json:"warnings,omitempty"`
	}{r.Metadata.SourceFormat, r.Metadata.SourceFile, n.Collective, rows, avg, n.AvgBusBWStatus, n.OutOfBounds,
		n.WrongTotal, n.Validated, r.Missing, r.Warnings}
}

// printSummary writes a human-readable summary of a result.
func printSummary(w io.Writer, r *workload.Result) {
	md := r.Metadata
	fmt.Fprintf(w, "format: %s", md.SourceFormat)
	if md.Tool != "" {
		fmt.Fprintf(w, " (%s", md.Tool)
		if md.ToolVersion != "" {
			fmt.Fprintf(w, " %s", md.ToolVersion)
		}
		fmt.Fprint(w, ")")
	}
	fmt.Fprintln(w)
	if md.Model != "" {
		fmt.Fprintf(w, "model: %s\n", md.Model)
	}
	if s := md.Semantics; s != nil {
		fmt.Fprintf(w, "semantics: %s, version %s: %s\n", s.Tool, s.Version, s.Basis)
	}
	if run := md.Labels["run"]; run != "" {
		fmt.Fprintf(w, "run: %s\n", run)
	}
	if r.NCCL != nil {
		fmt.Fprintf(w, "%14s %14s %10s %10s %8s %10s %10s %8s\n", "size(B)", "count", "oop_algbw", "oop_busbw", "oop_wrg", "ip_algbw", "ip_busbw", "ip_wrg")
		wr := func(p *int64) string {
			if p == nil {
				return "N/A"
			}
			return fmt.Sprint(*p)
		}
		for _, row := range r.NCCL.Rows {
			fmt.Fprintf(w, "%14d %14d %10.2f %10.2f %8s", row.SizeBytes, row.Count, row.OutOfPlace.AlgBWGBps, row.OutOfPlace.BusBWGBps, wr(row.OutOfPlace.Wrong))
			if row.InPlace != nil {
				fmt.Fprintf(w, " %10.2f %10.2f %8s", row.InPlace.AlgBWGBps, row.InPlace.BusBWGBps, wr(row.InPlace.Wrong))
			}
			fmt.Fprintln(w)
		}
	}
	m := r.Metrics()
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	order := map[string]int{}
	for i, k := range workload.MetricKeys() {
		order[k] = i
	}
	sort.Slice(keys, func(i, j int) bool {
		oi, iok := order[keys[i]]
		oj, jok := order[keys[j]]
		switch {
		case iok && jok:
			return oi < oj
		case iok != jok:
			return iok
		}
		return keys[i] < keys[j]
	})
	for _, k := range keys {
		v := m[k]
		if v == math.Trunc(v) && math.Abs(v) < 1e15 {
			fmt.Fprintf(w, "  %-34s %d\n", k, int64(v))
		} else {
			fmt.Fprintf(w, "  %-34s %.4f\n", k, v)
		}
	}
	if len(r.Missing) > 0 {
		fmt.Fprintf(w, "missing: %s\n", strings.Join(r.Missing, ", "))
	}
	for _, wn := range r.Warnings {
		fmt.Fprintf(w, "warning: %s\n", wn)
	}
}
