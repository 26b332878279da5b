package engine

import "sync"

// ownedLeaders is what a supervisor learned of its engine's tree: the process groups and
// sessions that processes of the tree created (their leaders were seen in it), and the
// supervisor's start time. A process outside the tree's ppid links (reparented to PID 1 when no
// subreaper holds it, or after the supervisor died) still belongs to the tree when it is in one
// of these groups or sessions and started after the supervisor: an id recycled for a process
// started before the supervisor is never taken for the tree's.
type ownedLeaders struct {
	mu       sync.Mutex
	since    uint64
	groups   map[int]bool
	sessions map[int]bool
}

// learn records the group or session of process pid (in group pgrp and session sid) when pid
// leads it; it reports whether either is new.
func (o *ownedLeaders) learn(pid, pgrp, sid int) (newGroup, newSession bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.groups == nil {
		o.groups, o.sessions = map[int]bool{}, map[int]bool{}
	}
	if pgrp == pid && !o.groups[pid] {
		o.groups[pid], newGroup = true, true
	}
	if sid == pid && !o.sessions[pid] {
		o.sessions[pid], newSession = true, true
	}
	return newGroup, newSession
}

// add records a group or a session reported by a supervisor.
func (o *ownedLeaders) add(kind string, id int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.groups == nil {
		o.groups, o.sessions = map[int]bool{}, map[int]bool{}
	}
	if kind == "session" {
		o.sessions[id] = true
	} else {
		o.groups[id] = true
	}
}

// ownsGroup reports whether process group g was created inside the tree.
func (o *ownedLeaders) ownsGroup(g int) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.groups[g]
}
