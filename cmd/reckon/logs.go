package main

import (
	"encoding/json"
	"fmt"
	"io"

	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/reckon-ci/reckon/engine"
)

func init() { rootCmd.AddCommand(newLogsCmd()) }

func newLogsCmd() *cobra.Command {
	logs := &cobra.Command{
		Use:   "logs",
		Short: "Read engine logs",
	}
	var kind string
	var asJSON bool
	parse := &cobra.Command{
		Use:   "parse FILE...",
		Short: "Parse engine logs into EngineReports (memory plan, KV capacity, allreduce backend, errors)",
		Long: `parse reads SGLang or vLLM server logs (any version, several ranks, pasted logs with colour
codes) and prints what the engine actually did: readiness, the effective allreduce backend and why
custom allreduce was disabled, weights / KV cache / CUDA graph memory (GiB, minimum over ranks), KV
capacity in tokens, free memory after start-up, max running requests, context length, vLLM's max
concurrency, the speculative-decoding accept length, and classified errors with line numbers.

With --json it prints one JSON object per file (a JSON array for several files); fields the log
does not state are null. Exit code 2 when a file cannot be read or its engine cannot be told.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runLogsParse(cmd.OutOrStdout(), kind, asJSON, args)
		},
	}
	parse.Flags().StringVar(&kind, "engine", "auto", "engine that wrote the logs: sglang, vllm or auto (detect per file)")
	parse.Flags().BoolVar(&asJSON, "json", false, "print JSON (one object per file, an array for several files)")
	logs.AddCommand(parse)
	return logs
}

func runLogsParse(w io.Writer, kind string, asJSON bool, files []string) error {
	kind = strings.ToLower(strings.TrimSpace(kind))
	if kind != "auto" {
		if _, err := engine.AdapterFor(kind); err != nil {
			return withExitCode(2, fmt.Errorf("--engine: %w (or auto)", err))
		}
	}
	reports := make([]*engine.Report, 0, len(files))
	for _, f := range files {
		rep, err := engine.ParseLogFile(f, kind)
		if err != nil {
			return withExitCode(2, err)
		}
		reports = append(reports, rep)
	}
	if asJSON {
		var v any = reports
		if len(reports) == 1 {
			v = reports[0]
		}
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		if err := enc.Encode(v); err != nil {
			return fmt.Errorf("write JSON: %w", err)
		}
		return nil
	}
	for k, rep := range reports {
		if k > 0 {
			fmt.Fprintln(w)
		}
		if err := writeReportTable(w, files[k], rep); err != nil {
			return err
		}
	}
	return nil
}

func fmtF(v *float64, unit string) string {
	if v == nil {
		return "-"
	}
	s := strconv.FormatFloat(*v, 'f', -1, 64)
	if unit != "" {
		s += " " + unit
	}
	return s
}

func fmtI(v *int64) string {
	if v == nil {
		return "-"
	}
	return strconv.FormatInt(*v, 10)
}

func writeReportTable(w io.Writer, file string, r *engine.Report) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	ar := r.AllReduce
	if r.CustomAllReduceDisabledReason != nil {
		ar += " (custom disabled: " + *r.CustomAllReduceDisabledReason + ")"
	}
	rows := [][2]string{
		{"file", file},
		{"engine", r.Engine},
		{"ready", strconv.FormatBool(r.Ready)},
		{"allreduce", ar},
		{"weights", fmtF(r.WeightsGiB, "GiB")},
		{"kv cache tokens", fmtI(r.KVCacheTokens)},
		{"kv cache", fmtF(r.KVCacheGiB, "GiB")},
		{"available gpu mem", fmtF(r.AvailableGPUMemGiB, "GiB")},
		{"cuda graph time", fmtF(r.CUDAGraphSeconds, "s")},
		{"cuda graph mem", fmtF(r.CUDAGraphGiB, "GiB")},
		{"max running requests", fmtI(r.MaxRunningRequests)},
		{"context len", fmtI(r.ContextLen)},
		{"max concurrency", fmtF(r.MaxConcurrency, "x")},
		{"spec accept length", fmtF(r.SpecAcceptLength, "")},
		{"errors", strconv.Itoa(len(r.Errors))},
	}
	for _, row := range rows {
		fmt.Fprintf(tw, "%s\t%s\n", row[0], row[1])
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write table: %w", err)
	}
	for _, e := range r.Errors {
		fmt.Fprintf(w, "  line %d [%s] %s\n", e.Line, e.Kind, e.Text)
	}
	return nil
}
