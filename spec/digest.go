package spec

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
)

// Digest identifies the spec's content: "sha256:" and the hex SHA-256 of the resolved spec as
// JSON, without the path it was read from (File). Two loads of one spec from different
// checkouts have the same digest; any change to a config, workload or check (or a line number,
// which reports cite) changes it. reckon gate records it in results.json, and reckon merge
// refuses shards whose digests differ from each other or from the spec it judges with.
func (s *Spec) Digest() string {
	c := *s
	c.File = ""
	b, err := json.Marshal(&c)
	if err != nil {
		// Every field is plain data; a failure would be a bug in a field's type.
		return "sha256:unavailable (" + err.Error() + ")"
	}
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}
