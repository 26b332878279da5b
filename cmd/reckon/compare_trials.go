package main

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/reckon-ci/reckon/gate"
	"github.com/reckon-ci/reckon/workload"
)

// trialSet is the trials of one side: per trial its metrics, the workload that produced it and
// the definitions it was measured with.
type trialSet struct {
	metrics   []map[string]float64
	workloads []workloadKey
	semantics []*workload.Semantics
	files     []string
	// launches is each trial's launch (compare_launch.go), 0 when its file does not say.
	launches []int
}

// workloadKey is what must match for two trials to be comparable, each field as printed; ""
// is a setting the trial's file does not record (unknown).
type workloadKey struct {
	Model, Dataset, MaxConcurrency, RequestRate, InputLens, OutputLens, IgnoreEOS, Temperature string
}

// keyOf is a result's workloadKey: the dataset normalised across tools, lengths as the interval
// they were drawn from, unrecorded settings "".
func keyOf(r *workload.Result) workloadKey {
	w := r.Metadata.Workload
	k := workloadKey{Model: r.Metadata.Model, Dataset: workload.DatasetKind(w.Dataset), MaxConcurrency: "none", RequestRate: "inf"}
	if w.MaxConcurrency > 0 {
		k.MaxConcurrency = strconv.Itoa(w.MaxConcurrency)
	}
	if w.RequestRate > 0 {
		k.RequestRate = strconv.FormatFloat(w.RequestRate, 'g', -1, 64)
	}
	if r.Metadata.Labels["request_rate"] == "trace" {
		k.RequestRate = "trace"
	}
	lens := func(rg *workload.LenRange, l int) string {
		if rg != nil {
			return rg.String()
		}
		if l > 0 && w.RangeRatio == 0 {
			return strconv.Itoa(l)
		}
		return ""
	}
	k.InputLens, k.OutputLens = lens(w.InputLens, w.InputLen), lens(w.OutputLens, w.OutputLen)
	if w.IgnoreEOS != nil {
		k.IgnoreEOS = strconv.FormatBool(*w.IgnoreEOS)
	}
	switch {
	case w.Temperature != nil:
		k.Temperature = strconv.FormatFloat(*w.Temperature, 'g', -1, 64)
	case w.TemperatureServerDefault:
		k.Temperature = "server default"
	}
	return k
}

// loadTrialSet reads every file and returns each trial's metrics (each result of a file is one
// trial).
func loadTrialSet(paths []string) ([]map[string]float64, error) {
	ts, err := loadTrialsWith(paths, workload.ImportOptions{})
	if err != nil {
		return nil, err
	}
	return ts.metrics, nil
}

// loadTrialsWith reads every file; each result of a file is one trial.
func loadTrialsWith(paths []string, opts workload.ImportOptions) (*trialSet, error) {
	ts := &trialSet{}
	for _, p := range paths {
		rs, err := importTrials(p, opts)
		if err != nil {
			return nil, err
		}
		for i, r := range rs {
			m := r.Metrics()
			if len(m) == 0 {
				return nil, fmt.Errorf("%s: result %d has no metrics", p, i+1)
			}
			ts.metrics = append(ts.metrics, m)
			ts.workloads = append(ts.workloads, keyOf(r))
			ts.semantics = append(ts.semantics, r.Metadata.Semantics)
			ts.files = append(ts.files, p)
		}
	}
	return ts, nil
}

// importTrials reads one result file in any format `reckon import` reads and returns its
// results (vLLM key names). A file with several results (JSON lines: SGLang bench_serving, vLLM
// --append-result) gives one trial per result.
var importTrials = func(path string, opts workload.ImportOptions) ([]*workload.Result, error) {
	return workload.ImportAllWith(path, opts)
}

// workloadDiffs names every workload setting whose recorded values differ between or within the
// two sides (e.g. "max_concurrency: base 4, head 8"), and, apart, every setting one side does
// not record while the other does (e.g. "input_lens: base unknown, head 32"): an unknown is
// not a difference, and never printed as 0.
func workloadDiffs(base, head *trialSet) (diffs, unrecorded []string) {
	type field struct {
		name string
		get  func(workloadKey) string
	}
	fields := []field{
		{"model", func(k workloadKey) string { return k.Model }},
		{"max_concurrency", func(k workloadKey) string { return k.MaxConcurrency }},
		{"request_rate", func(k workloadKey) string { return k.RequestRate }},
		{"input_lens", func(k workloadKey) string { return k.InputLens }},
		{"output_lens", func(k workloadKey) string { return k.OutputLens }},
		{"dataset", func(k workloadKey) string { return k.Dataset }},
		{"ignore_eos", func(k workloadKey) string { return k.IgnoreEOS }},
		{"temperature", func(k workloadKey) string { return k.Temperature }},
	}
	values := func(ts *trialSet, f field) (known []string, unknown int) {
		set := map[string]bool{}
		for _, k := range ts.workloads {
			if v := f.get(k); v != "" {
				set[v] = true
			} else {
				unknown++
			}
		}
		for v := range set {
			known = append(known, v)
		}
		sort.Strings(known)
		return known, unknown
	}
	show := func(known []string, unknown int) string {
		out := strings.Join(known, "|")
		if unknown > 0 {
			if out != "" {
				out += "|"
			}
			out += "unknown"
		}
		return out
	}
	for _, f := range fields {
		b, bu := values(base, f)
		h, hu := values(head, f)
		line := fmt.Sprintf("%s: base %s, head %s", f.name, show(b, bu), show(h, hu))
		switch {
		case len(b) > 1 || len(h) > 1 || (len(b) == 1 && len(h) == 1 && b[0] != h[0]):
			diffs = append(diffs, line)
		case bu > 0 || hu > 0:
			if len(b)+len(h) > 0 {
				unrecorded = append(unrecorded, line)
			}
		}
	}
	return diffs, unrecorded
}

// semanticsReport is what compare says about the definitions of the two sides.
type semanticsReport struct {
	sides map[string][]*workload.Semantics
	diffs []string
	notes []string
}

// sideSemantics collects each side's distinct definitions and names those that differ between
// the two sides (or within one).
func sideSemantics(base, head *trialSet) semanticsReport {
	distinct := func(ss []*workload.Semantics) []*workload.Semantics {
		var out []*workload.Semantics
		seen := map[string]bool{}
		for _, s := range ss {
			k := "<nil>"
			if s != nil {
				k = fmt.Sprintf("%+v", *s)
			}
			if !seen[k] {
				seen[k] = true
				out = append(out, s)
			}
		}
		return out
	}
	b, h := distinct(base.semantics), distinct(head.semantics)
	rep := semanticsReport{sides: map[string][]*workload.Semantics{"base": b, "head": h}}
	for _, side := range []struct {
		name string
		ss   []*workload.Semantics
	}{{"base", b}, {"head", h}} {
		var read []string
		for _, s := range side.ss {
			if s == nil {
				read = append(read, "unknown definitions")
				continue
			}
			read = append(read, fmt.Sprintf("%s, version %s: %s", s.Tool, s.Version, s.Basis))
		}
		rep.notes = append(rep.notes, fmt.Sprintf("%s read with %s", side.name, strings.Join(read, "; ")))
	}
	seen := map[string]bool{}
	for _, x := range b {
		for _, y := range h {
			for _, d := range workload.DefinitionDiffs(x, y) {
				if !seen[d] {
					seen[d] = true
					rep.diffs = append(rep.diffs, d)
				}
			}
		}
	}
	if len(b) > 1 || len(h) > 1 {
		rep.notes = append(rep.notes, "warning: one side mixes results measured with different definitions")
	}
	for _, d := range rep.diffs {
		rep.notes = append(rep.notes, "definitions differ: "+d)
	}
	return rep
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// partialMetrics returns the metrics with a known direction that some trials have and others
// (of either side) lack: they are not compared.
func partialMetrics(sets ...[]map[string]float64) []string {
	count, total := metricCounts(sets...)
	var out []string
	for k, c := range count {
		if _, ok := gate.MetricFor(k); ok && c < total {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

// metricCounts counts, over every trial of the sets, the trials that have each metric; total is
// the number of trials.
func metricCounts(sets ...[]map[string]float64) (count map[string]int, total int) {
	count = map[string]int{}
	for _, set := range sets {
		for _, t := range set {
			total++
			for k := range t {
				count[k]++
			}
		}
	}
	return count, total
}
