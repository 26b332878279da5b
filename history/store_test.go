package history

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/reckon-ci/reckon/history/pgtest"
)

// pg is the throwaway PostgreSQL cluster shared by this package's tests (nil: pgSkip says why).
var (
	pg     *pgtest.Cluster
	pgSkip string
)

func TestMain(m *testing.M) {
	if os.Getenv("RECKON_HISTORY_HELPER") != "" {
		os.Exit(helperAppend())
	}
	c, err := pgtest.Start()
	if err != nil {
		pgSkip = "PostgreSQL not available: " + err.Error()
		fmt.Fprintln(os.Stderr, "history tests: "+pgSkip+"; the PostgreSQL backend tests are skipped")
		if os.Getenv("RECKON_REQUIRE_POSTGRES") != "" {
			fmt.Fprintln(os.Stderr, "RECKON_REQUIRE_POSTGRES is set: failing")
			os.Exit(1)
		}
	}
	pg = c
	code := m.Run()
	if pg != nil {
		pg.Stop()
	}
	os.Exit(code)
}

// backends runs f once per backend, each on a fresh, empty store DSN.
func backends(t *testing.T, f func(t *testing.T, dsn string)) {
	t.Run("sqlite", func(t *testing.T) {
		f(t, filepath.Join(t.TempDir(), "history.db"))
	})
	t.Run("postgres", func(t *testing.T) {
		if pg == nil {
			t.Skip(pgSkip)
		}
		dsn, err := pg.NewDatabase("reckon")
		if err != nil {
			t.Fatal(err)
		}
		f(t, dsn)
	})
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func openT(t *testing.T, dsn string) *Store {
	s, err := Open(ctxT(t), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// sampleRun is a run of night i with output_throughput around tput.
func sampleRun(i int, commit string, tput float64) *Rows {
	return &Rows{
		Run: RunRow{
			Source: SourceGate, StartedAt: time.Date(2026, 10, 1, 2, 0, 0, 0, time.UTC).Add(time.Duration(i) * 24 * time.Hour),
			GitCommit: commit, Engine: "refengine", EngineVersion: "0.1", ReckonVersion: "test",
			TestbedKey: "cpu-test", TestbedJSON: `{"gpus":0}`, SpecName: "default", SpecHash: "abc", Verdict: "PASS",
		},
		Configs: []ConfigRow{{
			Name: "nccl", EngineJSON: `{"kv_cache_tokens":290400,"allreduce":"nccl"}`,
			EngineValues: map[string]float64{"kv_cache_tokens": 290400, "kv_cache_gib": 0.14},
		}},
		Trials: []TrialRow{
			{Config: "nccl", Workload: "c8", Index: 0, Metrics: map[string]float64{"output_throughput": tput, "median_ttft_ms": 20}},
			{Config: "nccl", Workload: "c8", Index: 1, Metrics: map[string]float64{"output_throughput": tput * 1.01, "median_ttft_ms": 21}},
			{Config: "nccl", Workload: "c8", Index: 2, Metrics: map[string]float64{"output_throughput": tput * 0.99, "median_ttft_ms": 19}},
		},
	}
}

func TestParseDSN(t *testing.T) {
	for _, c := range []struct{ in, backend, where, err string }{
		{in: "out/history.db", backend: BackendSQLite, where: "out/history.db"},
		{in: "sqlite:///tmp/h.db", backend: BackendSQLite, where: "/tmp/h.db"},
		{in: "postgres://u:secret@db:5432/reckon", backend: BackendPostgres, where: "postgres://u:xxxxx@db:5432/reckon"},
		{in: "postgresql://db/reckon", backend: BackendPostgres, where: "postgresql://db/reckon"},
		{in: "", err: "empty"},
		{in: "mysql://db/x", err: `unknown scheme "mysql"`},
		{in: "sqlite://", err: "empty path"},
		{in: "a.db?mode=ro", err: "may not hold"},
	} {
		b, _, w, err := ParseDSN(c.in)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("ParseDSN(%q) error %v, want %q", c.in, err, c.err)
			}
			continue
		}
		if err != nil || b != c.backend || w != c.where {
			t.Errorf("ParseDSN(%q) = %s, %s, %v; want %s, %s", c.in, b, w, err, c.backend, c.where)
		}
	}
}

func TestMigrationsMatch(t *testing.T) {
	sq, err := Migrations(BackendSQLite)
	if err != nil {
		t.Fatal(err)
	}
	pq, err := Migrations(BackendPostgres)
	if err != nil {
		t.Fatal(err)
	}
	if len(sq) != len(pq) || len(sq) == 0 {
		t.Fatalf("sqlite has %d migrations, postgres %d", len(sq), len(pq))
	}
	for i := range sq {
		if sq[i].Name != pq[i].Name || len(splitSQL(sq[i].SQL)) != len(splitSQL(pq[i].SQL)) {
			t.Errorf("migration %d differs between backends: %s (%d statements) vs %s (%d)", i+1,
				sq[i].Name, len(splitSQL(sq[i].SQL)), pq[i].Name, len(splitSQL(pq[i].SQL)))
		}
	}
}

func TestStoreRoundTrip(t *testing.T) {
	backends(t, func(t *testing.T, dsn string) {
		s := openT(t, dsn)
		ctx := ctxT(t)
		r := sampleRun(0, "aaa111", 180)
		id, added, err := s.Append(ctx, r)
		if err != nil || !added || id == 0 {
			t.Fatalf("Append: id %d added %v err %v", id, added, err)
		}
		// Appending the same run again stores nothing new.
		again := sampleRun(0, "aaa111", 180)
		id2, added, err := s.Append(ctx, again)
		if err != nil || added || id2 != id {
			t.Fatalf("second Append: id %d (first %d) added %v err %v", id2, id, added, err)
		}
		got, err := s.Rows(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if got.Run.GitCommit != "aaa111" || got.Run.TestbedKey != "cpu-test" || !got.Run.StartedAt.Equal(r.Run.StartedAt) || got.Run.SpecHash != "abc" ||
			got.Run.UID != r.Run.UID || len(got.Configs) != 1 || len(got.TrialsOf("nccl")) != 3 || got.Configs[0].EngineValues["kv_cache_tokens"] != 290400 ||
			got.Trials[1].Metrics["output_throughput"] != 180*1.01 || !strings.Contains(got.Configs[0].EngineJSON, "allreduce") {
			t.Fatalf("round trip lost something: %+v", got)
		}
		// Reopening applies no migration twice.
		s.Close()
		s = openT(t, dsn)
		for i := 1; i < 5; i++ {
			if _, _, err := s.Append(ctx, sampleRun(i, fmt.Sprintf("c%d", i), 180+float64(i))); err != nil {
				t.Fatal(err)
			}
		}
		ser, err := s.Series(ctx, Filter{Metric: "output_throughput"})
		if err != nil {
			t.Fatal(err)
		}
		if len(ser) != 1 || len(ser[0].Points) != 5 || ser[0].Points[4].Value != 184 || len(ser[0].Points[4].Samples) != 3 ||
			ser[0].Points[4].Commit != "c4" || ser[0].Key != (SeriesKey{"cpu-test", "default", "nccl", "c8", "output_throughput"}) {
			t.Fatalf("series %+v", ser)
		}
		eng, err := s.Series(ctx, Filter{Workload: EngineWorkload})
		if err != nil {
			t.Fatal(err)
		}
		if len(eng) != 2 || eng[1].Key.Metric != "kv_cache_tokens" || len(eng[1].Points) != 5 {
			t.Fatalf("engine series %+v", eng)
		}
		all, err := s.Series(ctx, Filter{})
		if err != nil || len(all) != 4 {
			t.Fatalf("all series: %d, %v", len(all), err)
		}
		runs, err := s.Runs(ctx, RunFilter{CommitPrefix: "c3"})
		if err != nil || len(runs) != 1 || runs[0].GitCommit != "c3" {
			t.Fatalf("Runs(c3) = %+v, %v", runs, err)
		}
		if _, err := s.Rows(ctx, 9999); err == nil || !strings.Contains(err.Error(), "no run with id 9999") {
			t.Fatalf("missing run: %v", err)
		}
	})
}

func TestAppendRejectsIncompleteRun(t *testing.T) {
	s := openT(t, filepath.Join(t.TempDir(), "h.db"))
	_, _, err := s.Append(ctxT(t), &Rows{Run: RunRow{SpecName: "x"}})
	if err == nil || !strings.Contains(err.Error(), "started_at") || !strings.Contains(err.Error(), "testbed_key") {
		t.Fatalf("err %v", err)
	}
}

// helperAppend is the body of the child processes of TestConcurrentAppends.
func helperAppend() int {
	dsn := os.Getenv("RECKON_HISTORY_HELPER")
	worker, _ := strconv.Atoi(os.Getenv("RECKON_HISTORY_WORKER"))
	n, _ := strconv.Atoi(os.Getenv("RECKON_HISTORY_N"))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	s, err := Open(ctx, dsn)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer s.Close()
	for i := 0; i < n; i++ {
		r := sampleRun(worker*1000+i, fmt.Sprintf("w%d-%d", worker, i), 100+float64(i))
		if _, added, err := s.Append(ctx, r); err != nil || !added {
			fmt.Fprintln(os.Stderr, "append:", err, added)
			return 1
		}
	}
	return 0
}

func TestConcurrentAppends(t *testing.T) {
	const procs, each = 4, 10
	backends(t, func(t *testing.T, dsn string) {
		// The processes also race to create the schema: nobody opened the store before.
		var wg sync.WaitGroup
		errs := make([]error, procs)
		for w := 0; w < procs; w++ {
			wg.Add(1)
			go func(w int) {
				defer wg.Done()
				cmd := exec.Command(os.Args[0], "-test.run=^$")
				cmd.Env = append(os.Environ(), "RECKON_HISTORY_HELPER="+dsn, "RECKON_HISTORY_WORKER="+strconv.Itoa(w), "RECKON_HISTORY_N="+strconv.Itoa(each))
				if out, err := cmd.CombinedOutput(); err != nil {
					errs[w] = fmt.Errorf("worker %d: %v: %s", w, err, out)
				}
			}(w)
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			t.Fatal(err)
		}
		s := openT(t, dsn)
		runs, err := s.Runs(ctxT(t), RunFilter{})
		if err != nil {
			t.Fatal(err)
		}
		if len(runs) != procs*each {
			t.Fatalf("%d runs stored, want %d", len(runs), procs*each)
		}
		ser, err := s.Series(ctxT(t), Filter{Metric: "output_throughput"})
		if err != nil || len(ser) != 1 || len(ser[0].Points) != procs*each {
			t.Fatalf("series after concurrent appends: %v, %+v", err, ser)
		}
		for _, p := range ser[0].Points {
			if len(p.Samples) != 3 {
				t.Fatalf("run %d has %d trials, want 3", p.RunID, len(p.Samples))
			}
		}
	})
}

func TestUnreachableStore(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	start := time.Now()
	_, err := Open(ctx, "postgres://nobody@127.0.0.1:1/none?sslmode=disable&connect_timeout=2")
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("err %v, want ErrUnavailable", err)
	}
	if time.Since(start) > 5*time.Second {
		t.Fatalf("took %s", time.Since(start))
	}
	_, err = Open(ctx, filepath.Join(t.TempDir(), "no", "such", "dir", "h.db"))
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("sqlite in a missing directory: %v", err)
	}
}

// TestStoreGoesAway stops the PostgreSQL server between two appends: the second append fails
// within its deadline as ErrUnavailable, and the first run is still there after a restart.
func TestStoreGoesAway(t *testing.T) {
	if pg == nil {
		t.Skip(pgSkip)
	}
	if os.Getenv("RECKON_TEST_POSTGRES_DSN") != "" {
		t.Skip("RECKON_TEST_POSTGRES_DSN: an external server is not ours to stop")
	}
	c, err := pgtest.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	s := openT(t, c.DSN)
	if _, _, err := s.Append(ctxT(t), sampleRun(0, "before", 100)); err != nil {
		t.Fatal(err)
	}
	c.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	_, _, err = s.Append(ctx, sampleRun(1, "after", 100))
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("append to a stopped server: %v, want ErrUnavailable", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("append to a stopped server took %s", d)
	}
	t.Logf("append to a stopped server: %v (after %s)", err, time.Since(start).Round(time.Millisecond))
}
