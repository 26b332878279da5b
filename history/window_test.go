package history

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/reckon-ci/reckon/gate"
)

// storeNights appends nights from..to-1 of the sampleRun shape with one launch a night around
// level(i) at 2% between-launch and 1% within-launch noise.
func storeNights(t *testing.T, s *Store, rng *rand.Rand, from, to int, level func(int) float64) {
	t.Helper()
	for i := from; i < to; i++ {
		r := sampleRun(i, fmt.Sprintf("%040x", i+1), 1)
		a := rng.NormFloat64() * 0.02
		for j := range r.Trials {
			r.Trials[j].Metrics["output_throughput"] = level(i) * math.Exp(a+rng.NormFloat64()*0.01)
		}
		if _, _, err := s.Append(ctxT(t), r); err != nil {
			t.Fatal(err)
		}
	}
}

// TestHistoryWindowOpenRegressionUntilAccepted: a 10% drop after 20 nights opens a regression:
// the reference ends where it began (the drop never becomes the reference), and it stays open
// night after night; accepting it moves the reference to the new level; a flat series has none.
func TestHistoryWindowOpenRegressionUntilAccepted(t *testing.T) {
	backends(t, func(t *testing.T, dsn string) {
		s := openT(t, dsn)
		rng := rand.New(rand.NewPCG(7, 8))
		key := SeriesKey{Testbed: "cpu-test", Spec: "default", Config: "nccl", Workload: "c8", Metric: "output_throughput"}
		stat := gate.StatOptions{Alpha: 0.02, MinEffect: 0.06, Power: 0.8, Detect: true}
		storeNights(t, s, rng, 0, 20, func(int) float64 { return 1000 })
		w, err := s.HistoryWindow(ctxT(t), key, 5, DefaultWindow, Options{}, stat)
		if err != nil {
			t.Fatal(err)
		}
		if w.Open != nil || w.Runs != 20 || w.OpenFrom != len(w.Groups) {
			t.Fatalf("flat series: open %v, %d runs, open from %d of %d", w.Open, w.Runs, w.OpenFrom, len(w.Groups))
		}
		storeNights(t, s, rng, 20, 30, func(int) float64 { return 900 })
		w, err = s.HistoryWindow(ctxT(t), key, 5, DefaultWindow, Options{}, stat)
		if err != nil {
			t.Fatal(err)
		}
		if w.Open == nil || w.Runs < 18 || w.Runs > 20 || len(w.Groups)-w.OpenFrom < 10 {
			t.Fatalf("after a 10%% drop: open %v, reference %d runs, %d since", w.Open, w.Runs, len(w.Groups)-w.OpenFrom)
		}
		if !strings.Contains(w.Describe(), "open regression since") {
			t.Errorf("describe: %s", w.Describe())
		}
		// Accepted from the drop's first night: the new level is the reference, nothing is open.
		if err := s.Accept(ctxT(t), Acceptance{Filter: Filter{Config: "nccl"}, From: w.Open.StartedAt, Commit: w.Open.Commit, Reason: "slower but correct"}); err != nil {
			t.Fatal(err)
		}
		if err := s.Accept(ctxT(t), Acceptance{Filter: Filter{Config: "nccl"}, From: time.Now()}); err == nil {
			t.Error("an acceptance without a reason was recorded")
		}
		w, err = s.HistoryWindow(ctxT(t), key, 5, DefaultWindow, Options{}, stat)
		if err != nil {
			t.Fatal(err)
		}
		if w.Open != nil || w.Accepted == nil || w.Runs > 11 || w.Runs < 9 {
			t.Fatalf("accepted: open %v, accepted %v, %d runs", w.Open, w.Accepted, w.Runs)
		}
		// Another series (another config) is not accepted by it.
		other := key
		other.Config = "custom-ar"
		if a, err := s.LatestAcceptance(ctxT(t), other); err != nil || a != nil {
			t.Errorf("acceptance of nccl matched custom-ar: %v %v", a, err)
		}
	})
}

// TestCompareNightsScanAndOpen: the nightly detector's two modes on stored runs: tonight 8%
// slower after 20 steady nights is a regression found by the scan; with an open regression,
// tonight is judged with the runs since it.
func TestCompareNightsScanAndOpen(t *testing.T) {
	m, _ := gate.MetricFor("output_throughput")
	rng := rand.New(rand.NewPCG(3, 4))
	night := func(level float64) []float64 {
		a := rng.NormFloat64() * 0.02
		xs := make([]float64, 5)
		for j := range xs {
			xs[j] = level * math.Exp(a+rng.NormFloat64()*0.01)
		}
		return xs
	}
	var runs [][]float64
	for i := 0; i < 20; i++ {
		runs = append(runs, night(1000))
	}
	opts := gate.StatOptions{Alpha: 0.02, MinEffect: 0.06, Power: 0.8, Detect: true}
	r, note, _ := gate.CompareNights(runs, len(runs), [][]float64{night(1000)}, m, opts, gate.LaunchNoise{}, 5)
	if r.Outcome != gate.NoChange || r.Detectable <= 0 || r.Detectable > 0.06 || !strings.Contains(note, "no regression over the last 1..5") {
		t.Errorf("steady night: %s detectable %.3f (%s): %s", r.Outcome, r.Detectable, r.Reason, note)
	}
	r, note, _ = gate.CompareNights(runs, len(runs), [][]float64{night(920)}, m, opts, gate.LaunchNoise{}, 5)
	if r.Outcome != gate.Regression || !strings.Contains(note, "regression over the last") {
		t.Errorf("8%% slower night: %s (%s): %s", r.Outcome, r.Reason, note)
	}
	open := append(runs, night(930), night(925), night(935))
	r, note, _ = gate.CompareNights(open, 20, [][]float64{night(930)}, m, opts, gate.LaunchNoise{}, 5)
	if r.Outcome != gate.Regression || r.Launch.LaunchesHead != 4 || !strings.Contains(note, "open regression") {
		t.Errorf("open regression: %s, %d head launches: %s", r.Outcome, r.Launch.LaunchesHead, note)
	}
	if got := gate.OpenRegression(append(open, night(930)), m, opts, gate.LaunchNoise{}, 5); got < 19 || got > 21 {
		t.Errorf("replay opened the regression at run %d, want 20", got)
	}
	if got := gate.OpenRegression(runs, m, opts, gate.LaunchNoise{}, 5); got != len(runs) {
		t.Errorf("replay of steady nights opened a regression at %d", got)
	}
}

// TestLaunchesAreStored: a run of two launches is read back as two launch groups (the unit of
// the between-launch variation), and as two launches in Rows.
func TestLaunchesAreStored(t *testing.T) {
	backends(t, func(t *testing.T, dsn string) {
		s := openT(t, dsn)
		r := sampleRun(0, "abc", 1000)
		r.Trials[0].Launch, r.Trials[1].Launch, r.Trials[2].Launch = 1, 1, 2
		if _, _, err := s.Append(ctxT(t), r); err != nil {
			t.Fatal(err)
		}
		ser, err := s.Series(ctxT(t), Filter{Config: "nccl", Workload: "c8", Metric: "output_throughput"})
		if err != nil || len(ser) != 1 || len(ser[0].Points) != 1 {
			t.Fatalf("series: %v %+v", err, ser)
		}
		if g := ser[0].Points[0].LaunchGroups(); len(g) != 2 || len(g[0]) != 2 || len(g[1]) != 1 {
			t.Errorf("launch groups %v, want 2 launches of 2 and 1 trials", g)
		}
		back, err := s.Rows(ctxT(t), 1)
		if err != nil || back.Trials[2].Launch != 2 {
			t.Errorf("rows: %v %+v", err, back)
		}
	})
}
