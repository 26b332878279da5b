package suites

import (
	"fmt"
	"path/filepath"
)

// Derived file names of a run's output directory. Config and workload names may hold letters,
// digits, '.', '_' and '-' (spec namePattern) but never '+': joined with '+', two different
// (config, workload, trial) or (config, launch) never give one file name. (Joined with '-', config
// "a" with workload "w-x" and config "a-w" with workload "x" both wrote trials/a-w-x-1.json, and
// config "a.launch2" shared its log with launch 2 of "a".)
const nameSep = "+"

// trialFile is the result file of trial n (1-based) of a config's workload.
func trialFile(outDir, config, workload string, n int) string {
	return filepath.Join(outDir, "trials", fmt.Sprintf("%s%s%s%s%d.json", config, nameSep, workload, nameSep, n))
}

// launchLogFile is the engine log of a config's launch (1-based): logs/CONFIG.log for the
// first, logs/CONFIG+launchN.log for a relaunch.
func launchLogFile(outDir, config string, launch int) string {
	if launch <= 1 {
		return filepath.Join(outDir, "logs", config+".log")
	}
	return filepath.Join(outDir, "logs", fmt.Sprintf("%s%slaunch%d.log", config, nameSep, launch))
}
