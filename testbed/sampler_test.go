package testbed

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// script writes an executable shell script and returns its path.
func script(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "fake-smi.sh")
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func waitCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestSamplerLoopRecordsPeaksAndKillsTheGroup(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "pid")
	// Like `nvidia-smi -lms`: one line per GPU per round, forever. GPU0 climbs to 5000 MiB then
	// falls back; GPU1 stays at 50. The background sleep is a child that must die with the script.
	sh := script(t, `echo $$ > `+pidFile+`
sleep 300 >/dev/null 2>&1 &
i=0
while true; do
  if [ $i -lt 10 ]; then u=$((i*500+500)); else u=100; fi
  echo "0, $u, 143771"
  echo "1, 50, 143771"
  i=$((i+1))
  sleep 0.01
done
`)
	s := &Sampler{Command: []string{sh}, Interval: 10 * time.Millisecond}
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := s.WaitSamples(waitCtx(t), 30); err != nil {
		t.Fatal(err)
	}
	r, err := s.Stop()
	if err != nil {
		t.Fatal(err)
	}
	g0, ok0 := r.GPU(0)
	g1, ok1 := r.GPU(1)
	if !ok0 || !ok1 || len(r.GPUs) != 2 {
		t.Fatalf("report = %+v", r)
	}
	if g0.PeakUsedMiB != 5000 || g0.FirstUsedMiB != 500 || g0.LastUsedMiB != 100 || g0.TotalMiB != 143771 {
		t.Errorf("GPU0 = %+v", g0)
	}
	if g1.PeakUsedMiB != 50 || g1.Samples < 15 {
		t.Errorf("GPU1 = %+v", g1)
	}
	if r.Samples != g0.Samples+g1.Samples || r.Malformed != 0 {
		t.Errorf("samples %d = %d + %d, malformed %d", r.Samples, g0.Samples, g1.Samples, r.Malformed)
	}
	if got := r.PeakGiB(); got != 5000.0/1024 {
		t.Errorf("PeakGiB = %v", got)
	}
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pgid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	// SIGKILL is delivered asynchronously: give the kernel a bounded time to finish the group.
	deadline := time.Now().Add(5 * time.Second)
	for live := liveInGroup(t, pgid); len(live) > 0; live = liveInGroup(t, pgid) {
		if time.Now().After(deadline) {
			t.Fatalf("processes of group %d alive after Stop: %v", pgid, live)
		}
		time.Sleep(5 * time.Millisecond) // polling a readiness condition, bounded by the deadline
	}
}

// liveInGroup lists the processes of a process group that are not zombies (from /proc).
func liveInGroup(t *testing.T, pgid int) []string {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	var live []string
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue // exited meanwhile
		}
		// pid (comm) state ppid pgrp ...: comm may hold spaces, so split after the last ')'.
		s := string(b)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(f) > 2 && f[2] == strconv.Itoa(pgid) && f[0] != "Z" && f[0] != "X" {
			live = append(live, e.Name()+" "+s[:strings.LastIndexByte(s, ')')+1])
		}
	}
	return live
}

func TestSamplerRerunsOneShotQueries(t *testing.T) {
	counter := filepath.Join(t.TempDir(), "n")
	// A plain query (no -lms): prints one round and exits; the sampler runs it again.
	sh := script(t, `n=$(cat `+counter+` 2>/dev/null || echo 0); n=$((n+1)); echo $n > `+counter+`
echo "0, $((n*10)), 80000"
`)
	s := &Sampler{Command: []string{sh}, Interval: time.Millisecond}
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := s.WaitSamples(waitCtx(t), 4); err != nil {
		t.Fatal(err)
	}
	r, err := s.Stop()
	if err != nil {
		t.Fatal(err)
	}
	if g, _ := r.GPU(0); g.Samples < 4 || g.PeakUsedMiB < 40 || g.FirstUsedMiB != 10 {
		t.Errorf("GPU0 = %+v", g)
	}
}

func TestSamplerCommandFailure(t *testing.T) {
	sh := script(t, `echo "0, 1000, 80000"
echo "0, [N/A], 80000"
echo "Unable to determine the device handle for GPU0000:00:06.0: Unknown Error" >&2
exit 3
`)
	s := &Sampler{Command: []string{sh}}
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	err := s.WaitSamples(waitCtx(t), 100)
	if err == nil || !strings.Contains(err.Error(), "exit status 3") || !strings.Contains(err.Error(), "Unknown Error") {
		t.Errorf("WaitSamples = %v", err)
	}
	r, err := s.Stop()
	if err == nil || !strings.Contains(err.Error(), "Unable to determine the device handle") {
		t.Errorf("Stop error = %v", err)
	}
	// What was read before the failure is kept.
	if r.Samples != 1 || r.Malformed != 1 || r.FirstMalformed != "0, [N/A], 80000" {
		t.Errorf("report = %+v", r)
	}
}

func TestSamplerNoSample(t *testing.T) {
	sh := script(t, "echo garbage\nexec sleep 30\n")
	s := &Sampler{Command: []string{sh}}
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if err := s.WaitSamples(ctx, 1); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("WaitSamples = %v", err)
	}
	r, err := s.Stop()
	if err == nil || !strings.Contains(err.Error(), `sampler: no sample from`) || !strings.Contains(err.Error(), `unreadable line "garbage"`) {
		t.Errorf("Stop = %v", err)
	}
	if r.Malformed != 1 {
		t.Errorf("report = %+v", r)
	}
}

func TestSamplerStartErrorsAndParentCancel(t *testing.T) {
	s := &Sampler{Command: []string{filepath.Join(t.TempDir(), "no-such-smi")}}
	if err := s.Start(context.Background()); err == nil || !strings.Contains(err.Error(), "sampler: start") {
		t.Errorf("Start = %v", err)
	}
	if _, err := (&Sampler{}).Stop(); err == nil {
		t.Error("Stop before Start succeeded")
	}

	ctx, cancel := context.WithCancel(context.Background())
	s = &Sampler{Command: []string{script(t, "while true; do echo '3, 7, 9'; sleep 0.01; done\n")}}
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.Start(ctx); err == nil {
		t.Error("second Start succeeded")
	}
	if err := s.WaitSamples(waitCtx(t), 2); err != nil {
		t.Fatal(err)
	}
	cancel() // the run's context ends: sampling stops, the report stays readable
	r, err := s.Stop()
	if err != nil {
		t.Fatal(err)
	}
	if g, ok := r.GPU(3); !ok || g.PeakUsedMiB != 7 || g.TotalMiB != 9 {
		t.Errorf("report = %+v", r)
	}
}

func TestDefaultSamplerCommand(t *testing.T) {
	got := strings.Join(DefaultSamplerCommand(250*time.Millisecond), " ")
	if got != "nvidia-smi --query-gpu=index,memory.used,memory.total --format=csv,noheader,nounits -lms 250" {
		t.Errorf("command = %q", got)
	}
}

// TestSamplerCapturedLoop feeds the captured `-lms 200` output of the H200 machines through
// the sampler.
func TestSamplerCapturedLoop(t *testing.T) {
	for _, f := range []string{"h200x2/mem-lms.csv", "h200/mem-loop.csv"} {
		path, err := filepath.Abs(filepath.Join(fixtures, f))
		if err != nil {
			t.Fatal(err)
		}
		s := &Sampler{Command: []string{"sh", "-c", `cat "$0"; exec sleep 30`, path}}
		if err := s.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		n := strings.Count(readFixture(t, f), "\n")
		if err := s.WaitSamples(waitCtx(t), n); err != nil {
			t.Fatal(err)
		}
		r, err := s.Stop()
		if err != nil {
			t.Fatal(err)
		}
		if len(r.GPUs) != 2 || r.Samples != n || r.GPUs[1].TotalMiB != 143771 {
			t.Errorf("%s: %+v", f, r)
		}
	}
}
