package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/reckon-ci/reckon/engine/internal/core"
)

// DefaultVersionTimeout bounds DetectVersion, whatever deadline ctx has (a run's --timeout of
// hours must not let a hanging `--version` take them): `import sglang` imports torch, which takes
// tens of seconds on a cold cache.
const DefaultVersionTimeout = 2 * time.Minute

// versionTimeout is DefaultVersionTimeout, lowered by tests.
var versionTimeout = DefaultVersionTimeout

// MaxVersionOutput is how much of the version command's output DetectVersion keeps (the last
// bytes: the version comes after whatever warnings the engine prints first).
const MaxVersionOutput = 64 << 10

// Version is a parsed engine version (see ParseVersion).
type Version = core.Version

// ParseVersion parses an engine version as the adapters compare it: "" and main-branch builds
// "0.0.0.devN+g<sha>" are the newest; rc/dev/post/+local suffixes do not order releases.
func ParseVersion(s string) (Version, error) { return core.ParseVersion(s) }

// DetectVersion runs a's VersionCommand for lc (the version probe; with lc.Env) and returns
// the last version-looking token of its output, e.g. "0.12.0", "0.5.3.post1",
// "0.0.0.dev1+g5dd2c243e". The probe runs under the same supervisor and containment as an
// engine launch (Linux: its own cgroup where cgroup v2 is writable, else the supervisor's
// subreaper and process group), so a probe that forks a daemon leaves nothing behind: whatever
// it left running ends when it exits, and its whole tree is killed when ctx ends or after
// DefaultVersionTimeout, whichever comes first (also when ctx has a far deadline, as under
// `--timeout`). A probe that fails, times out or prints no version is an error naming the
// version probe and its command and quoting the end of its output.
func DetectVersion(ctx context.Context, a Adapter, lc LaunchConfig) (string, error) {
	if a == nil {
		return "", errors.New("detect engine version: no adapter")
	}
	argv := a.VersionCommand(lc)
	if len(argv) == 0 {
		return "", fmt.Errorf("detect %s version: the adapter has no version command", a.Name())
	}
	limit := versionTimeout
	ctx, cancel := context.WithTimeoutCause(ctx, limit, fmt.Errorf("the version probe ran longer than its limit of %s (engine.DefaultVersionTimeout)", limit))
	defer cancel()
	out := &tailBuffer{max: MaxVersionOutput}
	env := mergeEnv(os.Environ(), lc.Env)
	var err error
	if supervisorSupported {
		_, err = runContained(ctx, argv, env, out, probeGrace)
	} else {
		err = runDirect(ctx, argv, env, out)
	}
	text := out.String()
	name := strings.Join(argv, " ")
	if ctx.Err() != nil {
		return "", fmt.Errorf("detect %s version: version probe %s: %w (%v)%s", a.Name(), name, ctx.Err(), context.Cause(ctx), quoteTail(text))
	}
	if err != nil {
		return "", fmt.Errorf("detect %s version: version probe %s: %w%s", a.Name(), name, err, quoteTail(text))
	}
	v := core.LastVersionToken(text)
	if v == "" {
		return "", fmt.Errorf("detect %s version: version probe %s printed no version (expected e.g. 0.12.0)%s", a.Name(), name, quoteTail(text))
	}
	return v, nil
}

// runDirect runs argv as the harness's own child in its own process group, killed with its
// group when ctx ends (platforms without the supervisor).
func runDirect(ctx context.Context, argv, env []string, out io.Writer) error {
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = sysProcAttr()
	cmd.Cancel = func() error { // the process group where there is one, else the process
		signalGroup(cmd.Process.Pid, syscall.SIGKILL)
		return nil
	}
	cmd.WaitDelay = 5 * time.Second
	var err error
	onForkThread(func() { err = cmd.Start() })
	if err == nil {
		err = cmd.Wait()
	}
	return err
}

// SpeculativeAlgorithms lists reckon's spellings of the speculative algorithms engine kind
// accepts (see Adapter.SpeculativeAlgorithms), for checking a spec before any launch.
func SpeculativeAlgorithms(kind string) ([]string, error) {
	a, err := AdapterFor(kind)
	if err != nil {
		return nil, err
	}
	return a.SpeculativeAlgorithms(), nil
}

func quoteTail(s string) string {
	s = strings.TrimSpace(s)
	if s == "" {
		return " (no output)"
	}
	lines := strings.Split(s, "\n")
	if len(lines) > 8 {
		lines = lines[len(lines)-8:]
	}
	for k, l := range lines {
		if len(l) > 300 {
			l = l[:300] + " [...]"
		}
		lines[k] = escapeControl(strings.TrimRight(l, "\r"))
	}
	return "; output ends:\n" + strings.Join(lines, "\n")
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := len(p)
	if len(p) > t.max {
		p = p[len(p)-t.max:]
	}
	t.b = append(t.b, p...)
	if len(t.b) > 2*t.max {
		t.b = append([]byte(nil), t.b[len(t.b)-t.max:]...)
	}
	return n, nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	b := t.b
	if len(b) > t.max {
		b = b[len(b)-t.max:]
	}
	return string(b)
}
