package testbed

import (
	"bufio"
	"encoding/csv"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
)

// GPU is one GPU as `nvidia-smi --query-gpu` reports it. Fields the driver did not report are
// zero ("" or 0).
type GPU struct {
	Index         int    `json:"index"`
	Name          string `json:"name"`
	UUID          string `json:"uuid,omitempty"`
	BusID         string `json:"bus_id,omitempty"`
	MemoryMiB     int64  `json:"memory_mib"`
	MemoryUsedMiB int64  `json:"memory_used_mib,omitempty"`
	Driver        string `json:"driver,omitempty"`
	// MIG is the current MIG mode: "Enabled", "Disabled", or "" where the GPU has no MIG.
	MIG        string `json:"mig,omitempty"`
	ComputeCap string `json:"compute_cap,omitempty"`
}

// QueryFields are the --query-gpu fields Detect asks for, in this order.
var QueryFields = []string{"index", "name", "uuid", "pci.bus_id", "memory.total", "memory.used", "driver_version", "mig.mode.current", "compute_cap"}

// QueryFieldsBasic is the fallback for old drivers that reject compute_cap or mig.mode.current.
var QueryFieldsBasic = []string{"index", "name", "uuid", "pci.bus_id", "memory.total", "memory.used", "driver_version"}

// notReported is how nvidia-smi prints a value it cannot give.
func notReported(v string) bool {
	switch strings.ToLower(strings.Trim(v, "[] ")) {
	case "n/a", "not supported", "unknown error", "insufficient permissions", "gpu requires reset", "":
		return true
	}
	return false
}

// ParseQueryCSV parses `nvidia-smi --query-gpu=FIELDS --format=csv[,noheader][,nounits]`.
// fields are the names given to --query-gpu, in order; when the output has a header line (no
// noheader), the header is used instead and fields may be nil. Memory values may carry a
// "MiB" unit. Values printed as [N/A] or [Not Supported] are left zero.
func ParseQueryCSV(text string, fields []string) ([]GPU, error) {
	r := csv.NewReader(strings.NewReader(text))
	r.TrimLeadingSpace = true
	r.FieldsPerRecord = -1
	var gpus []GPU
	line := 0
	sawHeader := false
	for {
		rec, err := r.Read()
		if err == io.EOF {
			break
		}
		line++
		if err != nil {
			return nil, fmt.Errorf("query csv: %w", err)
		}
		if len(rec) == 1 && strings.TrimSpace(rec[0]) == "" {
			continue
		}
		// nvidia-smi prints some warnings (a corrupt infoROM) on stdout before the values.
		if first := strings.ToUpper(strings.TrimSpace(rec[0])); strings.HasPrefix(first, "WARNING") && len(rec) != len(fields) {
			continue
		}
		if !sawHeader && len(gpus) == 0 && looksLikeHeader(rec) {
			sawHeader = true
			fields = make([]string, len(rec))
			for i, h := range rec {
				// "memory.total [MiB]" -> "memory.total"
				if k := strings.Index(h, " ["); k >= 0 {
					h = h[:k]
				}
				fields[i] = strings.TrimSpace(h)
			}
			continue
		}
		if len(fields) == 0 {
			return nil, fmt.Errorf("query csv: line %d: no header and no field list", line)
		}
		if len(rec) != len(fields) {
			return nil, fmt.Errorf("query csv: line %d: %d values for %d fields (%s): %q", line, len(rec), len(fields), strings.Join(fields, ","), strings.Join(rec, ", "))
		}
		g := GPU{Index: len(gpus)}
		for i, f := range fields {
			v := strings.TrimSpace(rec[i])
			if notReported(v) {
				continue
			}
			switch f {
			case "index":
				n, err := strconv.Atoi(v)
				if err != nil {
					return nil, fmt.Errorf("query csv: line %d: index %q is not a number", line, v)
				}
				g.Index = n
			case "name", "gpu_name":
				g.Name = v
			case "uuid", "gpu_uuid":
				g.UUID = v
			case "pci.bus_id", "gpu_bus_id":
				g.BusID = v
			case "memory.total", "memory.used":
				n, err := parseMiB(v)
				if err != nil {
					return nil, fmt.Errorf("query csv: line %d: %s: %w", line, f, err)
				}
				if f == "memory.total" {
					g.MemoryMiB = n
				} else {
					g.MemoryUsedMiB = n
				}
			case "driver_version":
				g.Driver = v
			case "mig.mode.current":
				g.MIG = v
			case "compute_cap":
				g.ComputeCap = v
			}
		}
		gpus = append(gpus, g)
	}
	return gpus, nil
}

func looksLikeHeader(rec []string) bool {
	for _, f := range rec {
		f = strings.TrimSpace(f)
		if f == "index" || f == "name" || strings.HasPrefix(f, "memory.") || f == "uuid" || f == "pci.bus_id" {
			return true
		}
	}
	return false
}

// parseMiB reads "143771" or "143771 MiB".
func parseMiB(v string) (int64, error) {
	v = strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "MiB"))
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%q is not a number of MiB", v)
	}
	return n, nil
}

var (
	// driverRe matches "Driver Version: 580.65.06" (table header), "Driver Version : ..." (-q)
	// and "DRIVER version : ..." (--version).
	driverRe = regexp.MustCompile(`(?i)Driver Version\s*:\s*([0-9][0-9.]*)`)
	// smiVersionRe is the banner's own version, the driver's: the fallback for localized
	// output where "Driver Version" is translated.
	smiVersionRe = regexp.MustCompile(`NVIDIA-SMI\s+(?:version\s*:\s*)?([0-9]+\.[0-9][0-9.]*)`)
	cudaRe       = regexp.MustCompile(`(?i)CUDA Version\s*:\s*([0-9][0-9.]*|N/A)`)
)

// ParseSMI reads the driver and CUDA versions from the header of plain `nvidia-smi` output
// (or from `nvidia-smi -q` or `--version`). The CUDA version is the newest the driver
// supports; it is "" when not printed (old drivers). Terminal escapes and carriage returns
// are ignored.
func ParseSMI(text string) (driver, cuda string, err error) {
	text = strings.Join(cleanText(text), "\n")
	m := driverRe.FindStringSubmatch(text)
	if m == nil && !strings.Contains(text, "NVIDIA-SMI has failed") {
		m = smiVersionRe.FindStringSubmatch(text)
	}
	if m == nil {
		if strings.Contains(text, "NVIDIA-SMI has failed") || strings.Contains(text, "couldn't communicate with the NVIDIA driver") {
			return "", "", fmt.Errorf("nvidia-smi cannot reach the driver: %s", firstLine(text))
		}
		return "", "", fmt.Errorf("nvidia-smi output has no \"Driver Version\"")
	}
	driver = m[1]
	if c := cudaRe.FindStringSubmatch(text); c != nil && c[1] != "N/A" {
		cuda = c[1]
	}
	return driver, cuda, nil
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// CPU is the host processor: its model name and the number of logical CPUs listed.
type CPU struct {
	Model string `json:"model"`
	// Logical is the number of logical CPUs in /proc/cpuinfo; Detect replaces it with the
	// number this process may use (cgroup and affinity limits), which is what a run gets.
	Logical int `json:"logical"`
	// Cores is the number of physical cores (distinct physical id/core id pairs), 0 if unknown.
	Cores int `json:"cores,omitempty"`
}

// ParseCPUInfo reads /proc/cpuinfo (x86: "model name"; Arm: "Model", "Hardware" or the CPU
// part; POWER: "cpu").
func ParseCPUInfo(text string) CPU {
	var c CPU
	cores := map[string]bool{}
	var phys, part, implementer, hardware, model, power string
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		switch k {
		case "processor":
			c.Logical++
		case "model name":
			if c.Model == "" {
				c.Model = v
			}
		case "Model":
			model = v
		case "Hardware":
			hardware = v
		case "cpu":
			// POWER: "cpu : POWER9, altivec supported"
			if power == "" {
				power, _, _ = strings.Cut(v, ",")
			}
		case "CPU part":
			part = v
		case "CPU implementer":
			implementer = v
		case "physical id":
			phys = v
		case "core id":
			cores[phys+"/"+v] = true
		}
	}
	switch {
	case c.Model != "":
	case model != "":
		c.Model = model
	case hardware != "":
		c.Model = hardware
	case power != "":
		c.Model = power
	case part != "":
		c.Model = armPartName(implementer, part)
	}
	c.Cores = len(cores)
	return c
}

// armPartName names the common server Arm cores by their implementer and part numbers.
func armPartName(implementer, part string) string {
	known := map[string]string{
		"0x41/0xd0c": "Arm Neoverse-N1", "0x41/0xd40": "Arm Neoverse-V1", "0x41/0xd4f": "Arm Neoverse-V2",
		"0x41/0xd49": "Arm Neoverse-N2", "0x41/0xd8e": "Arm Neoverse-N3", "0x41/0xd84": "Arm Neoverse-V3",
	}
	if n, ok := known[strings.ToLower(implementer+"/"+part)]; ok {
		return n
	}
	return "Arm part " + part
}
