package testbed

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// Runner runs a command and returns its standard output; the error carries what the command
// printed on failure. Tests replace it to feed captured output.
type Runner func(ctx context.Context, name string, args ...string) ([]byte, error)

// Options configure Detect. The zero value detects this machine.
type Options struct {
	// NvidiaSMI is the nvidia-smi program (default: "nvidia-smi" on PATH).
	NvidiaSMI string
	// Timeout bounds each nvidia-smi call (default 20s: a wedged driver must not hang a CI job).
	Timeout time.Duration
	// Run runs commands (default: ExecRunner).
	Run Runner
	// LookPath finds NvidiaSMI (default: exec.LookPath).
	LookPath func(string) (string, error)
	// CPUInfo is the text of /proc/cpuinfo; empty means read the file.
	CPUInfo string
	// NumCPU is the number of CPUs this process may use (default: runtime.NumCPU()).
	NumCPU int
	// Engine and EngineVersion name the engine under test (set by the caller).
	Engine, EngineVersion string
	// LookupEnv reads the environment (default os.LookupEnv). CUDA_VISIBLE_DEVICES restricts
	// the GPUs that make up the testbed: comma-separated indices or UUID prefixes, the first
	// entry that matches no GPU ending the list, as in CUDA; set but empty hides every GPU.
	LookupEnv func(string) (string, bool)
}

// ExecRunner runs the command; on failure the error holds the tail of its output.
func ExecRunner(ctx context.Context, name string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = 2 * time.Second
	err := cmd.Run()
	if err != nil {
		msg := strings.TrimSpace(stderr.String())
		if msg == "" {
			msg = strings.TrimSpace(stdout.String())
		}
		if len(msg) > 500 {
			msg = "..." + msg[len(msg)-500:]
		}
		if ctx.Err() != nil {
			err = fmt.Errorf("%w (%v)", ctx.Err(), err)
		}
		return stdout.Bytes(), fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, msg)
	}
	return stdout.Bytes(), nil
}

// ErrNoDriver is returned (wrapped) when nvidia-smi exists but cannot reach the driver: such a
// machine must not be mistaken for a CPU-only testbed.
var ErrNoDriver = errors.New("nvidia-smi cannot reach the NVIDIA driver")

// Detect fingerprints this machine with the default Options (see DetectWith). The caller sets
// Engine and EngineVersion on the result; Key then includes them.
func Detect(ctx context.Context) (*Fingerprint, error) { return DetectWith(ctx, Options{}) }

// DetectWith fingerprints this machine. With nvidia-smi on PATH it queries the GPUs, the driver
// and CUDA versions and (with several GPUs) the topology; without, it describes the CPU. A
// topology or CUDA version that cannot be read is a Note, not an error; nvidia-smi failing to
// list the GPUs is an error.
func DetectWith(ctx context.Context, opts Options) (*Fingerprint, error) {
	opts.fillDefaults()
	f := &Fingerprint{Engine: opts.Engine, EngineVersion: opts.EngineVersion}
	f.detectCPU(opts)

	smi, err := opts.LookPath(opts.NvidiaSMI)
	if err != nil {
		f.Notes = append(f.Notes, "nvidia-smi not found: CPU-only testbed")
		f.Finish()
		return f, nil
	}
	run := func(args ...string) ([]byte, error) {
		c, cancel := context.WithTimeout(ctx, opts.Timeout)
		defer cancel()
		return opts.Run(c, smi, args...)
	}
	gpus, cpuOnly, err := listGPUs(ctx, run)
	if err != nil {
		return nil, err
	}
	if cpuOnly != "" {
		f.Notes = append(f.Notes, cpuOnly)
		f.Finish()
		return f, nil
	}
	if vis, set := opts.LookupEnv("CUDA_VISIBLE_DEVICES"); set {
		var note string
		gpus, note = visibleGPUs(gpus, vis)
		f.Visible = vis
		if note != "" {
			f.Notes = append(f.Notes, note)
		}
	}
	f.GPUs = gpus
	if len(gpus) == 0 {
		f.Notes = append(f.Notes, "nvidia-smi listed no GPU: CPU-only testbed")
		f.Finish()
		return f, nil
	}
	f.detectVersions(run)
	if len(gpus) > 1 {
		f.detectTopology(run)
	}
	f.Finish()
	return f, nil
}

// fillDefaults sets the unset fields of opts: nvidia-smi from PATH, a 20 s timeout per call, the
// real runner, PATH lookup, CPU count and environment.
func (opts *Options) fillDefaults() {
	if opts.NvidiaSMI == "" {
		opts.NvidiaSMI = "nvidia-smi"
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 20 * time.Second
	}
	if opts.Run == nil {
		opts.Run = ExecRunner
	}
	if opts.LookPath == nil {
		opts.LookPath = exec.LookPath
	}
	if opts.NumCPU <= 0 {
		opts.NumCPU = runtime.NumCPU()
	}
	if opts.LookupEnv == nil {
		opts.LookupEnv = os.LookupEnv
	}
}

// detectCPU describes the CPU from opts.CPUInfo or /proc/cpuinfo (a read error is a note), with
// the architecture as the model when none is named.
func (f *Fingerprint) detectCPU(opts Options) {
	info := opts.CPUInfo
	if info == "" {
		b, err := os.ReadFile("/proc/cpuinfo")
		if err != nil {
			f.Notes = append(f.Notes, fmt.Sprintf("cpu: %v", err))
		}
		info = string(b)
	}
	f.CPU = ParseCPUInfo(info)
	if f.CPU.Model == "" {
		f.CPU.Model = runtime.GOARCH
	}
	f.CPU.Logical = opts.NumCPU
}

// listGPUs asks nvidia-smi (through run) for the GPUs, falling back to the basic fields on an
// older driver. A non-empty note means a CPU-only testbed (nvidia-smi found no device); a driver
// it cannot reach is ErrNoDriver.
func listGPUs(ctx context.Context, run func(args ...string) ([]byte, error)) ([]GPU, string, error) {
	fields := QueryFields
	out, err := run("--query-gpu="+strings.Join(fields, ","), "--format=csv,noheader,nounits")
	if err != nil && ctx.Err() == nil && (strings.Contains(err.Error(), "is not a valid field") || strings.Contains(err.Error(), "Invalid combination")) {
		fields = QueryFieldsBasic
		out, err = run("--query-gpu="+strings.Join(fields, ","), "--format=csv,noheader,nounits")
	}
	if err != nil {
		if strings.Contains(err.Error(), "No devices were found") {
			return nil, "nvidia-smi found no GPU: CPU-only testbed", nil
		}
		if strings.Contains(err.Error(), "couldn't communicate with the NVIDIA driver") || strings.Contains(err.Error(), "NVIDIA-SMI has failed") {
			return nil, "", fmt.Errorf("detect testbed: %w: %v", ErrNoDriver, err)
		}
		return nil, "", fmt.Errorf("detect testbed: list GPUs: %w", err)
	}
	gpus, err := ParseQueryCSV(string(out), fields)
	if err != nil {
		return nil, "", fmt.Errorf("detect testbed: %w", err)
	}
	return gpus, "", nil
}

// detectVersions reads the driver and CUDA versions from nvidia-smi's banner; a failure is a note.
func (f *Fingerprint) detectVersions(run func(args ...string) ([]byte, error)) {
	if out, err := run(); err != nil {
		f.Notes = append(f.Notes, fmt.Sprintf("driver/CUDA version: %v", err))
	} else if drv, cuda, err := ParseSMI(string(out)); err != nil {
		f.Notes = append(f.Notes, fmt.Sprintf("driver/CUDA version: %v", err))
	} else {
		f.Driver, f.CUDA = drv, cuda
	}
}

// detectTopology reads the interconnect matrix of f.GPUs from "nvidia-smi topo -m"; a failure,
// or a matrix that lacks some of the GPUs, is a note.
func (f *Fingerprint) detectTopology(run func(args ...string) ([]byte, error)) {
	idx := make([]int, len(f.GPUs))
	for i, g := range f.GPUs {
		idx[i] = g.Index
	}
	if out, err := run("topo", "-m"); err != nil {
		f.Notes = append(f.Notes, fmt.Sprintf("topology: %v", err))
	} else if t, err := ParseTopo(string(out)); err != nil {
		f.Notes = append(f.Notes, fmt.Sprintf("topology: %v", err))
	} else if _, ok := t.SubMatrix(idx); !ok {
		f.Notes = append(f.Notes, fmt.Sprintf("topology: the matrix lacks some of GPUs %v (devices %v)", idx, t.Devices))
		f.Topology = t
	} else {
		f.Topology = t
	}
}

// visibleGPUs applies a CUDA_VISIBLE_DEVICES value: entries are indices or (prefixes of) UUIDs,
// and the first one that matches no GPU ends the list, as the CUDA runtime does. The note says
// what was dropped, if anything. Integer entries are taken as nvidia-smi indices, which match
// CUDA's order when CUDA_DEVICE_ORDER=PCI_BUS_ID or the GPUs are all alike.
func visibleGPUs(gpus []GPU, vis string) ([]GPU, string) {
	if strings.Contains(vis, "MIG-") {
		// MIG instances are not listed by --query-gpu; describe their parents (every GPU in MIG
		// mode) rather than mistake the machine for a CPU-only one.
		var out []GPU
		for _, g := range gpus {
			if strings.EqualFold(g.MIG, "enabled") {
				out = append(out, g)
			}
		}
		if len(out) == 0 {
			out = gpus
		}
		return out, fmt.Sprintf("CUDA_VISIBLE_DEVICES=%q names MIG instances: the testbed describes the %d GPU(s) in MIG mode", vis, len(out))
	}
	var out []GPU
	used := map[int]bool{}
	for _, e := range strings.Split(vis, ",") {
		e = strings.TrimSpace(e)
		if e == "" {
			break
		}
		match := -1
		if n, err := strconv.Atoi(e); err == nil {
			for i, g := range gpus {
				if g.Index == n {
					match = i
				}
			}
		} else {
			for i, g := range gpus {
				if g.UUID != "" && strings.HasPrefix(g.UUID, e) {
					if match >= 0 {
						match = -2 // ambiguous prefix
						break
					}
					match = i
				}
			}
		}
		if match < 0 || used[match] {
			return out, fmt.Sprintf("CUDA_VISIBLE_DEVICES=%q: entry %q matches no GPU (or repeats one); the GPUs after it are hidden", vis, e)
		}
		used[match] = true
		out = append(out, gpus[match])
	}
	if len(out) < len(gpus) {
		return out, fmt.Sprintf("CUDA_VISIBLE_DEVICES=%q: %d of %d GPUs visible", vis, len(out), len(gpus))
	}
	return out, ""
}

// Summary is a one-line description for logs and reports, e.g.
// "2x H200 (141 GiB) nvlink [NV18], driver 580.159.04, CUDA 13.0, mig disabled".
func (f *Fingerprint) Summary() string {
	if f.GPUCount == 0 {
		return fmt.Sprintf("CPU only: %s, %d CPUs", f.CPU.Model, f.CPU.Logical)
	}
	s := fmt.Sprintf("%dx %s (%d GiB) %s", f.GPUCount, f.GPUModel, f.GPUMemoryGiB, f.Interconnect)
	if f.Topology != nil && f.GPUCount > 1 {
		if lvl, n := f.Topology.WorstGPULink(); lvl == LinkNVLink {
			s += fmt.Sprintf(" [NV%d]", n)
		} else if lvl != LinkUnknown {
			s += fmt.Sprintf(" [worst %s]", lvl)
		}
	}
	if f.Driver != "" {
		s += ", driver " + f.Driver
	}
	if f.CUDA != "" {
		s += ", CUDA " + f.CUDA
	}
	if f.MIG != "" {
		s += ", mig " + f.MIG
	}
	return s
}
