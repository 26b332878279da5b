package suites

import (
	"context"
	"fmt"
	"strings"

	"github.com/reckon-ci/reckon/engine"
)

// engineLaunch is the adapter's launch config of a config as the harness launches it: on
// 127.0.0.1, with flags built for the engine's release and what the profiler needs.
func (fw *framework) engineLaunch(ctx context.Context, cs *configState) engine.LaunchConfig {
	lc := LaunchConfig(cs.launch)
	lc.Host = "127.0.0.1"
	lc.EngineVersion = fw.release(ctx, cs, lc)
	cs.release = lc.EngineVersion
	fw.profilerSetup(&lc, cs)
	return lc
}

// releaseMismatch says when the running engine reports another release than the one its flags
// were built for (engine.version, or what its command said before the launch): "" when they
// agree or either is unknown. Suffixes (rc, dev, post, +local) do not count.
func releaseMismatch(builtFor, reported string) string {
	if builtFor == "" || reported == "" {
		return ""
	}
	b, err1 := engine.ParseVersion(builtFor)
	r, err2 := engine.ParseVersion(reported)
	switch {
	case err1 != nil || err2 != nil, b.Newest && r.Newest:
		return ""
	case b.Newest == r.Newest && b.Major == r.Major && b.Minor == r.Minor && b.Patch == r.Patch:
		return ""
	}
	return fmt.Sprintf("the engine reports version %s, but its flags were built for %s (engine.version, or the command's --version before the launch): set engine.version to the release you run", reported, builtFor)
}

// release is the engine release a config's flags are built for: engine.version when the spec
// states it, else what the config's command says when asked (`vllm --version`,
// sglang.__version__), asked once per command; "" (the newest) when it cannot tell, said in
// the log. The version the running engine reports is recorded beside it (recordEngineVersion).
func (fw *framework) release(ctx context.Context, cs *configState, lc engine.LaunchConfig) string {
	if lc.EngineVersion != "" {
		return lc.EngineVersion
	}
	key := strings.Join(fw.adapter.VersionCommand(lc), "\x00")
	fw.mu.Lock()
	v, asked := fw.releases[key]
	cs.releaseErr = fw.releaseErrs[key]
	fw.mu.Unlock()
	if asked {
		return v
	}
	v, err := engine.DetectVersion(ctx, fw.adapter, lc)
	cs.releaseErr = err
	log := fw.log.WithField("config", cs.name)
	if err != nil {
		log.WithError(err).Warn("engine release unknown before launch: flags are built for the newest release (set engine.version in the spec to choose)")
	} else {
		log.WithField("release", v).Info("engine release (flags built for it)")
	}
	fw.mu.Lock()
	if fw.releases == nil {
		fw.releases = map[string]string{}
	}
	fw.releases[key] = v
	if err != nil {
		if fw.releaseErrs == nil {
			fw.releaseErrs = map[string]error{}
		}
		fw.releaseErrs[key] = err
	}
	fw.mu.Unlock()
	return v
}
