package suites

import (
	"fmt"
	"strings"

	"github.com/reckon-ci/reckon/internal/safefile"
)

// Limits on what reckon merge reads from a shard directory besides its results.json.
const (
	// maxShardFileBytes bounds one evidence file read from a shard (a numerics probe).
	maxShardFileBytes = 64 << 20
	// maxLogTailLines is how many lines of a log tail a report shows.
	maxLogTailLines = 40
)

// readShardFile reads the file rel inside the shard directory dir, and nothing else: rel must be
// relative and stay inside dir (no "..", no absolute path), no component of it may be a
// symbolic link, it must be a regular file (a FIFO is refused without blocking) and at most
// limit bytes (safefile.ReadFileIn). A results.json names files (log_path, numerics_file) but
// merge never opens what it names: the shard job may have run untrusted code, and a path such
// as /proc/self/environ would publish the merge job's secrets in its reports.
func readShardFile(dir, rel string, limit int64) ([]byte, error) {
	b, err := safefile.ReadFileIn(dir, rel, limit)
	if err != nil {
		return nil, fmt.Errorf("shard %s: %w", dir, err)
	}
	return b, nil
}

// lastLines returns the last n lines of text.
func lastLines(text string, n int) string {
	lines := strings.Split(strings.TrimRight(text, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
