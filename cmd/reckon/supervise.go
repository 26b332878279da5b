package main

import (
	"github.com/spf13/cobra"

	"github.com/reckon-ci/reckon/engine"
)

func init() { rootCmd.AddCommand(newSuperviseCmd()) }

// newSuperviseCmd is the hidden supervise mode. The harness never goes through cobra to reach
// it (the engine package dispatches on RECKON_SUPERVISE before main runs, so that test binaries
// can supervise too); the command is here so that it can be run and read by hand.
func newSuperviseCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "supervise [--grace D] [--cgroup auto|off] [--subreaper on|off] -- ENGINE ARGS...",
		Short: "Run an engine under reckon's process supervisor (what every launch does)",
		Long: `supervise starts ENGINE as its child and contains its whole process tree: it is a child subreaper
(orphaned descendants, double-forked daemons included, stay its children; --subreaper off shows
what is left without it), starts the engine inside a cgroup v2 of its own where the hierarchy is
writable (clone3 into the cgroup; the hierarchy is found from /proc/self/cgroup and
/proc/self/mountinfo, so a hybrid host's /sys/fs/cgroup/unified works too), learns the process
groups and sessions the tree creates, and on SIGTERM/SIGINT/SIGHUP, on the death of its parent, or
at the end of its control pipe sends SIGTERM to the whole tree, SIGKILL after the grace, and exits
only when no process of the tree is left. The engine's version probe runs under it as well. Status
lines ("pid", "mech", "group", "session", "exit", "log", "gone") go to stderr when it runs by hand.
See docs/reliability.md.`,
		Hidden:             true,
		DisableFlagParsing: true,
		RunE: func(_ *cobra.Command, args []string) error {
			if code := engine.RunSupervisor(args); code != 0 {
				return withExitCode(code, nil)
			}
			return nil
		},
	}
}
