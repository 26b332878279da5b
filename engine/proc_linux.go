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
	pid, ppid, pgrp int
	state           byte
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
		f := strings.Fields(s[k+2:])
		if len(f) < 3 {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		pgrp, _ := strconv.Atoi(f[2])
		out = append(out, procInfo{pid: pid, ppid: ppid, pgrp: pgrp, state: f[0][0]})
	}
	return out, true
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
