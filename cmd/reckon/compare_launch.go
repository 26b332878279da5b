package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"

	"github.com/reckon-ci/reckon/gate"
	"github.com/reckon-ci/reckon/workload"
)

// Launches as the unit in reckon compare. A reckon results.json records which launch of its
// config ran each trial (Trial.Launch); when both sides come from such files, compare judges
// every metric with gate.CompareLaunches, as the gate does (docs/statistics.md, "Launches as the
// unit"): the launch means are the replicates, and a side with one launch takes the
// between-launch CV from the other side's launches or the prior. Trial files of other tools
// carry no launch, and compare then treats each trial as a replicate, saying so.

// resultsFile is the part of a reckon results.json that compare reads.
type resultsFile struct {
	Schema  string `json:"schema"`
	Configs []struct {
		Name   string `json:"name"`
		Trials []struct {
			Workload string             `json:"workload"`
			Launch   int                `json:"launch"`
			Metrics  map[string]float64 `json:"metrics"`
		} `json:"trials"`
	} `json:"configs"`
}

// readResultsSide reads the trials of one config and workload of a reckon results.json into ts,
// each with its launch (file-unique: fileNo*1000 + launch; launch 0, written before relaunches
// existed, is the only launch). ok is false when path is not a reckon results file.
func readResultsSide(ts *trialSet, path string, fileNo int, config, workloadName string) (ok bool, err error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return false, nil // the importer reports it
	}
	if !bytes.Contains(data[:min(len(data), 4096)], []byte(`"reckon.results/`)) {
		return false, nil
	}
	var r resultsFile
	if err := json.Unmarshal(data, &r); err != nil || !strings.HasPrefix(r.Schema, "reckon.results/") {
		return false, nil
	}
	var withTrials []string
	idx := -1
	for i, c := range r.Configs {
		if len(c.Trials) == 0 {
			continue
		}
		withTrials = append(withTrials, c.Name)
		if c.Name == config || config == "" {
			idx = i
		}
	}
	switch {
	case config != "" && idx < 0:
		return true, fmt.Errorf("%s: no config %q with trials (configs with trials: %s)", path, config, strings.Join(withTrials, ", "))
	case config == "" && len(withTrials) != 1:
		return true, fmt.Errorf("%s: %d configs have trials (%s): name one with --base-config / --head-config", path, len(withTrials), strings.Join(withTrials, ", "))
	}
	c := r.Configs[idx]
	workloads := map[string]bool{}
	for _, t := range c.Trials {
		workloads[t.Workload] = true
	}
	if workloadName == "" && len(workloads) > 1 {
		var ws []string
		for w := range workloads {
			ws = append(ws, w)
		}
		sort.Strings(ws)
		return true, fmt.Errorf("%s: config %s has trials of workloads %s: name one with --workload", path, c.Name, strings.Join(ws, ", "))
	}
	n := 0
	for _, t := range c.Trials {
		if workloadName != "" && t.Workload != workloadName {
			continue
		}
		n++
		ts.metrics = append(ts.metrics, t.Metrics)
		ts.workloads = append(ts.workloads, workloadKey{})
		ts.semantics = append(ts.semantics, nil)
		ts.files = append(ts.files, path)
		ts.launches = append(ts.launches, fileNo*1000+max(1, t.Launch))
	}
	if n == 0 {
		return true, fmt.Errorf("%s: config %s has no trials of workload %q", path, c.Name, workloadName)
	}
	return true, nil
}

// loadSide reads one side's files: reckon results.json files (config and workload chosen by
// config and workloadName, launches kept) and trial files in any format reckon import reads
// (no launch: 0).
func loadSide(paths []string, opts workload.ImportOptions, config, workloadName string) (*trialSet, error) {
	ts := &trialSet{}
	for i, p := range paths {
		ok, err := readResultsSide(ts, p, i+1, config, workloadName)
		if err != nil {
			return nil, err
		}
		if ok {
			continue
		}
		one, err := loadTrialsWith([]string{p}, opts)
		if err != nil {
			return nil, err
		}
		ts.metrics = append(ts.metrics, one.metrics...)
		ts.workloads = append(ts.workloads, one.workloads...)
		ts.semantics = append(ts.semantics, one.semantics...)
		ts.files = append(ts.files, one.files...)
		ts.launches = append(ts.launches, make([]int, len(one.metrics))...)
	}
	return ts, nil
}

// byLaunch reports whether every trial of ts carries its launch.
func (ts *trialSet) byLaunch() bool {
	if len(ts.launches) == 0 {
		return false
	}
	for _, l := range ts.launches {
		if l == 0 {
			return false
		}
	}
	return true
}

// launchGroups is metric's values per launch, launches in the order they first appear.
func (ts *trialSet) launchGroups(metric string) [][]float64 {
	at := map[int]int{}
	var out [][]float64
	for i, m := range ts.metrics {
		v, ok := m[metric]
		if !ok {
			continue
		}
		j, seen := at[ts.launches[i]]
		if !seen {
			j = len(out)
			at[ts.launches[i]] = j
			out = append(out, nil)
		}
		out[j] = append(out[j], v)
	}
	return out
}

// countLaunches is the number of distinct launches of ts.
func (ts *trialSet) countLaunches() int {
	seen := map[int]bool{}
	for _, l := range ts.launches {
		seen[l] = true
	}
	return len(seen)
}

// compareUnitNote is the line compare prints under its table on the statistical unit.
func compareUnitNote(base, head *trialSet, results []*gate.StatResult, prior gate.LaunchNoise) string {
	if !base.byLaunch() || !head.byLaunch() {
		if base.byLaunch() || head.byLaunch() {
			return "unit: trial (one side's files carry no launch indices, so each trial counts as a replicate; compare two reckon results.json files to judge launches)"
		}
		return ""
	}
	src := ""
	for _, r := range results {
		if r.Launch != nil && r.Launch.BetweenSource != "" {
			src = r.Launch.BetweenSource
			if r.Launch.BetweenPrior {
				src = fmt.Sprintf("assumed %.1f%% (%s)", 100*prior.CV, r.Launch.BetweenSource)
			}
			break
		}
	}
	return fmt.Sprintf("unit: launch (%d base vs %d head launches; each launch's mean is one replicate); between-launch variation: %s",
		base.countLaunches(), head.countLaunches(), src)
}

// comparePrior is compare's between-launch prior: --between-launch-cv, else the testbed's
// ($RECKON_BETWEEN_LAUNCH_CV, else gate.DefaultBetweenLaunchCV), as the gate takes it.
func comparePrior(flag string) (gate.LaunchNoise, error) {
	cv := 0.0
	if strings.TrimSpace(flag) != "" {
		v, err := gate.ParseBetweenLaunchCV("--between-launch-cv", flag)
		if err != nil {
			return gate.LaunchNoise{}, err
		}
		cv = v
	}
	p, err := gate.TestbedPrior(cv)
	if cv > 0 {
		p.Source = "--between-launch-cv"
	}
	return p, err
}
