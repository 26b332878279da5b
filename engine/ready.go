// ready.go holds the readiness wait after launch: the ready log line and the HTTP probes of
// the health route and ModelsPath.

package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// ModelsPath is the OpenAI-compatible model list both engines serve; ReadyHTTP needs its 200.
const ModelsPath = "/v1/models"

// readyProbeTimeout is the deadline of one readiness HTTP request.
const readyProbeTimeout = 5 * time.Second

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
