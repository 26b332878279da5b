package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/reckon-ci/reckon/history"
)

func newHistoryAcceptCmd(dsn *string) *cobra.Command {
	var f history.Filter
	var from, reason string
	cmd := &cobra.Command{
		Use:   "accept --from COMMIT|DATE --reason TEXT [--testbed K] [--spec S] [--config C] [--workload W] [--metric M]",
		Short: "Accept a change: the nightly detector takes the level from a run on as its new reference",
		Long: `accept records that the level of the matching series from a run on is the new normal (an
intended trade-off, a new model, a slower but correct kernel). A regression the nightly detector
found stays red every night until it is fixed (an improvement change point undoes it) or accepted
here; after that the series' reference starts at --from. --from is a commit (prefix; its first run
in the history) or a time (2026-12-01 or RFC 3339). Empty filters match every series; --reason is
kept with the acceptance (docs/history.md, "The nightly detector").`,
		Example: `  reckon history accept --history history.db --config custom-ar --from 3f2c1ab --reason "fp32 accumulate: 4% slower, fixes #812"`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if reason == "" {
				return withExitCode(2, errors.New("--reason is required: say why the new level is the new normal"))
			}
			if from == "" {
				return withExitCode(2, errors.New("--from is required: the commit (or time) of the first run of the new level"))
			}
			ctx, cancel := context.WithTimeout(cmdContext(cmd), historyCallTimeout)
			defer cancel()
			s, err := openHistory(ctx, *dsn)
			if err != nil {
				return err
			}
			defer s.Close()
			at, commit, err := acceptFrom(ctx, s, f, from)
			if err != nil {
				return err
			}
			if err := s.Accept(ctx, history.Acceptance{Filter: f, From: at, Commit: commit, Reason: reason}); err != nil {
				return historyExit(err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "accepted: series %s from %s (%s): %s\n", filterString(f), at.Format(time.RFC3339), shortSHA(commit), reason)
			return nil
		},
	}
	fl := cmd.Flags()
	seriesFilterFlags(fl, &f)
	fl.StringVar(&from, "from", "", "the first run of the new level: a commit (prefix) or a time (2026-12-01, RFC 3339)")
	fl.StringVar(&reason, "reason", "", "why the change is accepted (required)")
	return cmd
}

// acceptFrom resolves --from: a time as given, or the first run of a commit (prefix) among the
// runs f selects.
func acceptFrom(ctx context.Context, s *history.Store, f history.Filter, from string) (time.Time, string, error) {
	for _, layout := range []string{time.RFC3339, "2006-01-02T15:04", "2006-01-02"} {
		if t, err := time.Parse(layout, from); err == nil {
			return t.UTC(), "", nil
		}
	}
	runs, err := s.Runs(ctx, history.RunFilter{Testbed: f.Testbed, Spec: f.Spec, CommitPrefix: from})
	if err != nil {
		return time.Time{}, "", historyExit(err)
	}
	if len(runs) == 0 {
		return time.Time{}, "", withExitCode(2, fmt.Errorf("--from %q: no run of a commit starting so in the history (testbed %q, spec %q); expected a stored run's commit or a time such as 2026-12-01", from, f.Testbed, f.Spec))
	}
	return runs[0].StartedAt, runs[0].GitCommit, nil
}

func filterString(f history.Filter) string {
	s := ""
	for _, p := range []string{f.Testbed, f.Spec, f.Config, f.Workload, f.Metric} {
		if p == "" {
			p = "*"
		}
		if s != "" {
			s += "/"
		}
		s += p
	}
	return s
}
