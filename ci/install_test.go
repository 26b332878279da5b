package ci_test

import (
	"archive/tar"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestInstallReckonVerifiesTheChecksum: install-reckon.sh installs a release archive whose
// sha256 is the pinned one, and refuses (exit 3, nothing installed) one that is not, a version
// that is not a tag, and a missing pin.
func TestInstallReckonVerifiesTheChecksum(t *testing.T) {
	if runtime.GOOS != "linux" || (runtime.GOARCH != "amd64" && runtime.GOARCH != "arm64") {
		t.Skip("linux/amd64 and linux/arm64 only")
	}
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("curl not installed")
	}
	dir := t.TempDir()
	rel := filepath.Join(dir, "release", "v1.2.3")
	if err := os.MkdirAll(rel, 0o755); err != nil {
		t.Fatal(err)
	}
	// A stand-in binary: a script that answers `version`.
	bin := []byte("#!/bin/sh\necho \"reckon v1.2.3 (stand-in)\"\n")
	archive := filepath.Join(rel, "reckon_1.2.3_linux_"+runtime.GOARCH+".tar.gz")
	f, err := os.Create(archive)
	if err != nil {
		t.Fatal(err)
	}
	gz := gzip.NewWriter(f)
	tw := tar.NewWriter(gz)
	if err := tw.WriteHeader(&tar.Header{Name: "reckon", Mode: 0o755, Size: int64(len(bin))}); err != nil {
		t.Fatal(err)
	}
	tw.Write(bin)
	tw.Close()
	gz.Close()
	f.Close()
	b, _ := os.ReadFile(archive)
	h := sha256.Sum256(b)
	sum := hex.EncodeToString(h[:])
	run := func(version, pin string) (int, string, string) {
		dest := filepath.Join(t.TempDir(), "bin")
		cmd := exec.Command("bash", "scripts/install-reckon.sh", version, pin, dest)
		cmd.Env = append(os.Environ(), "RECKON_RELEASE_URL=file://"+filepath.Join(dir, "release"))
		out, _ := cmd.CombinedOutput()
		return cmd.ProcessState.ExitCode(), string(out), dest
	}
	code, out, dest := run("v1.2.3", sum)
	if code != 0 || !strings.Contains(out, "reckon v1.2.3") {
		t.Fatalf("good archive: exit %d\n%s", code, out)
	}
	if _, err := os.Stat(filepath.Join(dest, "reckon")); err != nil {
		t.Errorf("not installed: %v", err)
	}
	if code, out, _ := run("v1.2.3", runtime.GOARCH+"="+sum+",riscv64="+strings.Repeat("0", 64)); code != 0 {
		t.Errorf("per-arch pin: exit %d\n%s", code, out)
	}
	for name, c := range map[string][2]string{
		"wrong sum":   {"v1.2.3", strings.Repeat("0", 64)},
		"no pin":      {"v1.2.3", ""},
		"not a tag":   {"main", sum},
		"other arch":  {"v1.2.3", "riscv64=" + sum},
		"short sum":   {"v1.2.3", sum[:40]},
		"missing tag": {"v9.9.9", sum},
	} {
		code, out, dest := run(c[0], c[1])
		if code != 3 {
			t.Errorf("%s: exit %d, want 3\n%s", name, code, out)
		}
		if _, err := os.Stat(filepath.Join(dest, "reckon")); err == nil {
			t.Errorf("%s: installed anyway", name)
		}
	}
}
