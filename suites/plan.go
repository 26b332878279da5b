package suites

import (
	"fmt"
	"sort"
	"strings"

	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/ginkgo/v2/types"

	"github.com/reckon-ci/reckon/gate"
	"github.com/reckon-ci/reckon/spec"
)

// The plan: every Ginkgo spec the tree defines, the check it records, and the other specs whose
// results it judges. Before anything is launched the plan is previewed against --label-filter
// (Ginkgo's own PreviewSpecs, so the labels are exactly those the run filters on): a filter that
// selects nothing, or that selects a check but not its inputs, is bad input. After the run the
// plan lists every selected check that was never judged as not run.

// Container texts of the tree (see define).
const crossContainer = "cross-config"

func configContainer(name string) string { return "config " + name }

// Leaf texts of the measurement specs of a config; cross-config checks name them as inputs.
func probeSpecName(config string) string { return config + ": numerics probe" }

func trialsSpecName(config, workload string) string {
	return config + ": throughput trials (" + workload + ")"
}

// need is one input of a check: a spec of container (any spec of it when leaves is empty, any one
// of leaves otherwise) that the filter must select too; what says it in words.
type need struct {
	container string
	leaves    []string
	what      string
}

// plannedSpec is one spec of the tree: its key (container and leaf text), the check it records
// (without a verdict) and its inputs.
type plannedSpec struct {
	key   string
	entry gate.Check
	needs []need
}

func specKey(container, leaf string) string { return container + "\x00" + leaf }

// plan registers a spec of the tree. Tree construction runs twice (preview, then the run), so
// registering is idempotent.
func (fw *framework) plan(container, leaf string, e gate.Check, needs ...need) {
	fw.mu.Lock()
	defer fw.mu.Unlock()
	if fw.planned == nil {
		fw.planned = map[string]*plannedSpec{}
	}
	k := specKey(container, leaf)
	if _, ok := fw.planned[k]; !ok {
		fw.planOrder = append(fw.planOrder, k)
	}
	fw.planned[k] = &plannedSpec{key: k, entry: e, needs: needs}
}

// trafficNeed is the input of a check on a metric that exists only after traffic (a late
// metric): any measurement of the config. It returns nil when the config has none at all.
func trafficNeed(s *spec.Spec, config string) []need {
	var leaves []string
	if s.NeedsNumerics(config) {
		leaves = append(leaves, probeSpecName(config))
	}
	for _, w := range s.WorkloadsFor(config) {
		leaves = append(leaves, trialsSpecName(config, w.Name))
	}
	if len(leaves) == 0 {
		return nil
	}
	return []need{{container: configContainer(config), leaves: leaves, what: config + "'s traffic (numerics probe or throughput trials)"}}
}

// preflight previews the tree against the label filter. It fails (bad input) when the filter
// selects no check, or when it selects a check without its inputs and --allow-partial is not
// given; with --allow-partial such checks are recorded to be skipped, saying why.
func (fw *framework) preflight() error {
	report := ginkgo.PreviewSpecs("reckon gate: " + fw.spec.Name)
	match := func([]string) bool { return true }
	if fw.opts.LabelFilter != "" {
		f, err := types.ParseLabelFilter(fw.opts.LabelFilter)
		if err != nil {
			return fmt.Errorf("%w: --label-filter %q: %v", ErrInvalidInput, fw.opts.LabelFilter, err)
		}
		match = f
	}
	fw.selected = map[string]bool{}
	selectedIn := map[string]bool{} // containers with a selected spec
	labels := map[string]bool{}
	for _, sr := range report.SpecReports {
		if sr.LeafNodeType != types.NodeTypeIt {
			continue
		}
		ls := sr.Labels()
		for _, l := range ls {
			labels[l] = true
		}
		if !match(ls) {
			continue
		}
		container := ""
		if n := len(sr.ContainerHierarchyTexts); n > 0 {
			container = sr.ContainerHierarchyTexts[n-1]
		}
		fw.selected[specKey(container, sr.LeafNodeText)] = true
		selectedIn[container] = true
	}
	if len(fw.selected) == 0 {
		all := make([]string, 0, len(labels))
		for l := range labels {
			all = append(all, l)
		}
		sort.Strings(all)
		return fmt.Errorf("%w: --label-filter %q selects no check of %s; the labels of this spec are: %s", ErrInvalidInput, fw.opts.LabelFilter, fw.spec.File, strings.Join(all, ", "))
	}
	fw.partial = map[string]string{}
	var missing []string
	missingCfgs := map[string]bool{}
	for _, k := range fw.planOrder {
		p := fw.planned[k]
		if !fw.selected[k] {
			continue
		}
		var lack []string
		for _, n := range p.needs {
			ok := false
			if len(n.leaves) == 0 {
				ok = selectedIn[n.container]
			}
			for _, l := range n.leaves {
				ok = ok || fw.selected[specKey(n.container, l)]
			}
			if !ok {
				lack = append(lack, n.what)
				missingCfgs[strings.TrimPrefix(n.container, "config ")] = true
			}
		}
		if len(lack) == 0 {
			continue
		}
		missing = append(missing, fmt.Sprintf("%q needs %s", p.entry.Name, strings.Join(lack, " and ")))
		fw.partial[k] = fmt.Sprintf("not judged: --label-filter %q left out %s, which this check needs (--allow-partial)", fw.opts.LabelFilter, strings.Join(lack, " and "))
	}
	if len(missing) > 0 && !fw.opts.AllowPartial {
		cfgs := make([]string, 0, len(missingCfgs))
		for c := range missingCfgs {
			cfgs = append(cfgs, c)
		}
		sort.Strings(cfgs)
		shown := missing
		if len(shown) > 10 {
			shown = append(shown[:10:10], fmt.Sprintf("... and %d more", len(missing)-10))
		}
		return fmt.Errorf("%w: --label-filter %q selects %s without their inputs: %s; select those configs too (e.g. --label-filter '(%s) || %s') or pass --allow-partial to skip these checks",
			ErrInvalidInput, fw.opts.LabelFilter, countNoun(len(missing), "check"), strings.Join(shown, "; "), fw.opts.LabelFilter, strings.Join(cfgs, " || "))
	}
	return nil
}

// markJudged records that the running spec reached a verdict, and returns its plan key.
func (fw *framework) markJudged() string {
	sr := ginkgo.CurrentSpecReport()
	container := ""
	if n := len(sr.ContainerHierarchyTexts); n > 0 {
		container = sr.ContainerHierarchyTexts[n-1]
	}
	k := specKey(container, sr.LeafNodeText)
	fw.mu.Lock()
	if fw.judged == nil {
		fw.judged = map[string]bool{}
	}
	fw.judged[k] = true
	fw.mu.Unlock()
	return k
}

// notRun returns a check for every selected spec that never reached a verdict: skipped with
// outcome not_run when the run was interrupted (the run is red anyway), an error otherwise (a
// node failed before judging). Callers hold fw.mu.
func (fw *framework) notRun(interrupted bool, reason string) []gate.Check {
	failures := map[string]string{}
	if fw.suiteReport != nil {
		for _, sr := range fw.suiteReport.SpecReports {
			if sr.LeafNodeType != types.NodeTypeIt || sr.Failure.Message == "" {
				continue
			}
			container := ""
			if n := len(sr.ContainerHierarchyTexts); n > 0 {
				container = sr.ContainerHierarchyTexts[n-1]
			}
			failures[specKey(container, sr.LeafNodeText)] = sr.Failure.Message
		}
	}
	var out []gate.Check
	for _, k := range fw.planOrder {
		if !fw.selected[k] || fw.judged[k] {
			continue
		}
		e := fw.planned[k].entry
		e.Outcome = gate.OutcomeNotRun
		if interrupted {
			e.Status = gate.StatusSkipped
			e.Message = "not run: " + reason
		} else {
			e.Status = gate.StatusError
			e.Message = "not run: the check's spec ended without a verdict"
		}
		if m := failures[k]; m != "" {
			e.Details = m
		}
		out = append(out, e)
	}
	return out
}

// reasonOf turns Ginkgo's special suite failure reasons into what stopped the run ("" when
// nothing did).
func (fw *framework) reasonOf(reasons []string) string {
	for _, r := range reasons {
		l := strings.ToLower(r)
		switch {
		case strings.Contains(l, "timeout"):
			return fmt.Sprintf("--timeout %s elapsed", fw.opts.Timeout)
		case strings.Contains(l, "interrupt"):
			return r + " (SIGINT or SIGTERM)"
		}
	}
	return ""
}

func countNoun(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// at is the code location Ginkgo reports for a spec: the check's line in the YAML spec, so that a
// failure points at what to read or fix rather than at the harness's source.
func (fw *framework) at(line int) types.CodeLocation {
	if line <= 0 {
		return types.NewCustomCodeLocation(fw.spec.File)
	}
	return types.NewCustomCodeLocation(fmt.Sprintf("%s:%d", fw.spec.File, line))
}

// configLine is the line of a config in the spec file (0 when unknown).
func (fw *framework) configLine(name string) int {
	for _, c := range fw.spec.Configs {
		if c.Name == name {
			return c.Line
		}
	}
	return 0
}
