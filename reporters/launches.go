package reporters

import (
	"fmt"
	"strings"

	"github.com/reckon-ci/reckon/gate"
)

// launchOrderLine is the run order of a run that relaunched configs, e.g. "main#1 → pr#1 →
// pr#2 → main#2 → main#3 → pr#3 (3 launches per config, balanced interleaved order)"; "" when
// every config was launched once.
func launchOrderLine(r *gate.Run) string {
	relaunched := false
	maxOf := 0
	for _, l := range r.LaunchOrder {
		if l.Of > 1 || l.Launch > 1 {
			relaunched = true
		}
		maxOf = max(maxOf, l.Of)
	}
	if !relaunched {
		return ""
	}
	parts := make([]string, 0, len(r.LaunchOrder))
	for _, l := range r.LaunchOrder {
		p := fmt.Sprintf("%s#%d", l.Config, l.Launch)
		if l.Error != "" {
			p += " (did not start)"
		}
		parts = append(parts, p)
	}
	return fmt.Sprintf("%s (up to %d launches per config, balanced interleaved order; statistical checks treat launches as the unit)", strings.Join(parts, " → "), maxOf)
}

// shardLine says which shard a run was, or which shards were merged into it ("" for neither).
func shardLine(r *gate.Run) string {
	switch {
	case len(r.MergedFrom) > 0:
		keys := map[string]bool{}
		for _, m := range r.MergedFrom {
			keys[m.TestbedKey] = true
		}
		return fmt.Sprintf("merged from %d shards on %d testbed key(s)", len(r.MergedFrom), len(keys))
	case r.Shard != nil:
		s := fmt.Sprintf("shard %d/%d (%s)", r.Shard.Index, r.Shard.Count, strings.Join(r.Shard.Configs, ", "))
		if len(r.Shard.Configs) == 0 {
			s = fmt.Sprintf("shard %d/%d (empty: no configs fall in it)", r.Shard.Index, r.Shard.Count)
		}
		if n := len(r.Shard.Deferred); n > 0 {
			s += fmt.Sprintf(", %d cross-config checks left to reckon merge", n)
		}
		return s
	}
	return ""
}

// plannedLaunches is how many launches the spec asked for of a config (LaunchOrder's Of; 0
// when the run recorded no launch order).
func plannedLaunches(r *gate.Run, config string) int {
	n := 0
	for _, l := range r.LaunchOrder {
		if l.Config == config {
			n = max(n, l.Of)
		}
	}
	return n
}
