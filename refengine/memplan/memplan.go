// Package memplan computes the reference engine's per-rank memory plan. The device capacity is
// modelled (--device-memory); every other number is a real size: the rank's weight shard, the
// custom-allreduce buffers, the graph reserve and activation workspace the engine sets aside, and
// the KV pool that is then really allocated with whatever is left of the static budget.
//
//	static   = device × mem_fraction_static
//	kv_bytes = static − weights − custom_ar − graph_reserve − activations − fault_reserve
//	tokens   = ⌊kv_bytes / (kv_bytes_per_token × page_size)⌋ × page_size
package memplan

import (
	"errors"
	"fmt"
)

// ErrNotEnoughMemory is the start-up failure of a KV budget that holds no page; Compute's error
// wraps it (its text is SGLang's: "Not enough memory. Please try to increase --mem-fraction-static.").
var ErrNotEnoughMemory = errors.New("Not enough memory. Please try to increase --mem-fraction-static.")

// Input is what the plan is computed from; all sizes are bytes per rank.
type Input struct {
	DeviceBytes       int64
	MemFractionStatic float64
	Weights           int64 // target shard (+ draft shard) really held by the rank
	CustomAR          int64 // custom-allreduce IPC buffers (0 when custom allreduce is off)
	GraphReserve      int64 // CUDA-graph reserve (target + draft)
	Activations       int64 // activation workspace for the largest step
	FaultReserve      int64 // --fault-reserve-mb
	KVBytesPerToken   int64 // target + draft KV bytes per token slot on this rank
	PageSize          int
	// MaxTotalTokens caps the pool (--max-total-tokens); 0 = no cap.
	MaxTotalTokens int
}

// Plan is the result.
type Plan struct {
	Input
	Static    int64 // device × fraction
	KVBudget  int64 // bytes the KV pool may use (before rounding to pages)
	KVTokens  int   // token capacity of the pool
	KVPages   int
	KVBytes   int64 // bytes really allocated for KV (tokens × per-token bytes)
	Used      int64 // everything allocated or reserved: weights + custom AR + graph + activations + fault + KV
	Available int64 // device − used: free memory after start-up
}

// Compute builds the plan, or explains why no KV pool fits.
func Compute(in Input) (Plan, error) {
	if in.DeviceBytes <= 0 {
		return Plan{}, fmt.Errorf("memory plan: device memory must be positive, got %d bytes", in.DeviceBytes)
	}
	if !(in.MemFractionStatic > 0 && in.MemFractionStatic <= 1) {
		return Plan{}, fmt.Errorf("memory plan: --mem-fraction-static must be in (0, 1], got %v", in.MemFractionStatic)
	}
	if in.KVBytesPerToken <= 0 || in.PageSize <= 0 {
		return Plan{}, fmt.Errorf("memory plan: KV bytes per token (%d) and page size (%d) must be positive", in.KVBytesPerToken, in.PageSize)
	}
	p := Plan{Input: in}
	p.Static = int64(float64(in.DeviceBytes) * in.MemFractionStatic)
	p.KVBudget = p.Static - in.Weights - in.CustomAR - in.GraphReserve - in.Activations - in.FaultReserve
	perPage := in.KVBytesPerToken * int64(in.PageSize)
	if p.KVBudget > 0 {
		p.KVPages = int(p.KVBudget / perPage)
	}
	if in.MaxTotalTokens > 0 && p.KVPages*in.PageSize > in.MaxTotalTokens {
		p.KVPages = in.MaxTotalTokens / in.PageSize
	}
	p.KVTokens = p.KVPages * in.PageSize
	p.KVBytes = int64(p.KVTokens) * in.KVBytesPerToken
	p.Used = in.Weights + in.CustomAR + in.GraphReserve + in.Activations + in.FaultReserve + p.KVBytes
	p.Available = in.DeviceBytes - p.Used
	if p.KVPages < 1 {
		return p, fmt.Errorf("%w "+
			"(static budget %s = device %s x %.3f; weights %s, custom allreduce %s, graph reserve %s, activations %s, fault reserve %s leave %s for the KV cache, less than one page of %d tokens x %d bytes)", ErrNotEnoughMemory,
			GiBString(p.Static), GiBString(in.DeviceBytes), in.MemFractionStatic, GiBString(in.Weights), GiBString(in.CustomAR),
			GiBString(in.GraphReserve), GiBString(in.Activations), GiBString(in.FaultReserve), GiBString(p.KVBudget), in.PageSize, in.KVBytesPerToken)
	}
	return p, nil
}

// GiB converts bytes to GiB (what SGLang prints as "GB").
func GiB(b int64) float64 { return float64(b) / (1 << 30) }

// GiBString formats bytes as SGLang's logs do ("X GB", GiB values), with four decimals because the
// reference engine's sizes are small.
func GiBString(b int64) string { return fmt.Sprintf("%.4f GB", GiB(b)) }
