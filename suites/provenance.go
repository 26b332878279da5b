package suites

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// engineVersionTimeout bounds asking an engine its version.
const engineVersionTimeout = 5 * time.Second

// askEngineVersion asks a ready engine what version it is: SGLang's (and the reference
// engine's) /server_info or /get_server_info `version`, else vLLM's GET /version. It returns ""
// and the error when neither answers within engineVersionTimeout.
func (fw *framework) askEngineVersion(ctx context.Context, cs *configState) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, engineVersionTimeout)
	defer cancel()
	info, err := fw.client(cs).ServerInfo(ctx)
	if err == nil && strings.TrimSpace(info.Version) != "" {
		return strings.TrimSpace(info.Version), nil
	}
	req, rerr := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(cs.inst.BaseURL(), "/")+"/version", nil)
	if rerr != nil {
		return "", rerr
	}
	resp, rerr := http.DefaultClient.Do(req)
	if rerr != nil {
		return "", errors.Join(err, rerr)
	}
	defer resp.Body.Close()
	body, rerr := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if rerr != nil {
		return "", rerr
	}
	if resp.StatusCode != http.StatusOK {
		return "", errors.Join(err, fmt.Errorf("GET /version: HTTP %d", resp.StatusCode))
	}
	var v struct {
		Version string `json:"version"`
	}
	if jerr := json.Unmarshal(body, &v); jerr != nil || strings.TrimSpace(v.Version) == "" {
		return "", errors.Join(err, fmt.Errorf("GET /version: no version in %q", snippet(body)))
	}
	return strings.TrimSpace(v.Version), nil
}

func snippet(b []byte) string {
	if len(b) > 120 {
		return string(b[:120]) + "..."
	}
	return string(b)
}

// recordEngineVersion asks the config's engine its version and records it on the config (and
// on the run, from the first config that answers). The engine report map carries it as
// engine_version, which `reckon baseline record` copies into the baseline's provenance.
func (fw *framework) recordEngineVersion(ctx context.Context, cs *configState) {
	v, err := fw.askEngineVersion(ctx, cs)
	if err != nil || v == "" {
		fw.log.WithError(err).WithField("config", cs.name).Warn("engine version unknown: the engine answered neither /server_info nor /version")
		return
	}
	cs.engineVersion = v
	if m := releaseMismatch(cs.release, v); m != "" {
		fw.log.WithField("config", cs.name).Warn(m)
	}
	fw.mu.Lock()
	fw.reportConfig(cs.name).EngineVersion = v
	if fw.run.EngineVersion == "" {
		fw.run.EngineVersion = v
	}
	fw.mu.Unlock()
}
