package testbed

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Link levels of `nvidia-smi topo -m`, from the closest to the farthest. The zero value is
// LinkUnknown.
type LinkLevel int

// Link levels.
const (
	LinkUnknown LinkLevel = iota
	LinkSelf              // X
	LinkNVLink            // NV# (a bonded set of # NVLinks)
	LinkPIX               // at most a single PCIe bridge
	LinkPXB               // multiple PCIe bridges, without the host bridge
	LinkPHB               // a PCIe host bridge (typically the CPU)
	LinkNode              // PCIe and the interconnect between host bridges within a NUMA node
	LinkSys               // PCIe and the SMP interconnect between NUMA nodes (SOC in old drivers)
)

var linkNames = map[LinkLevel]string{
	LinkUnknown: "unknown", LinkSelf: "X", LinkNVLink: "NV", LinkPIX: "PIX", LinkPXB: "PXB",
	LinkPHB: "PHB", LinkNode: "NODE", LinkSys: "SYS",
}

// String returns the level's name as nvidia-smi prints it ("NV" for any NVLink count).
func (l LinkLevel) String() string { return linkNames[l] }

// IsPCIe reports whether the level is a PCIe path (no NVLink).
func (l LinkLevel) IsPCIe() bool { return l >= LinkPIX && l <= LinkSys }

var nvCell = regexp.MustCompile(`^NV([0-9]+)$`)

// ParseLink reads one matrix cell: the level and, for NVLink, the number of bonded links.
func ParseLink(cell string) (LinkLevel, int) {
	cell = strings.TrimSpace(cell)
	if m := nvCell.FindStringSubmatch(cell); m != nil {
		n, _ := strconv.Atoi(m[1])
		return LinkNVLink, n
	}
	switch cell {
	case "X":
		return LinkSelf, 0
	case "PIX":
		return LinkPIX, 0
	case "PXB":
		return LinkPXB, 0
	case "PHB":
		return LinkPHB, 0
	case "NODE":
		return LinkNode, 0
	case "SYS", "SOC":
		return LinkSys, 0
	}
	return LinkUnknown, 0
}

// Topology is the matrix printed by `nvidia-smi topo -m`: every device (GPUs, then NICs or
// network devices such as mlx5_0) against every other, with each row's CPU and NUMA affinity.
type Topology struct {
	// Devices are the column labels in order: "GPU0", "GPU1", ..., "NIC0" or "mlx5_0".
	Devices []string `json:"devices"`
	// Links[i][j] is the cell of row Devices[i], column Devices[j], as printed ("X", "NV18",
	// "PIX", ...).
	Links [][]string `json:"links"`
	// CPUAffinity, NUMAAffinity and GPUNUMAID are per row ("" where the row has none, as NIC
	// rows; "N/A" as printed).
	CPUAffinity  []string `json:"cpu_affinity,omitempty"`
	NUMAAffinity []string `json:"numa_affinity,omitempty"`
	GPUNUMAID    []string `json:"gpu_numa_id,omitempty"`
	// NICNames maps NIC labels to device names, from the "NIC Legend" ("NIC0" -> "mlx5_0").
	NICNames map[string]string `json:"nic_names,omitempty"`
}

var (
	ansiEscape = regexp.MustCompile(`\x1b\[[0-9;]*[A-Za-z]`)
	gpuLabel   = regexp.MustCompile(`^GPU([0-9]+)$`)
	nicLegend  = regexp.MustCompile(`^\s*(NIC[0-9]+)\s*:\s*(\S+)\s*$`)
)

// affinityColumns are the column titles that follow the device columns, in their order.
var affinityColumns = []string{"CPU Affinity", "NUMA Affinity", "GPU NUMA ID"}

// ParseTopo parses the output of `nvidia-smi topo -m` (any driver generation: with or without
// NIC rows and columns, NIC legend, NUMA affinity and GPU NUMA ID columns; tab or space
// separated, as pasted into issues; terminal escapes stripped).
func ParseTopo(text string) (*Topology, error) {
	lines := strings.Split(strings.ReplaceAll(ansiEscape.ReplaceAllString(text, ""), "\r", ""), "\n")
	// The header is the first line whose first field is GPU0.
	hdr := -1
	for i, l := range lines {
		f := strings.Fields(l)
		if len(f) > 0 && f[0] == "GPU0" && !gpuRowStart(l) {
			hdr = i
			break
		}
	}
	if hdr < 0 {
		return nil, fmt.Errorf("topology: no header line starting with GPU0 (is this `nvidia-smi topo -m` output?)")
	}
	header := lines[hdr]
	// Cut the affinity titles off the header; the rest are device labels.
	cut := len(header)
	nAff := 0
	for _, t := range affinityColumns {
		if i := strings.Index(header, t); i >= 0 {
			if i < cut {
				cut = i
			}
			nAff++
		}
	}
	t := &Topology{Devices: strings.Fields(header[:cut]), NICNames: map[string]string{}}
	if len(t.Devices) == 0 {
		return nil, fmt.Errorf("topology: empty header")
	}
	index := map[string]int{}
	for i, d := range t.Devices {
		if _, dup := index[d]; dup {
			return nil, fmt.Errorf("topology: device %s appears twice in the header", d)
		}
		index[d] = i
	}
	n := len(t.Devices)
	t.Links = make([][]string, n)
	t.CPUAffinity = make([]string, n)
	t.NUMAAffinity = make([]string, n)
	t.GPUNUMAID = make([]string, n)
	seen := make([]bool, n)
	for ln := hdr + 1; ln < len(lines); ln++ {
		l := lines[ln]
		if m := nicLegend.FindStringSubmatch(l); m != nil {
			t.NICNames[m[1]] = m[2]
			continue
		}
		f := strings.Fields(l)
		if len(f) == 0 {
			continue
		}
		row, ok := index[f[0]]
		if !ok {
			continue // legend text and blank lines
		}
		if len(f)-1 < n {
			return nil, fmt.Errorf("topology: line %d: row %s has %d cells, want %d", ln+1, f[0], len(f)-1, n)
		}
		if seen[row] {
			return nil, fmt.Errorf("topology: line %d: row %s appears twice", ln+1, f[0])
		}
		seen[row] = true
		cells := f[1 : n+1]
		for j, c := range cells {
			if lvl, _ := ParseLink(c); lvl == LinkUnknown {
				return nil, fmt.Errorf("topology: line %d: row %s, column %s: unknown link %q (want X, NV#, PIX, PXB, PHB, NODE or SYS)", ln+1, f[0], t.Devices[j], c)
			}
			if (j == row) != (c == "X") {
				return nil, fmt.Errorf("topology: line %d: row %s, column %s: %q on the diagonal is wrong (X marks a device's own cell)", ln+1, f[0], t.Devices[j], c)
			}
		}
		t.Links[row] = append([]string(nil), cells...)
		rest := f[n+1:]
		if nAff > 0 && len(rest) > 0 {
			if len(rest) > 0 {
				t.CPUAffinity[row] = rest[0]
			}
			if len(rest) > 1 {
				t.NUMAAffinity[row] = rest[1]
			}
			if len(rest) > 2 {
				t.GPUNUMAID[row] = strings.Join(rest[2:], " ")
			}
		}
	}
	for i, d := range t.Devices {
		if !seen[i] {
			return nil, fmt.Errorf("topology: no row for %s (truncated output?)", d)
		}
	}
	if nAff == 0 {
		t.CPUAffinity, t.NUMAAffinity, t.GPUNUMAID = nil, nil, nil
	}
	if len(t.NICNames) == 0 {
		t.NICNames = nil
	}
	return t, nil
}

// gpuRowStart reports whether a line is a matrix row for GPU0 rather than the header (a row
// has a link cell after the label; the header has another device label).
func gpuRowStart(line string) bool {
	f := strings.Fields(line)
	if len(f) < 2 || f[0] != "GPU0" {
		return false
	}
	lvl, _ := ParseLink(f[1])
	return lvl != LinkUnknown
}

// GPUs returns the indices (into Devices) of the GPU rows, ordered by GPU number.
func (t *Topology) GPUs() []int {
	type g struct{ num, idx int }
	var gs []g
	for i, d := range t.Devices {
		if m := gpuLabel.FindStringSubmatch(d); m != nil {
			n, _ := strconv.Atoi(m[1])
			gs = append(gs, g{n, i})
		}
	}
	for i := 1; i < len(gs); i++ {
		for j := i; j > 0 && gs[j].num < gs[j-1].num; j-- {
			gs[j], gs[j-1] = gs[j-1], gs[j]
		}
	}
	out := make([]int, len(gs))
	for i, x := range gs {
		out[i] = x.idx
	}
	return out
}

// GPUMatrix returns the GPU-to-GPU part of the matrix, in GPU order.
func (t *Topology) GPUMatrix() [][]string {
	g := t.GPUs()
	m := make([][]string, len(g))
	for i, a := range g {
		m[i] = make([]string, len(g))
		for j, b := range g {
			m[i][j] = t.Links[a][b]
		}
	}
	return m
}

// SubMatrix returns the links among the GPUs with the given nvidia-smi indices (rows "GPU<i>"),
// in that order; ok is false when one of them is not in the matrix.
func (t *Topology) SubMatrix(indices []int) (m [][]string, ok bool) {
	pos := map[string]int{}
	for i, d := range t.Devices {
		pos[d] = i
	}
	rows := make([]int, len(indices))
	for i, g := range indices {
		p, found := pos["GPU"+strconv.Itoa(g)]
		if !found {
			return nil, false
		}
		rows[i] = p
	}
	m = make([][]string, len(rows))
	for i, a := range rows {
		m[i] = make([]string, len(rows))
		for j, b := range rows {
			m[i][j] = t.Links[a][b]
		}
	}
	return m, true
}

// Interconnect classifies the GPU-to-GPU links: "nvlink" when every pair is joined by NVLink,
// "pcie" when none is, "mixed" otherwise, and "single" with fewer than two GPUs.
func (t *Topology) Interconnect() string {
	return classify(t.GPUMatrix())
}

func classify(m [][]string) string {
	if len(m) < 2 {
		return "single"
	}
	nv, other := 0, 0
	for i := range m {
		for j := range m[i] {
			if i == j {
				continue
			}
			if lvl, _ := ParseLink(m[i][j]); lvl == LinkNVLink {
				nv++
			} else {
				other++
			}
		}
	}
	switch {
	case other == 0:
		return "nvlink"
	case nv == 0:
		return "pcie"
	default:
		return "mixed"
	}
}

// WorstGPULink returns the farthest level between any two GPUs (for an all-NVLink matrix,
// LinkNVLink and the smallest bonded link count).
func (t *Topology) WorstGPULink() (LinkLevel, int) {
	worst, minNV := LinkUnknown, 0
	m := t.GPUMatrix()
	for i := range m {
		for j := range m[i] {
			if i == j {
				continue
			}
			lvl, n := ParseLink(m[i][j])
			if lvl > worst {
				worst = lvl
				minNV = n
			} else if lvl == LinkNVLink && lvl == worst && n < minNV {
				minNV = n
			}
		}
	}
	return worst, minNV
}
