package spec

import "path/filepath"

// ResolvePaths makes the data files a spec names relative to the spec file itself, not to the
// directory reckon runs in: numerics.prompts, workloads[].dataset and an allreduce_probe check's
// file. A spec read from a trusted checkout (trusted/.reckon/premerge.yaml) then reads its
// prompts from that checkout whatever the working directory is, never a same-named file of the
// pull request's tree. Absolute paths are kept. Programs (command) and model stay as written:
// a command is a build output of the job's workspace and a model may be a hub id. Check names
// keep the path as written (they are computed by Parse). Load calls it; a caller of Parse on a
// spec file (reckon spec check's partial spec) calls it itself.
func (s *Spec) ResolvePaths(specFile string) {
	dir := filepath.Dir(specFile)
	rel := func(p string) string {
		if p == "" || filepath.IsAbs(p) {
			return p
		}
		return filepath.Join(dir, p)
	}
	if s.Numerics != nil {
		s.Numerics.Prompts = rel(s.Numerics.Prompts)
	}
	for _, w := range s.Workloads {
		w.Dataset = rel(w.Dataset)
	}
	for _, c := range s.Checks {
		if p := c.Probe(); p != nil {
			p.File = rel(p.File)
		}
	}
}
