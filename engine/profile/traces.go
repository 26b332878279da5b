package profile

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/reckon-ci/reckon/internal/safefile"
)

// SkippedFile is a trace file left out of a Summary, with why.
type SkippedFile struct {
	Path   string `json:"path"`
	Reason string `json:"reason"`
}

// ParseTraces parses every file and adds up those it can read: a truncated or otherwise
// unreadable file (a rank still flushing, a torn write) is skipped and listed in
// Summary.Skipped, so one bad rank does not discard the others. Together the files may hold at
// most maxTotalTraceBytes uncompressed (as ParseFiles). It is an error when ctx ends or when no
// file could be read.
func ParseTraces(ctx context.Context, paths []string) (*Summary, error) {
	s := &Summary{Files: []FileCounts{}}
	budget := safefile.NewBudget(maxTotalTraceBytes)
	for _, p := range paths {
		fc, err := parseFile(ctx, p, budget)
		if err != nil {
			if ctx.Err() != nil {
				return nil, err
			}
			reason := err.Error()
			if errors.Is(err, io.ErrUnexpectedEOF) {
				reason = "truncated (still being written?): " + reason
			}
			s.Skipped = append(s.Skipped, SkippedFile{Path: p, Reason: reason})
			continue
		}
		s.Add(*fc)
	}
	if len(s.Files) == 0 && len(s.Skipped) > 0 {
		return s, fmt.Errorf("no trace file could be read (%d skipped; first: %s: %s)", len(s.Skipped), s.Skipped[0].Path, s.Skipped[0].Reason)
	}
	return s, nil
}

// Existing is the trace files a directory held before a profiling window (Snapshot): a file
// still the same afterwards (size and modification time) is not the window's, which matters when
// several configs or launches share one directory (a user's own VLLM_TORCH_PROFILER_DIR).
type Existing map[string]fileState

// Snapshot records the trace files under dir (CollectTraces) as they are now; a missing dir is
// an empty snapshot.
func Snapshot(dir string) Existing {
	files, err := CollectTraces(dir, time.Time{})
	if err != nil {
		return Existing{}
	}
	return Existing(snapshot(files))
}

// SettleOptions bound WaitTraces.
type SettleOptions struct {
	// Existing are files to leave out while they are unchanged (Snapshot before the window).
	Existing Existing
	// Ranks is how many rank traces (files that are not vLLM's front-end trace) to wait for;
	// 0 waits for at least one.
	Ranks int
	// Poll is the interval between looks (0: 100 ms).
	Poll time.Duration
}

// onPoll, when set by tests, runs after each look at the directory.
var onPoll func(n int)

// WaitTraces waits until the traces under dir (CollectTraces, modified at or after since, less
// opts.Existing files that did not change) have settled: at least opts.Ranks rank traces exist, and no file appeared, vanished or changed size
// or modification time between two consecutive looks. It returns the files and true once
// settled; when ctx ends first, the files of the last look and false (the caller parses them,
// and ParseTraces skips a file still being written). An unreadable dir is an error.
func WaitTraces(ctx context.Context, dir string, since time.Time, opts SettleOptions) ([]string, bool, error) {
	poll := opts.Poll
	if poll <= 0 {
		poll = 100 * time.Millisecond
	}
	want := max(opts.Ranks, 1)
	var prev map[string]fileState
	var files []string
	t := time.NewTimer(0)
	defer t.Stop()
	for n := 0; ; n++ {
		select {
		case <-ctx.Done():
			return files, false, nil
		case <-t.C:
		}
		all, err := CollectTraces(dir, since)
		if err != nil {
			return nil, false, err
		}
		cur := snapshot(all)
		files = nil
		for _, f := range all {
			if old, ok := opts.Existing[f]; ok && old == cur[f] {
				delete(cur, f)
				continue
			}
			files = append(files, f)
		}
		if onPoll != nil {
			onPoll(n)
		}
		ranks := 0
		for _, f := range files {
			if !IsFrontendTrace(f) {
				ranks++
			}
		}
		if ranks >= want && prev != nil && sameState(prev, cur) {
			return files, true, nil
		}
		prev = cur
		t.Reset(poll)
	}
}

type fileState struct {
	size int64
	mod  time.Time
}

func snapshot(files []string) map[string]fileState {
	m := make(map[string]fileState, len(files))
	for _, f := range files {
		if st, err := os.Lstat(f); err == nil {
			m[f] = fileState{st.Size(), st.ModTime()}
		}
	}
	return m
}

func sameState(a, b map[string]fileState) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}
