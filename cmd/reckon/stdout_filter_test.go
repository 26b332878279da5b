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
