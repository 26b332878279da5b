package engine

import "time"

// SetVersionTimeout lowers DetectVersion's limit for a test; the returned func restores it.
func SetVersionTimeout(d time.Duration) func() {
	old := versionTimeout
	versionTimeout = d
	return func() { versionTimeout = old }
}
