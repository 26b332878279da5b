package suites

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/ginkgo/v2/types"
	"github.com/onsi/gomega"
	"github.com/sirupsen/logrus"

	"github.com/reckon-ci/reckon/engine"
	"github.com/reckon-ci/reckon/gate"
	"github.com/reckon-ci/reckon/reporters"
	"github.com/reckon-ci/reckon/spec"
)

// Options configure one gate run.
type Options struct {
	// SpecPath is the gate spec (YAML) to run.
	SpecPath string
	// OutDir receives engine logs, probe files, trial results and the reports.
	OutDir string
	// LabelFilter selects checks by label (Ginkgo's label-filter syntax), e.g. "memory && !eagle3".
	LabelFilter string
	// BaselineDir holds stored baselines, one folder per testbed (default "baselines").
	BaselineDir string
	// RequireBaseline makes a missing baseline a failure instead of its own outcome.
	RequireBaseline bool
	// Strict makes no_baseline, inconclusive, and checks skipped for a missing input failures.
	Strict bool
	// AllowPartial lets a label filter select a check without the other config's measurements it
	// needs: the check is skipped, saying so. Without it such a filter is bad input.
	AllowPartial bool
	// Shard runs one part of the spec's configs (Count 0: all of them); see shard.go.
	Shard Shard
	// Timeout bounds the whole run (0: no bound beyond each step's own timeouts).
	Timeout time.Duration
	// Verbose streams Ginkgo's per-spec progress.
	Verbose bool
	// Version and GitCommit are recorded in the results for provenance; GitCommitSource says
	// where the commit came from (a flag, a CI variable, git).
	Version, GitCommit, GitCommitSource string
	// Log receives the harness's own log lines.
	Log logrus.FieldLogger
	// History is the results history that checks `against: history` are judged against (nil:
	// such checks are no_baseline). cmd/reckon wires it from --history / RECKON_HISTORY.
	History HistorySource
	// BetweenLaunchCV is this testbed's prior between-launch CV, used by statistical checks
	// when nothing measures it (0: $RECKON_BETWEEN_LAUNCH_CV, else gate.DefaultBetweenLaunchCV).
	BetweenLaunchCV float64
}

// ErrInvalidInput marks errors caused by the user's input (spec, flags): exit code 2.
var ErrInvalidInput = errors.New("invalid input")

// failRecorder is the GinkgoTestingT handed to RunSpecs when the suite runs inside the reckon
// binary rather than under `go test`.
type failRecorder struct {
	mu     sync.Mutex
	failed bool
}

func (f *failRecorder) Fail() {
	f.mu.Lock()
	f.failed = true
	f.mu.Unlock()
}

// Run loads the spec, builds the Ginkgo tree from it, runs it once, and writes the reports to
// opts.OutDir. The returned Run is what the reports show; it is returned (partial, with
// Interrupted set) even when the run was interrupted. Run may be called once per process (a Ginkgo
// restriction); the integration tests start the reckon binary for each spec.
func Run(ctx context.Context, opts Options) (*gate.Run, error) {
	if opts.Log == nil {
		opts.Log = logrus.StandardLogger()
	}
	if opts.BaselineDir == "" {
		opts.BaselineDir = "baselines"
	}
	s, err := spec.Load(opts.SpecPath)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidInput, err)
	}
	// Values the engine kind would drop or could never judge are bad input, not a run-time error.
	if problems := EngineProblems(s); len(problems) > 0 {
		return nil, fmt.Errorf("%w: %w", ErrInvalidInput, problems)
	}
	if opts.LabelFilter != "" {
		if _, err := types.ParseLabelFilter(opts.LabelFilter); err != nil {
			return nil, fmt.Errorf("%w: --label-filter %q: %v", ErrInvalidInput, opts.LabelFilter, err)
		}
	}
	if err := os.MkdirAll(opts.OutDir, 0o755); err != nil {
		return nil, fmt.Errorf("create output directory: %w", err)
	}
	// Refuse a directory reckon may not clear before anything else; clear and claim it only
	// once the spec's inputs are known good (bad input leaves it as it was).
	if err := checkOutDir(opts.OutDir); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidInput, err)
	}
	claimOut := func() error {
		removed, err := claimOutDir(opts.OutDir)
		if len(removed) > 0 {
			opts.Log.Infof("--out %s: removed the previous run's %s", opts.OutDir, strings.Join(removed, ", "))
		}
		if err != nil {
			return fmt.Errorf("%w: %w", ErrInvalidInput, err)
		}
		return nil
	}
	abs, _ := filepath.Abs(opts.SpecPath)

	fw, err := newFramework(ctx, s, abs, opts)
	if err != nil {
		return nil, err
	}
	fw.applyShard()
	if fw.shardSet != nil && len(fw.shardSet) == 0 {
		// An empty shard (more shards than groups of configs): nothing to run, said so.
		if err := claimOut(); err != nil {
			return nil, err
		}
		fw.run.FinishedAt = time.Now().UTC()
		run := fw.view()
		if err := reporters.WriteAll(opts.OutDir, &run); err != nil {
			return &run, fmt.Errorf("write reports: %w", err)
		}
		return &run, nil
	}
	stopSignals := engine.StopAllOnSignalFunc(ctx, nil)
	defer stopSignals()
	defer engine.StopAll(context.Background())

	define(fw)
	if err := fw.preflight(); err != nil {
		return nil, err
	}
	if err := claimOut(); err != nil {
		return nil, err
	}

	suiteConfig, reporterConfig := ginkgo.GinkgoConfiguration()
	suiteConfig.LabelFilter = opts.LabelFilter
	suiteConfig.RandomSeed = 1
	suiteConfig.RandomizeAllSpecs = false
	if opts.Timeout > 0 {
		suiteConfig.Timeout = opts.Timeout
	} else {
		suiteConfig.Timeout = 24 * time.Hour
	}
	reporterConfig.Succinct = !opts.Verbose
	reporterConfig.Verbose = opts.Verbose
	reporterConfig.NoColor = !isTerminal(os.Stdout)

	gomega.RegisterFailHandler(ginkgo.Fail)
	t := &failRecorder{}
	ginkgo.RunSpecs(t, "reckon gate: "+s.Name, suiteConfig, reporterConfig)

	run := fw.finish()
	if err := reporters.WriteAll(opts.OutDir, run); err != nil {
		return run, fmt.Errorf("write reports: %w", err)
	}
	return run, nil
}

func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// staleReports are the reports a run writes into its output directory. A previous run's copies
// are removed before anything launches, so that a run killed before it writes its own (SIGKILL,
// a CI cancel) never leaves the last run's green junit.xml beside its own logs. Only these files
// go, and only where reckon's marker is (claimOutDir): the directory may be shared with other
// things (--out .).
var staleReports = []string{"junit.xml", "results.json", "summary.md", "report.html"}
