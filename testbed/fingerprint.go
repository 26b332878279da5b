// Package testbed says what machine a run happens on: the GPUs (model, count, memory, MIG),
// driver and CUDA versions, how the GPUs are linked (NVLink or PCIe, from `nvidia-smi topo
// -m`), the CPU when there is no GPU, and the engine. The Fingerprint's ID
// (`<slug>-<hash>`, e.g. "8xH200-nvlink-drv570-1a2b3c4d") names the baseline folder, so that
// numbers are only ever compared with numbers from the same kind of machine. The package also
// samples GPU memory during a run (Sampler).
//
// Parsing functions take text, so they are tested on captured nvidia-smi output
// (fixtures/testbed); Detect runs the tools.
package testbed

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"sort"
	"strings"
)

// Schema is the value of Fingerprint.Schema; it is part of the hash, so a change of what the
// hash covers changes every ID.
const Schema = "reckon.testbed/v1"

// Fingerprint identifies a testbed. Fields marked "hashed" make up the identity (see
// Canonical); the others are recorded for people reading reports and baselines.
type Fingerprint struct {
	Schema string `json:"schema"`
	// GPUModel is the GPU name without the vendor ("H200"), models joined by "+" when they
	// differ. Hashed.
	GPUModel string `json:"gpu_model,omitempty"`
	// GPUCount is the number of GPUs visible. Hashed.
	GPUCount int `json:"gpu_count"`
	// GPUMemoryGiB is the smallest per-GPU memory, rounded to whole GiB (ECC and MIG shift the
	// MiB figure slightly). Hashed.
	GPUMemoryGiB int `json:"gpu_memory_gib,omitempty"`
	// Driver is the full driver version; only its major part is hashed.
	Driver string `json:"driver,omitempty"`
	// CUDA is the newest CUDA version the driver supports (from the nvidia-smi header).
	CUDA string `json:"cuda,omitempty"`
	// Interconnect is "nvlink", "pcie", "mixed", "single" (one GPU), "unknown" (topology not
	// read) or "" (no GPU). Hashed.
	Interconnect string `json:"interconnect,omitempty"`
	// GPULinks is the GPU-to-GPU link matrix ("X", "NV18", "PIX", "SYS"...). Hashed: two
	// 8-GPU PCIe machines whose GPUs hang off different switches are different testbeds.
	GPULinks [][]string `json:"gpu_links,omitempty"`
	// MIG is "enabled", "disabled", "mixed" or "" (not reported). Hashed.
	MIG string `json:"mig,omitempty"`
	// CPU is the host CPU. Hashed only when there is no GPU.
	CPU CPU `json:"cpu"`
	// Engine is the engine name (sglang, vllm, refengine), set by the caller. Hashed.
	Engine string `json:"engine,omitempty"`
	// EngineVersion is recorded but not hashed: a baseline must stay comparable when the
	// engine under test changes, which is the point of a regression gate.
	EngineVersion string `json:"engine_version,omitempty"`
	// GPUs are the GPUs as detected (UUIDs and bus ids are not hashed).
	GPUs []GPU `json:"gpus,omitempty"`
	// Topology is the full `nvidia-smi topo -m` matrix, NICs included (not hashed).
	Topology *Topology `json:"topology,omitempty"`
	// Slug is a readable name: "8xH200-nvlink-drv570", "1xH100-80GB-HBM3-drv550",
	// "cpu-2c-amd-epyc-7b13".
	Slug string `json:"slug"`
	// Hash is the first 8 hex digits of the SHA-256 of Canonical().
	Hash string `json:"hash"`
	// Visible is CUDA_VISIBLE_DEVICES when it restricted the GPUs (not hashed: the GPUs it
	// leaves, and their links, are).
	Visible string `json:"visible,omitempty"`
	// Notes say what could not be detected and why.
	Notes []string `json:"notes,omitempty"`
}

// Key is the baseline folder name, "<slug>-<hash>". It first refreshes Slug and Hash from the
// identity fields, so a caller may set Engine after Detect and then ask for the key.
func (f *Fingerprint) Key() string {
	f.Slug = f.slug()
	f.Hash = f.hash()
	return f.Slug + "-" + f.Hash
}

func (f *Fingerprint) hash() string {
	sum := sha256.Sum256(f.Canonical())
	return hex.EncodeToString(sum[:])[:8]
}

// identity is what the hash covers, in a fixed field order.
type identity struct {
	Schema       string     `json:"schema"`
	GPUModel     string     `json:"gpu_model"`
	GPUCount     int        `json:"gpu_count"`
	GPUMemoryGiB int        `json:"gpu_memory_gib"`
	DriverMajor  string     `json:"driver_major"`
	Interconnect string     `json:"interconnect"`
	GPULinks     [][]string `json:"gpu_links"`
	MIG          string     `json:"mig"`
	CPUModel     string     `json:"cpu_model"`
	CPULogical   int        `json:"cpu_logical"`
	Engine       string     `json:"engine"`
}

// Canonical returns the canonical JSON of the identity fields, which Hash digests.
func (f *Fingerprint) Canonical() []byte {
	id := identity{
		Schema:       Schema,
		GPUModel:     f.GPUModel,
		GPUCount:     f.GPUCount,
		GPUMemoryGiB: f.GPUMemoryGiB,
		DriverMajor:  driverMajor(f.Driver),
		Interconnect: f.Interconnect,
		GPULinks:     f.GPULinks,
		MIG:          f.MIG,
		Engine:       strings.ToLower(f.Engine),
	}
	if f.GPUCount == 0 {
		id.CPUModel = f.CPU.Model
		id.CPULogical = f.CPU.Logical
	}
	b, _ := json.Marshal(id) // a struct of strings and ints always marshals
	return b
}

// Finish fills the derived fields (model, count, memory, MIG, interconnect, links, slug, hash)
// from GPUs, Topology, Driver, CPU and Engine. Call it after changing any of them.
func (f *Fingerprint) Finish() {
	f.Schema = Schema
	f.GPUCount = len(f.GPUs)
	f.GPUModel, f.GPUMemoryGiB, f.MIG = "", 0, ""
	f.Interconnect, f.GPULinks = "", nil
	if f.GPUCount > 0 {
		var models []string
		seen := map[string]bool{}
		minMiB := int64(math.MaxInt64)
		mig := map[string]bool{}
		for _, g := range f.GPUs {
			m := ShortModel(g.Name)
			if !seen[m] {
				seen[m] = true
				models = append(models, m)
			}
			if g.MemoryMiB > 0 && g.MemoryMiB < minMiB {
				minMiB = g.MemoryMiB
			}
			if g.MIG != "" {
				mig[strings.ToLower(g.MIG)] = true
			}
			if f.Driver == "" && g.Driver != "" {
				f.Driver = g.Driver
			}
		}
		sort.Strings(models)
		f.GPUModel = strings.Join(models, "+")
		if minMiB != math.MaxInt64 {
			f.GPUMemoryGiB = int(math.Round(float64(minMiB) / 1024))
		}
		switch {
		case len(mig) > 1:
			f.MIG = "mixed"
		case mig["enabled"]:
			f.MIG = "enabled"
		case mig["disabled"]:
			f.MIG = "disabled"
		}
		switch {
		case f.GPUCount == 1:
			f.Interconnect = "single"
		case f.Topology != nil:
			idx := make([]int, len(f.GPUs))
			for i, g := range f.GPUs {
				idx[i] = g.Index
			}
			if m, ok := f.Topology.SubMatrix(idx); ok {
				f.GPULinks = m
				f.Interconnect = classify(m)
			} else {
				f.Interconnect = "unknown"
			}
		default:
			f.Interconnect = "unknown"
		}
	}
	f.Key()
}

func (f *Fingerprint) slug() string {
	if f.GPUCount == 0 {
		return fmt.Sprintf("cpu-%dc-%s", f.CPU.Logical, cpuSlug(f.CPU.Model))
	}
	model := f.GPUModel
	if strings.Contains(model, "+") {
		model = "mixed"
	}
	parts := []string{fmt.Sprintf("%dx%s", f.GPUCount, model)}
	if f.Interconnect != "single" && f.Interconnect != "" {
		parts = append(parts, f.Interconnect)
	}
	if f.MIG == "enabled" || f.MIG == "mixed" {
		parts = append(parts, "mig")
	}
	if d := driverMajor(f.Driver); d != "" {
		parts = append(parts, "drv"+d)
	}
	return sanitize(strings.Join(parts, "-"))
}

func driverMajor(v string) string {
	major, _, _ := strings.Cut(strings.TrimSpace(v), ".")
	return major
}

var (
	nonSlug   = regexp.MustCompile(`[^A-Za-z0-9.+]+`)
	cpuNoise  = regexp.MustCompile(`(?i)\((r|tm)\)|\bprocessor\b|\bcpu\b|\b[0-9]+-core\b|@.*$|\bwith radeon.*$`)
	multiDash = regexp.MustCompile(`-+`)
)

// ShortModel turns an nvidia-smi GPU name into a slug-safe model: "NVIDIA H200" -> "H200",
// "NVIDIA H100 80GB HBM3" -> "H100-80GB-HBM3", "Tesla V100-SXM2-32GB" -> "V100-SXM2-32GB".
func ShortModel(name string) string {
	n := strings.TrimSpace(name)
	for _, p := range []string{"NVIDIA ", "Tesla "} {
		n = strings.TrimPrefix(n, p)
	}
	return sanitize(n)
}

func sanitize(s string) string {
	s = nonSlug.ReplaceAllString(s, "-")
	s = strings.ReplaceAll(s, "+", "plus")
	s = multiDash.ReplaceAllString(s, "-")
	s = strings.Trim(s, "-.")
	if s == "" {
		return "unknown"
	}
	return s
}

// cpuSlug turns a CPU model into lower-case words: "AMD EPYC 7B13 64-Core Processor" ->
// "amd-epyc-7b13", "Intel(R) Xeon(R) Platinum 8480+" -> "intel-xeon-platinum-8480plus".
func cpuSlug(model string) string {
	m := cpuNoise.ReplaceAllString(model, " ")
	return strings.ToLower(sanitize(m))
}
