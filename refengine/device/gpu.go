// Package device is the reference engine's modelled accelerator: a small table of GPUs (memory,
// memory bandwidth, bf16 throughput), modelled models whose size sets how long a step of the
// engine would take on such a GPU, and the device clock that makes each scheduler step last that
// long (or longer, when the CPU that really computes the step is slower). Nothing here is
// measured; the numbers and their sources are in docs/refengine.md ("Device clock").
package device

import (
	"fmt"
	"sort"
	"strings"
)

// GPU is a modelled accelerator.
type GPU struct {
	// Name is the table key (lower case, e.g. "h100").
	Name string
	// Display is the product name.
	Display string
	// MemoryBytes is the device memory that the memory plan may use (what nvidia-smi reports as
	// total, in bytes).
	MemoryBytes int64
	// HBMGBps is the peak device-memory bandwidth, GB/s (10^9 bytes per second).
	HBMGBps float64
	// BF16TFLOPS is the dense (no sparsity) bf16 tensor-core peak, 10^12 FLOP/s.
	BF16TFLOPS float64
	// Interconnect is how the product's boards are usually connected ("nvlink" or "pcie").
	Interconnect string
	// SM is the compute capability times ten (90 for Hopper, 120 for the RTX Blackwell parts),
	// what engines test to pick kernels (SGLang's is_sm90_supported).
	SM int
	// Source cites the datasheet the numbers come from.
	Source string
}

// MemEfficiency and FLOPEfficiency are the fractions of the peak memory bandwidth and bf16
// throughput that a step's kernels reach (decode GEMVs and paged attention reach 70-85% of peak
// bandwidth on these parts; large GEMMs 60-75% of the tensor peak).
const (
	MemEfficiency  = 0.8
	FLOPEfficiency = 0.65
)

const gib = 1 << 30

// gpus is the table; keys are lower case.
var gpus = map[string]GPU{
	"h200": {Name: "h200", Display: "NVIDIA H200 SXM (141 GB HBM3e)", MemoryBytes: 143771 << 20, HBMGBps: 4800, BF16TFLOPS: 989.5, Interconnect: "nvlink", SM: 90,
		Source: "NVIDIA H200 Tensor Core GPU datasheet (2024): 141 GB HBM3e, 4.8 TB/s, BF16 1,979 TFLOPS with sparsity (989.5 dense); nvidia-smi total 143,771 MiB"},
	"h100": {Name: "h100", Display: "NVIDIA H100 SXM5 (80 GB HBM3)", MemoryBytes: 81559 << 20, HBMGBps: 3350, BF16TFLOPS: 989.5, Interconnect: "nvlink", SM: 90,
		Source: "NVIDIA H100 Tensor Core GPU datasheet (2023), SXM5: 80 GB HBM3, 3.35 TB/s, BF16 1,979 TFLOPS with sparsity (989.5 dense); nvidia-smi total 81,559 MiB"},
	"rtx-pro-6000": {Name: "rtx-pro-6000", Display: "NVIDIA RTX PRO 6000 Blackwell (96 GB GDDR7, PCIe)", MemoryBytes: 97887 << 20, HBMGBps: 1792, BF16TFLOPS: 503.8, Interconnect: "pcie", SM: 120,
		Source: "NVIDIA RTX PRO 6000 Blackwell Workstation/Server Edition datasheet (2025): 96 GB GDDR7 ECC, 1,792 GB/s, PCIe Gen5 x16, no NVLink; NVIDIA RTX Blackwell GPU architecture whitepaper: FP16/BF16 tensor 503.8 TFLOPS dense with FP32 accumulate; nvidia-smi total 97,887 MiB"},
}

// LookupGPU returns the table's GPU of that name (case-insensitive).
func LookupGPU(name string) (GPU, error) {
	g, ok := gpus[strings.ToLower(strings.TrimSpace(name))]
	if !ok {
		return GPU{}, fmt.Errorf("unknown modelled GPU %q: expected one of %s", name, strings.Join(GPUNames(), ", "))
	}
	return g, nil
}

// GPUNames lists the table's GPU names, sorted.
func GPUNames() []string {
	var out []string
	for k := range gpus {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
