package history

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/reckon-ci/reckon/gate"
)

// TestUIDStable pins the UID of a run: a store written by an earlier reckon must recognise the
// same run appended again (the UIDs were computed before the rows replaced history's run type).
func TestUIDStable(t *testing.T) {
	for _, c := range []struct {
		r    *Rows
		want string
	}{
		{sampleRun(0, "aaa111", 180), "7b94c552a0c6e93a73dd4ea2a807af2d"},
		{sampleRun(3, "c3", 183), "77e10c0b74a07a07b86cd6def202a775"},
	} {
		if got := computeUID(c.r); got != c.want {
			t.Errorf("UID of %s = %s, want %s", c.r.Run.GitCommit, got, c.want)
		}
	}
}

func gateRun() *gate.Run {
	start := time.Date(2026, 10, 1, 2, 0, 0, 0, time.UTC)
	return &gate.Run{
		Schema: gate.ResultsSchema, SpecName: "default", Engine: "refengine", TestbedKey: "cpu", Testbed: map[string]any{"gpus": 0.0},
		GitCommit: "abc", StartedAt: start, FinishedAt: start.Add(time.Minute), EngineVersion: "0.1", ReckonVersion: "test",
		Configs: []gate.Config{
			{Name: "nccl", Engine: map[string]any{"kv_cache_tokens": 290400.0, "allreduce": "nccl", "nan": math.NaN()},
				GPUPeakMiB: []float64{1000, 1500}, Trials: []gate.Trial{{Workload: "c8", Index: 0, Metrics: map[string]float64{"output_throughput": 100}}}},
			{Name: "custom-ar", LaunchError: "port taken"},
		},
		Checks: []gate.Check{{Verdict: gate.Verdict{Name: "launch nccl", Kind: gate.KindHealth, Config: "nccl", Outcome: "pass"}, Status: gate.StatusPassed}},
	}
}

// TestRowsFromRunStoreRoundTrip: a gate's run becomes rows (engine numbers and the peak GPU
// memory as engine values, trials keyed by config) that the store gives back unchanged.
func TestRowsFromRunStoreRoundTrip(t *testing.T) {
	run := gateRun()
	rows := RowsFromRun(run, "hash")
	if rows.Run.Verdict != run.Verdict() || rows.Run.SpecHash != "hash" || rows.Run.TestbedJSON != `{"gpus":0}` || len(rows.Configs) != 2 {
		t.Fatalf("run row %+v", rows.Run)
	}
	ev := rows.Configs[0].EngineValues
	if ev["kv_cache_tokens"] != 290400 || ev[PeakGPUMemKey] != 1500 || len(ev) != 2 {
		t.Fatalf("engine values %v: want the finite numbers and the peak GPU memory", ev)
	}
	if rows.Configs[1].LaunchError != "port taken" || rows.Configs[1].EngineJSON != "{}" || len(rows.TrialsOf("custom-ar")) != 0 {
		t.Fatalf("config without a launch %+v", rows.Configs[1])
	}
	backends(t, func(t *testing.T, dsn string) {
		s := openT(t, dsn)
		id, added, err := s.Append(ctxT(t), RowsFromRun(run, "hash"))
		if err != nil || !added {
			t.Fatalf("Append: %v %v", added, err)
		}
		got, err := s.Rows(ctxT(t), id)
		if err != nil {
			t.Fatal(err)
		}
		// Configs come back by name.
		if got.Run.Verdict != rows.Run.Verdict || len(got.Configs) != 2 || got.Configs[0].Name != "custom-ar" || got.Configs[0].LaunchError != "port taken" ||
			got.Configs[1].EngineValues[PeakGPUMemKey] != 1500 || len(got.Trials) != 1 || got.Trials[0].Config != "nccl" || got.Trials[0].Metrics["output_throughput"] != 100 {
			t.Fatalf("round trip: %+v", got)
		}
	})
}

func TestRowsFromImport(t *testing.T) {
	in := Imported{Path: "a.json", Index: 2, Engine: "vllm", Metrics: map[string]float64{"output_throughput": 10}}
	_, err := RowsFromImport(in, ImportMeta{})
	for _, want := range []string{"a.json", "--time", "--testbed", "--spec", "--config", "--workload"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("missing provenance: %v, want %q", err, want)
		}
	}
	in.Date, in.Config, in.Commit = "2026-11-01", "from-file", "f00"
	r, err := RowsFromImport(in, ImportMeta{Testbed: "h100", Spec: "archive", Config: "nccl", Workload: "c16", ReckonVersion: "v"})
	if err != nil {
		t.Fatal(err)
	}
	if r.Run.Source != SourceImport || r.Run.GitCommit != "f00" || r.Run.StartedAt.Day() != 1 || r.Configs[0].Name != "nccl" ||
		r.Trials[0].Index != 2 || r.Trials[0].Workload != "c16" || r.Run.ReckonVersion != "v" {
		t.Fatalf("rows %+v", r)
	}
	if err := r.Validate(); err != nil {
		t.Fatal(err)
	}
	if _, err := RowsFromImport(in, ImportMeta{When: "yesterday", Testbed: "h", Spec: "s", Workload: "w"}); err == nil || !strings.Contains(err.Error(), `time "yesterday"`) {
		t.Fatalf("bad time: %v", err)
	}
	in.Metrics = nil
	if _, err := RowsFromImport(in, ImportMeta{Testbed: "h", Spec: "s", Workload: "w"}); err == nil || !strings.Contains(err.Error(), "no metrics") {
		t.Fatalf("no metrics: %v", err)
	}
}

func TestValidateTrialOfUnknownConfig(t *testing.T) {
	r := sampleRun(0, "a", 1)
	r.Trials[0].Config = "other"
	if err := r.Validate(); err == nil || !strings.Contains(err.Error(), `config "other"`) {
		t.Fatalf("Validate: %v", err)
	}
}
