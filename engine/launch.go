package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
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

// ModelsPath is the OpenAI-compatible model list both engines serve; ReadyHTTP needs its 200.
const ModelsPath = "/v1/models"

// readyProbeTimeout is the deadline of one readiness HTTP request.
const readyProbeTimeout = 5 * time.Second

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

// Instance is a running engine started by Launch.
type Instance struct {
	adapter Adapter
	cfg     LaunchConfig
	argv    []string
	logPath string
	grace   time.Duration
	log     logrus.FieldLogger

	cmd     *exec.Cmd // the supervisor (or, where there is none, the engine itself)
	pid     int       // the engine's pid, also its process group id
	logFile *os.File

	// Supervised launches (Linux): the supervisor's control pipe, its exit, what it contains
	// the engine with, and whether it reported the engine's tree gone.
	supervised bool
	ctlMu      sync.Mutex
	control    *os.File
	supDone    chan struct{}
	mech       string
	cgDir      string
	gone       atomic.Bool
	statusDone chan struct{} // closed when the supervisor's status pipe is read to its end

	exited   chan struct{}
	exitErr  error
	exitCode int

	readerDone chan struct{}
	readyLine  chan struct{}
	addrInUse  chan struct{}

	mu   sync.Mutex
	tail []string

	stopOnce sync.Once
	stopDone chan struct{}
	stopErr  error
}

// BaseURL is the engine's HTTP address, e.g. "http://127.0.0.1:30000".
func (i *Instance) BaseURL() string {
	return "http://" + net.JoinHostPort(connectHost(i.cfg.Host), strconv.Itoa(i.cfg.Port))
}

// Pid is the engine's process id (also its process group id).
func (i *Instance) Pid() int { return i.pid }

// SupervisorPid is the pid of the supervisor that contains the engine's process tree (0 where
// engines run without one).
func (i *Instance) SupervisorPid() int {
	if !i.supervised {
		return 0
	}
	return i.cmd.Process.Pid
}

// Containment says how the engine's process tree is contained: "cgroup v2 DIR +
// subreaper+pgroup", "subreaper+pgroup (cgroup v2 not used: WHY)", or "pgroup" where there is
// no supervisor.
func (i *Instance) Containment() string { return i.mech }

// Port is the port the engine listens on.
func (i *Instance) Port() int { return i.cfg.Port }

// Argv is the command line the engine was started with.
func (i *Instance) Argv() []string { return append([]string(nil), i.argv...) }

// LogPath is the engine's log file.
func (i *Instance) LogPath() string { return i.logPath }

// Config is the configuration the engine was launched with (Port filled in).
func (i *Instance) Config() LaunchConfig { return i.cfg }

// Adapter is the adapter the engine was launched with.
func (i *Instance) Adapter() Adapter { return i.adapter }

// ReadyLineSeen reports whether the adapter's ready log line has appeared in the engine's
// output so far (corroboration of HTTP readiness; false when the engine logs at WARNING).
func (i *Instance) ReadyLineSeen() bool {
	select {
	case <-i.readyLine:
		return true
	default:
		return false
	}
}

// Report parses the engine log written so far.
func (i *Instance) Report() (*Report, error) {
	f, err := os.Open(i.logPath)
	if err != nil {
		return nil, fmt.Errorf("engine report: %w", err)
	}
	defer f.Close()
	rep, err := i.adapter.ParseLog(f)
	if err != nil {
		return nil, fmt.Errorf("engine report %s: %w", i.logPath, err)
	}
	return rep, nil
}

// Exited is closed when the engine's main process has exited.
func (i *Instance) Exited() <-chan struct{} { return i.exited }

// ExitErr is the main process's exit error (nil while running or after a clean exit).
func (i *Instance) ExitErr() error {
	select {
	case <-i.exited:
		return i.exitErr
	default:
		return nil
	}
}

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

// kill skips the rest of the grace: SIGKILL to the engine's whole tree now.
func (i *Instance) kill() {
	if i.supervised {
		i.sendControl("kill")
		return
	}
	signalGroup(i.pid, syscall.SIGKILL)
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

func (i *Instance) waitReady(ctx context.Context, opts LaunchOptions) error {
	timer := time.NewTimer(opts.ReadyTimeout)
	defer timer.Stop()
	tick := time.NewTicker(opts.HealthInterval)
	defer tick.Stop()
	client := &http.Client{Timeout: readyProbeTimeout}
	healthPath := i.adapter.HealthPath()
	needModels := opts.Ready == ReadyHTTP
	healthOK, modelsOK, lineOK := healthPath == "", false, false
	healthState, modelsState := "not polled yet", "not polled yet"
	if healthPath == "" {
		healthState = "no health path"
	}
	readyLine := (<-chan struct{})(i.readyLine)
	fail := func(op string, cause error) *LaunchError {
		return &LaunchError{Op: op, Cause: cause, Argv: i.argv, LogPath: i.logPath, ExitCode: -1}
	}
	for {
		var ready bool
		switch opts.Ready {
		case ReadyBoth:
			ready = lineOK && healthOK
		case ReadyHealth:
			ready = (healthOK && healthPath != "") || (healthPath == "" && lineOK)
		case ReadyLogLine:
			ready = lineOK
		case ReadyEither:
			ready = (healthOK && healthPath != "") || lineOK
		default: // ReadyHTTP
			ready = healthOK && modelsOK
		}
		if ready {
			return nil
		}
		select {
		case <-ctx.Done():
			return fail("canceled", fmt.Errorf("waiting for the engine to become ready: %w", ctx.Err()))
		case <-timer.C:
			var b strings.Builder
			fmt.Fprintf(&b, "not ready after %s (GET %s: %s", opts.ReadyTimeout, healthPath, healthState)
			if needModels {
				fmt.Fprintf(&b, "; GET %s: %s", ModelsPath, modelsState)
			}
			fmt.Fprintf(&b, "; ready line seen: %v)", lineOK)
			return fail("ready timeout", errors.New(b.String()))
		case <-i.addrInUse:
			return fail("port", fmt.Errorf("port %d: %w", i.cfg.Port, ErrPortInUse))
		case <-i.exited:
			// Let the output pipe drain so that the tail holds the engine's last words.
			select {
			case <-i.readerDone:
			case <-time.After(500 * time.Millisecond): // orphans may hold the pipe open
			}
			if addrInUseRE.MatchString(i.LogTail(80)) {
				return fail("port", fmt.Errorf("port %d: %w", i.cfg.Port, ErrPortInUse))
			}
			le := fail("exited", fmt.Errorf("engine exited before it was ready: %v", i.exitErr))
			le.ExitCode = i.exitCode
			return le
		case <-readyLine:
			lineOK, readyLine = true, nil
		case <-tick.C:
			if opts.Ready == ReadyLogLine {
				continue
			}
			if !healthOK {
				healthOK, healthState = probe(ctx, client, i.BaseURL()+healthPath)
			}
			if needModels && healthOK && !modelsOK {
				modelsOK, modelsState = probe(ctx, client, i.BaseURL()+ModelsPath)
			}
		}
	}
}

// probe sends one GET with its own deadline and reports whether it answered 200, and what it
// answered ("200", "503 Service Unavailable", "error: ...") for the timeout message.
func probe(ctx context.Context, c *http.Client, url string) (bool, string) {
	ctx, cancel := context.WithTimeout(ctx, readyProbeTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false, "error: " + err.Error()
	}
	resp, err := c.Do(req)
	if err != nil {
		return false, "error: " + err.Error()
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64*1024))
	_ = resp.Body.Close()
	return resp.StatusCode == http.StatusOK, resp.Status
}

// Stop stops the engine's whole process tree: SIGTERM, up to the stop grace for every
// process of it (its cgroup, its process group, every descendant the supervisor reaped) to
// exit, then SIGKILL. It waits until none is left, closes the log, and is idempotent: later
// and concurrent calls wait for the first one and return its result. ctx bounds the grace
// period.
func (i *Instance) Stop(ctx context.Context) error {
	i.stopOnce.Do(func() {
		i.stopErr = i.stop(ctx)
		unregister(i)
		close(i.stopDone)
	})
	select {
	case <-i.stopDone:
		return i.stopErr
	case <-ctx.Done():
		return fmt.Errorf("stop engine pid %d: %w", i.pid, ctx.Err())
	}
}

// alive reports whether the main process or any process of its group is still running.
func (i *Instance) alive() bool {
	select {
	case <-i.exited:
	default:
		return true
	}
	return len(groupMembers(i.pid)) > 0
}

func (i *Instance) stop(ctx context.Context) error {
	if i.supervised {
		return i.stopSupervised(ctx)
	}
	start := time.Now()
	signalAll := func(sig syscall.Signal) { signalGroup(i.pid, sig) }
	waitGone := func(d time.Duration, ctx context.Context) bool {
		deadline := time.NewTimer(d)
		defer deadline.Stop()
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			if !i.alive() {
				return true
			}
			select {
			case <-deadline.C:
				return false
			case <-ctx.Done():
				return false
			case <-tick.C:
			}
		}
	}
	var err error
	if i.alive() {
		signalAll(syscall.SIGTERM)
		if !waitGone(i.grace, ctx) {
			i.log.WithField("grace", i.grace).Warn("engine did not stop after SIGTERM; sending SIGKILL")
			signalAll(syscall.SIGKILL)
			if !waitGone(killWait, context.Background()) {
				err = fmt.Errorf("stop engine pid %d: processes still running after SIGKILL: %v", i.pid, groupMembers(i.pid))
			}
		}
	}
	select {
	case <-i.exited:
	case <-time.After(killWait):
		if err == nil {
			err = fmt.Errorf("stop engine pid %d: main process not reaped", i.pid)
		}
	}
	select {
	case <-i.readerDone:
	case <-time.After(2 * time.Second):
	}
	if cerr := i.logFile.Close(); cerr != nil && err == nil && !errors.Is(cerr, os.ErrClosed) {
		err = fmt.Errorf("close engine log: %w", cerr)
	}
	i.log.WithField("took", time.Since(start).Round(time.Millisecond)).Info("engine stopped")
	return err
}
