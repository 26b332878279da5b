package main

import (
	"bufio"
	"io"
	"strings"
)

// progressFilter copies Ginkgo's console output line by line, leaving out the goroutine dumps of
// the progress report it prints on an interrupt (its "Spec Goroutine" and "Other Goroutines"
// stacks): on a normal interrupt the user needs to know what was running, not a stack trace.
// `--verbose` keeps them.
type progressFilter struct {
	dst io.Writer
}

// copy reads r until EOF.
func (f progressFilter) copy(r io.Reader) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	skipping := false
	for sc.Scan() {
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
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
		if !skipping {
			io.WriteString(f.dst, line+"\n")
		}
	}
	// A line longer than the buffer ends the scan: pass the rest through unfiltered.
	io.Copy(f.dst, r)
}
