package history

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// Acceptance is a change a person accepted (reckon history accept): from From on, the series it
// matches take their level as the nightly detector's new reference, so an accepted regression
// is green again and an unaccepted one stays red.
type Acceptance struct {
	// Filter selects the series (empty fields match every value).
	Filter Filter `json:"filter"`
	// From is the first run of the new reference (the change point's first run).
	From time.Time `json:"from"`
	// Commit is the commit of that run, Reason why the change is accepted.
	Commit string `json:"commit"`
	Reason string `json:"reason"`
	// Added is when it was recorded.
	Added time.Time `json:"added"`
}

// Accept records a. Reason is required: an acceptance is a decision someone must be able to read.
func (s *Store) Accept(ctx context.Context, a Acceptance) error {
	if a.Reason == "" {
		return fmt.Errorf("history accept: a reason is required (why the new level is the new normal)")
	}
	if a.From.IsZero() {
		return fmt.Errorf("history accept: the first run of the new level is required")
	}
	ctx, cancel := s.deadline(ctx)
	defer cancel()
	f := a.Filter
	_, err := s.db.ExecContext(ctx, s.q(`INSERT INTO accepted_changes (testbed_key, spec_name, config, workload, metric, from_us, git_commit, reason, added_us)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`), f.Testbed, f.Spec, f.Config, f.Workload, f.Metric, a.From.UnixMicro(), a.Commit, a.Reason, time.Now().UnixMicro())
	if err != nil {
		return s.unavailable("recording the acceptance", err)
	}
	return nil
}

// LatestAcceptance returns the acceptance of key with the latest From (nil when none).
func (s *Store) LatestAcceptance(ctx context.Context, key SeriesKey) (*Acceptance, error) {
	ctx, cancel := s.deadline(ctx)
	defer cancel()
	rows, err := s.db.QueryContext(ctx, s.q(`SELECT testbed_key, spec_name, config, workload, metric, from_us, git_commit, reason, added_us
		FROM accepted_changes WHERE (testbed_key = '' OR testbed_key = ?) AND (spec_name = '' OR spec_name = ?)
		AND (config = '' OR config = ?) AND (workload = '' OR workload = ?) AND (metric = '' OR metric = ?)
		ORDER BY from_us DESC, id DESC`), key.Testbed, key.Spec, key.Config, key.Workload, key.Metric)
	if err != nil {
		return nil, s.unavailable("reading acceptances", err)
	}
	defer rows.Close()
	if !rows.Next() {
		return nil, rows.Err()
	}
	var a Acceptance
	var from, added int64
	var commit sql.NullString
	if err := rows.Scan(&a.Filter.Testbed, &a.Filter.Spec, &a.Filter.Config, &a.Filter.Workload, &a.Filter.Metric, &from, &commit, &a.Reason, &added); err != nil {
		return nil, fmt.Errorf("history: reading an acceptance: %w", err)
	}
	a.Commit = commit.String
	a.From, a.Added = time.UnixMicro(from).UTC(), time.UnixMicro(added).UTC()
	return &a, nil
}
