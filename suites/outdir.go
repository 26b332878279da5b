package suites

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/reckon-ci/reckon/gate"
	"github.com/reckon-ci/reckon/internal/atomicfile"
	"github.com/reckon-ci/reckon/internal/safefile"
	"github.com/reckon-ci/reckon/reporters"
)

// ownedDirs are the subdirectories a run writes into its output directory: the engine logs,
// trial results, numerics probes, a failed config's artifacts and the profiles of allreduce
// evidence. A previous run's are removed before anything launches, so that a reused --out never
// holds the last run's evidence beside this one's; but only those that run created (outMarker).
var ownedDirs = []string{"logs", "trials", "numerics", "artifacts", "profiles"}

// outMarker marks an output directory reckon gate wrote. It records the run that wrote it and
// the identity (device and inode) of each of ownedDirs that run created: a later run removes
// only those, so that a directory created since by anyone else, or put in place of reckon's, is
// never deleted.
const outMarker = ".reckon-out"

// outMarkerSchema is the schema of outMarker's content.
const outMarkerSchema = "reckon.out/v1"

// maxMarkerBytes bounds the marker read back.
const maxMarkerBytes = 64 << 10

// outMarkerFile is the content of outMarker.
type outMarkerFile struct {
	Schema string `json:"schema"`
	Note   string `json:"note"`
	// RunID identifies the run that claimed the directory.
	RunID     string    `json:"run_id"`
	ClaimedAt time.Time `json:"claimed_at"`
	// Dirs are the owned directories that run created, by name.
	Dirs map[string]dirID `json:"dirs"`
}

// dirID is a directory's identity: a directory removed and made again, or replaced by a link,
// has another (the inode number may come back; the birth time, where recorded, does not).
type dirID struct {
	Dev   uint64 `json:"dev"`
	Ino   uint64 `json:"ino"`
	Birth int64  `json:"birth_ns,omitempty"`
}

// readOutMarker reads dir's marker: nil without error when there is none; an error when there
// is one reckon did not write (or an older reckon wrote, without the record of what it created).
func readOutMarker(dir string) (*outMarkerFile, error) {
	p := filepath.Join(dir, outMarker)
	b, err := safefile.ReadFile(p, maxMarkerBytes)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var m outMarkerFile
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil || m.Schema != outMarkerSchema || m.RunID == "" {
		return nil, fmt.Errorf("%s is not a marker this reckon wrote (expected JSON with \"schema\": %q and the run's id; an older reckon wrote a note without the record of what it created)", p, outMarkerSchema)
	}
	return &m, nil
}

// foreignResults says why the results.json in dir is not one reckon wrote ("" when it is, or
// when there is none).
func foreignResults(dir string) string {
	p := filepath.Join(dir, reporters.JSONFile)
	b, err := safefile.ReadFile(p, gate.MaxResultsBytes)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return ""
	case err != nil:
		return fmt.Sprintf("%s cannot be read as reckon's: %v", p, err)
	}
	var probe struct {
		Schema string `json:"schema"`
	}
	if err := json.Unmarshal(b, &probe); err != nil {
		return fmt.Sprintf("%s is not JSON reckon wrote (%s)", p, safefile.Excerpt(err.Error()))
	}
	if !strings.HasPrefix(probe.Schema, "reckon.results/") {
		return fmt.Sprintf("%s is not a reckon results file (its \"schema\" is %q, expected %q)", p, safefile.Excerpt(probe.Schema), gate.ResultsSchema)
	}
	return ""
}

// claimOutDir makes dir this run's output directory and returns what it removed of the
// previous run there. It refuses, removing nothing, a directory that holds what reckon would
// remove or overwrite (ownedDirs, the reports) unless reckon's marker is there, the
// results.json is reckon's, and each owned directory present is one the marker records as
// created by reckon (same device and inode). Then it creates every owned directory afresh and
// records them, with a new run id, in the marker.
func claimOutDir(dir string) ([]string, error) {
	return claim(dir, false)
}

// checkOutDir is claimOutDir without its effects: the refusals, before the spec's inputs are
// checked (bad input then leaves dir as it was; claimOutDir checks again when it acts).
func checkOutDir(dir string) error {
	_, err := claim(dir, true)
	return err
}

func claim(dir string, dryRun bool) ([]string, error) {
	refuse := func(why string) error {
		return fmt.Errorf("--out %s: %s; reckon would delete or overwrite it, so nothing was touched: choose a new or empty --out, or remove it yourself", dir, why)
	}
	marker, err := readOutMarker(dir)
	if err != nil {
		return nil, refuse(err.Error())
	}
	if why := foreignResults(dir); why != "" {
		return nil, refuse(why)
	}
	var remove []string
	for _, d := range ownedDirs {
		p := filepath.Join(dir, d)
		id, st, ok, err := statID(p)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("output directory %s: %w", dir, err)
		}
		if marker == nil {
			return nil, refuse(fmt.Sprintf("%s/ exists, but %s is not a reckon output directory (no %s)", d, dir, outMarker))
		}
		if rec, found := marker.Dirs[d]; !found || !ok || rec != id || !st.IsDir() {
			return nil, refuse(fmt.Sprintf("%s/ is not the directory reckon's run %s created there (made or replaced since)", d, marker.RunID))
		}
		remove = append(remove, d)
	}
	if marker == nil {
		for _, f := range staleReports {
			if _, err := os.Lstat(filepath.Join(dir, f)); err == nil {
				return nil, refuse(fmt.Sprintf("%s exists, but %s is not a reckon output directory (no %s)", f, dir, outMarker))
			}
		}
	}
	if dryRun {
		return nil, nil
	}
	var removed []string
	for _, name := range staleReports {
		err := os.Remove(filepath.Join(dir, name))
		if err == nil {
			removed = append(removed, name)
		} else if !errors.Is(err, os.ErrNotExist) {
			return removed, fmt.Errorf("output directory %s: removing the previous run's %s: %w", dir, name, err)
		}
	}
	for _, d := range remove {
		if err := os.RemoveAll(filepath.Join(dir, d)); err != nil {
			return removed, fmt.Errorf("output directory %s: removing the previous run's %s/: %w", dir, d, err)
		}
		removed = append(removed, d+"/")
	}
	m := outMarkerFile{Schema: outMarkerSchema, RunID: newRunID(), ClaimedAt: time.Now().UTC().Truncate(time.Second), Dirs: map[string]dirID{},
		Note: "This directory is a reckon gate output. Before each run reckon removes the logs/, trials/, numerics/, artifacts/ and profiles/ that the run recorded here created, and its reports; nothing else."}
	for _, d := range ownedDirs {
		p := filepath.Join(dir, d)
		if err := os.Mkdir(p, 0o755); err != nil {
			return removed, fmt.Errorf("output directory %s: %w", dir, err)
		}
		if id, _, ok, err := statID(p); err == nil && ok {
			m.Dirs[d] = id
		}
	}
	if err := atomicfile.WriteJSON(filepath.Join(dir, outMarker), &m); err != nil {
		return removed, fmt.Errorf("output directory %s: %w", dir, err)
	}
	return removed, nil
}

// newRunID is a random id for a run's claim of its output directory.
func newRunID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return time.Now().UTC().Format("20060102T150405Z") + "-" + hex.EncodeToString(b[:])
}
