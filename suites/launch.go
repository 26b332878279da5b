// A config's engine from launch to stop: its launch config, starting it, reading what it did
// (engine report, log tail), stopping it and releasing its GPUs.

package suites

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/reckon-ci/reckon/engine"
	"github.com/reckon-ci/reckon/engine/client"
	"github.com/reckon-ci/reckon/gate"
	"github.com/reckon-ci/reckon/internal/safefile"
	"github.com/reckon-ci/reckon/spec"
	"github.com/reckon-ci/reckon/testbed"
)

// gpuReleaseSlackMiB is how much GPU memory above what was in use before a launch may remain
// after the engine stopped before the next launch proceeds.
const gpuReleaseSlackMiB = 512

// LaunchConfig turns a config's effective settings (spec.Launch) into the engine adapter's
// launch config. The harness fills host and port when it launches; `reckon spec check` uses the
// same mapping to show each config's command line.
func LaunchConfig(l spec.Launch) engine.LaunchConfig {
	lc := engine.LaunchConfig{
		Command:                l.Command,
		Model:                  l.Model,
		TPSize:                 l.TPSize,
		DisableCustomAllReduce: l.DisableCustomAllReduce,
		EngineVersion:          l.EngineVersion,
		ExtraArgs:              l.Args,
		Env:                    l.Env,
	}
	if l.CudaGraphMaxBS != nil {
		lc.CUDAGraphMaxBS = *l.CudaGraphMaxBS
	}
	if l.MemFractionStatic != nil {
		lc.MemFractionStatic = *l.MemFractionStatic
	}
	if sp := l.Speculative; sp != nil {
		lc.Speculative = &engine.Speculative{
			Algorithm:      sp.Algorithm,
			DraftModelPath: sp.DraftModel,
			NumSteps:       sp.NumSteps,
			EagleTopK:      sp.EagleTopK,
			NumDraftTokens: sp.NumDraftTokens,
		}
	}
	return lc
}

// launchConfig starts the engine for a config. A failure is recorded, not returned: every check
// of the config then reports it as an infrastructure error, and the run goes on.
func (fw *framework) launchConfig(ctx context.Context, cs *configState) {
	lc := fw.engineLaunch(ctx, cs)
	l := cs.launch
	log := fw.log.WithField("config", cs.name)
	log.WithField("log", cs.logPath).Info("launching engine")
	fw.mu.Lock()
	rc := fw.reportConfig(cs.name)
	rc.Launches++
	rc.LogPath = cs.logPath
	fw.mu.Unlock()

	if fw.gpus {
		cs.sampler = testbed.NewSampler(200 * time.Millisecond)
		if err := cs.sampler.Start(ctx); err != nil {
			log.WithError(err).Warn("GPU memory sampling unavailable")
			cs.sampler = nil
		}
	}
	inst, err := engine.Launch(ctx, fw.adapter, engine.LaunchOptions{
		Config:       lc,
		LogPath:      cs.logPath,
		ReadyTimeout: l.ReadyTimeout.D(),
		StopGrace:    l.StopGrace.D(),
		Logger:       log,
	})
	cs.inst, cs.launchEr = inst, err
	rec := gate.LaunchRecord{Config: cs.name, Launch: 1, Of: launchesOf(fw.spec, cs.name), LogPath: cs.logPath, StartedAt: time.Now().UTC()}
	for _, w := range fw.spec.WorkloadsFor(cs.name) {
		rec.Workloads = append(rec.Workloads, w.Name)
	}
	if err != nil {
		rec.Error = err.Error()
	}
	fw.mu.Lock()
	fw.run.LaunchOrder = append(fw.run.LaunchOrder, rec)
	if inst != nil {
		rc.Args = inst.Argv()
	}
	fw.mu.Unlock()
	// The evidence gathered after readiness has a budget of its own: a slow profiler makes
	// that evidence incomplete (said in the health check and the allreduce sources), never the
	// launch "not run".
	ectx, cancel := context.WithTimeoutCause(ctx, evidenceBudget, fmt.Errorf("the evidence gathered after readiness (engine version, memory plan, allreduce profile) ran past its budget of %s", evidenceBudget))
	defer cancel()
	if err != nil {
		log.WithError(err).Error("engine did not start")
	} else {
		log.WithField("url", inst.BaseURL()).Info("engine ready")
		fw.recordEngineVersion(ectx, cs)
		fw.recordServerMemory(ectx, cs)
	}
	fw.refreshReport(cs)
	fw.gatherAllReduceEvidence(ectx, cs)
	if ectx.Err() != nil && ctx.Err() == nil {
		cs.evidenceErr = context.Cause(ectx)
		log.WithError(cs.evidenceErr).Warn("evidence incomplete")
	}
}

// evidenceBudget bounds what launchConfig gathers once the engine is ready: its version and
// memory plan (metadata requests), and the allreduce profile window (start, one request of up
// to 2 minutes, stop of up to client.ProfileStopTimeout, parsing of up to traceParseTimeout).
const evidenceBudget = 2*time.Minute + client.ProfileStopTimeout + traceParseTimeout + 2*time.Minute

// launchNodeTimeout bounds the node that launches a config: the version command asked before
// the launch (engine.DefaultVersionTimeout), the readiness wait, the evidence gathered after it
// (evidenceBudget, first launches only) and the stop grace. Each phase has its own limit inside
// it, so that none of them can make the launch "not run".
func launchNodeTimeout(l spec.Launch, evidence bool) time.Duration {
	d := engine.DefaultVersionTimeout + l.ReadyTimeout.D() + l.StopGrace.D() + 30*time.Second
	if evidence {
		d += evidenceBudget
	}
	return d
}

// refreshReport re-reads the engine log into the config's EngineReport.
func (fw *framework) refreshReport(cs *configState) {
	rep, err := engine.ParseEngineLog(cs.logPath, fw.adapter.Name())
	if err != nil {
		fw.log.WithError(err).WithField("config", cs.name).Warn("could not parse engine log")
		return
	}
	cs.report = rep
	var m map[string]any
	if b, err := json.Marshal(rep); err == nil && json.Unmarshal(b, &m) == nil {
		if cs.engineVersion != "" {
			m["engine_version"] = cs.engineVersion
		}
		if cs.allreduce != nil && cs.allreduce.Effective != gate.BackendUnknown {
			m["allreduce"] = cs.allreduce.Effective // what ran, over what the log says
		}
		mergeServerMemory(m, cs.serverMemory)
		fw.mu.Lock()
		rc := fw.reportConfig(cs.name)
		rc.Engine = m
		if cs.launchEr != nil {
			rc.LaunchError = cs.launchEr.Error()
		}
		rc.LogTail = tailFile(cs.logPath, 40)
		fw.mu.Unlock()
	}
}

// stopConfig stops the config's engine (whole process group) and records the final log state.
func (fw *framework) stopConfig(ctx context.Context, cs *configState) {
	fw.snapshotOnFailure(ctx, cs)
	cs.recordStop()
	if cs.inst != nil {
		if err := cs.inst.Stop(ctx); err != nil {
			fw.log.WithError(err).WithField("config", cs.name).Warn("engine stop")
		}
	}
	if cs.sampler != nil {
		// Do not let the next config launch onto GPUs the previous engine still holds.
		err := engine.WaitGPUMemoryReleased(ctx, func() (int, error) {
			var held int64
			for _, g := range cs.sampler.Snapshot().GPUs {
				held += max(0, g.LastUsedMiB-g.FirstUsedMiB)
			}
			return int(held), nil
		}, gpuReleaseSlackMiB)
		if err != nil {
			fw.log.WithError(err).WithField("config", cs.name).Warn("GPU memory not released after stop")
		}
		rep, err := cs.sampler.Stop()
		if err != nil {
			fw.log.WithError(err).WithField("config", cs.name).Warn("GPU memory sampling")
		}
		fw.mu.Lock()
		rc := fw.reportConfig(cs.name)
		rc.GPUPeakMiB = nil
		for _, g := range rep.GPUs {
			rc.GPUPeakMiB = append(rc.GPUPeakMiB, float64(g.PeakUsedMiB))
		}
		fw.mu.Unlock()
	}
	fw.refreshReport(cs)
	fw.checkpoint()
}

// infraError is the error every check of a config reports when its engine is not up.
func (cs *configState) infraError() error {
	if cs.launchEr != nil {
		return fmt.Errorf("config %s: engine did not start: %w", cs.name, cs.launchEr)
	}
	if cs.inst == nil {
		if cs.replayed {
			return nil // read back from a shard's results (reckon merge): it ran there
		}
		return fmt.Errorf("config %s: engine was not launched", cs.name)
	}
	if cs.stopped {
		return cs.exitedErr // as recorded when the run stopped it
	}
	select {
	case <-cs.inst.Exited():
		return fmt.Errorf("config %s: engine exited during the run: %v", cs.name, cs.inst.ExitErr())
	default:
	}
	return nil
}

// recordStop records, before the run stops the engine, whether it had exited on its own: the
// evidence checks judged after the stop (a relaunched config's) read.
func (cs *configState) recordStop() {
	if cs.inst == nil || cs.stopped {
		return
	}
	cs.exitedErr = cs.infraError()
	cs.stopped = true
}

// client returns an HTTP client for the config's engine.
func (fw *framework) client(cs *configState) *client.Client {
	return client.New(cs.inst.BaseURL(), client.Options{Model: cs.launch.Model})
}

// tailFile is the last n lines of the engine log at path (opened as safefile.Open does: the
// engine may have left a link or a FIFO there).
func tailFile(path string, n int) string {
	f, err := safefile.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	// Only the end of the file: an engine log may be gigabytes.
	const window = 256 << 10
	if st, err := f.Stat(); err == nil && st.Size() > window {
		if _, err := f.Seek(st.Size()-window, io.SeekStart); err != nil {
			return ""
		}
	}
	b, err := io.ReadAll(io.LimitReader(f, window))
	if err != nil {
		return ""
	}
	return lastLines(string(b), n)
}

// logTail is the end of the config's engine log: read from the log reckon wrote, or, for a
// config replayed by reckon merge, the tail its shard recorded (merge opens no path a shard
// names).
func (cs *configState) logTail() string {
	if cs.replayed {
		return lastLines(cs.out.LogTail, maxLogTailLines)
	}
	return tailFile(cs.logPath, maxLogTailLines)
}

// launchDType is the dtype a launch asks for with --dtype ("" when not given or "auto").
func launchDType(l spec.Launch) string {
	for i, a := range l.Args {
		v, ok := strings.CutPrefix(a, "--dtype=")
		if !ok && a == "--dtype" && i+1 < len(l.Args) {
			v, ok = l.Args[i+1], true
		}
		if ok && v != "auto" {
			return v
		}
	}
	return ""
}
