package main

import (
	"fmt"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/reckon-ci/reckon/gate"
	"github.com/reckon-ci/reckon/reporters"
)

func init() { rootCmd.AddCommand(newReportCmd()) }

func newReportCmd() *cobra.Command {
	var results, out string
	cmd := &cobra.Command{
		Use:   "report --results FILE [--out DIR]",
		Short: "Re-render the reports (JUnit, JSON, Markdown, HTML) from a run's results.json",
		Long: `report reads the lossless results.json of a gate run and writes junit.xml, results.json,
summary.md and report.html again into --out (default: the directory of --results). Use it after
editing nothing but the renderer, or to publish a run's reports somewhere else.`,
		Example: `  reckon report --results out/results.json --out public/`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if results == "" {
				return withExitCode(2, fmt.Errorf("--results is required"))
			}
			run, err := gate.ReadResults(results)
			if err != nil {
				return withExitCode(2, err)
			}
			if out == "" {
				out = filepath.Dir(results)
			}
			if err := reporters.WriteAll(out, run); err != nil {
				return withExitCode(3, err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "wrote %s: %s\n", out, closingLine(run))
			return nil
		},
	}
	cmd.Flags().StringVar(&results, "results", "", "results.json of a gate run (required)")
	cmd.Flags().StringVar(&out, "out", "", "directory for the reports (default: beside --results)")
	return cmd
}
