package gate

import (
	"context"
	"strings"
	"testing"
)

// A small launches x trials calibration: deterministic, one-launch designs use the prior, and a
// 3 x 3 design at 1% noise reaches the aims.
func TestCalibrateLaunches(t *testing.T) {
	cfg := DefaultLaunchCalibrationConfig()
	cfg.Noise = []LaunchNoiseLevel{{0.01, 0.01}}
	cfg.Designs = []LaunchDesign{{1, 5}, {4, 3}}
	cfg.Reps, cfg.NullReps = 300, 1000
	rows, err := CalibrateLaunches(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Workers = 1
	again, _ := CalibrateLaunches(context.Background(), cfg)
	if len(rows) != 2 || rows[0] != again[0] || rows[1] != again[1] {
		t.Fatalf("not deterministic: %+v vs %+v", rows, again)
	}
	if !rows[0].Prior || rows[0].FalseAlarm > 0.01 || rows[1].Prior || !rows[1].Meets() {
		t.Errorf("rows %+v", rows)
	}
	md := LaunchCalibrationMarkdown(rows, cfg.Effect, cfg.Prior)
	if !strings.Contains(md, "| 1% / 1% | 1 x 5 (prior 3%) |") || !strings.Contains(md, "**4 x 3**") {
		t.Errorf("markdown:\n%s", md)
	}
}
