package suites

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/reckon-ci/reckon/gate"
	"github.com/reckon-ci/reckon/internal/atomicfile"
)

// Bounds of the evidence a failed config leaves before its engine is stopped.
const (
	snapshotTimeout  = 10 * time.Second // per request or command
	snapshotMaxBytes = 4 << 20          // per file
)

// snapshotOnFailure saves what a failed config's engine says about itself while it still runs:
// /server_info (or /get_server_info), /metrics and, on GPU testbeds, nvidia-smi, into
// OUT/artifacts/CONFIG/. It does nothing when every check of the config passed or the engine is
// not up. Each step is bounded by snapshotTimeout and snapshotMaxBytes; failures are logged.
func (fw *framework) snapshotOnFailure(ctx context.Context, cs *configState) {
	if cs.inst == nil || cs.infraError() != nil || !fw.configFailed(cs.name) {
		return
	}
	dir := filepath.Join(fw.opts.OutDir, "artifacts", cs.name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		fw.log.WithError(err).Warn("artifacts directory")
		return
	}
	log := fw.log.WithField("config", cs.name)
	var saved []string
	save := func(name string, body []byte) {
		path := filepath.Join(dir, name)
		err := atomicfile.Write(path, func(w io.Writer) error {
			_, err := w.Write(body)
			return err
		})
		if err != nil {
			log.WithError(err).Warn("save artifact")
			return
		}
		saved = append(saved, path)
	}
	base := strings.TrimRight(cs.inst.BaseURL(), "/")
	info, err := httpGet(ctx, base+"/server_info")
	if err != nil {
		info, err = httpGet(ctx, base+"/get_server_info")
	}
	if err == nil {
		save("server_info.json", info)
	} else {
		log.WithError(err).Warn("server info snapshot")
	}
	if m, err := httpGet(ctx, base+"/metrics"); err == nil {
		save("metrics.txt", m)
	} else {
		log.WithError(err).Warn("metrics snapshot")
	}
	if fw.gpus {
		cctx, cancel := context.WithTimeout(ctx, snapshotTimeout)
		cmd := exec.CommandContext(cctx, "nvidia-smi")
		cmd.WaitDelay = time.Second
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &limitedWriter{w: &out, n: snapshotMaxBytes}, &limitedWriter{w: &out, n: snapshotMaxBytes}
		if err := cmd.Run(); err != nil {
			log.WithError(err).Warn("nvidia-smi snapshot")
		}
		cancel()
		if out.Len() > 0 {
			save("nvidia-smi.txt", out.Bytes())
		}
	}
	if len(saved) > 0 {
		log.WithField("dir", dir).Info("saved the failed config's server state")
		fw.mu.Lock()
		fw.reportConfig(cs.name).Artifacts = saved
		fw.mu.Unlock()
	}
}

// configFailed reports whether a check of the config failed or errored so far.
func (fw *framework) configFailed(name string) bool {
	fw.mu.Lock()
	defer fw.mu.Unlock()
	for _, c := range fw.run.Checks {
		if c.Config == name && (c.Status == gate.StatusFailed || c.Status == gate.StatusError) {
			return true
		}
	}
	return false
}

// httpGet fetches url within snapshotTimeout, keeping at most snapshotMaxBytes of the body.
func httpGet(ctx context.Context, url string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, snapshotTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, snapshotMaxBytes))
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: HTTP %d", url, resp.StatusCode)
	}
	return body, nil
}

// limitedWriter keeps the first n bytes written to it and drops the rest.
type limitedWriter struct {
	w io.Writer
	n int
}

func (l *limitedWriter) Write(p []byte) (int, error) {
	if l.n <= 0 {
		return len(p), nil
	}
	k := min(len(p), l.n)
	l.n -= k
	if _, err := l.w.Write(p[:k]); err != nil {
		return 0, err
	}
	return len(p), nil
}
