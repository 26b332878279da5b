// Package profile reads torch-profiler Chrome trace files (what SGLang's /start_profile and
// vLLM's /start_profile + /stop_profile write, one per rank, usually gzip-compressed) and
// counts the allreduce kernels that actually ran, by implementation: NCCL or a custom
// allreduce (SGLang's and vLLM's cross_device_reduce kernels and their kin). It is the
// evidence for the effective allreduce backend where the log says nothing (current SGLang's
// CustomAllReduceV2 logs neither "on" nor, at TP2 over PCIe, "off").
//
// Only complete kernel events count: cat "kernel" (any case) and ph "X". Names are reduced to
// the bare function name first (BaseName: "void ", namespaces, templates and parameters go). A
// kernel whose bare name starts with "nccl" (any case) is NCCL: an NCCL allreduce when its name
// contains "AllReduce" (ncclDevKernel_AllReduce_Sum_bf16_RING_LL, older
// ncclKernel_AllReduce_RING_LL_Sum_half), another collective otherwise (AllGather,
// ReduceScatter, Broadcast, SendRecv, and NCCL's ncclDevKernel_Generic, whose collective the
// name does not say). FlashInfer's allreduce fusion kernels (allreduce_fusion_kernel_oneshot_lamport
// and kin, wire/enginefacts) are a third implementation, "fused". Any other name containing
// cross_device_reduce, all_reduce or allreduce (any case) is a custom allreduce. Everything else
// is ignored.
//
// The package never judges; Summary.Verdict reports what ran.
package profile

import (
	"bufio"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/reckon-ci/reckon/internal/safefile"
)

// MaxTraceBytes is the largest trace read, uncompressed; a larger one is refused.
const MaxTraceBytes = 512 << 20

// maxTraceBytes is MaxTraceBytes, lowered by tests.
var maxTraceBytes int64 = MaxTraceBytes

// MaxTotalTraceBytes bounds what ParseFiles reads from all its files together, uncompressed: a
// profile window writes one trace per rank, and a few large ones must not become hours of
// decompression when an engine leaves many (a gzip bomb hard-linked under many names).
const MaxTotalTraceBytes = 2 << 30

// maxTotalTraceBytes is MaxTotalTraceBytes, lowered by tests.
var maxTotalTraceBytes int64 = MaxTotalTraceBytes

// MaxKernelNames is how many distinct counted kernel names a FileCounts keeps.
const MaxKernelNames = 64

// maxCollectFiles bounds how many trace files CollectTraces returns.
const maxCollectFiles = 4096

// Verdicts of Summary.Verdict (the same words as the engine report's allreduce field).
const (
	VerdictCustom  = "custom"
	VerdictNCCL    = "nccl"
	VerdictUnknown = "unknown"
)

// Kind is what a kernel is, for counting.
type Kind int

// Kernel kinds.
const (
	// Ignored kernels are neither allreduce nor NCCL.
	Ignored Kind = iota
	// NCCLAllReduce is an NCCL allreduce kernel.
	NCCLAllReduce
	// CustomAllReduce is a custom (non-NCCL) allreduce kernel.
	CustomAllReduce
	// OtherCollective is any other NCCL kernel.
	OtherCollective
)

// FileCounts is what one trace file holds.
type FileCounts struct {
	// Path is the trace file.
	Path string `json:"path"`
	// Rank is distributedInfo.rank, else the N of a "-TP-N" file name (SGLang's), else -1.
	Rank int `json:"rank"`
	// NCCLAllReduce counts NCCL allreduce kernels.
	NCCLAllReduce int `json:"nccl_allreduce"`
	// CustomAllReduce counts custom allreduce kernels.
	CustomAllReduce int `json:"custom_allreduce"`
	// FusedAllReduce counts FlashInfer allreduce fusion kernels.
	FusedAllReduce int `json:"fused_allreduce,omitempty"`
	// OtherCollectives counts the other NCCL kernels.
	OtherCollectives int `json:"other_collectives"`
	// Kernels are the distinct names of the counted kernels, in first-seen order, at most
	// MaxKernelNames (KernelsTruncated then says more were seen).
	Kernels          []string `json:"kernels"`
	KernelsTruncated bool     `json:"kernels_truncated,omitempty"`
	// Events is the number of trace events read.
	Events int `json:"events"`
}

// Summary adds up the files of one profiling window.
type Summary struct {
	// Files are the per-file counts, in the order given.
	Files []FileCounts `json:"files"`
	// NCCLAllReduce, CustomAllReduce, FusedAllReduce and OtherCollectives are the totals over
	// Files.
	NCCLAllReduce    int `json:"nccl_allreduce"`
	CustomAllReduce  int `json:"custom_allreduce"`
	FusedAllReduce   int `json:"fused_allreduce,omitempty"`
	OtherCollectives int `json:"other_collectives"`
	// Skipped are the files ParseTraces could not read (a truncated trace), left out of the
	// counts.
	Skipped []SkippedFile `json:"skipped,omitempty"`
}

// Verdict is the allreduce implementation that ran. An implementation counts as having run
// when it has at least MinShare of the window's allreduce kernels (fewer are outliers, named by
// String, never the verdict). Then "fused" when FlashInfer allreduce fusion ran (it replaces
// the allreduce of the layers it fuses; the rest go to NCCL or custom allreduce), else "custom"
// when custom allreduce ran (engines with it on still send tensors too large for it to NCCL, so
// NCCL kernels beside custom ones do not mean it was off), else "nccl"; "unknown" when no
// allreduce kernel ran in the window (nothing was profiled, TP 1, or a kernel name this package
// does not know).
func (s *Summary) Verdict() string {
	total := s.NCCLAllReduce + s.CustomAllReduce + s.FusedAllReduce
	switch {
	case ran(s.FusedAllReduce, total):
		return VerdictFused
	case ran(s.CustomAllReduce, total):
		return VerdictCustom
	case ran(s.NCCLAllReduce, total):
		return VerdictNCCL
	}
	return VerdictUnknown
}

// Ranks is the number of distinct ranks the files come from (files of unknown rank count one
// each).
func (s *Summary) Ranks() int {
	seen := map[int]bool{}
	n := 0
	for _, f := range s.Files {
		if f.Rank < 0 {
			n++
			continue
		}
		if !seen[f.Rank] {
			seen[f.Rank] = true
			n++
		}
	}
	return n
}

// String is one line, e.g. "122 custom / 0 NCCL allreduce kernels on 4 ranks".
func (s *Summary) String() string {
	r := s.Ranks()
	unit := "ranks"
	if r == 1 {
		unit = "rank"
	}
	out := fmt.Sprintf("%d custom / %d NCCL allreduce kernels on %d %s", s.CustomAllReduce, s.NCCLAllReduce, r, unit)
	if s.FusedAllReduce > 0 {
		out = fmt.Sprintf("%d FlashInfer allreduce fusion / ", s.FusedAllReduce) + out
	}
	if s.OtherCollectives > 0 {
		out += fmt.Sprintf(" (%d other NCCL collective kernels)", s.OtherCollectives)
	}
	for _, o := range s.outliers() {
		out += "; " + o
	}
	if n := len(s.Skipped); n > 0 {
		out += fmt.Sprintf("; %d unreadable trace file(s) skipped (%s: %s)", n, s.Skipped[0].Path, s.Skipped[0].Reason)
	}
	return out
}

// Add adds one file's counts.
func (s *Summary) Add(f FileCounts) {
	s.Files = append(s.Files, f)
	s.NCCLAllReduce += f.NCCLAllReduce
	s.CustomAllReduce += f.CustomAllReduce
	s.FusedAllReduce += f.FusedAllReduce
	s.OtherCollectives += f.OtherCollectives
}

// ParseFiles parses every file and adds them up; the first error stops it (ctx too, checked
// on every read). Together the files may hold at most MaxTotalTraceBytes uncompressed.
func ParseFiles(ctx context.Context, paths []string) (*Summary, error) {
	s := &Summary{Files: []FileCounts{}}
	budget := safefile.NewBudget(maxTotalTraceBytes)
	for _, p := range paths {
		fc, err := parseFile(ctx, p, budget)
		if err != nil {
			return nil, err
		}
		s.Add(*fc)
	}
	return s, nil
}

// ParseFile parses one trace file: JSON, or gzip-compressed JSON (by its magic bytes, whatever
// its name). A file larger than MaxTraceBytes uncompressed is refused. The file is opened as
// safefile.Open does: a symbolic link, a FIFO or anything else not a regular file is refused
// without blocking.
func ParseFile(ctx context.Context, path string) (*FileCounts, error) {
	return parseFile(ctx, path, nil)
}

func parseFile(ctx context.Context, path string, budget *safefile.Budget) (*FileCounts, error) {
	f, err := safefile.Open(path)
	if err != nil {
		return nil, fmt.Errorf("trace file: %w", err)
	}
	defer f.Close()
	br := bufio.NewReaderSize(f, 1<<16)
	var r io.Reader = br
	if magic, _ := br.Peek(2); len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("trace file %s: gzip: %w", path, err)
		}
		defer zr.Close()
		r = zr
	}
	fc, err := parse(ctx, r, path, budget)
	if err != nil {
		return nil, err
	}
	if fc.Rank < 0 {
		fc.Rank = rankFromName(path)
	}
	return fc, nil
}

var tpRankRE = regexp.MustCompile(`(?i)[-_.]TP[-_]?(\d+)[-_.]`)

func rankFromName(path string) int {
	if m := tpRankRE.FindStringSubmatch(filepath.Base(path)); m != nil {
		if n, err := strconv.Atoi(m[1]); err == nil {
			return n
		}
	}
	return -1
}

// ErrTooLarge is the cause of Parse's error for a trace over MaxTraceBytes uncompressed.
var ErrTooLarge = errors.New("trace larger than the limit")

// limitReader fails once more than max bytes were read.
type limitReader struct {
	r    io.Reader
	n    int64
	max  int64
	name string
}

func (l *limitReader) Read(p []byte) (int, error) {
	n, err := l.r.Read(p)
	l.n += int64(n)
	if l.n > l.max {
		return n, fmt.Errorf("trace file %s: more than %d bytes (%d MiB) uncompressed, refusing to read it (%w)", l.name, l.max, l.max>>20, ErrTooLarge)
	}
	return n, err
}

// event is the part of a trace event the counts need. ts, dur, args and the rest are not
// decoded, so their types (a string "ts" in some exporters) do not matter.
type event struct {
	Ph   string `json:"ph"`
	Cat  string `json:"cat"`
	Name string `json:"name"`
}

// Parse reads one Chrome trace from r (name is used in counts and errors): the object form
// {"traceEvents": [...], "distributedInfo": {"rank": R}, ...} or a bare array of events.
// Bad JSON is an error naming the file, the byte offset (in the uncompressed stream) of the
// value that failed, and what was expected there.
func Parse(ctx context.Context, r io.Reader, name string) (*FileCounts, error) {
	return parse(ctx, r, name, nil)
}

// parse is Parse, its uncompressed bytes also taken from budget (nil: none) and every read
// stopped once ctx is done.
func parse(ctx context.Context, r io.Reader, name string, budget *safefile.Budget) (*FileCounts, error) {
	lr := &limitReader{r: safefile.Reader(ctx, r, budget, "trace file "+name), max: maxTraceBytes, name: name}
	dec := json.NewDecoder(lr)
	fc := &FileCounts{Path: name, Rank: -1, Kernels: []string{}}
	seen := map[string]bool{}
	fail := func(what string, err error) error {
		if errors.Is(err, ErrTooLarge) || errors.Is(err, safefile.ErrTooLarge) || ctx.Err() != nil && errors.Is(err, context.Cause(ctx)) {
			return err
		}
		// The offset of the value that failed (the decoder's own SyntaxError offsets are
		// relative to its buffer, not to the file).
		off := dec.InputOffset()
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return fmt.Errorf("trace file %s: at byte %d: %s: %w", name, off, what, err)
	}
	events := func() error {
		tok, err := dec.Token()
		if err != nil {
			return fail(`expected the "traceEvents" array`, err)
		}
		if d, ok := tok.(json.Delim); !ok || d != '[' {
			return fail(`expected the "traceEvents" array`, gotToken(tok))
		}
		return eventsAfterOpen(ctx, dec, fc, seen, fail)
	}
	tok, err := dec.Token()
	if err != nil {
		return nil, fail("expected a Chrome trace (a JSON object or array)", err)
	}
	switch tok {
	case json.Delim('['): // a bare array of events
		if err := eventsAfterOpen(ctx, dec, fc, seen, fail); err != nil {
			return nil, err
		}
	case json.Delim('{'):
		sawEvents := false
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return nil, fail("expected a key of the trace object", err)
			}
			key, _ := kt.(string)
			switch key {
			case "traceEvents":
				if err := events(); err != nil {
					return nil, err
				}
				sawEvents = true
			case "distributedInfo":
				var di struct {
					Rank *json.Number `json:"rank"`
				}
				if err := dec.Decode(&di); err != nil {
					return nil, fail(`expected "distributedInfo" to be an object with a numeric "rank"`, err)
				}
				if di.Rank != nil {
					if n, err := di.Rank.Int64(); err == nil && n >= 0 {
						fc.Rank = int(n)
					}
				}
			default:
				var skip json.RawMessage
				if err := dec.Decode(&skip); err != nil {
					return nil, fail(fmt.Sprintf("expected the value of %q", safefile.Excerpt(key)), err)
				}
			}
		}
		if _, err := dec.Token(); err != nil {
			return nil, fail("expected the end of the trace object", err)
		}
		if !sawEvents {
			return nil, fmt.Errorf("trace file %s: no \"traceEvents\" array: not a Chrome trace", name)
		}
	default:
		return nil, fail("expected a Chrome trace (a JSON object or array)", gotToken(tok))
	}
	// Trailing garbage after the trace.
	if _, err := dec.Token(); err != io.EOF {
		if err == nil {
			err = errors.New("more JSON after the trace")
		}
		return nil, fail("expected the end of the file", err)
	}
	for i, k := range fc.Kernels {
		fc.Kernels[i] = safefile.Excerpt(k)
	}
	return fc, nil
}

// gotToken says what token was found where another was expected, quoting at most an excerpt of
// a string (a trace can hold a string of any length where the event array belongs).
func gotToken(tok json.Token) error {
	if s, ok := tok.(string); ok {
		return fmt.Errorf("got the string %q", safefile.Excerpt(s))
	}
	return fmt.Errorf("got %v", tok)
}

// eventsAfterOpen reads a bare event array whose '[' was consumed.
func eventsAfterOpen(ctx context.Context, dec *json.Decoder, fc *FileCounts, seen map[string]bool, fail func(string, error) error) error {
	for dec.More() {
		if fc.Events%4096 == 0 {
			if err := ctx.Err(); err != nil {
				return fmt.Errorf("trace file %s: %w", fc.Path, err)
			}
		}
		var ev event
		if err := dec.Decode(&ev); err != nil {
			return fail(fmt.Sprintf("expected trace event %d (an object with string ph, cat, name)", fc.Events), err)
		}
		fc.Events++
		count(fc, seen, ev)
	}
	if _, err := dec.Token(); err != nil {
		return fail("expected the end of the event array", err)
	}
	return nil
}

func count(fc *FileCounts, seen map[string]bool, ev event) {
	if ev.Ph != "X" || !strings.EqualFold(ev.Cat, "kernel") {
		return
	}
	switch Classify(ev.Name) {
	case NCCLAllReduce:
		fc.NCCLAllReduce++
	case CustomAllReduce:
		fc.CustomAllReduce++
	case FusedAllReduce:
		fc.FusedAllReduce++
	case OtherCollective:
		fc.OtherCollectives++
	default:
		return
	}
	if seen[ev.Name] {
		return
	}
	if len(fc.Kernels) >= MaxKernelNames {
		fc.KernelsTruncated = true
		return
	}
	seen[ev.Name] = true
	fc.Kernels = append(fc.Kernels, ev.Name)
}

// CollectTraces returns the trace files (names ending in .json or .json.gz, e.g. SGLang's
// {id}-TP-{rank}.trace.json.gz and vLLM's {worker}.{ms}.pt.trace.json.gz) under dir, at any
// depth, modified at or after since (zero: any time), sorted by path. vLLM's front-end CPU trace
// ({host}_{pid}.async_llm.*, IsFrontendTrace) is not a rank and is left out. Symlinks are not
// followed. At most 4096 files; more is an error.
func CollectTraces(dir string, since time.Time) ([]string, error) {
	var out []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if path == dir {
				return err
			}
			return nil // an unreadable subdirectory: skip it
		}
		if d.IsDir() || !d.Type().IsRegular() {
			return nil
		}
		name := strings.ToLower(d.Name())
		if !strings.HasSuffix(name, ".json") && !strings.HasSuffix(name, ".json.gz") || IsFrontendTrace(path) {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return nil // removed meanwhile
		}
		if !since.IsZero() && info.ModTime().Before(since) {
			return nil
		}
		if len(out) >= maxCollectFiles {
			return fmt.Errorf("more than %d trace files", maxCollectFiles)
		}
		out = append(out, path)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("collect traces in %s: %w", dir, err)
	}
	sort.Strings(out)
	return out, nil
}
