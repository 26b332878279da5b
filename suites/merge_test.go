package suites

import (
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/sirupsen/logrus"

	"github.com/reckon-ci/reckon/gate"
	"github.com/reckon-ci/reckon/reporters"
	"github.com/reckon-ci/reckon/spec"
)

// The shards in testdata/shards/ab are the two results.json of
//
//	reckon gate --spec fixtures/specs/ab.yaml --shard I/2 --shard-by config
//
// (config main in shard 1, pr in shard 2; pr is the slow build, so the merge is red). The tests
// tamper with copies of them; the spec digest is set to the current ab.yaml's on load, so that
// an edit of the spec does not break them.

const abSpecPath = "../fixtures/specs/ab.yaml"

type rawShard = map[string]any

// abShards returns the two shards as decoded JSON.
func abShards(t *testing.T) [2]rawShard {
	t.Helper()
	s, err := spec.Load(abSpecPath)
	if err != nil {
		t.Fatal(err)
	}
	var out [2]rawShard
	for i := range out {
		b, err := os.ReadFile(filepath.Join("testdata", "shards", "ab", string(rune('1'+i)), "results.json"))
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, &out[i]); err != nil {
			t.Fatal(err)
		}
		out[i]["spec_digest"] = s.Digest()
	}
	return out
}

// writeShards writes the shards into fresh directories and returns them.
func writeShards(t *testing.T, shards [2]rawShard) []string {
	t.Helper()
	var dirs []string
	for _, sh := range shards {
		d := t.TempDir()
		b, err := json.Marshal(sh)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, reporters.JSONFile), b, 0o644); err != nil {
			t.Fatal(err)
		}
		dirs = append(dirs, d)
	}
	return dirs
}

func quietLog() logrus.FieldLogger {
	l := logrus.New()
	l.SetOutput(io.Discard)
	return l
}

func mergeShards(t *testing.T, shards [2]rawShard, opts MergeOptions) (*gate.Run, string, error) {
	t.Helper()
	opts.Dirs = writeShards(t, shards)
	opts.OutDir = t.TempDir()
	if opts.SpecPath == "" {
		opts.SpecPath = abSpecPath
	}
	opts.BaselineDir = t.TempDir()
	opts.Log = quietLog()
	run, err := Merge(opts)
	return run, opts.OutDir, err
}

// configOf returns config name's object in a shard.
func configOf(t *testing.T, sh rawShard, name string) map[string]any {
	t.Helper()
	for _, c := range sh["configs"].([]any) {
		if m := c.(map[string]any); m["name"] == name {
			return m
		}
	}
	t.Fatalf("no config %s", name)
	return nil
}

// checkOf returns check name's object in a shard.
func checkOf(t *testing.T, sh rawShard, name string) map[string]any {
	t.Helper()
	for _, c := range sh["checks"].([]any) {
		if m := c.(map[string]any); m["name"] == name {
			return m
		}
	}
	t.Fatalf("no check %q", name)
	return nil
}

func dropCheck(sh rawShard, name string) {
	var keep []any
	for _, c := range sh["checks"].([]any) {
		if c.(map[string]any)["name"] != name {
			keep = append(keep, c)
		}
	}
	sh["checks"] = keep
}

func findCheck(r *gate.Run, name string) *gate.Check {
	for i := range r.Checks {
		if r.Checks[i].Name == name {
			return &r.Checks[i]
		}
	}
	return nil
}

func TestMergeOfUntamperedShards(t *testing.T) {
	run, _, err := mergeShards(t, abShards(t), MergeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n := run.Count()
	if n.Failed != 1 || n.Errors != 0 {
		t.Errorf("counts %+v, want the one failed throughput check", n)
	}
	for _, c := range run.Checks {
		if c.Kind == mergeKind {
			t.Errorf("untampered shards flagged: %s", c.Message)
		}
	}
	if run.SpecDigest == "" {
		t.Error("merged run has no spec digest")
	}
}

// A shard's log_path is never opened: the log tail merge shows comes from the results.
func TestMergeNeverOpensTheLogPathAShardNames(t *testing.T) {
	t.Setenv("RECKON_TEST_SECRET", "s3cr3t-token-value")
	secret := filepath.Join(t.TempDir(), "secret.log")
	if err := os.WriteFile(secret, []byte("SECRET-FROM-OUTSIDE-THE-SHARD\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/proc/self/environ", secret, "../../../../proc/self/environ"} {
		sh := abShards(t)
		pr := configOf(t, sh[1], "pr")
		pr["launch_error"] = "engine exited with status 1"
		pr["log_path"] = path
		pr["log_tail"] = "the tail recorded in results.json"
		run, out, err := mergeShards(t, sh, MergeOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var all strings.Builder
		for _, f := range []string{"summary.md", "junit.xml", "report.html", "results.json"} {
			b, err := os.ReadFile(filepath.Join(out, f))
			if err != nil {
				t.Fatal(err)
			}
			all.Write(b)
		}
		b, _ := json.Marshal(run)
		all.Write(b)
		for _, leak := range []string{"s3cr3t-token-value", "SECRET-FROM-OUTSIDE-THE-SHARD"} {
			if strings.Contains(all.String(), leak) {
				t.Errorf("log_path %s: the merged reports contain %q read from outside the shard", path, leak)
			}
		}
		if !strings.Contains(all.String(), "the tail recorded in results.json") {
			t.Errorf("log_path %s: the recorded log tail is not shown", path)
		}
	}
}

func TestReadShardFileStaysInsideTheShard(t *testing.T) {
	dir := t.TempDir()
	outside := filepath.Join(t.TempDir(), "outside.json")
	if err := os.WriteFile(outside, []byte(`{}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "numerics"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "numerics", "ok.json"), []byte(`{"x":1}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(dir, "numerics", "link.json")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("ok.json", filepath.Join(dir, "numerics", "inner.json")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "numerics", "big.json"), make([]byte, 100), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "numerics", "dir.json"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "numerics", "fifo.json"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		rel, want string
	}{
		{"numerics/ok.json", ""},
		{"numerics/inner.json", "symbolic link"}, // no link is followed, even inside the shard
		{outside, "not a path inside the directory"},
		{"../" + filepath.Base(outside), "not a path inside the directory"},
		{"numerics/../../x", "not a path inside the directory"},
		{"numerics/link.json", "symbolic link"},
		{"numerics/fifo.json", "not a regular file (a FIFO)"}, // refused at once, never waited on
		{"numerics/big.json", "more than the 50"},
		{"numerics/dir.json", "not a regular file"},
		{"numerics/absent.json", "no such file"},
	} {
		_, err := readShardFile(dir, tc.rel, 50)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.rel, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: error %v, want %q", tc.rel, err, tc.want)
		}
	}
}

// The numerics probe is read from the shard's numerics/CONFIG.json only, never from the path
// numerics_file names.
func TestMergeReadsNumericsOnlyFromTheShard(t *testing.T) {
	sh := abShards(t)
	outside := filepath.Join(t.TempDir(), "main.json")
	if err := os.WriteFile(outside, []byte(`{"prompts":[]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	configOf(t, sh[0], "main")["numerics_file"] = outside
	dirs := writeShards(t, sh)
	s, err := spec.Load(abSpecPath)
	if err != nil {
		t.Fatal(err)
	}
	shards, err := readShards(dirs)
	if err != nil {
		t.Fatal(err)
	}
	cs := &configState{name: "main", trials: map[string][]map[string]float64{}, trialLaunch: map[string][]int{}, measErr: map[string]error{}}
	replay(cs, &shards[0], s)
	if cs.probe != nil || cs.probeErr == nil || !strings.Contains(cs.probeErr.Error(), filepath.Join(dirs[0], "numerics", "main.json")) {
		t.Errorf("probe %v, error %v: want the shard's own numerics/main.json, which is absent", cs.probe, cs.probeErr)
	}
	// A link from the shard's numerics/ to the file outside is refused too.
	if err := os.MkdirAll(filepath.Join(dirs[0], "numerics"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(dirs[0], "numerics", "main.json")); err != nil {
		t.Fatal(err)
	}
	cs.probe, cs.probeErr = nil, nil
	replay(cs, &shards[0], s)
	if cs.probe != nil || cs.probeErr == nil || !strings.Contains(cs.probeErr.Error(), "symbolic link") {
		t.Errorf("through a link: probe %v, error %v", cs.probe, cs.probeErr)
	}
}

// A shard job that leaves a FIFO where merge reads (numerics/CONFIG.json, results.json) cannot
// hang the merge: the FIFO is refused at once (os.Open would wait for a writer forever).
func TestMergeRefusesFIFOsInAShard(t *testing.T) {
	sh := abShards(t)
	configOf(t, sh[0], "main")["numerics_file"] = "numerics/main.json"
	dirs := writeShards(t, sh)
	s, err := spec.Load(abSpecPath)
	if err != nil {
		t.Fatal(err)
	}
	shards, err := readShards(dirs)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dirs[0], "numerics"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(dirs[0], "numerics", "main.json"), 0o644); err != nil {
		t.Fatal(err)
	}
	cs := &configState{name: "main", trials: map[string][]map[string]float64{}, trialLaunch: map[string][]int{}, measErr: map[string]error{}}
	replay(cs, &shards[0], s)
	if cs.probe != nil || cs.probeErr == nil || !strings.Contains(cs.probeErr.Error(), "not a regular file (a FIFO)") {
		t.Errorf("numerics FIFO: probe %v, error %v", cs.probe, cs.probeErr)
	}
	res := filepath.Join(dirs[1], reporters.JSONFile)
	if err := os.Remove(res); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(res, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := readShards(dirs); err == nil || !strings.Contains(err.Error(), "not a regular file (a FIFO)") || !strings.Contains(err.Error(), dirs[1]) {
		t.Errorf("results.json FIFO: %v", err)
	}
}

func TestMergeRefusesShardsThatDoNotMatchTheSpec(t *testing.T) {
	grown := filepath.Join(t.TempDir(), "ab.yaml")
	b, err := os.ReadFile(abSpecPath)
	if err != nil {
		t.Fatal(err)
	}
	src := strings.Replace(string(b), "  - name: pr\n", "  - name: extra\n    command: [bin/refengine]\n  - name: pr\n", 1)
	if err := os.WriteFile(grown, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		tamper func(sh [2]rawShard)
		opts   MergeOptions
		want   string
	}{
		{"a failing check deleted", func(sh [2]rawShard) { dropCheck(sh[0], "floor kv_cache_tokens >= 1000") },
			MergeOptions{}, `the spec's check "floor kv_cache_tokens >= 1000" of config main is missing`},
		{"a deferred check deleted", func(sh [2]rawShard) { dropCheck(sh[1], "relative pr kv_cache_tokens >= 0.9 x main") },
			MergeOptions{}, `the spec's check "relative pr kv_cache_tokens >= 0.9 x main" is missing`},
		{"the launch check deleted", func(sh [2]rawShard) { dropCheck(sh[1], "pr: launch and readiness") },
			MergeOptions{}, `config pr has no "pr: launch and readiness" check`},
		{"a shard emptied of its config", func(sh [2]rawShard) { sh[1]["configs"] = []any{} },
			MergeOptions{}, "config pr is assigned to shard 2/2 but absent from its configs[]"},
		{"a shard claims another assignment", func(sh [2]rawShard) { sh[0]["shard"].(map[string]any)["configs"] = []any{} },
			MergeOptions{}, "lists configs [], the spec assigns it [main]"},
		{"a check the spec does not have", func(sh [2]rawShard) {
			sh[0]["checks"] = append(sh[0]["checks"].([]any), map[string]any{"name": "floor invented", "kind": "floor", "config": "main", "outcome": "pass", "status": "passed"})
		}, MergeOptions{}, `check "floor invented" (kind floor, config "main") is not a check of the spec`},
		{"a check listed twice", func(sh [2]rawShard) {
			sh[0]["checks"] = append(sh[0]["checks"].([]any), checkOf(t, sh[0], "floor kv_cache_tokens >= 1000"))
		}, MergeOptions{}, "listed twice"},
		{"a per-config check deferred", func(sh [2]rawShard) {
			c := checkOf(t, sh[0], "floor kv_cache_tokens >= 1000")
			c["outcome"], c["status"] = "deferred", "skipped"
		}, MergeOptions{}, "only cross-config checks are left to merge"},
		{"another spec version", func(sh [2]rawShard) { sh[1]["spec_digest"] = "sha256:0000" },
			MergeOptions{}, "spec_digest sha256:0000"},
		{"no spec digest", func(sh [2]rawShard) { delete(sh[1], "spec_digest") },
			MergeOptions{}, "no spec_digest"},
		{"the spec gained a config no shard ran", func([2]rawShard) {},
			MergeOptions{SpecPath: grown}, "the shard ran another version of the spec"},
		{"shards of different commits", func(sh [2]rawShard) { sh[1]["git_commit"] = "1111111111111111111111111111111111111111" },
			MergeOptions{}, "the shards ran different commits"},
		{"different label filters", func(sh [2]rawShard) { sh[1]["label_filter"] = "memory" },
			MergeOptions{}, "every shard must select the same checks"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sh := abShards(t)
			tc.tamper(sh)
			_, _, err := mergeShards(t, sh, tc.opts)
			if err == nil || !errors.Is(err, ErrInvalidInput) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want bad input with %q", err, tc.want)
			}
		})
	}
}

func TestMergeAllowMixedCommitsIsRed(t *testing.T) {
	sh := abShards(t)
	sh[1]["git_commit"] = "1111111111111111111111111111111111111111"
	run, _, err := mergeShards(t, sh, MergeOptions{AllowMixed: true})
	if err != nil {
		t.Fatal(err)
	}
	c := findCheck(run, "merge: every shard ran one commit")
	if c == nil || c.Status != gate.StatusFailed || !strings.Contains(c.Message, "1111111111111111111111111111111111111111 (shard 2/2)") {
		t.Fatalf("mixed commits: %+v", c)
	}
}

// Outcomes a shard states are judged again from the evidence its results carry.
func TestMergeRejudgesFlippedOutcomes(t *testing.T) {
	for _, tc := range []struct {
		name, check string
		tamper      func(t *testing.T, sh [2]rawShard)
		want        gate.Check // Status and Outcome of the merged check
	}{
		{"a floor passed on a failing engine report", "floor kv_cache_tokens >= 1000", func(t *testing.T, sh [2]rawShard) {
			configOf(t, sh[0], "main")["engine"].(map[string]any)["kv_cache_tokens"] = 10
		}, gate.Check{Status: gate.StatusFailed}},
		{"a failed floor flipped to passed", "floor kv_cache_tokens >= 1000", func(t *testing.T, sh [2]rawShard) {
			configOf(t, sh[0], "main")["engine"].(map[string]any)["kv_cache_tokens"] = 10
			c := checkOf(t, sh[0], "floor kv_cache_tokens >= 1000")
			c["outcome"], c["status"], c["message"] = "pass", "passed", "main: fine"
		}, gate.Check{Status: gate.StatusFailed}},
		{"a failure whose status says passed", "main: engine log shows no errors", func(t *testing.T, sh [2]rawShard) {
			c := checkOf(t, sh[0], "main: engine log shows no errors")
			c["outcome"], c["status"] = "fail", "passed"
		}, gate.Check{Status: gate.StatusFailed}},
		{"a launch that failed recorded as ready", "main: launch and readiness", func(t *testing.T, sh [2]rawShard) {
			configOf(t, sh[0], "main")["launch_error"] = "engine exited with status 1"
		}, gate.Check{Status: gate.StatusError}},
		{"a measurement passed without trials", "main: throughput trials (decode)", func(t *testing.T, sh [2]rawShard) {
			configOf(t, sh[0], "main")["trials"] = []any{}
		}, gate.Check{Status: gate.StatusError}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sh := abShards(t)
			tc.tamper(t, sh)
			run, _, err := mergeShards(t, sh, MergeOptions{})
			if err != nil {
				t.Fatal(err)
			}
			c := findCheck(run, tc.check)
			if c == nil || c.Status != tc.want.Status {
				t.Errorf("%s: %+v, want status %s", tc.check, c, tc.want.Status)
			}
			m := findCheck(run, "merge: the shards' stated outcomes agree with their evidence")
			if m == nil || m.Status != gate.StatusFailed || !strings.Contains(m.Details, tc.check) {
				t.Errorf("no disagreement reported for %s: %+v", tc.check, m)
			}
		})
	}
}

// Found by FuzzVerifyShards: a shard claiming count 0 crashed merge's shard plan (index out of
// range), and a count of 10^12 would allocate a slot per shard. Both are refused, naming the file.
func TestMergeRefusesImpossibleShardNumbers(t *testing.T) {
	for _, count := range []any{0, -1, 1e12} {
		shards := abShards(t)
		shards[1]["shard"].(map[string]any)["count"] = count
		_, _, err := mergeShards(t, shards, MergeOptions{})
		if err == nil || !strings.Contains(err.Error(), "results.json: shard") || !strings.Contains(err.Error(), "<= 1024") {
			t.Errorf("count %v: %v", count, err)
		}
	}
}

// Merge rebuilds a config's measurement errors from the evidence its shard recorded
// (configs[].measurement_errors), not from the names of its measurement checks: a failed
// measurement under a name that no name pattern of the suites produces still reaches the checks
// that use the measurement, and the merged results record it again.
func TestMergeMeasurementErrorFromStructuredFields(t *testing.T) {
	const throughput = "throughput pr decode output_throughput vs main"
	failMeasurement := func(t *testing.T, sh [2]rawShard) {
		c := checkOf(t, sh[1], "pr: throughput trials (decode), launch 3 of 3")
		c["name"] = "pr: the third go at it"
		c["outcome"], c["status"], c["message"] = "error", "error", "pr: trial 1 of launch 3: engine exited with status 137"
	}
	t.Run("recorded", func(t *testing.T) {
		sh := abShards(t)
		failMeasurement(t, sh)
		configOf(t, sh[1], "pr")["measurement_errors"] = []any{map[string]any{"workload": "decode", "error": "pr: trial 1 of launch 3: engine exited with status 137"}}
		run, _, err := mergeShards(t, sh, MergeOptions{})
		if err != nil {
			t.Fatal(err)
		}
		c := findCheck(run, throughput)
		if c == nil || c.Status != gate.StatusError || !strings.Contains(c.Message, "status 137") {
			t.Fatalf("%s: %+v, want the measurement's error", throughput, c)
		}
		var pr *gate.Config
		for i := range run.Configs {
			if run.Configs[i].Name == "pr" {
				pr = &run.Configs[i]
			}
		}
		if pr == nil || len(pr.MeasurementErrors) != 1 || pr.MeasurementErrors[0].Workload != "decode" {
			t.Fatalf("merged config pr: %+v, want its measurement error recorded", pr)
		}
	})
	t.Run("only the check says it (results of an earlier reckon)", func(t *testing.T) {
		sh := abShards(t)
		failMeasurement(t, sh)
		run, _, err := mergeShards(t, sh, MergeOptions{})
		if err != nil {
			t.Fatal(err)
		}
		// Every launch left trials, so the error cannot be placed: it goes to each workload of
		// the config rather than letting the check judge trials its shard called incomplete.
		if c := findCheck(run, throughput); c == nil || c.Status != gate.StatusError || !strings.Contains(c.Message, "status 137") {
			t.Fatalf("%s: %+v, want the measurement's error", throughput, c)
		}
	})
	t.Run("a recorded error names another workload", func(t *testing.T) {
		sh := abShards(t)
		configOf(t, sh[1], "pr")["measurement_errors"] = []any{map[string]any{"workload": "prefill", "error": "pr: prefill failed"}}
		run, _, err := mergeShards(t, sh, MergeOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if c := findCheck(run, throughput); c == nil || c.Status != gate.StatusFailed {
			t.Fatalf("%s: %+v, want it judged on decode's trials (failed: pr is slower)", throughput, c)
		}
	})
}

// A shard's numerics probe with a key twice is refused, naming the key: encoding/json would keep
// the last without a word.
func TestMergeRefusesDuplicateKeysInAShardProbe(t *testing.T) {
	sh := abShards(t)
	configOf(t, sh[0], "main")["numerics_file"] = "numerics/main.json"
	dirs := writeShards(t, sh)
	s, err := spec.Load(abSpecPath)
	if err != nil {
		t.Fatal(err)
	}
	shards, err := readShards(dirs)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dirs[0], "numerics"), 0o755); err != nil {
		t.Fatal(err)
	}
	probe := `{"schema": "reckon.numerics/v1", "config": "main", "top_k": 5, "prompts": [], "config": "other"}`
	if err := os.WriteFile(filepath.Join(dirs[0], "numerics", "main.json"), []byte(probe), 0o644); err != nil {
		t.Fatal(err)
	}
	cs := &configState{name: "main", trials: map[string][]map[string]float64{}, trialLaunch: map[string][]int{}, measErr: map[string]error{}}
	replay(cs, &shards[0], s)
	if cs.probe != nil || cs.probeErr == nil || !strings.Contains(cs.probeErr.Error(), `duplicate key "config"`) || !strings.Contains(cs.probeErr.Error(), "main.json") {
		t.Errorf("probe %v, error %v", cs.probe, cs.probeErr)
	}
}

// reckon merge never overwrites a results.json another tool wrote in its --out.
func TestMergeRefusesAForeignResultsFile(t *testing.T) {
	sh := abShards(t)
	out := t.TempDir()
	foreign := `{"results": {"gsm8k": {"exact_match": 0.42}}}`
	if err := os.WriteFile(filepath.Join(out, reporters.JSONFile), []byte(foreign), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Merge(MergeOptions{Dirs: writeShards(t, sh), OutDir: out, SpecPath: abSpecPath, BaselineDir: t.TempDir(), Log: quietLog()})
	if !errors.Is(err, ErrInvalidInput) || !strings.Contains(err.Error(), "not a reckon results file") {
		t.Fatalf("merge into a foreign --out: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(out, reporters.JSONFile)); string(b) != foreign {
		t.Errorf("the foreign results.json was overwritten: %.200s", b)
	}
}
