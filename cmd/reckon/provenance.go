package main

import (
	"context"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"time"
)

// gitTimeout bounds `git rev-parse HEAD` when the commit under test is read from git.
const gitTimeout = 5 * time.Second

// commitVars are the CI variables that name the commit under test, in the order they are read.
var commitVars = []string{"GITHUB_SHA", "BUILDKITE_COMMIT", "CI_COMMIT_SHA"}

var hexCommit = regexp.MustCompile(`^[0-9a-f]{7,64}$`)

// resolveCommit returns the git commit of the code under test and where it came from: the
// --commit flag, else the first CI variable set, else `git rev-parse HEAD` in dir (bounded by
// gitTimeout). It returns "" when none is known.
func resolveCommit(ctx context.Context, flag, dir string) (commit, source string) {
	if c := strings.TrimSpace(flag); c != "" {
		return c, "--commit"
	}
	for _, v := range commitVars {
		if c := strings.TrimSpace(os.Getenv(v)); c != "" {
			return c, v
		}
	}
	ctx, cancel := context.WithTimeout(ctx, gitTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "git", "rev-parse", "HEAD")
	cmd.Dir = dir
	cmd.WaitDelay = time.Second
	out, err := cmd.Output()
	if err != nil {
		return "", ""
	}
	c := strings.TrimSpace(string(out))
	if !hexCommit.MatchString(c) {
		return "", ""
	}
	if dirty(ctx, dir) {
		c += "-dirty"
	}
	return c, "git rev-parse HEAD"
}

// dirty reports whether the working tree of dir has uncommitted changes to tracked files.
func dirty(ctx context.Context, dir string) bool {
	cmd := exec.CommandContext(ctx, "git", "status", "--porcelain", "--untracked-files=no")
	cmd.Dir = dir
	cmd.WaitDelay = time.Second
	out, err := cmd.Output()
	return err == nil && len(strings.TrimSpace(string(out))) > 0
}
