// instance.go holds Instance, a launched engine process, and its accessors.

package engine

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/reckon-ci/reckon/internal/safefile"
)

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
	owned      ownedLeaders // groups and sessions the supervisor reported (for a dead supervisor)
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
	// The engine can reach its log's path (/proc/self/fd/1): never follow a link there or
	// wait on a FIFO it left.
	f, err := safefile.Open(i.logPath)
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
