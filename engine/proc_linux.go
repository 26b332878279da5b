package engine

import (
	"os"
	"strconv"
	"strings"
	"syscall"
)

func sysProcAttr() *syscall.SysProcAttr {
	// Setpgid: the engine and everything it forks share a process group that Stop signals as
	// a whole. Pdeathsig: if the harness dies without running Stop, the engine gets SIGTERM.
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
}

type procInfo struct {
	pid, ppid, pgrp, sid int
	start                uint64 // start time in clock ticks after boot (/proc/PID/stat field 22)
	state                byte
}

func readProcs() ([]procInfo, bool) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil, false
	}
	out := make([]procInfo, 0, len(ents))
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		s := string(b)
		k := strings.LastIndexByte(s, ')')
		if k < 0 || k+2 >= len(s) {
			continue
		}
		p, ok := parseStat(pid, s[k+2:])
		if ok {
			out = append(out, p)
		}
	}
	return out, true
}

// parseStat parses the fields of /proc/PID/stat after the command name's ")".
func parseStat(pid int, rest string) (procInfo, bool) {
	f := strings.Fields(rest)
	if len(f) < 20 {
		return procInfo{}, false
	}
	ppid, _ := strconv.Atoi(f[1])
	pgrp, _ := strconv.Atoi(f[2])
	sid, _ := strconv.Atoi(f[3])
	start, _ := strconv.ParseUint(f[19], 10, 64)
	return procInfo{pid: pid, ppid: ppid, pgrp: pgrp, sid: sid, start: start, state: f[0][0]}, true
}

// readProc reads one process's /proc/PID/stat.
func readProc(pid int) (procInfo, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procInfo{}, false
	}
	s := string(b)
	k := strings.LastIndexByte(s, ')')
	if k < 0 || k+2 >= len(s) {
		return procInfo{}, false
	}
	return parseStat(pid, s[k+2:])
}

// members lists the live processes of procs (except self) in an owned group or session that
// started no earlier than the supervisor.
func (o *ownedLeaders) members(procs []procInfo, self int) []int {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []int
	if len(o.groups)+len(o.sessions) == 0 {
		return nil
	}
	for _, p := range procs {
		if p.pid == self || p.state == 'Z' || p.state == 'X' || p.start < o.since {
			continue
		}
		if o.groups[p.pgrp] || o.sessions[p.sid] {
			out = append(out, p.pid)
		}
	}
	return out
}

// childrenOf lists the children of pid from /proc/PID/task/*/children (nil where the kernel
// has no such file: then only the full /proc scans find descendants).
func childrenOf(pid int) []int {
	tasks, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/task")
	if err != nil {
		return nil
	}
	var out []int
	for _, t := range tasks {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/task/" + t.Name() + "/children")
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(b)) {
			if c, err := strconv.Atoi(f); err == nil {
				out = append(out, c)
			}
		}
	}
	return out
}

// groupMembers returns the live (non-zombie) processes of process group pgid plus their live
// descendants that moved to another group or session.
func groupMembers(pgid int) []int {
	procs, ok := readProcs()
	if !ok {
		if syscall.Kill(-pgid, 0) == nil {
			return []int{pgid}
		}
		return nil
	}
	in := map[int]bool{}
	for _, p := range procs {
		if p.pgrp == pgid || p.pid == pgid {
			in[p.pid] = true
		}
	}
	for changed := true; changed; {
		changed = false
		for _, p := range procs {
			if !in[p.pid] && in[p.ppid] {
				in[p.pid] = true
				changed = true
			}
		}
	}
	var out []int
	for _, p := range procs {
		if in[p.pid] && p.state != 'Z' && p.state != 'X' {
			out = append(out, p.pid)
		}
	}
	return out
}

// signalGroup sends sig to process group pgid and to every live member or descendant of it
// (descendants may have left the group with setsid).
func signalGroup(pgid int, sig syscall.Signal) {
	_ = syscall.Kill(-pgid, sig)
	for _, p := range groupMembers(pgid) {
		_ = syscall.Kill(p, sig)
	}
}

// raise sends sig to the current process.
func raise(sig syscall.Signal) { _ = syscall.Kill(os.Getpid(), sig) }

// supervisorProcAttr starts the supervisor in its own process group (a terminal's Ctrl-C goes
// to the harness, which stops the engines) with a parent-death signal: SIGTERM, which the
// supervisor handles as "stop the tree".
func supervisorProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
}

// killOwned sends SIGKILL to every live process of the owned groups and sessions (except
// self) and returns those it found.
func killOwned(o *ownedLeaders, self int) []int {
	procs, ok := readProcs()
	if !ok {
		return nil
	}
	pids := o.members(procs, self)
	for _, p := range pids {
		_ = syscall.Kill(p, syscall.SIGKILL)
	}
	return pids
}

// procStart is pid's start time in clock ticks after boot (0 when unknown).
func procStart(pid int) uint64 {
	p, _ := readProc(pid)
	return p.start
}
