package ci_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// alive reports whether pid is a live (not zombie) process.
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(b)
	rest := strings.Fields(s[strings.LastIndex(s, ")")+1:])
	return len(rest) > 0 && rest[0] != "Z"
}

// TestContainEndsWhatABuildLeavesBehind: contain.py runs a build that leaves processes behind in
// the ways a hostile build would (a double fork into its own session, nohup, a plain background
// job) and ends every one of them before it returns, naming them, with the build's exit status.
// The same script run without contain.py leaves them running (the fault it guards against).
func TestContainEndsWhatABuildLeavesBehind(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("linux only (PR_SET_CHILD_SUBREAPER)")
	}
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not installed")
	}
	dir := t.TempDir()
	pids := filepath.Join(dir, "pids")
	build := filepath.Join(dir, "build.sh")
	// Each leftover's pid is written by the shell that started it ($!: setsid and nohup exec
	// the command), before the build exits.
	script := `#!/usr/bin/env bash
( setsid sleep 300 </dev/null >/dev/null 2>&1 & echo $! >> "$1" )
( nohup sleep 300 </dev/null >/dev/null 2>&1 & echo $! >> "$1" )
sleep 300 </dev/null >/dev/null 2>&1 &
echo $! >> "$1"
exit "${2:-0}"
`
	if err := os.WriteFile(build, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	readPids := func() []int {
		b, _ := os.ReadFile(pids)
		var out []int
		for _, f := range strings.Fields(string(b)) {
			n, _ := strconv.Atoi(f)
			out = append(out, n)
		}
		os.Remove(pids)
		return out
	}
	// Output into a file, not a pipe: a leftover holding a pipe would keep the test waiting.
	logf := filepath.Join(dir, "log")
	runTo := func(cmd *exec.Cmd) string {
		f, err := os.Create(logf)
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stdout, cmd.Stderr = f, f
		_ = cmd.Run()
		f.Close()
		b, _ := os.ReadFile(logf)
		return string(b)
	}
	// Without contain.py: the leftovers live on (then ended by the test).
	if out := runTo(exec.Command("bash", build, pids)); !strings.Contains(out, "") {
		t.Fatal(out)
	}
	left := readPids()
	stillAlive := 0
	for _, p := range left {
		if alive(p) {
			stillAlive++
		}
		_ = syscall.Kill(p, syscall.SIGKILL)
	}
	if len(left) != 3 || stillAlive != 3 {
		t.Fatalf("the bad case does not show the fault: %d pids, %d alive after the build", len(left), stillAlive)
	}
	for _, code := range []int{7} { // a failing build: its own status, its leftovers ended
		cmd := exec.Command(py, "scripts/contain.py", "bash", build, pids, strconv.Itoa(code))
		out := runTo(cmd)
		if got := cmd.ProcessState.ExitCode(); got != code {
			t.Errorf("exit %d, want the build's %d\n%s", got, code, out)
		}
		ps := readPids()
		if len(ps) != 3 {
			t.Fatalf("the build left %d pids, want 3\n%s", len(ps), out)
		}
		for _, p := range ps {
			if alive(p) {
				t.Errorf("pid %d outlived contain.py\n%s", p, out)
				_ = syscall.Kill(p, syscall.SIGKILL)
			}
			if !strings.Contains(string(out), "pid "+strconv.Itoa(p)+":") {
				t.Errorf("contain.py does not name pid %d it ended\n%s", p, out)
			}
		}
	}
}

// TestReckonWrapperRunsOnlyThePinnedBinary: reckon.sh runs the reckon install-reckon.sh
// installed while the binary is the one inside the archive and the archive has the pinned
// sha256, and refuses (exit 3, nothing run) a swapped binary, a swapped archive or a wrong pin.
func TestReckonWrapperRunsOnlyThePinnedBinary(t *testing.T) {
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
	name := "reckon_1.2.3_linux_" + runtime.GOARCH + ".tar.gz"
	archive := func(bin string) []byte {
		var buf bytes.Buffer
		gz := gzip.NewWriter(&buf)
		tw := tar.NewWriter(gz)
		tw.WriteHeader(&tar.Header{Name: "reckon", Mode: 0o755, Size: int64(len(bin))})
		tw.Write([]byte(bin))
		tw.Close()
		gz.Close()
		return buf.Bytes()
	}
	good := archive("#!/bin/sh\necho \"pinned reckon $*\"\n")
	if err := os.WriteFile(filepath.Join(rel, name), good, 0o644); err != nil {
		t.Fatal(err)
	}
	h := sha256.Sum256(good)
	sum := hex.EncodeToString(h[:])
	env := append(os.Environ(), "RECKON_RELEASE_URL=file://"+filepath.Join(dir, "release"), "RECKON_VERSION=v1.2.3")
	install := func() string {
		dest := filepath.Join(t.TempDir(), "bin")
		cmd := exec.Command("bash", "scripts/install-reckon.sh", "v1.2.3", sum, dest)
		cmd.Env = env
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("install: %v\n%s", err, out)
		}
		return dest
	}
	run := func(dest, pin string) (int, string) {
		cmd := exec.Command("bash", "scripts/reckon.sh", dest, "gate", "--strict")
		cmd.Env = append(env, "RECKON_SHA256="+pin)
		out, _ := cmd.CombinedOutput()
		return cmd.ProcessState.ExitCode(), string(out)
	}
	dest := install()
	if code, out := run(dest, sum); code != 0 || !strings.Contains(out, "pinned reckon gate --strict") {
		t.Fatalf("the installed reckon: exit %d\n%s", code, out)
	}
	faults := map[string]func(dest string) string{
		"binary swapped": func(dest string) string {
			os.WriteFile(filepath.Join(dest, "reckon"), []byte("#!/bin/sh\necho PASS; exit 0\n"), 0o755)
			return sum
		},
		"binary and archive swapped": func(dest string) string {
			os.WriteFile(filepath.Join(dest, "reckon"), []byte("#!/bin/sh\necho PASS; exit 0\n"), 0o755)
			os.WriteFile(filepath.Join(dest, name), archive("#!/bin/sh\necho PASS; exit 0\n"), 0o644)
			return sum
		},
		"binary a symlink": func(dest string) string {
			os.Rename(filepath.Join(dest, "reckon"), filepath.Join(dest, "real"))
			os.Symlink("real", filepath.Join(dest, "reckon"))
			return sum
		},
		"wrong pin":    func(string) string { return strings.Repeat("0", 64) },
		"no pin":       func(string) string { return "" },
		"archive gone": func(dest string) string { os.Remove(filepath.Join(dest, name)); return sum },
	}
	for fault, apply := range faults {
		dest := install()
		pin := apply(dest)
		code, out := run(dest, pin)
		if code != 3 || strings.Contains(out, "PASS") || strings.Contains(out, "pinned reckon") {
			t.Errorf("%s: exit %d, want 3 and nothing run\n%s", fault, code, out)
		}
	}
}
