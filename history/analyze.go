package history

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/reckon-ci/reckon/gate"
	"github.com/reckon-ci/reckon/internal/num"
)

// Finding is one change point of one series, with the runs on either side of it.
type Finding struct {
	Series SeriesKey `json:"series"`
	ChangePoint
	// RunID, Time and Commit are those of the first run after the change.
	RunID  int64     `json:"run_id"`
	Time   time.Time `json:"time"`
	Commit string    `json:"commit"`
	// PrevCommit is the commit of the last run before the change: the change came in
	// PrevCommit..Commit (git log PrevCommit..Commit; git bisect good PrevCommit, bad Commit).
	PrevCommit string    `json:"prev_commit"`
	PrevTime   time.Time `json:"prev_time"`
	// Regression is true when the change made the metric worse (direction from gate.MetricFor;
	// false as well when the direction is unknown).
	Regression bool   `json:"regression"`
	Direction  string `json:"direction,omitempty"`
}

// CommitRange is "prev..commit" with commits shortened to 12 characters.
func (f Finding) CommitRange() string {
	return short(f.PrevCommit) + ".." + short(f.Commit)
}

func short(c string) string {
	head, dirty := strings.CutSuffix(c, "-dirty")
	if len(head) > 12 {
		head = head[:12]
	}
	if head == "" {
		head = "?"
	}
	if dirty {
		head += "-dirty"
	}
	return head
}

// Line is the one-line summary, e.g. "custom-ar output_throughput: change point at run
// 2026-11-28 (abc123..def456), -6.1% (183.0 ± 2.1 -> 171.8 ± 2.4, p=1.2e-09)".
func (f Finding) Line() string {
	what := ""
	if f.Regression {
		what = " regression"
	}
	return fmt.Sprintf("%s %s: change point%s at run %s (%s), %+.1f%% (%s ± %s -> %s ± %s, n %d -> %d, p=%s)",
		f.Series.Config, f.Series.Metric, what, f.Time.Format("2006-01-02"), f.CommitRange(), f.Forward*100,
		num.Format(f.Before.Mean), num.Format(f.Before.Std), num.Format(f.After.Mean), num.Format(f.After.Std), f.Before.N, f.After.N, fmtP(f.PValue))
}

func fmtP(p float64) string {
	if p < 1e-15 {
		return "<1e-15"
	}
	if p < 0.001 {
		return fmt.Sprintf("%.1e", p)
	}
	return fmt.Sprintf("%.3f", p)
}

// AnalyzeSeries returns the change points of one series as Findings.
func AnalyzeSeries(s *Series, o Options) []Finding {
	xs := s.Values()
	cps := Detect(xs, o)
	out := make([]Finding, 0, len(cps))
	m, known := gate.MetricFor(s.Key.Metric)
	for _, cp := range cps {
		p, prev := s.Points[cp.Index], s.Points[cp.Index-1]
		f := Finding{Series: s.Key, ChangePoint: cp, RunID: p.RunID, Time: p.StartedAt, Commit: p.Commit, PrevCommit: prev.Commit, PrevTime: prev.StartedAt}
		if known {
			f.Direction = string(m.Direction)
			f.Regression = (m.Direction == gate.HigherIsBetter && cp.Forward < 0) || (m.Direction == gate.LowerIsBetter && cp.Forward > 0)
		}
		out = append(out, f)
	}
	return out
}

// Analyze reads every series that matches f and returns their change points, series by series.
func (s *Store) Analyze(ctx context.Context, f Filter, o Options) ([]Series, []Finding, error) {
	ser, err := s.Series(ctx, f)
	if err != nil {
		return nil, nil, err
	}
	var out []Finding
	for i := range ser {
		out = append(out, AnalyzeSeries(&ser[i], o)...)
	}
	return ser, out, nil
}

// Window is what the gate judges tonight's trials against (`against: history`, the nightly
// detector of docs/history.md): the reference, the runs of the series' current level, and, when a
// regression is open, the runs since it.
type Window struct {
	Key SeriesKey
	// Samples are the trials of the window's runs (all of them: nothing is averaged).
	Samples []float64
	// Groups holds the same trials by launch (Point.LaunchGroups), oldest first, so the window
	// measures the series' between-launch variation. Groups[:OpenFrom] is the reference and
	// Groups[OpenFrom:] the runs since the open regression (OpenFrom = len(Groups) when none).
	Groups [][]float64
	// GroupRun is the run (its index among the window's runs) of each group.
	GroupRun []int
	// OpenFrom is where the runs since Open begin in Groups.
	OpenFrom int
	// Runs is how many reference runs the window holds; Total how many the series has.
	Runs, Total int
	// From and To are the first and last runs of the reference.
	From, To Point
	// Since is the change point the reference starts after (nil: the series' start or an
	// acceptance).
	Since *Finding
	// Open is the first run of the regression the reference ends at: found by the nightly
	// detector's replay (gate.OpenRegression), not undone, not accepted (nil: none); OpenPrev is
	// the run before it (the regression came in OpenPrev.Commit..Open.Commit).
	Open, OpenPrev *Point
	// Accepted is the acceptance the series is read from (nil: none).
	Accepted *Acceptance
	// Last is the newest run of the series (the commit a regression tonight came after).
	Last Point
}

// Describe is e.g. "12 runs since the change point at 2026-11-28 (abc..def), 2026-11-28..2026-12-09".
func (w *Window) Describe() string {
	s := fmt.Sprintf("reference: %d runs %s..%s", w.Runs, w.From.StartedAt.Format("2006-01-02"), w.To.StartedAt.Format("2006-01-02"))
	switch {
	case w.Since != nil:
		s += fmt.Sprintf(", since the change point at %s (%s, %+.1f%%)", w.Since.Time.Format("2006-01-02"), w.Since.CommitRange(), w.Since.Forward*100)
	case w.Accepted != nil:
		s += fmt.Sprintf(", since the change accepted from %s (%s)", w.Accepted.From.Format("2006-01-02"), w.Accepted.Reason)
	}
	if w.Open != nil {
		s += fmt.Sprintf("; open regression since %s, %d run(s), not accepted", w.OpenSince(), len(w.Groups)-w.OpenFrom)
	}
	return s
}

// OpenSince names the open regression's first run: "2026-12-03 (abc..def)" ("" when none).
func (w *Window) OpenSince() string {
	if w.Open == nil {
		return ""
	}
	prev := ""
	if w.OpenPrev != nil {
		prev = w.OpenPrev.Commit
	}
	return fmt.Sprintf("%s (%s..%s)", w.Open.StartedAt.Format("2006-01-02"), short(prev), short(w.Open.Commit))
}

// ErrShortWindow is returned by HistoryWindow when too few runs follow the last change point.
type ErrShortWindow struct {
	Key       SeriesKey
	Runs, Min int
	Since     *Finding
}

func (e *ErrShortWindow) Error() string {
	s := fmt.Sprintf("history %s: %d run(s)", e.Key, e.Runs)
	if e.Since != nil {
		s += fmt.Sprintf(" since the change point at %s (%s)", e.Since.Time.Format("2006-01-02"), e.Since.CommitRange())
	}
	return s + fmt.Sprintf("; at least %d needed to judge against history (docs/history.md: bootstrapping)", e.Min)
}

// HistoryWindow returns the window of key for the gate's check with options stat. The series is
// read from its latest acceptance (LatestAcceptance) on; its change points are found with o, and
// the newest improvement (or change of unknown direction) starts the current level. Over that
// level the nightly detector is replayed (gate.OpenRegression with stat): a regression it found
// and that the runs since still confirm is open, and the reference ends where it began, so a
// regression is never silently the new normal: it is red until an improvement undoes it or a
// person accepts it. The reference is the newest maxRuns runs (no cap when 0) and must hold at
// least minRuns.
func (s *Store) HistoryWindow(ctx context.Context, key SeriesKey, minRuns, maxRuns int, o Options, stat gate.StatOptions) (*Window, error) {
	ser, err := s.Series(ctx, Filter{Testbed: key.Testbed, Spec: key.Spec, Config: key.Config, Workload: key.Workload, Metric: key.Metric})
	if err != nil {
		return nil, err
	}
	if len(ser) == 0 {
		return nil, &ErrShortWindow{Key: key, Runs: 0, Min: minRuns}
	}
	acc, err := s.LatestAcceptance(ctx, key)
	if err != nil {
		return nil, err
	}
	return windowOf(&ser[0], acc, minRuns, maxRuns, o, stat)
}

// maxReplay bounds the runs the nightly detector is replayed over (windowOf).
const maxReplay = 2 * DefaultWindow

// windowOf is HistoryWindow over a series already read.
func windowOf(full *Series, acc *Acceptance, minRuns, maxRuns int, o Options, stat gate.StatOptions) (*Window, error) {
	sr := &Series{Key: full.Key, Points: full.Points}
	if acc != nil {
		i := 0
		for i < len(sr.Points) && sr.Points[i].StartedAt.Before(acc.From) {
			i++
		}
		sr.Points = sr.Points[i:]
	}
	if len(sr.Points) == 0 {
		return nil, &ErrShortWindow{Key: full.Key, Runs: 0, Min: minRuns}
	}
	refFrom := 0
	var since *Finding
	fs := AnalyzeSeries(sr, o)
	for i := range fs {
		if !fs[i].Regression {
			since, refFrom = &fs[i], fs[i].Index
		}
	}
	level := sr.Points[refFrom:]
	refTo := len(sr.Points)
	if m, ok := gate.MetricFor(full.Key.Metric); ok && m.Direction != gate.DirectionUnknown {
		var runs [][]float64
		var at []int
		for i, p := range level {
			for _, g := range p.LaunchGroups() {
				runs = append(runs, g)
				at = append(at, i)
			}
		}
		// The replay covers the newest maxReplay runs of the level (its cost grows with the
		// square of the runs replayed).
		skip := max(0, len(runs)-maxReplay)
		if open := gate.OpenRegression(runs[skip:], m, stat, gate.LaunchNoise{}, minRuns); open < len(runs)-skip {
			refTo = refFrom + at[skip+open]
		}
	}
	var open, openPrev *Point
	if refTo < len(sr.Points) {
		open = &sr.Points[refTo]
		if refTo > 0 {
			openPrev = &sr.Points[refTo-1]
		}
	}
	ref := sr.Points[refFrom:refTo]
	if maxRuns > 0 && len(ref) > maxRuns {
		ref = ref[len(ref)-maxRuns:]
	}
	if len(ref) < minRuns || len(ref) == 0 {
		return nil, &ErrShortWindow{Key: full.Key, Runs: len(ref), Min: minRuns, Since: since}
	}
	w := &Window{Key: full.Key, Runs: len(ref), Total: len(full.Points), From: ref[0], To: ref[len(ref)-1], Since: since, Open: open, OpenPrev: openPrev,
		Accepted: acc, Last: sr.Points[len(sr.Points)-1]}
	run := 0
	add := func(pts []Point) {
		for _, p := range pts {
			w.Samples = append(w.Samples, p.Samples...)
			for _, g := range p.LaunchGroups() {
				w.Groups = append(w.Groups, g)
				w.GroupRun = append(w.GroupRun, run)
			}
			run++
		}
	}
	add(ref)
	w.OpenFrom = len(w.Groups)
	if open != nil {
		add(sr.Points[refTo:])
	}
	return w, nil
}

// Between returns the runs whose commits lie from commit a to commit b (by run time: from the
// first run of a to the last run of b, either order), and the change points among them.
func (s *Store) Between(ctx context.Context, a, b string, f Filter, o Options) ([]RunRow, []Finding, error) {
	if a == "" || b == "" {
		return nil, nil, fmt.Errorf("history between: two commits needed, got %q and %q", a, b)
	}
	all, err := s.Runs(ctx, RunFilter{Testbed: f.Testbed, Spec: f.Spec})
	if err != nil {
		return nil, nil, err
	}
	first, last := -1, -1
	for i, r := range all {
		if strings.HasPrefix(r.GitCommit, a) || strings.HasPrefix(r.GitCommit, b) {
			if first < 0 {
				first = i
			}
			last = i
		}
	}
	var missing []string
	for _, c := range []string{a, b} {
		found := false
		for _, r := range all {
			if strings.HasPrefix(r.GitCommit, c) {
				found = true
				break
			}
		}
		if !found {
			missing = append(missing, c)
		}
	}
	if len(missing) > 0 {
		return nil, nil, fmt.Errorf("history %s: no run of commit %s (expected a commit, or a prefix of one, that a stored run tested)", s.where, strings.Join(missing, " or "))
	}
	runs := all[first : last+1]
	in := map[int64]bool{}
	for _, r := range runs {
		in[r.ID] = true
	}
	_, fs, err := s.Analyze(ctx, f, o)
	if err != nil {
		return nil, nil, err
	}
	var out []Finding
	for _, x := range fs {
		// A change point belongs to the range when its run and the run before it are in it.
		if in[x.RunID] && x.RunID != runs[0].ID {
			out = append(out, x)
		}
	}
	return runs, out, nil
}
