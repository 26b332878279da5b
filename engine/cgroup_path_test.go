//go:build linux

package engine

import (
	"strings"
	"testing"
)

// ownCgroup2Dir on the cgroup layouts reckon meets: the process's cgroup comes from its 0:: line
// joined to the cgroup2 mount that shows it, never a hard-coded /sys/fs/cgroup.
func TestOwnCgroup2Dir(t *testing.T) {
	const (
		v1Lines = "9:name=systemd:/\n4:memory:/process_api/b58725\n1:cpu:/\n"
		hybrid  = "25 1 0:22 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n" +
			"31 25 0:27 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n" +
			"40 30 0:37 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n"
	)
	for _, c := range []struct {
		name, cgroup, mountinfo, want, err string
	}{
		// This machine (issue 34): v1 controllers, v2 at /sys/fs/cgroup/unified, process at the root.
		{"hybrid root", v1Lines + "0::/\n", hybrid, "/sys/fs/cgroup/unified", ""},
		{"hybrid nested", v1Lines + "0::/user.slice/session-3.scope\n", hybrid, "/sys/fs/cgroup/unified/user.slice/session-3.scope", ""},
		{"pure v2", "0::/system.slice/runner.service\n",
			"30 23 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate\n",
			"/sys/fs/cgroup/system.slice/runner.service", ""},
		// A container whose mount shows a subtree of the hierarchy (no cgroup namespace).
		{"bind-mounted subtree", "0::/kubepods/pod1/ctr\n",
			"50 40 0:26 /kubepods/pod1 /sys/fs/cgroup rw,relatime - cgroup2 cgroup2 rw\n",
			"/sys/fs/cgroup/ctr", ""},
		{"mount point with a space", "0::/a\n", `40 30 0:37 / /run/my\040cg rw - cgroup2 none rw` + "\n", "/run/my cg/a", ""},
		{"read-only mount skipped for a writable one", "0::/a\n",
			"40 30 0:37 / /sys/fs/cgroup ro,relatime - cgroup2 cgroup2 ro\n41 30 0:37 / /mnt/cg rw - cgroup2 cgroup2 rw\n",
			"/mnt/cg/a", ""},
		{"pure v1: no 0:: line", v1Lines, hybrid, "", "no cgroup v2 entry"},
		{"no cgroup2 mount", v1Lines + "0::/\n", "25 1 0:22 / /sys/fs/cgroup rw - tmpfs tmpfs rw\n", "", "no cgroup2 mount"},
		{"read-only only", "0::/\n", "40 30 0:37 / /sys/fs/cgroup/unified ro,relatime - cgroup2 cgroup2 ro\n", "", "read-only"},
		{"outside the mount's subtree", "0::/other\n", "50 40 0:26 /kubepods/pod1 /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n", "", "outside every cgroup2 mount"},
		{"prefix is not a parent", "0::/kubepods/pod10\n", "50 40 0:26 /kubepods/pod1 /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n", "", "outside every cgroup2 mount"},
	} {
		got, err := ownCgroup2Dir(c.cgroup, c.mountinfo)
		switch {
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("%s: got %q, %v; want an error with %q", c.name, got, err, c.err)
		case c.err == "" && (err != nil || got != c.want):
			t.Errorf("%s: got %q, %v; want %q", c.name, got, err, c.want)
		}
	}
}
