package main

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"syscall"
	"time"
)

// What the GitLab, Buildkite and Kubernetes runners share: a job's result, the verdict of a
// pipeline from its jobs, a process run with its own log, and glob copies for artifacts.

// jobResult is what happened to one job (a GitLab job, a Buildkite job, a Kubernetes pod).
type jobResult struct {
	Name string
	Exit int
	// Gate: the job stopped in (or right after, returning its status) its reckon gate or
	// reckon merge command, as far as the CI system can tell which command it stopped in.
	Gate bool
	// Closing is reckon's closing line ("PASS: ..." / "FAIL: ...") last printed in the job's
	// log, if any.
	Closing string
	// Refused: the job stopped because the trusted tree or reckon changed since it was
	// fetched (a template's own check), before or instead of a verdict.
	Refused bool
}

// reckonRunRe matches a command line that runs reckon gate or reckon merge: the binary itself
// (reckon gate ...) or through the verify-and-exec wrapper (reckon.sh BIN_DIR gate ...).
var reckonRunRe = regexp.MustCompile(`reckon(\.sh \S+)? (gate|merge) `)

// runsReckon reports whether s runs reckon gate or reckon merge.
func runsReckon(s string) bool { return reckonRunRe.MatchString(s) }

// refusedRe is what the templates print when they refuse to run reckon on a changed trusted
// tree or binary (the tree's digest check, reckon.sh), matched at the start of a line: a CI log
// that echoes the script (GitLab's trace) holds the message inside the echoed commands too.
var refusedRe = regexp.MustCompile(`(?m)^(reckon: |reckon\.sh: |::error::)[^\n]*CHANGED since it was (fetched|checked out|installed)`)

var closingRe = regexp.MustCompile(`(?m)^(PASS|FAIL|ERROR)[A-Z ]*: \d+ passed.*$`)

// lastClosing returns the last reckon closing line of a log.
func lastClosing(log string) string {
	m := closingRe.FindAllString(log, -1)
	if len(m) == 0 {
		return ""
	}
	return m[len(m)-1]
}

// pipelineVerdict: green when every job passed; red when every failed job is a gate (or merge)
// that exited 1 with reckon's FAIL line; anything else (exit 3, a build or install that failed,
// a job that never reached reckon) is an error.
func pipelineVerdict(res []jobResult) (string, string) {
	var failed []string
	red := false
	for _, r := range res {
		if r.Refused && r.Exit != 0 {
			return "refused", fmt.Sprintf("%s exit %d: the trusted tree or reckon changed since it was fetched", r.Name, r.Exit)
		}
	}
	for _, r := range res {
		if r.Exit == 0 {
			continue
		}
		if r.Exit == 1 && r.Gate && strings.HasPrefix(r.Closing, "FAIL") {
			red = true
			failed = append(failed, fmt.Sprintf("%s exit 1 (%s)", r.Name, r.Closing))
			continue
		}
		return "error", fmt.Sprintf("%s exit %d (%q)", r.Name, r.Exit, r.Closing)
	}
	if red {
		return "red", strings.Join(failed, "; ")
	}
	return "green", ""
}

// runLogged runs cmd with its output in logPath (appended to the main log afterwards); it returns
// the exit code and the job log's text. A command still running after limit is killed.
func runLogged(cmd *exec.Cmd, logPath string, main io.Writer, limit time.Duration) (int, string, error) {
	f, err := os.Create(logPath)
	if err != nil {
		return 0, "", err
	}
	cmd.Stdout, cmd.Stderr = f, f
	// Its own process group: a job killed at its limit takes its children (engines) with it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		f.Close()
		return 0, "", err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err = <-done:
	case <-time.After(limit):
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		err = <-done
		fmt.Fprintf(f, "\n[runner] killed after %s\n", limit)
	}
	f.Close()
	b, _ := os.ReadFile(logPath)
	main.Write(b)
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
		if code < 0 {
			code = 137
		}
	} else if err != nil {
		return 0, string(b), err
	}
	return code, string(b), nil
}

// globFiles returns the regular files under dir that pattern matches: "*" within one path
// element, "**" across elements, a trailing "/" (or a directory match) everything under it.
func globFiles(dir, pattern string) ([]string, error) {
	pattern = strings.TrimPrefix(pattern, "./")
	dirOnly := strings.HasSuffix(pattern, "/")
	pattern = strings.TrimSuffix(pattern, "/")
	var re strings.Builder
	re.WriteString("^")
	for i := 0; i < len(pattern); i++ {
		c := pattern[i]
		switch {
		case c == '*' && i+1 < len(pattern) && pattern[i+1] == '*':
			i++
			if i+1 < len(pattern) && pattern[i+1] == '/' {
				i++
				re.WriteString("(?:.*/)?")
			} else {
				re.WriteString(".*")
			}
		case c == '*':
			re.WriteString("[^/]*")
		case c == '?':
			re.WriteString("[^/]")
		default:
			re.WriteString(regexp.QuoteMeta(string(c)))
		}
	}
	re.WriteString("$")
	rx, err := regexp.Compile(re.String())
	if err != nil {
		return nil, err
	}
	var out []string
	err = filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if rel == "." {
			return nil
		}
		if rel == ".git" && info.IsDir() {
			return filepath.SkipDir
		}
		if rx.MatchString(rel) {
			if info.IsDir() {
				return filepath.Walk(p, func(q string, fi os.FileInfo, err error) error {
					if err == nil && fi.Mode().IsRegular() {
						r, _ := filepath.Rel(dir, q)
						out = append(out, r)
					}
					return err
				})
			}
			if !dirOnly && info.Mode().IsRegular() {
				out = append(out, rel)
			}
		}
		return nil
	})
	sort.Strings(out)
	return dedup(out), err
}

func dedup(xs []string) []string {
	var out []string
	for i, x := range xs {
		if i == 0 || x != xs[i-1] {
			out = append(out, x)
		}
	}
	return out
}

// copyFiles copies rel paths from one directory to another, keeping their modes.
func copyFiles(from, to string, rels []string) error {
	for _, r := range rels {
		if err := copyFile(filepath.Join(from, r), filepath.Join(to, r)); err != nil {
			return err
		}
	}
	return nil
}

// copyTree copies every regular file under from into to.
func copyTree(from, to string) error {
	rels, err := globFiles(from, "**")
	if err != nil {
		return err
	}
	return copyFiles(from, to, rels)
}

// envList turns a map into KEY=VALUE entries after base (later entries win in exec).
func envList(base []string, m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := append([]string{}, base...)
	for _, k := range keys {
		out = append(out, k+"="+m[k])
	}
	return out
}

// shellQuote quotes s for bash.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
