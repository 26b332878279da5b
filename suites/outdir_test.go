//go:build unix

package suites

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func writeFile(t *testing.T, p, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func mustExist(t *testing.T, p string) {
	t.Helper()
	if _, err := os.Lstat(p); err != nil {
		t.Errorf("%s was touched: %v", p, err)
	}
}

// A reused output directory loses the previous run's owned directories and reports (and says
// so), and nothing else.
func TestReusedOutDirIsCleared(t *testing.T) {
	out := t.TempDir()
	if _, err := claimOutDir(out); err != nil {
		t.Fatal(err)
	}
	for _, d := range ownedDirs {
		writeFile(t, filepath.Join(out, d, "old", "x.json"), "{}")
	}
	writeFile(t, filepath.Join(out, "results.json"), `{"schema": "reckon.results/v2"}`)
	writeFile(t, filepath.Join(out, "junit.xml"), `<testsuites/>`)
	keep := filepath.Join(out, "notes.txt")
	writeFile(t, keep, "mine")
	// The check before the spec's inputs are known good touches nothing.
	if err := checkOutDir(out); err != nil {
		t.Fatal(err)
	}
	mustExist(t, filepath.Join(out, "logs", "old", "x.json"))
	mustExist(t, filepath.Join(out, "results.json"))
	removed, err := claimOutDir(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range ownedDirs {
		if _, err := os.Stat(filepath.Join(out, d, "old")); !os.IsNotExist(err) {
			t.Errorf("%s/ of the previous run is still there (%v)", d, err)
		}
		if !slices.Contains(removed, d+"/") {
			t.Errorf("removed %v does not name %s/", removed, d)
		}
	}
	if !slices.Contains(removed, "results.json") || !slices.Contains(removed, "junit.xml") {
		t.Errorf("removed %v does not name the reports", removed)
	}
	mustExist(t, keep)
	// And again: the directories this claim made are recorded, so the next run may clear them.
	if _, err := claimOutDir(out); err != nil {
		t.Fatal(err)
	}
}

// A directory another tool wrote (lm-eval, vLLM's benchmarks: a results.json of their own) is
// refused and left exactly as it was, marker or not.
func TestForeignOutDirIsRefused(t *testing.T) {
	for name, setup := range map[string]func(t *testing.T, dir string){
		"foreign results.json": func(t *testing.T, dir string) {
			writeFile(t, filepath.Join(dir, "results.json"), `{"results": {"hellaswag": {"acc": 0.61}}, "config": {}}`)
		},
		"foreign results.json beside reckon's marker": func(t *testing.T, dir string) {
			if _, err := claimOutDir(dir); err != nil {
				t.Fatal(err)
			}
			writeFile(t, filepath.Join(dir, "results.json"), `{"results": {}}`)
		},
		"results.json that is not JSON": func(t *testing.T, dir string) {
			writeFile(t, filepath.Join(dir, "results.json"), strings.Repeat("x", 1<<20))
		},
		"an older reckon's note": func(t *testing.T, dir string) {
			writeFile(t, filepath.Join(dir, outMarker), "This directory is a reckon gate output.\n")
			writeFile(t, filepath.Join(dir, "results.json"), `{"schema": "reckon.results/v2"}`)
		},
		"a summary.md of its own": func(t *testing.T, dir string) {
			writeFile(t, filepath.Join(dir, "summary.md"), "# my notes")
		},
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			setup(t, dir)
			writeFile(t, filepath.Join(dir, "logs", "lm-eval.log"), "mine")
			writeFile(t, filepath.Join(dir, "artifacts", "model.bin"), "mine")
			before := tree(t, dir)
			removed, err := claimOutDir(dir)
			if err == nil || !strings.Contains(err.Error(), "nothing was touched") {
				t.Fatalf("claimed: %v", err)
			}
			if len(err.Error()) > 1024 {
				t.Errorf("the error has %d bytes", len(err.Error()))
			}
			if len(removed) > 0 {
				t.Errorf("removed %v", removed)
			}
			if after := tree(t, dir); !slices.Equal(before, after) {
				t.Errorf("the directory changed:\n%v\n%v", before, after)
			}
		})
	}
}

// The marker lets a later run remove only the directories reckon made: one removed and made
// again since, or put in place of reckon's as a link, is refused and left alone.
func TestOutMarkerCoversOnlyWhatReckonCreated(t *testing.T) {
	out := t.TempDir()
	if _, err := claimOutDir(out); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(out, "profiles")); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(out, "profiles", "mine.json"), "mine")
	_, err := claimOutDir(out)
	if err == nil || !strings.Contains(err.Error(), "profiles/ is not the directory reckon's run") {
		t.Fatalf("a profiles/ made since: %v", err)
	}
	mustExist(t, filepath.Join(out, "profiles", "mine.json"))
	mustExist(t, filepath.Join(out, "logs"))

	out2 := t.TempDir()
	if _, err := claimOutDir(out2); err != nil {
		t.Fatal(err)
	}
	target := t.TempDir()
	writeFile(t, filepath.Join(target, "precious"), "x")
	if err := os.Remove(filepath.Join(out2, "trials")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, filepath.Join(out2, "trials")); err != nil {
		t.Fatal(err)
	}
	if _, err := claimOutDir(out2); err == nil || !strings.Contains(err.Error(), "trials/") {
		t.Fatalf("a link in place of trials/: %v", err)
	}
	mustExist(t, filepath.Join(target, "precious"))
	mustExist(t, filepath.Join(out2, "trials"))
}

// tree lists every path under dir with its size.
func tree(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		out = append(out, p+" "+info.Mode().String())
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
