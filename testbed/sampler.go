package testbed

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// GPUMemory is what the sampler saw of one GPU.
type GPUMemory struct {
	Index        int   `json:"index"`
	TotalMiB     int64 `json:"total_mib"`
	FirstUsedMiB int64 `json:"first_used_mib"`
	LastUsedMiB  int64 `json:"last_used_mib"`
	PeakUsedMiB  int64 `json:"peak_used_mib"`
	Samples      int   `json:"samples"`
}

// MemoryReport is the result of a sampling run.
type MemoryReport struct {
	GPUs      []GPUMemory `json:"gpus"` // by GPU index
	Samples   int         `json:"samples"`
	Malformed int         `json:"malformed,omitempty"`
	// FirstMalformed is the first line that could not be read, for diagnosis.
	FirstMalformed string        `json:"first_malformed,omitempty"`
	Duration       time.Duration `json:"duration_ns"`
}

// PeakGiB returns the largest peak over the GPUs, in GiB (0 without samples).
func (r MemoryReport) PeakGiB() float64 {
	var peak int64
	for _, g := range r.GPUs {
		peak = max(peak, g.PeakUsedMiB)
	}
	return float64(peak) / 1024
}

// GPU returns the record of the GPU with the given index.
func (r MemoryReport) GPU(index int) (GPUMemory, bool) {
	for _, g := range r.GPUs {
		if g.Index == index {
			return g, true
		}
	}
	return GPUMemory{}, false
}

// Sampler records GPU memory use during a run, by reading
// `nvidia-smi --query-gpu=index,memory.used,memory.total --format=csv,noheader,nounits -lms N`
// (one line per GPU per interval). A command that prints one round and exits 0 is run again
// every Interval, so a plain query works too.
type Sampler struct {
	// Command is the program and arguments; nil means nvidia-smi in loop mode.
	Command []string
	// Interval is the sampling period (default 200ms).
	Interval time.Duration

	mu      sync.Mutex
	gpus    map[int]*GPUMemory
	report  MemoryReport
	changed chan struct{} // closed and replaced on every sample
	started time.Time
	cancel  context.CancelFunc
	done    chan struct{}
	err     error          // the command's failure, if it failed on its own
	errw    *limitedWriter // the current command's stderr
}

// NewSampler returns a sampler of nvidia-smi at the given interval.
func NewSampler(interval time.Duration) *Sampler { return &Sampler{Interval: interval} }

// DefaultSamplerCommand is the nvidia-smi loop for an interval.
func DefaultSamplerCommand(interval time.Duration) []string {
	ms := max(interval.Milliseconds(), 1)
	return []string{"nvidia-smi", "--query-gpu=index,memory.used,memory.total", "--format=csv,noheader,nounits", "-lms", strconv.FormatInt(ms, 10)}
}

// Start launches the sampling command; sampling runs until Stop or until ctx is done. It fails
// at once when the command cannot be started.
func (s *Sampler) Start(ctx context.Context) error {
	if s.Interval <= 0 {
		s.Interval = 200 * time.Millisecond
	}
	if len(s.Command) == 0 {
		s.Command = DefaultSamplerCommand(s.Interval)
	}
	s.mu.Lock()
	if s.done != nil {
		s.mu.Unlock()
		return errors.New("sampler: already started")
	}
	s.gpus = map[int]*GPUMemory{}
	s.changed = make(chan struct{})
	s.done = make(chan struct{})
	s.started = time.Now()
	s.mu.Unlock()
	ctx, cancel := context.WithCancel(ctx)
	s.cancel = cancel
	cmd, out, err := s.launch(ctx)
	if err != nil {
		cancel()
		close(s.done)
		return err
	}
	go s.loop(ctx, cmd, out)
	return nil
}

func (s *Sampler) launch(ctx context.Context) (*exec.Cmd, *bufio.Scanner, error) {
	cmd := exec.CommandContext(ctx, s.Command[0], s.Command[1:]...)
	ownGroup(cmd)
	cmd.WaitDelay = 2 * time.Second
	w := &limitedWriter{max: 4096}
	s.mu.Lock()
	s.errw = w
	s.mu.Unlock()
	cmd.Stderr = w
	pipe, err := cmd.StdoutPipe()
	if err != nil {
		return nil, nil, fmt.Errorf("sampler: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return nil, nil, fmt.Errorf("sampler: start %s: %w", strings.Join(s.Command, " "), err)
	}
	return cmd, bufio.NewScanner(pipe), nil
}

func (s *Sampler) loop(ctx context.Context, cmd *exec.Cmd, sc *bufio.Scanner) {
	defer close(s.done)
	for {
		for sc.Scan() {
			s.record(sc.Text())
		}
		err := cmd.Wait()
		if ctx.Err() != nil {
			return // stopped: the kill is expected
		}
		if err != nil {
			s.mu.Lock()
			msg := strings.TrimSpace(s.errw.String())
			s.err = fmt.Errorf("sampler: %s: %w: %s", strings.Join(s.Command, " "), err, msg)
			s.mu.Unlock()
			return
		}
		// A one-shot query: run it again after the interval.
		t := time.NewTimer(s.Interval)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		var lerr error
		cmd, sc, lerr = s.launch(ctx)
		if lerr != nil {
			s.mu.Lock()
			s.err = lerr
			s.mu.Unlock()
			return
		}
	}
}

// record parses "index, used, total" and updates the peaks.
func (s *Sampler) record(line string) {
	line = strings.TrimSpace(line)
	if line == "" {
		return
	}
	f := strings.Split(line, ",")
	var idx int
	var used, total int64
	var err error
	if len(f) != 3 {
		err = errors.New("want 3 fields")
	} else {
		idx, err = strconv.Atoi(strings.TrimSpace(f[0]))
		if err == nil {
			used, err = parseMiB(f[1])
		}
		if err == nil && !notReported(strings.TrimSpace(f[2])) {
			total, err = parseMiB(f[2])
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		s.report.Malformed++
		if s.report.FirstMalformed == "" {
			s.report.FirstMalformed = line
		}
		return
	}
	g := s.gpus[idx]
	if g == nil {
		g = &GPUMemory{Index: idx, FirstUsedMiB: used}
		s.gpus[idx] = g
	}
	g.TotalMiB = total
	g.LastUsedMiB = used
	g.PeakUsedMiB = max(g.PeakUsedMiB, used)
	g.Samples++
	s.report.Samples++
	close(s.changed)
	s.changed = make(chan struct{})
}

// Snapshot returns what has been recorded so far.
func (s *Sampler) Snapshot() MemoryReport {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.snapshotLocked()
}

func (s *Sampler) snapshotLocked() MemoryReport {
	r := s.report
	r.GPUs = make([]GPUMemory, 0, len(s.gpus))
	for _, g := range s.gpus {
		r.GPUs = append(r.GPUs, *g)
	}
	sort.Slice(r.GPUs, func(i, j int) bool { return r.GPUs[i].Index < r.GPUs[j].Index })
	if !s.started.IsZero() {
		r.Duration = time.Since(s.started)
	}
	return r
}

// WaitSamples blocks until at least n samples (GPU lines) have been recorded, the command has
// failed, or ctx is done. Use it to know that sampling is live before the load starts.
func (s *Sampler) WaitSamples(ctx context.Context, n int) error {
	for {
		s.mu.Lock()
		if s.done == nil {
			s.mu.Unlock()
			return errors.New("sampler: not started")
		}
		got, ch, done, err := s.report.Samples, s.changed, s.done, s.err
		s.mu.Unlock()
		if got >= n {
			return nil
		}
		if err != nil {
			return err
		}
		select {
		case <-ch:
		case <-done:
			s.mu.Lock()
			err, got = s.err, s.report.Samples
			s.mu.Unlock()
			if got >= n {
				return nil
			}
			if err == nil {
				err = errors.New("sampler: stopped")
			}
			return err
		case <-ctx.Done():
			return fmt.Errorf("sampler: waiting for %d samples (have %d): %w", n, got, ctx.Err())
		}
	}
}

// Stop ends sampling (killing the command's whole process group) and returns the report. The
// error is non-nil when the command failed on its own or never produced a sample; the report
// holds whatever was recorded either way.
func (s *Sampler) Stop() (MemoryReport, error) {
	s.mu.Lock()
	if s.done == nil {
		s.mu.Unlock()
		return MemoryReport{}, errors.New("sampler: not started")
	}
	s.mu.Unlock()
	s.cancel()
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.snapshotLocked()
	if s.err != nil {
		return r, s.err
	}
	if r.Samples == 0 {
		msg := ""
		if s.errw != nil {
			msg = strings.TrimSpace(s.errw.String())
		}
		if r.FirstMalformed != "" {
			msg = fmt.Sprintf("unreadable line %q", r.FirstMalformed)
		}
		return r, fmt.Errorf("sampler: no sample from %s in %v %s", strings.Join(s.Command, " "), r.Duration.Round(time.Millisecond), msg)
	}
	return r, nil
}

// limitedWriter keeps the first max bytes written (a command's stderr, for error messages).
type limitedWriter struct {
	mu  sync.Mutex
	buf bytes.Buffer
	max int
}

// String returns what was kept.
func (w *limitedWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// Write keeps what fits and reports everything written, so the command never blocks on it.
func (w *limitedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if room := w.max - w.buf.Len(); room > 0 {
		if len(p) > room {
			w.buf.Write(p[:room])
		} else {
			w.buf.Write(p)
		}
	}
	return len(p), nil
}
