//go:build linux

package engine

// The supervisor: every engine runs as the child of a small process of reckon's own (the
// harness binary re-executed with RECKON_SUPERVISE set; see init below). The supervisor
//
//   - is a child subreaper (PR_SET_CHILD_SUBREAPER), so every descendant of the engine that is
//     orphaned (a wrapper script's child, a double-forked setsid daemon) is reparented to it
//     rather than to PID 1: the whole tree stays reachable by ppid links from the supervisor;
//   - puts the engine in a cgroup v2 of its own where the hierarchy is writable (clone3 with
//     CLONE_INTO_CGROUP, so not even the engine's first fork escapes), and kills the cgroup;
//   - learns of the harness's death twice: a parent-death signal (SIGTERM) and the end of the
//     control pipe, whose only writer is the harness;
//   - on stop or on the harness's death sends SIGTERM to the whole tree (cgroup, process group,
//     every descendant), SIGKILL after the grace, and exits only when it has no child left.
//
// Protocol with the harness (Launch): fd 3 is the status pipe (supervisor -> harness), one line
// per event: "pid N", "mech TEXT", "startfail TEXT", "exit CODE SIGNAL", "log LEVEL TEXT",
// "gone". fd 4 is the control pipe (harness -> supervisor): "term" (graceful stop), "kill"
// (SIGKILL now); its end of file means the harness died, and is handled as "term".

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// supervisorPollEvery is how often a stopping supervisor re-signals the tree.
const supervisorPollEvery = 20 * time.Millisecond

// supervisorLearnEvery is how often a running supervisor walks its descendants to learn the
// process groups and sessions they created.
const supervisorLearnEvery = time.Second

const supervisorSupported = true

func init() {
	if os.Getenv(superviseEnv) != superviseProto {
		return
	}
	os.Exit(RunSupervisor(os.Args[1:]))
}

// RunSupervisor is the supervise mode: `reckon supervise [--grace D] [--cgroup auto|off]
// [--subreaper on|off] [--pipes] -- ENGINE ARGS...`. It starts the engine, contains its process tree and returns the exit code of
// the supervisor (the engine's exit code when it exited by itself, 0 after a stop, 2 on usage
// errors, 127 when the engine could not be started). Launch runs it; by hand it is useful to
// see the containment at work (status lines then go to stderr).
func RunSupervisor(args []string) int {
	if len(args) > 0 && args[0] == "supervise" {
		args = args[1:]
	}
	fs := flag.NewFlagSet("reckon supervise", flag.ContinueOnError)
	grace := fs.Duration("grace", DefaultStopGrace, "time between SIGTERM and SIGKILL of the engine's tree")
	cg := fs.String("cgroup", "auto", "auto: own cgroup v2 where writable; off: subreaper and process group only")
	subreaper := fs.String("subreaper", "on", "on: a child subreaper; off: not (what a host without PR_SET_CHILD_SUBREAPER leaves: the groups and sessions the tree created, and its process group, still find its orphans)")
	pipes := fs.Bool("pipes", false, "status on fd 3 and control on fd 4 (how Launch runs it); otherwise status on stderr")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	argv := fs.Args()
	if len(argv) == 0 {
		fmt.Fprintln(os.Stderr, "reckon supervise: expected the engine command after --")
		return 2
	}
	if *cg != "auto" && *cg != "off" {
		fmt.Fprintf(os.Stderr, "reckon supervise: --cgroup %q: expected auto or off\n", *cg)
		return 2
	}
	if *subreaper != "on" && *subreaper != "off" {
		fmt.Fprintf(os.Stderr, "reckon supervise: --subreaper %q: expected on or off\n", *subreaper)
		return 2
	}
	if *grace <= 0 {
		fmt.Fprintf(os.Stderr, "reckon supervise: --grace %v: expected a positive duration\n", *grace)
		return 2
	}
	s := &supervisor{grace: *grace, useCgroup: *cg == "auto", subreaper: *subreaper == "on", self: os.Getpid(), pipes: *pipes}
	s.owned.since = procStart(s.self)
	return s.run(argv)
}

type supervisor struct {
	grace     time.Duration
	useCgroup bool
	subreaper bool
	baseMech  string // the containment without the cgroup: "subreaper+pgroup" normally
	self      int
	pipes     bool

	statusMu sync.Mutex
	status   io.Writer

	enginePid int
	cgDir     string // the engine's cgroup, "" when not used

	// owned: the process groups and sessions created inside the engine's tree (reported to the
	// harness as "group N" / "session N", for when the supervisor itself is killed).
	owned ownedLeaders
}

func (s *supervisor) say(kind, text string) {
	text = strings.NewReplacer("\n", " ", "\r", " ").Replace(text)
	s.statusMu.Lock()
	defer s.statusMu.Unlock()
	if text == "" {
		_, _ = fmt.Fprintf(s.status, "%s\n", kind)
		return
	}
	_, _ = fmt.Fprintf(s.status, "%s %s\n", kind, text)
}

func (s *supervisor) logf(level, format string, a ...any) {
	s.say("log", level+" "+fmt.Sprintf(format, a...))
}

// fdOpen reports whether fd is an open descriptor.
func fdOpen(fd int) bool {
	var st syscall.Stat_t
	return syscall.Fstat(fd, &st) == nil
}

func (s *supervisor) run(argv []string) int {
	// The engine's parent-death signal follows the thread that forks it: this goroutine keeps
	// its thread until the supervisor exits.
	runtime.LockOSThread()
	control, ok := s.openPipes()
	if !ok {
		return 2
	}
	signal.Ignore(syscall.SIGPIPE)
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)

	mech, cgFD := s.contain()
	pid, code := s.startEngine(argv, mech, cgFD)
	if code != 0 {
		return code
	}
	exitCh, empty := reap(pid)
	ctl := readControl(control)
	return s.watch(exitCh, empty, ctl, sigs)
}

// openPipes sets up the status and control pipes when started by Launch (--pipes); by hand,
// status goes to stderr and control is nil. ok is false when the pipes are missing.
func (s *supervisor) openPipes() (control io.Reader, ok bool) {
	// Status and control pipes when started by Launch; stderr and signals only by hand.
	s.status = os.Stderr
	if s.pipes {
		if !fdOpen(3) || !fdOpen(4) {
			fmt.Fprintln(os.Stderr, "reckon supervise: --pipes: expected the status pipe on fd 3 and the control pipe on fd 4")
			return nil, false
		}
		syscall.CloseOnExec(3)
		syscall.CloseOnExec(4)
		s.status = os.NewFile(3, "status")
		control = os.NewFile(4, "control")
	}
	return control, true
}

// contain makes the supervisor a child subreaper and, unless disabled, makes the engine's cgroup:
// mech describes the containment, cgFD is the cgroup's descriptor (-1 without one).
func (s *supervisor) contain() (mech string, cgFD int) {
	mech = "subreaper+pgroup"
	if !s.subreaper {
		mech = "pgroup+sessions (subreaper disabled by --subreaper off)"
	} else if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		s.logf("warn", "PR_SET_CHILD_SUBREAPER: %v (orphaned engine processes are found by their process group and session only)", err)
		mech = "pgroup+sessions (PR_SET_CHILD_SUBREAPER failed: " + err.Error() + ")"
	}
	s.baseMech = mech
	cgFD = -1
	if s.useCgroup {
		dir, fd, err := makeCgroup(s.self)
		if err != nil {
			mech += " (cgroup v2 not used: " + err.Error() + ")"
		} else {
			s.cgDir, cgFD = dir, fd
		}
	} else {
		mech += " (cgroup disabled by " + CgroupEnv + "=off)"
	}
	return mech, cgFD
}

// startEngine forks the engine in its own process group (into the cgroup when there is one, else
// without it) and reports its pid and the containment. code is non-zero when it could not start.
func (s *supervisor) startEngine(argv []string, mech string, cgFD int) (pid, code int) {
	env := make([]string, 0, len(os.Environ()))
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, superviseEnv+"=") {
			env = append(env, kv)
		}
	}
	path, err := exec.LookPath(argv[0])
	if err != nil {
		s.say("startfail", err.Error())
		s.removeCgroup()
		return 0, 127
	}
	attr := &syscall.ProcAttr{
		Env:   env,
		Files: []uintptr{0, 1, 2},
		Sys: &syscall.SysProcAttr{
			// The engine's own process group, signalled as a whole; SIGKILL if the supervisor
			// itself is killed (then the harness kills the cgroup, when there is one).
			Setpgid:   true,
			Pdeathsig: syscall.SIGKILL,
		},
	}
	if cgFD >= 0 {
		attr.Sys.UseCgroupFD, attr.Sys.CgroupFD = true, cgFD
	}
	pid, err = syscall.ForkExec(path, argv, attr)
	if err != nil && cgFD >= 0 {
		// clone3 into the cgroup refused (old kernel, no delegation): without the cgroup.
		mech = s.baseMech + " (cgroup v2 not used: clone into " + s.cgDir + ": " + err.Error() + ")"
		s.removeCgroup()
		attr.Sys.UseCgroupFD, attr.Sys.CgroupFD = false, 0
		pid, err = syscall.ForkExec(path, argv, attr)
	}
	if cgFD >= 0 {
		_ = syscall.Close(cgFD)
	}
	if err != nil {
		s.say("startfail", fmt.Sprintf("start %s: %v", argv[0], err))
		s.removeCgroup()
		return 0, 127
	}
	s.enginePid = pid
	if s.cgDir != "" {
		mech = "cgroup v2 " + s.cgDir + " + " + s.baseMech
	}
	s.say("pid", strconv.Itoa(pid))
	s.say("mech", mech)
	// The engine holds the output pipe now; the supervisor lets go of it so that the harness
	// sees the end of the output when the engine's tree is gone.
	if devnull, err := syscall.Open(os.DevNull, syscall.O_RDWR, 0); err == nil && s.pipes {
		_ = unix.Dup3(devnull, 1, 0)
		_ = unix.Dup3(devnull, 2, 0)
		_ = syscall.Close(devnull)
	}

	return pid, 0
}

// reap waits for every child, the engine's and the orphans reparented to the supervisor: the
// engine's exit goes to exitCh, and empty closes when no child is left.
func reap(pid int) (<-chan exitEv, <-chan struct{}) {
	exitCh := make(chan exitEv, 1)
	empty := make(chan struct{})
	go func() { // the reaper: every child, the engine's and the orphans reparented to us
		defer close(empty)
		for {
			var ws syscall.WaitStatus
			p, err := syscall.Wait4(-1, &ws, 0, nil)
			if errors.Is(err, syscall.EINTR) {
				continue
			}
			if err != nil { // ECHILD: no child left, and none can appear any more
				return
			}
			if p == pid {
				ev := exitEv{code: -1}
				if ws.Exited() {
					ev.code = ws.ExitStatus()
				} else if ws.Signaled() {
					ev.sig = int(ws.Signal())
				}
				exitCh <- ev
			}
		}
	}()
	return exitCh, empty
}

// readControl forwards the control pipe's commands, then "eof" when it closes; with no pipe the
// channel stays silent.
func readControl(control io.Reader) chan string {
	ctl := make(chan string, 4)
	if control != nil {
		go func() {
			sc := bufio.NewScanner(control)
			for sc.Scan() {
				ctl <- strings.TrimSpace(sc.Text())
			}
			ctl <- "eof"
		}()
	}
	return ctl
}

// watch runs the supervisor until the engine's tree is gone: it reports the engine's exit, turns
// stop requests, the control pipe's end and signals into SIGTERM, and SIGTERM past the grace
// period into SIGKILL rounds. It returns the supervisor's exit code.
func (s *supervisor) watch(exitCh <-chan exitEv, empty <-chan struct{}, ctl chan string, sigs <-chan os.Signal) int {
	code := 0
	const (
		running = iota
		terming
		killing
	)
	phase := running
	var termDeadline, killStart time.Time
	warnedKill := false
	tick := time.NewTicker(supervisorPollEvery)
	defer tick.Stop()
	learnTick := time.NewTicker(supervisorLearnEvery)
	defer learnTick.Stop()
	childless := false // every child reaped: what is left of the tree is outside its ppid links
	finish := func() int {
		s.removeCgroup()
		s.say("gone", "")
		if phase != running {
			return 0
		}
		return code
	}
	startTerm := func(why string) {
		if phase != running {
			return
		}
		s.logf("info", "stopping the engine's process tree (%s): SIGTERM, SIGKILL after %s", why, s.grace)
		phase, termDeadline = terming, time.Now().Add(s.grace)
		s.signalTree(syscall.SIGTERM)
	}
	startKill := func(why string) {
		if phase == killing {
			return
		}
		if left := s.tree(); len(left) > 0 {
			s.logf("warn", "engine tree still running (%s): SIGKILL to %d processes %v", why, len(left), left)
		}
		phase, killStart = killing, time.Now()
		s.signalTree(syscall.SIGKILL)
	}
	exited := func(ev exitEv) {
		code = ev.code
		if ev.sig != 0 {
			code = 128 + ev.sig
		}
		s.say("exit", fmt.Sprintf("%d %d", ev.code, ev.sig))
	}
	for {
		select {
		case ev := <-exitCh:
			exited(ev)
		case <-empty:
			// Report the engine's exit if the reaper's last event is still queued.
			select {
			case ev := <-exitCh:
				exited(ev)
			default:
			}
			empty, childless = nil, true
			left := s.tree()
			if len(left) == 0 {
				return finish()
			}
			// Not its children (no subreaper held them): processes of the tree's sessions or
			// groups, or of its cgroup. The supervisor stays until they are gone.
			s.logf("warn", "no child left, but %d processes of the engine's sessions, groups or cgroup are: %v", len(left), left)
		case <-learnTick.C:
			if childless && phase == running && len(s.tree()) == 0 {
				return finish()
			}
			if phase == running && !childless {
				s.learnTree()
			}
		case c := <-ctl:
			switch c {
			case "kill":
				startKill("kill requested")
			case "eof":
				ctl = nil
				startTerm("the harness is gone")
			default:
				startTerm("stop requested")
			}
		case sig := <-sigs:
			startTerm("signal " + sig.String() + " (the harness's parent-death signal, or a stop)")
		case <-tick.C:
			// While stopping, every round; while running, the learning tick checks (a full
			// /proc scan 50 times a second would cost a running engine's host too much).
			if childless && phase != running && len(s.tree()) == 0 {
				return finish()
			}
			switch phase {
			case terming:
				if time.Now().After(termDeadline) {
					startKill("did not stop after SIGTERM within " + s.grace.String())
				}
			case killing:
				s.signalTree(syscall.SIGKILL) // processes forked since the last round
				if !warnedKill && time.Since(killStart) > killWait {
					warnedKill = true
					s.logf("error", "processes still running %s after SIGKILL: %v", killWait, s.tree())
				}
			}
		}
	}
}

// learn records p's group or session when p leads one, and reports a new one to the harness.
func (s *supervisor) learn(p procInfo) {
	g, ss := s.owned.learn(p.pid, p.pgrp, p.sid)
	if g {
		s.say("group", strconv.Itoa(p.pid))
	}
	if ss {
		s.say("session", strconv.Itoa(p.pid))
	}
}

// learnTree follows the supervisor's descendants by their children lists (cheap: only the
// tree's own /proc entries are read) and learns the groups and sessions they lead, so that a
// daemon in a session of its own is known before anything could cut its ppid link.
func (s *supervisor) learnTree() {
	seen := map[int]bool{s.self: true}
	queue := childrenOf(s.self)
	for len(queue) > 0 && len(seen) < 1<<16 {
		pid := queue[0]
		queue = queue[1:]
		if seen[pid] {
			continue
		}
		seen[pid] = true
		if p, ok := readProc(pid); ok && p.state != 'Z' && p.state != 'X' {
			s.learn(p)
			queue = append(queue, childrenOf(pid)...)
		}
	}
}

// tree lists the live processes of the engine's tree: every descendant of the supervisor (the
// subreaper keeps their ppid links intact), every member of the engine's cgroup, and every
// process of a group or session that a descendant created (started after the supervisor).
func (s *supervisor) tree() []int {
	seen := map[int]bool{}
	var out []int
	if procs, ok := readProcs(); ok {
		in := map[int]bool{s.self: true}
		for changed := true; changed; {
			changed = false
			for _, p := range procs {
				if !in[p.pid] && in[p.ppid] {
					in[p.pid] = true
					changed = true
				}
			}
		}
		for _, p := range procs {
			if p.pid != s.self && in[p.pid] && p.state != 'Z' && p.state != 'X' && !seen[p.pid] {
				seen[p.pid] = true
				out = append(out, p.pid)
				s.learn(p)
			}
		}
		for _, p := range s.owned.members(procs, s.self) {
			if !seen[p] {
				seen[p] = true
				out = append(out, p)
			}
		}
	}
	for _, p := range cgroupProcs(s.cgDir) {
		if p != s.self && !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	return out
}

// signalTree sends sig to the cgroup, the engine's process group and every process of the tree.
func (s *supervisor) signalTree(sig syscall.Signal) {
	if sig == syscall.SIGKILL && s.cgDir != "" {
		_ = os.WriteFile(filepath.Join(s.cgDir, "cgroup.kill"), []byte("1"), 0)
	}
	pids := s.tree()
	// A process group (the engine's, or one a descendant created) is signalled only while one
	// of the tree's own processes is in it, so that a recycled group id of someone else's is
	// never hit.
	if procs, ok := readProcs(); ok {
		mine := map[int]bool{}
		for _, p := range pids {
			mine[p] = true
		}
		hit := map[int]bool{}
		for _, p := range procs {
			if mine[p.pid] && !hit[p.pgrp] && p.pgrp > 1 && p.pgrp != s.self && (p.pgrp == s.enginePid || s.owned.ownsGroup(p.pgrp)) {
				hit[p.pgrp] = true
				_ = syscall.Kill(-p.pgrp, sig)
			}
		}
	}
	for _, p := range pids {
		_ = syscall.Kill(p, sig)
	}
}

func (s *supervisor) removeCgroup() {
	if s.cgDir == "" {
		return
	}
	if err := removeCgroupDir(s.cgDir); err != nil {
		s.logf("warn", "%v", err)
	}
}

// removeCgroupDir removes an emptied cgroup, waiting a little for the kernel to notice that
// its last process is gone.
func removeCgroupDir(dir string) error {
	deadline := time.Now().Add(2 * time.Second)
	for {
		err := syscall.Rmdir(dir)
		if err == nil || errors.Is(err, syscall.ENOENT) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("remove engine cgroup %s: %w", dir, err)
		}
		time.Sleep(supervisorPollEvery) // polling the kernel's accounting, not a readiness wait
	}
}

// makeCgroup creates a cgroup v2 for the engine under the supervisor's own and returns its
// directory and an open descriptor of it (for clone3). An error says why none can be used.
func makeCgroup(self int) (string, int, error) {
	procCgroup, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", -1, fmt.Errorf("read /proc/self/cgroup: %w", err)
	}
	mountinfo, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return "", -1, fmt.Errorf("read /proc/self/mountinfo: %w", err)
	}
	own, err := ownCgroup2Dir(string(procCgroup), string(mountinfo))
	if err != nil {
		return "", -1, err
	}
	st, err := os.Stat(own)
	if err != nil {
		return "", -1, fmt.Errorf("own cgroup: %w", err)
	}
	if !st.IsDir() {
		return "", -1, fmt.Errorf("own cgroup %s is not a directory", own)
	}
	dir := filepath.Join(own, fmt.Sprintf("reckon-engine-%d", self))
	if err := os.Mkdir(dir, 0o755); err != nil {
		return "", -1, fmt.Errorf("not writable: %w", err)
	}
	fd, err := syscall.Open(dir, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	if err != nil {
		_ = syscall.Rmdir(dir)
		return "", -1, fmt.Errorf("open %s: %w", dir, err)
	}
	return dir, fd, nil
}

// ownCgroup2Dir is the directory of the process's own cgroup v2, from the contents of
// /proc/self/cgroup (its "0::PATH" line) and /proc/self/mountinfo (the cgroup2 mounts and the
// part of the hierarchy each shows). It works wherever cgroup2 is mounted: /sys/fs/cgroup on a
// v2 host, /sys/fs/cgroup/unified on a hybrid one (v1 controllers beside it), a cgroup
// namespace's root in a container. Read-only mounts and mounts that do not show PATH are
// skipped; an error says why there is none (a pure v1 host: no 0:: line or no cgroup2 mount).
func ownCgroup2Dir(procCgroup, mountinfo string) (string, error) {
	var cur string
	found := false
	for _, line := range strings.Split(procCgroup, "\n") {
		if v, ok := strings.CutPrefix(line, "0::"); ok {
			cur, found = strings.TrimSpace(v), true
			break
		}
	}
	if !found {
		return "", errors.New("/proc/self/cgroup has no cgroup v2 entry (0::): cgroup v1 only")
	}
	if !strings.HasPrefix(cur, "/") {
		return "", fmt.Errorf("/proc/self/cgroup: cgroup v2 path %q is not absolute", cur)
	}
	mounts, readOnly := 0, 0
	for _, line := range strings.Split(mountinfo, "\n") {
		pre, post, ok := strings.Cut(line, " - ")
		if !ok {
			continue
		}
		pf, qf := strings.Fields(pre), strings.Fields(post)
		if len(pf) < 6 || len(qf) < 1 || qf[0] != "cgroup2" {
			continue
		}
		mounts++
		if strings.Contains(","+pf[5]+",", ",ro,") {
			readOnly++
			continue
		}
		root, point := unescapeMount(pf[3]), unescapeMount(pf[4])
		rel, ok := underRoot(cur, root)
		if !ok {
			continue
		}
		return filepath.Join(point, rel), nil
	}
	switch {
	case mounts == 0:
		return "", errors.New("no cgroup2 mount in /proc/self/mountinfo")
	case mounts == readOnly:
		return "", errors.New("the cgroup2 mount is read-only")
	}
	return "", fmt.Errorf("own cgroup %s is outside every cgroup2 mount in /proc/self/mountinfo", cur)
}

// underRoot is path p relative to root when p is root or below it.
func underRoot(p, root string) (string, bool) {
	p, root = filepath.Clean(p), filepath.Clean(root)
	if root == "/" {
		return p, true
	}
	if p == root {
		return "/", true
	}
	if rest, ok := strings.CutPrefix(p, root+"/"); ok {
		return "/" + rest, true
	}
	return "", false
}

func unescapeMount(s string) string {
	return strings.NewReplacer(`\040`, " ", `\011`, "\t", `\012`, "\n", `\134`, `\`).Replace(s)
}

// cgroupProcs lists the processes of a cgroup ("" or unreadable: none).
func cgroupProcs(dir string) []int {
	if dir == "" {
		return nil
	}
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		return nil
	}
	var out []int
	for _, f := range strings.Fields(string(b)) {
		if p, err := strconv.Atoi(f); err == nil {
			out = append(out, p)
		}
	}
	return out
}

// killCgroup is the harness's last resort when a supervisor died without reporting that the
// tree is gone: SIGKILL to the whole cgroup, then its removal.
func killCgroup(dir string) {
	if dir == "" {
		return
	}
	_ = os.WriteFile(filepath.Join(dir, "cgroup.kill"), []byte("1"), 0)
	for _, p := range cgroupProcs(dir) {
		_ = syscall.Kill(p, syscall.SIGKILL)
	}
}
