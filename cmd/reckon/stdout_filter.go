package main

import (
	"bufio"
	"io"
	"regexp"
	"strings"
)

// progressFilter copies Ginkgo's console output line by line, leaving out what a person does not
// need from it (`--verbose` keeps everything):
//   - the goroutine dumps of the progress report it prints on an interrupt (its "Spec Goroutine"
//     and "Other Goroutines" stacks): on a normal interrupt the user needs to know what was
//     running, not a stack trace;
//   - Ginkgo's own end-of-suite summary ("Summarizing 2 Failures:", "Ran 10 of 10 Specs",
//     "FAIL! -- 8 Passed | 2 Failed | 0 Pending | 0 Skipped"): it counts Ginkgo specs, not
//     checks, so its numbers disagree with the run's; the terminal report after it and the
//     closing line are the one summary and the one count (gate.Run.Count);
//   - harness-internal code locations ("In [It] at: .../suites/tree.go:176 @ ...", a bare
//     "suites/tree.go:176" line): a failure is located by its spec file and line, which stay;
//     where in reckon's Go source Ginkgo recorded it is in --verbose output and in no report.
type progressFilter struct {
	dst io.Writer
}

// ansiSGR matches the colour sequences Ginkgo writes on a terminal.
var ansiSGR = regexp.MustCompile(`\x1b\[[0-9;]*m`)

// goLocation is a line that is only a location in Go source, with Ginkgo's "In [It] at: "
// before it and its " @ timestamp" after it when it has them.
var goLocation = regexp.MustCompile(`^(In \[[A-Za-z]+\] at: )?\S+\.go:\d+( @ .*)?$`)

// ginkgoRan and ginkgoStatus are the two lines of Ginkgo's closing count.
var (
	ginkgoRan    = regexp.MustCompile(`^Ran \d+ of \d+ Specs? in `)
	ginkgoStatus = regexp.MustCompile(`^(SUCCESS!|FAIL!)( - .*)?( -- .*)?$|^\d+ Passed \| |^A BeforeSuite node failed`)
)

// copy reads r until EOF.
func (f progressFilter) copy(r io.Reader) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	skipping, summary, afterRan := false, false, false
	for sc.Scan() {
		line := sc.Text()
		trimmed := strings.TrimSpace(ansiSGR.ReplaceAllString(line, ""))
		switch {
		case !skipping && (trimmed == "Spec Goroutine" || trimmed == "Other Goroutines" || trimmed == "Goroutines of Interest"):
			skipping = true
			io.WriteString(f.dst, strings.Replace(line, trimmed, "(goroutine stacks left out; --verbose shows them)", 1)+"\n")
			continue
		case skipping && strings.HasPrefix(trimmed, "----------"):
			skipping = false
		case skipping && (strings.HasPrefix(trimmed, "Ran ") || strings.HasPrefix(trimmed, "reports:") || strings.HasPrefix(trimmed, "[1]")):
			skipping = false
		}
		if skipping {
			continue
		}
		switch {
		case strings.HasPrefix(trimmed, "Summarizing ") && strings.HasSuffix(trimmed, ":"):
			summary = true
			continue
		case ginkgoRan.MatchString(trimmed):
			summary, afterRan = false, true
			continue
		case afterRan && ginkgoStatus.MatchString(trimmed):
			continue // its status line, and the counts when the status took a line of its own
		case summary && !strings.HasPrefix(trimmed, "reports:"):
			continue // the summary's failures: the terminal report lists them with their reasons
		case goLocation.MatchString(trimmed):
			continue
		}
		summary = false
		if trimmed != "" {
			afterRan = false
		}
		io.WriteString(f.dst, line+"\n")
	}
	// A line longer than the buffer ends the scan: pass the rest through unfiltered.
	io.Copy(f.dst, r)
}
