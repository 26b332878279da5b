package reporters

import (
	"strings"
	"testing"

	"github.com/reckon-ci/reckon/gate"
)

func TestLaunchOrderAndShardLines(t *testing.T) {
	r := &gate.Run{SpecName: "ab", Configs: []gate.Config{{Name: "main", Launches: 3}, {Name: "pr", Launches: 3}}}
	for _, l := range []struct {
		c string
		n int
	}{{"main", 1}, {"pr", 1}, {"pr", 2}, {"main", 2}, {"main", 3}, {"pr", 3}} {
		r.LaunchOrder = append(r.LaunchOrder, gate.LaunchRecord{Config: l.c, Launch: l.n, Of: 3})
	}
	want := "main#1 → pr#1 → pr#2 → main#2 → main#3 → pr#3 (up to 3 launches per config"
	if got := launchOrderLine(r); !strings.HasPrefix(got, want) {
		t.Errorf("launch order %q", got)
	}
	md := renderMarkdown(r, 1<<16)
	if !strings.Contains(md, "### Launch order") || strings.Contains(md, "| 3 ⚠️") {
		t.Errorf("markdown: launch order missing, or planned launches flagged:\n%s", md)
	}
	r.Configs[0].Launches = 4 // one more than planned: flagged
	if md := renderMarkdown(r, 1<<16); !strings.Contains(md, "| 4 ⚠️") {
		t.Errorf("an unplanned launch is not flagged:\n%s", md)
	}
	one := &gate.Run{LaunchOrder: []gate.LaunchRecord{{Config: "a", Launch: 1, Of: 1}, {Config: "b", Launch: 1, Of: 1}}}
	if got := launchOrderLine(one); got != "" {
		t.Errorf("one launch per config: %q", got)
	}
	sh := &gate.Run{Shard: &gate.Shard{Index: 1, Count: 2, By: "config", Configs: []string{"main"}, Deferred: []string{"x", "y"}},
		Checks: []gate.Check{{Verdict: gate.Verdict{Name: "main: launch and readiness", Kind: gate.KindHealth, Config: "main"}, Status: gate.StatusPassed}}}
	if got := shardLine(sh); got != "shard 1/2 (main), 2 cross-config checks left to reckon merge" {
		t.Errorf("shard line %q", got)
	}
	m := &gate.Run{MergedFrom: []gate.MergedShard{{Index: 1, TestbedKey: "k"}, {Index: 2, TestbedKey: "k"}}}
	if got := shardLine(m); got != "merged from 2 shards on 1 testbed key(s)" {
		t.Errorf("merged line %q", got)
	}
	var b strings.Builder
	if err := WriteJUnit(&b, sh); err != nil || !strings.Contains(b.String(), `name="shards" value="shard 1/2 (main)`) {
		t.Errorf("junit properties (%v):\n%s", err, b.String())
	}
}
