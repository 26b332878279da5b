#!/usr/bin/env python3
"""contain.py: run a command so that nothing it starts outlives it.

    .reckon/contain.py COMMAND [ARGS...]

The CI templates run every step that executes a pull request's code (its engine build) under
this: a process the build leaves behind (a daemon, a `( setsid sleep 300 & )`, a watcher that
waits for the gate to start) could otherwise rewrite the checksum-verified reckon, the trusted
spec or the summary while the trusted gate runs in the same job.

It makes itself a child subreaper (prctl PR_SET_CHILD_SUBREAPER, Linux 3.4+), so every process
the command starts and orphans (double fork, setsid, nohup) is re-parented to it instead of to
init; when the command exits it SIGKILLs every descendant still alive, again and again until
none is left (a process that forks while being killed is caught on the next pass), reaps them,
and names each on stderr. No privileges, no cgroup delegation, no systemd session needed.

What it cannot contain: a process started for the build by another service (a Docker daemon,
systemd --user, cron, ssh to localhost); run builds that use those in their own job or
container.

Exit status: the command's (128+N for a signal N); 3 when the subreaper cannot be set up
(infrastructure, as in reckon); 2 for bad usage. SIGTERM, SIGINT and SIGHUP are passed on to
the command.
"""
import ctypes
import os
import signal
import sys

PR_SET_CHILD_SUBREAPER = 36


def descendants(root):
    """Every live process below root, from /proc (pid -> ppid), deepest last."""
    parent = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % name, "rb") as f:
                stat = f.read()
        except OSError:
            continue  # gone meanwhile
        # pid (comm) state ppid ...: comm may hold spaces and parentheses, so split at the last ')'.
        rest = stat[stat.rfind(b")") + 2:].split()
        if len(rest) < 2 or rest[0] == b"Z":
            continue
        parent[int(name)] = int(rest[1])
    out, frontier = [], [root]
    while frontier:
        p = frontier.pop()
        kids = [c for c, pp in parent.items() if pp == p]
        out.extend(kids)
        frontier.extend(kids)
    return out


def comm(pid):
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            cmd = f.read().replace(b"\0", b" ").strip().decode("utf-8", "replace")
        return cmd[:120] or "?"
    except OSError:
        return "?"


def main(argv):
    if len(argv) < 2 or argv[1] in ("-h", "--help"):
        sys.stderr.write("usage: contain.py COMMAND [ARGS...]\n")
        return 2
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        err = ctypes.get_errno()
        sys.stderr.write("contain: cannot become a child subreaper: %s\n" % os.strerror(err))
        return 3
    me = os.getpid()
    try:
        child = os.fork()
    except OSError as e:
        sys.stderr.write("contain: fork: %s\n" % e)
        return 3
    if child == 0:
        try:
            os.execvp(argv[1], argv[1:])
        except OSError as e:
            sys.stderr.write("contain: %s: %s\n" % (argv[1], e))
            os._exit(127)

    def forward(sig, _frame):
        try:
            os.kill(child, sig)
        except OSError:
            pass

    for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(s, forward)
    status = None
    while status is None:
        try:
            pid, st = os.waitpid(-1, 0)  # reaps orphans re-parented to us too
        except ChildProcessError:
            break
        except InterruptedError:
            continue
        if pid == child:
            status = os.waitstatus_to_exitcode(st)
    if status is None:
        status = 3
    elif status < 0:
        status = 128 - status
    # Everything the command left: kill, reap, repeat until no descendant is left.
    ended = {}
    while True:
        left = descendants(me)
        for pid in left:
            if pid not in ended:
                ended[pid] = comm(pid)
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            if not descendants(me):
                break
        except InterruptedError:
            pass
    if ended:
        sys.stderr.write("contain: %s exited %d and left %d process(es) running; ended them:\n" % (argv[1], status, len(ended)))
        for pid, c in sorted(ended.items()):
            sys.stderr.write("contain:   pid %d: %s\n" % (pid, c))
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv))
