package history

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx" (PostgreSQL)
	_ "modernc.org/sqlite"             // database/sql driver "sqlite" (pure Go)

	"github.com/reckon-ci/reckon/internal/num"
)

// Backends (Store.Backend).
const (
	BackendSQLite   = "sqlite"
	BackendPostgres = "postgres"
)

// DefaultTimeout bounds each store call whose context has no deadline of its own.
const DefaultTimeout = 60 * time.Second

// EnvDSN is the environment variable `reckon gate` and `reckon history` read the DSN from when
// --history is not given.
const EnvDSN = "RECKON_HISTORY"

//go:embed migrations/sqlite/*.sql migrations/postgres/*.sql
var migrationFS embed.FS

// ErrUnavailable marks a store that could not be reached or written (the database is down, the
// file cannot be opened, a call ran past its deadline): an infrastructure error, never bad input.
var ErrUnavailable = errors.New("history store unavailable")

// Store is an open results store. It is safe for concurrent use, and several processes may
// append to the same store at once (SQLite: WAL, immediate write transactions and a busy
// timeout; PostgreSQL: ordinary transactions, an advisory lock around migrations).
type Store struct {
	db      *sql.DB
	backend string
	// secrets are the DSN's secret values (passwords), removed from every error text.
	secrets []string
	// where names the store in errors: the file path, or the URL with its password redacted.
	where string
	// Timeout bounds each call whose context has no deadline (DefaultTimeout when 0).
	Timeout time.Duration
}

// Open opens (creating when needed: an SQLite file, the schema) the store at dsn and applies
// the migrations it lacks. A store that cannot be reached is ErrUnavailable.
func Open(ctx context.Context, dsn string) (*Store, error) {
	backend, source, where, err := ParseDSN(dsn)
	if err != nil {
		return nil, err
	}
	secrets := dsnSecrets(dsn)
	driver := "sqlite"
	if backend == BackendPostgres {
		driver = "pgx"
	} else if dir := filepath.Dir(where); dir != "" {
		if st, err := os.Stat(dir); err != nil || !st.IsDir() {
			return nil, fmt.Errorf("%w: %s: directory %s does not exist (create it, or name another file)", ErrUnavailable, where, dir)
		}
	}
	db, err := sql.Open(driver, source)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrUnavailable, where, redactText(err.Error(), secrets))
	}
	s := &Store{db: db, backend: backend, where: where, secrets: secrets}
	if backend == BackendSQLite {
		// One connection: SQLite serialises writers anyway, and the pragmas hold per connection.
		db.SetMaxOpenConns(1)
	} else {
		db.SetMaxOpenConns(4)
		db.SetConnMaxIdleTime(time.Minute)
	}
	cctx, cancel := s.deadline(ctx)
	defer cancel()
	if err := db.PingContext(cctx); err != nil {
		db.Close()
		return nil, s.unavailable("connecting", err)
	}
	if err := s.migrate(cctx); err != nil {
		db.Close()
		return nil, err
	}
	return s, nil
}

// Close closes the store.
func (s *Store) Close() error { return s.db.Close() }

// Backend is BackendSQLite or BackendPostgres.
func (s *Store) Backend() string { return s.backend }

// Where names the store: the SQLite file, or the PostgreSQL URL with its password redacted.
func (s *Store) Where() string { return s.where }

func (s *Store) deadline(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return context.WithCancel(ctx)
	}
	t := s.Timeout
	if t <= 0 {
		t = DefaultTimeout
	}
	return context.WithTimeout(ctx, t)
}

func (s *Store) unavailable(what string, err error) error {
	return fmt.Errorf("%w: %s: %s: %s", ErrUnavailable, s.where, what, redactText(err.Error(), s.secrets))
}

// q rewrites '?' placeholders to PostgreSQL's $1, $2, ...
func (s *Store) q(query string) string {
	if s.backend != BackendPostgres {
		return query
	}
	var b strings.Builder
	n := 0
	for _, r := range query {
		if r == '?' {
			n++
			b.WriteString("$" + strconv.Itoa(n))
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// Migration is one versioned schema change (history/migrations/BACKEND/NNNN_name.sql).
type Migration struct {
	Version int
	Name    string
	SQL     string
}

// Migrations returns the backend's migrations in version order.
func Migrations(backend string) ([]Migration, error) {
	dir := path.Join("migrations", backend)
	entries, err := fs.ReadDir(migrationFS, dir)
	if err != nil {
		return nil, fmt.Errorf("history: no migrations for backend %q: %v", backend, err)
	}
	var out []Migration
	for _, e := range entries {
		seq, name, ok := strings.Cut(strings.TrimSuffix(e.Name(), ".sql"), "_")
		v, err := strconv.Atoi(seq)
		if !ok || err != nil || v <= 0 {
			return nil, fmt.Errorf("history: migration %s/%s: expected NNNN_name.sql", dir, e.Name())
		}
		b, err := fs.ReadFile(migrationFS, path.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		out = append(out, Migration{Version: v, Name: name, SQL: string(b)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	for i := range out {
		if out[i].Version != i+1 {
			return nil, fmt.Errorf("history: migrations of %s: expected version %d, found %d (versions must run 1, 2, 3, ...)", backend, i+1, out[i].Version)
		}
	}
	return out, nil
}

// SchemaVersion is the schema version this build of reckon writes.
func SchemaVersion() int {
	m, _ := Migrations(BackendSQLite)
	return len(m)
}

// migrate applies the missing migrations in one transaction, serialised across processes.
func (s *Store) migrate(ctx context.Context) error {
	migs, err := Migrations(s.backend)
	if err != nil {
		return err
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return s.unavailable("starting the migration", err)
	}
	defer tx.Rollback()
	if s.backend == BackendPostgres {
		// Two runners opening a fresh database at once: the second waits, then sees the schema.
		if _, err := tx.ExecContext(ctx, "SELECT pg_advisory_xact_lock(7263540013)"); err != nil {
			return s.unavailable("locking for migration", err)
		}
	}
	if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    INTEGER PRIMARY KEY,
		name       TEXT    NOT NULL,
		applied_us BIGINT  NOT NULL)`); err != nil {
		return s.unavailable("creating schema_migrations", err)
	}
	var have sql.NullInt64
	if err := tx.QueryRowContext(ctx, "SELECT MAX(version) FROM schema_migrations").Scan(&have); err != nil {
		return s.unavailable("reading the schema version", err)
	}
	if int(have.Int64) > len(migs) {
		return fmt.Errorf("history store %s has schema version %d; this reckon knows versions up to %d: use a newer reckon", s.where, have.Int64, len(migs))
	}
	for _, m := range migs[have.Int64:] {
		for _, stmt := range splitSQL(m.SQL) {
			if _, err := tx.ExecContext(ctx, stmt); err != nil {
				return fmt.Errorf("history store %s: migration %04d_%s: %w", s.where, m.Version, m.Name, err)
			}
		}
		if _, err := tx.ExecContext(ctx, s.q("INSERT INTO schema_migrations (version, name, applied_us) VALUES (?, ?, ?)"),
			m.Version, m.Name, time.Now().UnixMicro()); err != nil {
			return s.unavailable("recording a migration", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return s.unavailable("committing the migration", err)
	}
	return nil
}

// splitSQL splits a migration into statements at semicolons that end a line, dropping comments.
func splitSQL(src string) []string {
	var out []string
	var cur strings.Builder
	for _, line := range strings.Split(src, "\n") {
		t := strings.TrimSpace(line)
		if t == "" || strings.HasPrefix(t, "--") {
			continue
		}
		cur.WriteString(line)
		cur.WriteString("\n")
		if strings.HasSuffix(t, ";") {
			out = append(out, strings.TrimSpace(cur.String()))
			cur.Reset()
		}
	}
	if strings.TrimSpace(cur.String()) != "" {
		out = append(out, strings.TrimSpace(cur.String()))
	}
	return out
}

// computeUID identifies a run by its provenance and content. The hash reads the configs in
// order, each followed by its trials, as every earlier reckon did: a run appended again by a
// newer reckon is still found.
func computeUID(r *Rows) string {
	h := sha256.New()
	p := &r.Run
	fmt.Fprintf(h, "%s\x00%d\x00%s\x00%s\x00%s\x00%s\x00", p.Source, p.StartedAt.UnixMicro(), p.TestbedKey, p.SpecName, p.GitCommit, p.LabelFilter)
	for _, c := range r.Configs {
		fmt.Fprintf(h, "c\x00%s\x00", c.Name)
		for _, t := range r.TrialsOf(c.Name) {
			fmt.Fprintf(h, "t\x00%s\x00%d\x00", t.Workload, t.Index)
			for _, k := range sortedKeys(t.Metrics) {
				fmt.Fprintf(h, "%s=%v\x00", k, t.Metrics[k])
			}
		}
	}
	return hex.EncodeToString(h.Sum(nil))[:32]
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Append stores rows in one transaction and returns the run's id. A run already stored (same
// UID) is not stored again: added is false and id is the stored run's. Non-finite metric values
// are not stored (a series holds numbers only). Append sets rows.Run's ID and fills its UID,
// Source, TestbedJSON and FinishedAt when empty.
func (s *Store) Append(ctx context.Context, rows *Rows) (id int64, added bool, err error) {
	if err := rows.Validate(); err != nil {
		return 0, false, err
	}
	r := &rows.Run
	if r.UID == "" {
		r.UID = computeUID(rows)
	}
	if r.Source == "" {
		r.Source = SourceGate
	}
	if r.TestbedJSON == "" {
		r.TestbedJSON = "{}"
	}
	if r.FinishedAt.IsZero() {
		r.FinishedAt = r.StartedAt
	}
	ctx, cancel := s.deadline(ctx)
	defer cancel()
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, false, s.unavailable("starting the append", err)
	}
	defer tx.Rollback()
	row := tx.QueryRowContext(ctx, s.q(`INSERT INTO runs (uid, started_us, finished_us, added_us, source, git_commit, engine,
		engine_version, reckon_version, testbed_key, testbed_json, spec_name, spec_hash, label_filter, verdict)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (uid) DO NOTHING RETURNING id`),
		r.UID, r.StartedAt.UnixMicro(), r.FinishedAt.UnixMicro(), time.Now().UnixMicro(), r.Source, r.GitCommit, r.Engine,
		r.EngineVersion, r.ReckonVersion, r.TestbedKey, r.TestbedJSON, r.SpecName, r.SpecHash, r.LabelFilter, r.Verdict)
	if err := row.Scan(&id); err != nil {
		if !errors.Is(err, sql.ErrNoRows) {
			return 0, false, s.unavailable("storing the run", err)
		}
		if err := tx.QueryRowContext(ctx, s.q("SELECT id FROM runs WHERE uid = ?"), r.UID).Scan(&id); err != nil {
			return 0, false, s.unavailable("finding the stored run", err)
		}
		r.ID = id
		return id, false, nil
	}
	for _, c := range rows.Configs {
		ej := c.EngineJSON
		if ej == "" {
			ej = "{}"
		}
		if _, err := tx.ExecContext(ctx, s.q("INSERT INTO configs (run_id, config, engine_version, launch_error, engine_json) VALUES (?, ?, ?, ?, ?)"),
			id, c.Name, c.EngineVersion, c.LaunchError, ej); err != nil {
			return 0, false, s.unavailable("storing config "+c.Name, err)
		}
		for _, k := range sortedKeys(c.EngineValues) {
			v := c.EngineValues[k]
			if math.IsNaN(v) || math.IsInf(v, 0) {
				continue
			}
			if _, err := tx.ExecContext(ctx, s.q("INSERT INTO engine_values (run_id, config, key, value) VALUES (?, ?, ?, ?)"), id, c.Name, k, v); err != nil {
				return 0, false, s.unavailable("storing engine values of "+c.Name, err)
			}
		}
	}
	if err := s.insertTrials(ctx, tx, id, rows.Trials); err != nil {
		return 0, false, err
	}
	if err := tx.Commit(); err != nil {
		return 0, false, s.unavailable("committing the run", err)
	}
	r.ID = id
	return id, true, nil
}

// insertTrials writes the trials in multi-row INSERTs.
func (s *Store) insertTrials(ctx context.Context, tx *sql.Tx, id int64, trials []TrialRow) error {
	const perStmt = 150 // 7 parameters a row; well under both backends' parameter limits
	var args []any
	rows := 0
	flush := func() error {
		if rows == 0 {
			return nil
		}
		q := "INSERT INTO trials (run_id, config, workload, trial_index, launch, metric, value) VALUES " +
			strings.TrimSuffix(strings.Repeat("(?, ?, ?, ?, ?, ?, ?), ", rows), ", ")
		if _, err := tx.ExecContext(ctx, s.q(q), args...); err != nil {
			return s.unavailable("storing trials", err)
		}
		args, rows = args[:0], 0
		return nil
	}
	for _, t := range trials {
		for _, k := range sortedKeys(t.Metrics) {
			v := t.Metrics[k]
			if math.IsNaN(v) || math.IsInf(v, 0) {
				continue
			}
			args = append(args, id, t.Config, t.Workload, t.Index, t.Launch, k, v)
			rows++
			if rows == perStmt {
				if err := flush(); err != nil {
					return err
				}
			}
		}
	}
	return flush()
}

// RunFilter selects runs; empty fields match everything.
type RunFilter struct {
	Testbed, Spec string
	// CommitPrefix selects runs whose commit starts with it.
	CommitPrefix string
}

// Runs returns the run rows that match f, in run order (time, then id).
func (s *Store) Runs(ctx context.Context, f RunFilter) ([]RunRow, error) {
	ctx, cancel := s.deadline(ctx)
	defer cancel()
	where, args := []string{"1=1"}, []any{}
	if f.Testbed != "" {
		where, args = append(where, "testbed_key = ?"), append(args, f.Testbed)
	}
	if f.Spec != "" {
		where, args = append(where, "spec_name = ?"), append(args, f.Spec)
	}
	if f.CommitPrefix != "" {
		where, args = append(where, "git_commit LIKE ?"), append(args, escapeLike(f.CommitPrefix)+"%")
	}
	rows, err := s.db.QueryContext(ctx, s.q(`SELECT id, uid, source, started_us, finished_us, git_commit, engine, engine_version,
		reckon_version, testbed_key, testbed_json, spec_name, spec_hash, label_filter, verdict FROM runs WHERE `+
		strings.Join(where, " AND ")+` ORDER BY started_us, id`), args...)
	if err != nil {
		return nil, s.unavailable("listing runs", err)
	}
	defer rows.Close()
	var out []RunRow
	for rows.Next() {
		var r RunRow
		var st, fin int64
		if err := rows.Scan(&r.ID, &r.UID, &r.Source, &st, &fin, &r.GitCommit, &r.Engine, &r.EngineVersion, &r.ReckonVersion,
			&r.TestbedKey, &r.TestbedJSON, &r.SpecName, &r.SpecHash, &r.LabelFilter, &r.Verdict); err != nil {
			return nil, s.unavailable("reading runs", err)
		}
		r.StartedAt, r.FinishedAt = time.UnixMicro(st).UTC(), time.UnixMicro(fin).UTC()
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, s.unavailable("reading runs", err)
	}
	return out, nil
}

func escapeLike(s string) string {
	return strings.NewReplacer("%", "", "_", "\\_").Replace(s)
}

// Rows returns one stored run's rows: the run, its configs and its trials.
func (s *Store) Rows(ctx context.Context, id int64) (*Rows, error) {
	ctx, cancel := s.deadline(ctx)
	defer cancel()
	out := &Rows{}
	r := &out.Run
	var st, fin int64
	err := s.db.QueryRowContext(ctx, s.q(`SELECT id, uid, source, started_us, finished_us, git_commit, engine, engine_version,
		reckon_version, testbed_key, testbed_json, spec_name, spec_hash, label_filter, verdict FROM runs WHERE id = ?`), id).
		Scan(&r.ID, &r.UID, &r.Source, &st, &fin, &r.GitCommit, &r.Engine, &r.EngineVersion, &r.ReckonVersion,
			&r.TestbedKey, &r.TestbedJSON, &r.SpecName, &r.SpecHash, &r.LabelFilter, &r.Verdict)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("history store %s: no run with id %d", s.where, id)
	}
	if err != nil {
		return nil, s.unavailable("reading run", err)
	}
	r.StartedAt, r.FinishedAt = time.UnixMicro(st).UTC(), time.UnixMicro(fin).UTC()
	idx := map[string]int{}
	crow, err := s.db.QueryContext(ctx, s.q("SELECT config, engine_version, launch_error, engine_json FROM configs WHERE run_id = ? ORDER BY config"), id)
	if err != nil {
		return nil, s.unavailable("reading configs", err)
	}
	for crow.Next() {
		var c ConfigRow
		if err := crow.Scan(&c.Name, &c.EngineVersion, &c.LaunchError, &c.EngineJSON); err != nil {
			crow.Close()
			return nil, s.unavailable("reading configs", err)
		}
		idx[c.Name] = len(out.Configs)
		out.Configs = append(out.Configs, c)
	}
	crow.Close()
	erow, err := s.db.QueryContext(ctx, s.q("SELECT config, key, value FROM engine_values WHERE run_id = ?"), id)
	if err != nil {
		return nil, s.unavailable("reading engine values", err)
	}
	for erow.Next() {
		var cfg, k string
		var v float64
		if err := erow.Scan(&cfg, &k, &v); err != nil {
			erow.Close()
			return nil, s.unavailable("reading engine values", err)
		}
		if i, ok := idx[cfg]; ok {
			if out.Configs[i].EngineValues == nil {
				out.Configs[i].EngineValues = map[string]float64{}
			}
			out.Configs[i].EngineValues[k] = v
		}
	}
	erow.Close()
	trow, err := s.db.QueryContext(ctx, s.q("SELECT config, workload, trial_index, launch, metric, value FROM trials WHERE run_id = ? ORDER BY config, workload, trial_index"), id)
	if err != nil {
		return nil, s.unavailable("reading trials", err)
	}
	defer trow.Close()
	for trow.Next() {
		var cfg, w, m string
		var ti, launch int
		var v float64
		if err := trow.Scan(&cfg, &w, &ti, &launch, &m, &v); err != nil {
			return nil, s.unavailable("reading trials", err)
		}
		if _, ok := idx[cfg]; !ok {
			continue
		}
		if n := len(out.Trials); n == 0 || out.Trials[n-1].Config != cfg || out.Trials[n-1].Workload != w || out.Trials[n-1].Index != ti {
			out.Trials = append(out.Trials, TrialRow{Config: cfg, Workload: w, Index: ti, Launch: launch, Metrics: map[string]float64{}})
		}
		out.Trials[len(out.Trials)-1].Metrics[m] = v
	}
	if err := trow.Err(); err != nil {
		return nil, s.unavailable("reading trials", err)
	}
	return out, nil
}

// Series returns every series that matches f, each in run order. A run's point is the median of
// its trials of that metric; Samples keeps the trials.
func (s *Store) Series(ctx context.Context, f Filter) ([]Series, error) {
	ctx, cancel := s.deadline(ctx)
	defer cancel()
	where, args := []string{"1=1"}, []any{}
	add := func(col, v string) {
		if v != "" {
			where, args = append(where, col+" = ?"), append(args, v)
		}
	}
	add("r.testbed_key", f.Testbed)
	add("r.spec_name", f.Spec)
	add("t.config", f.Config)
	add("t.metric", f.Metric)
	var out []Series
	if f.Workload == "" || f.Workload != EngineWorkload {
		w2, a2 := where, args
		if f.Workload != "" {
			w2, a2 = append(append([]string{}, where...), "t.workload = ?"), append(append([]any{}, args...), f.Workload)
		}
		q := `SELECT r.testbed_key, r.spec_name, t.config, t.workload, t.metric, r.id, r.started_us, r.git_commit, t.launch, t.value
			FROM trials t JOIN runs r ON r.id = t.run_id WHERE ` + strings.Join(w2, " AND ") + `
			ORDER BY r.testbed_key, r.spec_name, t.config, t.workload, t.metric, r.started_us, r.id, t.trial_index`
		got, err := s.scanSeries(ctx, q, a2)
		if err != nil {
			return nil, err
		}
		out = append(out, got...)
	}
	if f.Workload == "" || f.Workload == EngineWorkload {
		q := `SELECT r.testbed_key, r.spec_name, t.config, '` + EngineWorkload + `', t.key, r.id, r.started_us, r.git_commit, 0, t.value
			FROM engine_values t JOIN runs r ON r.id = t.run_id WHERE ` + strings.ReplaceAll(strings.Join(where, " AND "), "t.metric", "t.key") + `
			ORDER BY r.testbed_key, r.spec_name, t.config, t.key, r.started_us, r.id`
		got, err := s.scanSeries(ctx, q, args)
		if err != nil {
			return nil, err
		}
		out = append(out, got...)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Key.String() < out[j].Key.String() })
	return out, nil
}

func (s *Store) scanSeries(ctx context.Context, q string, args []any) ([]Series, error) {
	rows, err := s.db.QueryContext(ctx, s.q(q), args...)
	if err != nil {
		return nil, s.unavailable("reading series", err)
	}
	defer rows.Close()
	var out []Series
	var cur *Series
	for rows.Next() {
		var k SeriesKey
		var id, st int64
		var commit string
		var launch int
		var v float64
		if err := rows.Scan(&k.Testbed, &k.Spec, &k.Config, &k.Workload, &k.Metric, &id, &st, &commit, &launch, &v); err != nil {
			return nil, s.unavailable("reading series", err)
		}
		if cur == nil || cur.Key != k {
			out = append(out, Series{Key: k})
			cur = &out[len(out)-1]
		}
		if n := len(cur.Points); n == 0 || cur.Points[n-1].RunID != id {
			cur.Points = append(cur.Points, Point{RunID: id, StartedAt: time.UnixMicro(st).UTC(), Commit: commit})
		}
		p := &cur.Points[len(cur.Points)-1]
		p.Samples = append(p.Samples, v)
		p.Launches = append(p.Launches, launch)
	}
	if err := rows.Err(); err != nil {
		return nil, s.unavailable("reading series", err)
	}
	for i := range out {
		for j := range out[i].Points {
			out[i].Points[j].Value = num.Median(out[i].Points[j].Samples)
		}
	}
	return out, nil
}
