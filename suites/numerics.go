// The numerics probe of a config: its prompts, greedy and teacher-forced, saved as
// numerics/CONFIG.json.

package suites

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/reckon-ci/reckon/internal/atomicfile"
	"github.com/reckon-ci/reckon/workload"
)

// measureNumerics runs the numerics probe against the config and saves it as JSON.
func (fw *framework) measureNumerics(ctx context.Context, cs *configState) error {
	if err := cs.infraError(); err != nil {
		cs.probeErr = err
		return err
	}
	n := fw.spec.Numerics
	if n == nil {
		cs.probeErr = fmt.Errorf("%s: an equivalence check names config %s but the spec has no numerics section", fw.spec.File, cs.name)
		return cs.probeErr
	}
	prompts, err := workload.LoadPrompts(n.Prompts)
	if err != nil {
		cs.probeErr = err
		return err
	}
	p, err := workload.RunNumericsProbe(ctx, fw.client(cs), prompts, n.MaxTokens, n.TopLogprobs)
	if err != nil {
		cs.probeErr = fmt.Errorf("numerics probe of %s: %w", cs.name, err)
		return cs.probeErr
	}
	p.Config = cs.name
	p.Engine = fw.spec.Engine.Kind
	p.DType, p.TPSize = launchDType(cs.launch), cs.launch.TPSize
	// Teacher forcing: every config scores the same sequences, the prompts followed by the
	// greedy continuations of the first config probed in this run.
	fw.mu.Lock()
	if fw.forced == nil {
		seqs, err := workload.ForcedSequences(p)
		if err != nil {
			fw.mu.Unlock()
			cs.probeErr = fmt.Errorf("numerics probe of %s: %w", cs.name, err)
			return cs.probeErr
		}
		fw.forced, fw.forcedFrom = seqs, cs.name
	}
	seqs, from := fw.forced, fw.forcedFrom
	fw.mu.Unlock()
	if err := workload.ScoreForced(ctx, fw.client(cs), p, seqs, from, n.TopLogprobs, n.BatchSize); err != nil {
		cs.probeErr = fmt.Errorf("numerics probe of %s: %w", cs.name, err)
		return cs.probeErr
	}
	cs.probe = p
	path := filepath.Join(fw.opts.OutDir, "numerics", cs.name+".json")
	if err := atomicfile.WriteJSON(path, p); err != nil {
		return err
	}
	fw.mu.Lock()
	fw.reportConfig(cs.name).NumericsFile = path
	fw.mu.Unlock()
	return nil
}
