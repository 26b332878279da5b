// Package interconnect models the communication time of the reference engine's allreduces on an
// NVLink or PCIe machine. Nothing here is measured: the reference engine runs its ranks on the CPU
// and adds the modelled time to each step, so that the configurations that matter in the field
// (custom allreduce or NCCL, NVLink or PCIe) show their real shape in throughput. The formulas and
// the reasons for the default constants are in docs/interconnect.md.
package interconnect

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/reckon-ci/reckon/refengine/collective"
)

// Topology is how the GPUs of one tensor-parallel group are connected.
type Topology string

const (
	// NVLink: every GPU has its own link into an NVSwitch; transfers of different GPUs do not
	// contend.
	NVLink Topology = "nvlink"
	// PCIe: peer-to-peer traffic crosses a shared PCIe fabric (switches / root complex); transfers
	// that happen at the same time share its bandwidth.
	PCIe Topology = "pcie"
)

// Parse turns a command-line value into a Topology ("nvlink" or "pcie", case-insensitive).
func Parse(s string) (Topology, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "nvlink":
		return NVLink, nil
	case "pcie":
		return PCIe, nil
	}
	return "", fmt.Errorf("unknown topology %q: expected %q or %q", s, NVLink, PCIe)
}

// Model is the modelled interconnect. Bandwidths are in GB/s (10^9 bytes per second, which is
// 1000 bytes per microsecond); times in microseconds.
type Model struct {
	Topology Topology
	// LinkGBps is one GPU's link bandwidth in each direction: the ring's neighbour link, and on
	// NVLink the port through which a GPU reads its peers.
	LinkGBps float64
	// BusGBps is the shared fabric's total bandwidth that concurrent PCIe peer transfers divide
	// among themselves. Unused on NVLink.
	BusGBps float64
	// LatencyUs is the fixed cost of one communication step: one ring hop, or the one-shot
	// kernel's launch and barrier.
	LatencyUs float64
	// TransferUs is the bus occupancy of one peer-to-peer transfer beyond its bytes (transaction
	// set-up and the barrier flags each rank writes to and polls from each peer). On a shared
	// PCIe fabric the n(n-1) transfers of a one-shot serialise, so this is paid n(n-1) times.
	// Unused on NVLink, where these flags travel in parallel inside LatencyUs.
	TransferUs float64
	// ConcurrentTransfers is how many peer transfers the PCIe fabric carries at once without
	// contention (one per direction of a link: 2). Only the transfers beyond these queue for the
	// bus and pay TransferUs each, so two PCIe GPUs (SGLang's and vLLM's limit for custom
	// allreduce) see no contention, and eight see 54 of their 56 queue. Unused on NVLink.
	ConcurrentTransfers int
}

// Default returns the documented default model of a topology. For a value that Parse would reject
// it returns a Model with only Topology set, which Validate rejects; check with Parse first.
func Default(t Topology) Model {
	switch t {
	case NVLink:
		return Model{Topology: NVLink, LinkGBps: 16, LatencyUs: 10}
	case PCIe:
		return Model{Topology: PCIe, LinkGBps: 2, BusGBps: 2, LatencyUs: 25, TransferUs: 40, ConcurrentTransfers: 2}
	}
	return Model{Topology: t}
}

// GPUScale returns the model of a topology at the scale of real GPUs, which the reference engine
// uses on its modelled device clock (--clock modelled), where the messages are those of the
// modelled model (tokens × its hidden size in bf16) rather than of the tiny real one. The values
// and their reasons are in docs/interconnect.md ("GPU-scale constants").
func GPUScale(t Topology) Model {
	switch t {
	case NVLink:
		return Model{Topology: NVLink, LinkGBps: 360, LatencyUs: 2}
	case PCIe:
		return Model{Topology: PCIe, LinkGBps: 25, BusGBps: 50, LatencyUs: 4.3, TransferUs: 2.2, ConcurrentTransfers: 2}
	}
	return Model{Topology: t}
}

// Validate checks that the model can be evaluated: a known topology and positive bandwidths,
// non-negative times.
func (m Model) Validate() error {
	if _, err := Parse(string(m.Topology)); err != nil {
		return fmt.Errorf("interconnect model: %w", err)
	}
	if !(m.LinkGBps > 0) || math.IsInf(m.LinkGBps, 0) {
		return fmt.Errorf("interconnect model %s: link bandwidth %v GB/s: expected a positive finite number", m.Topology, m.LinkGBps)
	}
	if m.Topology == PCIe && (!(m.BusGBps > 0) || math.IsInf(m.BusGBps, 0)) {
		return fmt.Errorf("interconnect model pcie: bus bandwidth %v GB/s: expected a positive finite number", m.BusGBps)
	}
	if !(m.LatencyUs >= 0) || math.IsInf(m.LatencyUs, 0) {
		return fmt.Errorf("interconnect model %s: latency %v us: expected a non-negative finite number", m.Topology, m.LatencyUs)
	}
	if m.ConcurrentTransfers < 0 {
		return fmt.Errorf("interconnect model %s: concurrent transfers %d: expected a non-negative number", m.Topology, m.ConcurrentTransfers)
	}
	if !(m.TransferUs >= 0) || math.IsInf(m.TransferUs, 0) {
		return fmt.Errorf("interconnect model %s: per-transfer overhead %v us: expected a non-negative finite number", m.Topology, m.TransferUs)
	}
	return nil
}

// AllReduceTime is the modelled communication time of one allreduce of bytes per rank over ranks
// ranks. With n ranks, B bytes, a = LatencyUs, and bandwidths in bytes per microsecond:
//
//	ring (any topology):  2(n-1) * (a + (B/n)/Link)
//	tree (any topology):  2*ceil(log2 n) * a + 2*B/Link
//	one-shot on NVLink:   a + (n-1)*B/Link
//	one-shot on PCIe:     a + max(0, n(n-1) - ConcurrentTransfers) * TransferUs + n(n-1) * B/Bus
//
// It returns 0 for one rank, a non-positive size, or an unknown algorithm; a zero bandwidth
// contributes no bandwidth term.
func (m Model) AllReduceTime(alg collective.Algorithm, bytes int64, ranks int) time.Duration {
	if ranks <= 1 || bytes <= 0 {
		return 0
	}
	n := float64(ranks)
	b := float64(bytes)
	var us float64
	switch alg {
	case collective.Ring:
		us = 2 * (n - 1) * (m.LatencyUs + perUs(b/n, m.LinkGBps))
	case collective.Tree:
		// Pipelined binary tree: the message goes up ceil(log2 n) levels and back down, one
		// latency per level each way; pipelining in chunks hides the depth from the bandwidth
		// term, so every byte crosses a link once up and once down.
		depth := math.Ceil(math.Log2(n))
		us = 2*depth*m.LatencyUs + 2*perUs(b, m.LinkGBps)
	case collective.OneShot:
		if m.Topology == PCIe {
			queued := math.Max(0, n*(n-1)-float64(m.ConcurrentTransfers))
			us = m.LatencyUs + queued*m.TransferUs + n*(n-1)*perUs(b, m.BusGBps)
		} else {
			us = m.LatencyUs + perUs((n-1)*b, m.LinkGBps)
		}
	default:
		return 0
	}
	return time.Duration(math.Round(us * float64(time.Microsecond)))
}

// perUs is the time in microseconds to move b bytes at gbps GB/s (1 GB/s = 1000 bytes/us).
func perUs(b, gbps float64) float64 {
	if gbps <= 0 {
		return 0
	}
	return b / (gbps * 1000)
}

// Describe is one line for the engine's start-up log: the topology, the formulas and the
// constants in use.
func (m Model) Describe() string {
	switch m.Topology {
	case PCIe:
		return fmt.Sprintf("interconnect model (modelled, not measured): topology=pcie link=%gGB/s bus=%gGB/s latency=%gus transfer=%gus concurrent=%d; "+
			"ring=2(n-1)*(latency+B/n/link) one_shot=latency+max(0,n(n-1)-concurrent)*transfer+n(n-1)*B/bus (shared bus)",
			m.LinkGBps, m.BusGBps, m.LatencyUs, m.TransferUs, m.ConcurrentTransfers)
	default:
		return fmt.Sprintf("interconnect model (modelled, not measured): topology=%s link=%gGB/s latency=%gus; "+
			"ring=2(n-1)*(latency+B/n/link) one_shot=latency+(n-1)*B/link (no contention between GPUs)",
			m.Topology, m.LinkGBps, m.LatencyUs)
	}
}

// Crossover returns the smallest message size in bytes, searched by doubling from 1 byte up to
// limit, at which the ring is at least as fast as the one-shot on n ranks, or 0 if the one-shot
// is faster for every size up to limit. It helps documentation and logs say where the custom
// allreduce stops paying.
func (m Model) Crossover(ranks int, limit int64) int64 {
	lo, hi := int64(0), int64(0)
	for b := int64(1); b <= limit; b *= 2 {
		if m.AllReduceTime(collective.Ring, b, ranks) <= m.AllReduceTime(collective.OneShot, b, ranks) {
			hi = b
			break
		}
		lo = b
	}
	if hi == 0 {
		return 0
	}
	for hi-lo > 1 { // binary search between the last size where one-shot won and hi
		mid := lo + (hi-lo)/2
		if m.AllReduceTime(collective.Ring, mid, ranks) <= m.AllReduceTime(collective.OneShot, mid, ranks) {
			hi = mid
		} else {
			lo = mid
		}
	}
	return hi
}
