package engine

import "time"

// SetVersionTimeout lowers DetectVersion's limit for a test; the returned func restores it.
func SetVersionTimeout(d time.Duration) func() {
	old := versionTimeout
	versionTimeout = d
	return func() { versionTimeout = old }
}

// OwnedSessions lists the sessions the supervisor of i reported as created in its tree.
func OwnedSessions(i *Instance) []int {
	i.owned.mu.Lock()
	defer i.owned.mu.Unlock()
	var out []int
	for s := range i.owned.sessions {
		out = append(out, s)
	}
	return out
}
