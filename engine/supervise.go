package engine

const (
	// superviseEnv selects the supervise mode of any binary that links this package (reckon,
	// and test binaries, whose TestMain does not need to know): its value is superviseProto.
	superviseEnv   = "RECKON_SUPERVISE"
	superviseProto = "reckon-supervise-1"
	// CgroupEnv set to "off" makes Launch skip the cgroup even where cgroup v2 is writable
	// (containment then relies on the subreaper and the process group; Linux only).
	CgroupEnv = "RECKON_ENGINE_CGROUP"
)

// exitEv is how the engine exited: its exit code (-1 when signalled) and the signal, if any.
type exitEv struct{ code, sig int }
