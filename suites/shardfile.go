package suites

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// Limits on what reckon merge reads from a shard directory besides its results.json.
const (
	// maxShardFileBytes bounds one evidence file read from a shard (a numerics probe).
	maxShardFileBytes = 64 << 20
	// maxLogTailLines is how many lines of a log tail a report shows.
	maxLogTailLines = 40
)

// readShardFile reads the file rel inside the shard directory dir, and nothing else: rel must be
// relative and stay inside dir (no "..", no absolute path, no symbolic link leading out of
// dir, which os.OpenInRoot refuses), must be a regular file, and at most limit bytes. A
// results.json names files (log_path, numerics_file) but merge never opens what it names: the
// shard job may have run untrusted code, and a path such as /proc/self/environ would publish
// the merge job's secrets in its reports.
func readShardFile(dir, rel string, limit int64) ([]byte, error) {
	if rel == "" || filepath.IsAbs(rel) || !filepath.IsLocal(rel) {
		return nil, fmt.Errorf("shard %s: %q is not a path inside the shard directory", dir, rel)
	}
	f, err := os.OpenInRoot(dir, rel)
	if err != nil {
		return nil, fmt.Errorf("shard %s: %w", dir, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("shard %s: %s: %w", dir, rel, err)
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("shard %s: %s is not a regular file (%s)", dir, rel, st.Mode().Type())
	}
	if st.Size() > limit {
		return nil, fmt.Errorf("shard %s: %s is %d bytes, more than the %d this file may have", dir, rel, st.Size(), limit)
	}
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fmt.Errorf("shard %s: read %s: %w", dir, rel, err)
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("shard %s: %s grew past %d bytes while read", dir, rel, limit)
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
