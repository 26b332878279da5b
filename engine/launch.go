package engine

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/sirupsen/logrus"
)

// Defaults for LaunchOptions fields left zero.
const (
	DefaultReadyTimeout   = 20 * time.Minute
	DefaultStopGrace      = 15 * time.Second
	DefaultPortRetries    = 3
	DefaultHealthInterval = 250 * time.Millisecond
	// killWait bounds how long Stop waits for the group to vanish after SIGKILL.
	killWait = 10 * time.Second
	// tailLines is how many log lines an Instance keeps in memory for LogTail.
	tailLines = 400
)

// ReadyMode says which signals make an engine ready.
type ReadyMode int

const (
	// ReadyHTTP (the default) needs a 200 from the adapter's health path and then a 200 from
	// GET ModelsPath (/v1/models, which both engines serve). The adapter's ready log line is
	// recorded (Instance.ReadyLineSeen) but never required: engines launched with
	// --log-level warning (SGLang) or VLLM_LOGGING_LEVEL=WARNING / --uvicorn-log-level warning
	// (vLLM) print no ready line at all. Current SGLang answers /health 503 while starting and
	// runs a one-token generation once up; vLLM serves HTTP only after its engine is initialised.
	ReadyHTTP ReadyMode = iota
	// ReadyBoth needs the adapter's ready log line and a 200 from its health path. Old SGLang
	// answered /health before its warmup finished; the line comes after.
	ReadyBoth
	// ReadyHealth needs only a 200 from the health path.
	ReadyHealth
	// ReadyLogLine needs only the ready log line.
	ReadyLogLine
	// ReadyEither takes whichever of the health 200 and the ready line comes first.
	ReadyEither
)

// LaunchOptions configures Launch.
type LaunchOptions struct {
	// Config is the engine configuration; Port 0 picks a free port.
	Config LaunchConfig
	// LogPath receives the engine's stdout and stderr (created with its directory,
	// truncated). A failed attempt's log is kept as LogPath.attemptN.
	LogPath string
	// ReadyTimeout bounds the wait for readiness (default DefaultReadyTimeout).
	ReadyTimeout time.Duration
	// StopGrace is the time between SIGTERM and SIGKILL (default DefaultStopGrace).
	StopGrace time.Duration
	// PortRetries is how many more ports are tried when the port is taken (default
	// DefaultPortRetries; negative means none).
	PortRetries int
	// Logger receives lifecycle events (default logrus.StandardLogger()).
	Logger logrus.FieldLogger
	// Ready selects the readiness signals (default ReadyHTTP).
	Ready ReadyMode
	// HealthInterval is the health polling period (default DefaultHealthInterval).
	HealthInterval time.Duration
}

// ErrPortInUse is the cause of a LaunchError when the engine could not bind its port.
var ErrPortInUse = errors.New("address already in use")

// LaunchError is an infrastructure failure of Launch (the engine did not start, exited, did
// not become ready in time, or no port could be bound). Suites report it as a JUnit error
// with LogTail attached, never as a regression.
type LaunchError struct {
	// Op is what failed: "config", "start", "exited", "ready timeout", "port", "canceled".
	Op string
	// Cause is the underlying error.
	Cause error
	// Argv is the command line that was run.
	Argv []string
	// LogPath is the engine log of the last attempt.
	LogPath string
	// LogTail holds the last lines of the engine log.
	LogTail string
	// ExitCode is the engine's exit status; -1 when it had not exited or died by a signal.
	ExitCode int
	// Attempts is the number of launch attempts made.
	Attempts int
}

func (e *LaunchError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "launch engine: %s", e.Op)
	if e.Cause != nil {
		fmt.Fprintf(&b, ": %v", e.Cause)
	}
	if e.ExitCode >= 0 {
		fmt.Fprintf(&b, " (exit code %d)", e.ExitCode)
	}
	if e.Attempts > 1 {
		fmt.Fprintf(&b, " after %d attempts", e.Attempts)
	}
	if e.LogPath != "" {
		fmt.Fprintf(&b, "; log %s", e.LogPath)
	}
	if t := strings.TrimSpace(e.LogTail); t != "" {
		fmt.Fprintf(&b, "\n--- last log lines ---\n%s", t)
	}
	return b.String()
}

func (e *LaunchError) Unwrap() error { return e.Cause }

var addrInUseRE = regexp.MustCompile(`(?i)address already in use|Errno 98\b|EADDRINUSE|port \d+ is (?:already )?(?:in use|not available|occupied)`)

// Launch starts the engine described by opts with adapter a, under a supervisor that contains
// its whole process tree even if the harness dies (on Linux; see supervise_linux.go and
// docs/reliability.md), in its own process group, with stdout and stderr in opts.LogPath, on
// a free port (retrying with another port when the port is taken), and waits until it is
// ready. It fails early, with a *LaunchError carrying the log tail, when the engine exits,
// when opts.ReadyTimeout passes or when ctx is done; the engine's whole tree is stopped before
// such an error is returned. Cancelling ctx after Launch returned stops the engine.
func Launch(ctx context.Context, a Adapter, opts LaunchOptions) (*Instance, error) {
	if a == nil {
		return nil, &LaunchError{Op: "config", Cause: errors.New("no adapter"), ExitCode: -1}
	}
	if opts.LogPath == "" {
		return nil, &LaunchError{Op: "config", Cause: errors.New("log path: expected a file path, got nothing"), ExitCode: -1}
	}
	if opts.ReadyTimeout <= 0 {
		opts.ReadyTimeout = DefaultReadyTimeout
	}
	if opts.StopGrace <= 0 {
		opts.StopGrace = DefaultStopGrace
	}
	if opts.PortRetries == 0 {
		opts.PortRetries = DefaultPortRetries
	} else if opts.PortRetries < 0 {
		opts.PortRetries = 0
	}
	if opts.HealthInterval <= 0 {
		opts.HealthInterval = DefaultHealthInterval
	}
	if opts.Logger == nil {
		opts.Logger = logrus.StandardLogger()
	}
	tried := map[int]bool{}
	attempts := 1 + opts.PortRetries
	var lastErr *LaunchError
	for attempt := 1; attempt <= attempts; attempt++ {
		cfg := opts.Config
		port, err := choosePort(cfg.Host, cfg.Port, tried)
		if err != nil {
			return nil, &LaunchError{Op: "port", Cause: err, ExitCode: -1, Attempts: attempt}
		}
		tried[port] = true
		cfg.Port = port
		if attempt > 1 && lastErr != nil {
			// Keep the failed attempt's log next to the new one.
			_ = os.Rename(opts.LogPath, fmt.Sprintf("%s.attempt%d", opts.LogPath, attempt-1))
		}
		inst, err := start(ctx, a, cfg, opts)
		if err != nil {
			var le *LaunchError
			if errors.As(err, &le) {
				le.Attempts = attempt
			}
			return nil, err
		}
		err = inst.waitReady(ctx, opts)
		if err == nil {
			opts.Logger.WithFields(logrus.Fields{"engine": a.Name(), "pid": inst.pid, "url": inst.BaseURL(), "ready_line": inst.ReadyLineSeen()}).Info("engine ready")
			go func() {
				select {
				case <-ctx.Done():
					sctx, cancel := context.WithTimeout(context.Background(), opts.StopGrace+killWait)
					defer cancel()
					if err := inst.Stop(sctx); err != nil {
						opts.Logger.WithError(err).Warn("stopping engine after cancellation")
					}
				case <-inst.stopDone:
				}
			}()
			return inst, nil
		}
		sctx, cancel := context.WithTimeout(context.Background(), opts.StopGrace+killWait)
		stopErr := inst.Stop(sctx)
		cancel()
		var le *LaunchError
		if !errors.As(err, &le) {
			return nil, err
		}
		le.Attempts = attempt
		le.LogTail = inst.LogTail(60)
		if stopErr != nil {
			le.Cause = errors.Join(le.Cause, stopErr)
		}
		if le.Op == "port" && attempt < attempts {
			opts.Logger.WithFields(logrus.Fields{"engine": a.Name(), "port": port}).Warn("engine port taken; retrying on another port")
			lastErr = le
			continue
		}
		return nil, le
	}
	return nil, lastErr
}

func connectHost(h string) string {
	switch h {
	case "", "0.0.0.0", "::", "[::]":
		return "127.0.0.1"
	}
	return h
}

func bindHost(h string) string {
	if h == "" {
		return "127.0.0.1"
	}
	return strings.Trim(h, "[]")
}

// choosePort returns want when it is free and untried, otherwise a free port from the kernel.
func choosePort(host string, want int, tried map[int]bool) (int, error) {
	if want > 0 && !tried[want] {
		if l, err := net.Listen("tcp", net.JoinHostPort(bindHost(host), strconv.Itoa(want))); err == nil {
			_ = l.Close()
			return want, nil
		}
	}
	for range 20 {
		l, err := net.Listen("tcp", net.JoinHostPort(bindHost(host), "0"))
		if err != nil {
			return 0, fmt.Errorf("find a free port on %s: %w", bindHost(host), err)
		}
		p := l.Addr().(*net.TCPAddr).Port
		_ = l.Close()
		if !tried[p] {
			return p, nil
		}
	}
	return 0, fmt.Errorf("find a free port on %s: kernel kept returning tried ports", bindHost(host))
}

func start(ctx context.Context, a Adapter, cfg LaunchConfig, opts LaunchOptions) (*Instance, error) {
	argv, err := a.Command(cfg)
	if err != nil {
		return nil, &LaunchError{Op: "config", Cause: err, ExitCode: -1}
	}
	if len(argv) == 0 {
		return nil, &LaunchError{Op: "config", Cause: errors.New("adapter returned an empty command"), ExitCode: -1}
	}
	fail := func(cause error) *LaunchError {
		return &LaunchError{Op: "start", Cause: cause, Argv: argv, LogPath: opts.LogPath, ExitCode: -1}
	}
	if err := os.MkdirAll(filepath.Dir(opts.LogPath), 0o755); err != nil {
		return nil, fail(fmt.Errorf("create log directory: %w", err))
	}
	logFile, err := createLog(opts.LogPath)
	if err != nil {
		return nil, fail(err)
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		_ = logFile.Close()
		return nil, fail(fmt.Errorf("create output pipe: %w", err))
	}
	i := &Instance{
		adapter: a, cfg: cfg, argv: argv, logPath: opts.LogPath, grace: opts.StopGrace,
		logFile: logFile, exited: make(chan struct{}), exitCode: -1,
		readerDone: make(chan struct{}), readyLine: make(chan struct{}), addrInUse: make(chan struct{}),
		stopDone: make(chan struct{}), supDone: make(chan struct{}), statusDone: make(chan struct{}),
	}
	env := mergeEnv(os.Environ(), cfg.Env)
	if supervisorSupported {
		err = i.startSupervised(ctx, pw, env, opts)
	} else {
		err = i.startDirect(pw, env)
	}
	_ = pw.Close()
	if err != nil {
		_ = pr.Close()
		_ = logFile.Close()
		return nil, fail(err)
	}
	if i.log == nil {
		i.log = opts.Logger.WithFields(logrus.Fields{"engine": a.Name(), "pid": i.pid, "port": cfg.Port})
	}
	register(i)
	i.log.WithFields(logrus.Fields{"argv": strings.Join(argv, " "), "log": opts.LogPath, "containment": i.mech}).Info("engine started")
	go i.pump(pr)
	return i, nil
}

// createLog creates the engine log at path without following a symlink or writing through a
// hard link that is already there: a new file is created next to it and renamed into place.
func createLog(path string) (*os.File, error) {
	if st, err := os.Lstat(path); err == nil && st.IsDir() {
		return nil, fmt.Errorf("engine log %s: is a directory, expected a file path", path)
	}
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return nil, fmt.Errorf("create engine log %s: %w", path, err)
	}
	if err := f.Chmod(0o644); err == nil {
		err = os.Rename(f.Name(), path)
		if err == nil {
			return f, nil
		}
		_ = f.Close()
		_ = os.Remove(f.Name())
		return nil, fmt.Errorf("create engine log %s: %w", path, err)
	}
	_ = f.Close()
	_ = os.Remove(f.Name())
	return nil, fmt.Errorf("create engine log %s: chmod: %w", path, err)
}

// startDirect starts the engine as the harness's own child (platforms without the supervisor).
func (i *Instance) startDirect(out *os.File, env []string) error {
	cmd := exec.Command(i.argv[0], i.argv[1:]...)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.Env = env
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", i.argv[0], err)
	}
	i.cmd, i.pid, i.mech = cmd, cmd.Process.Pid, "pgroup"
	go func() {
		err := cmd.Wait()
		i.exitErr = err
		if cmd.ProcessState != nil {
			i.exitCode = cmd.ProcessState.ExitCode()
		}
		close(i.exited)
		close(i.supDone)
	}()
	return nil
}

func mergeEnv(base []string, extra map[string]string) []string {
	if len(extra) == 0 {
		return base
	}
	keys := make([]string, 0, len(extra))
	for k := range extra {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]string, 0, len(base)+len(keys))
	for _, kv := range base {
		k, _, _ := strings.Cut(kv, "=")
		if _, ok := extra[k]; !ok {
			out = append(out, kv)
		}
	}
	for _, k := range keys {
		out = append(out, k+"="+extra[k])
	}
	return out
}
