package suites

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/reckon-ci/reckon/gate"
	"github.com/reckon-ci/reckon/spec"
)

// FuzzVerifyShards: merge's shard verification never panics, whatever the second shard's
// results.json holds (issue 25, item 8). Seeds: testdata/fuzz/FuzzVerifyShards (the A/B
// fixture's shard 2, with its spec digest).
func FuzzVerifyShards(f *testing.F) {
	s, err := spec.Load(abSpecPath)
	if err != nil {
		f.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join("testdata", "shards", "ab", "1", "results.json"))
	if err != nil {
		f.Fatal(err)
	}
	first, err := gate.DecodeResults(b)
	if err != nil {
		f.Fatal(err)
	}
	first.SpecDigest = s.Digest()
	// Shard 2 with the fixture spec's digest, which the file in testdata/fuzz cannot carry (the
	// digest follows the spec): the fuzzer starts from a shard that passes verification.
	var second map[string]any
	raw, err := os.ReadFile(filepath.Join("testdata", "shards", "ab", "2", "results.json"))
	if err != nil {
		f.Fatal(err)
	}
	if err := json.Unmarshal(raw, &second); err != nil {
		f.Fatal(err)
	}
	second["spec_digest"] = s.Digest()
	seed, err := json.Marshal(second)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(seed)
	f.Fuzz(func(t *testing.T, data []byte) {
		second, err := gate.DecodeResults(data)
		if err != nil || second.Shard == nil {
			return
		}
		shards := []shardRun{{dir: "shard1", run: first}, {dir: "shard2", run: second}}
		_, _ = verifyShards(s, shards, false)
		_, _ = verifyShards(s, shards, true)
	})
}
