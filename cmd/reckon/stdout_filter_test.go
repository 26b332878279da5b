package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestProgressFilterDropsGoroutineDumps(t *testing.T) {
	in := `[1] reckon gate: default - 44/44 specs •••••
  ------------------------------
  Interrupted by User
  Here's a current progress report:
    gate default config nccl nccl: throughput trials (decode) (Spec Runtime: 2.265s)
      fixtures/specs/default.yaml:14

      Spec Goroutine
      goroutine 102 [sync.WaitGroup.Wait]
        sync.(*WaitGroup).Wait()
          /usr/lib/go/src/sync/waitgroup.go:118

      Other Goroutines
      goroutine 1 [running]
        main.main()
  ------------------------------
reports: out (junit.xml, results.json, summary.md, report.html); 4s to verdict
INTERRUPTED: 5 passed, 0 failed
`
	var out bytes.Buffer
	progressFilter{dst: &out}.copy(strings.NewReader(in))
	got := out.String()
	if strings.Contains(got, "goroutine 1") || strings.Contains(got, "waitgroup.go") || strings.Count(got, "goroutine stacks left out") != 1 {
		t.Errorf("dump not filtered:\n%s", got)
	}
	for _, keep := range []string{"Interrupted by User", "throughput trials (decode)", "fixtures/specs/default.yaml:14", "INTERRUPTED: 5 passed", "reports: out"} {
		if !strings.Contains(got, keep) {
			t.Errorf("lost %q:\n%s", keep, got)
		}
	}
}

// ginkgoFailedRun is Ginkgo's console output of a red gate run (pcie-forced-custom.yaml, taken
// from a real run): two failure blocks as they happened, its failure summary and its own count.
const ginkgoFailedRun = `[1] reckon gate: pcie-forced-custom - 10/10 specs ••••••••
------------------------------
• [FAILED] [0.001 seconds]
gate pcie-forced-custom cross-config [It] relative custom-ar kv_cache_tokens >= 0.9 x nccl [nightly, field-failure, memory, custom-ar, nccl]
fixtures/specs/pcie-forced-custom.yaml:33

  [FAILED] fixtures/specs/pcie-forced-custom.yaml:33: custom-ar: kv_cache_tokens 28256 vs nccl 290400 (ratio 0.097, -90%): below 0.9x
  In [It] at: /work/wt-reports/suites/tree.go:176 @ 12/06/26 01:56:12.865
------------------------------
• [FAILED] [0.001 seconds]
gate pcie-forced-custom cross-config [It] custom allreduce is not slower than NCCL [nightly, field-failure, throughput, custom-ar, nccl]
fixtures/specs/pcie-forced-custom.yaml:38

  [FAILED] fixtures/specs/pcie-forced-custom.yaml:38: custom-ar: output_throughput -61% vs nccl: regression
  In [It] at: /work/wt-reports/suites/tree.go:176 @ 12/06/26 01:56:12.866
------------------------------

Summarizing 2 Failures:
  [FAIL] gate pcie-forced-custom cross-config [It] relative custom-ar kv_cache_tokens >= 0.9 x nccl [nightly, field-failure, memory, custom-ar, nccl]
  /work/wt-reports/suites/tree.go:176
  [FAIL] gate pcie-forced-custom cross-config [It] custom allreduce is not slower than NCCL [nightly, field-failure, throughput, custom-ar, nccl]
  /work/wt-reports/suites/tree.go:176

Ran 10 of 10 Specs in 51.717 seconds
FAIL! -- 8 Passed | 2 Failed | 0 Pending | 0 Skipped
`

// TestProgressFilterOneSummaryNoGoFrames: the terminal shows one summary with one count (the
// terminal report and the closing line, printed after the filter) and no location in reckon's Go
// source; the failures as they happened, with their spec file and line, stay.
func TestProgressFilterOneSummaryNoGoFrames(t *testing.T) {
	for _, colour := range []bool{false, true} {
		in := ginkgoFailedRun
		if colour {
			// Ginkgo on a terminal: the same lines in colour.
			in = strings.NewReplacer("Summarizing", "\x1b[1m\x1b[38;5;9mSummarizing", "Failures:", "Failures:\x1b[0m",
				"Ran ", "\x1b[38;5;9m\x1b[1mRan ", " seconds", " seconds\x1b[0m", "FAIL! --", "\x1b[38;5;9m\x1b[1mFAIL!\x1b[0m --",
				"  In [It]", "  \x1b[38;5;9mIn \x1b[1m[It]\x1b[0m\x1b[38;5;9m", "  /work", "  \x1b[38;5;243m/work").Replace(in)
		}
		var out bytes.Buffer
		progressFilter{dst: &out}.copy(strings.NewReader(in))
		got := out.String()
		for _, bad := range []string{"tree.go", ".go:", "Summarizing", "Ran 10 of 10", "Passed |", "Pending"} {
			if strings.Contains(got, bad) {
				t.Errorf("colour=%v: %q left in:\n%s", colour, bad, got)
			}
		}
		for _, keep := range []string{"[1] reckon gate: pcie-forced-custom", "fixtures/specs/pcie-forced-custom.yaml:33", "below 0.9x", "fixtures/specs/pcie-forced-custom.yaml:38: custom-ar: output_throughput -61%"} {
			if !strings.Contains(got, keep) {
				t.Errorf("colour=%v: lost %q:\n%s", colour, keep, got)
			}
		}
	}
	// An interrupt whose reasons take a line of their own: the counts on the next line go too.
	var out bytes.Buffer
	progressFilter{dst: &out}.copy(strings.NewReader("Ran 3 of 10 Specs in 4.2 seconds\nFAIL! - Interrupted by User, Timeout\n3 Passed | 0 Failed | 0 Pending | 7 Skipped\nnext\n"))
	if got := out.String(); got != "next\n" {
		t.Errorf("interrupted summary not dropped: %q", got)
	}
}
