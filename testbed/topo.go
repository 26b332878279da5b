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
	// ansiEscape matches terminal control sequences: CSI (colours, underline), OSC and
	// character-set selections such as the "\x1b(B" that tput sgr0 emits.
	ansiEscape = regexp.MustCompile(`\x1b(?:\[[0-9;?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[()][0-9A-Za-z]|[=>78])`)
	gpuLabel   = regexp.MustCompile(`^GPU([0-9]+)$`)
	nicLegend  = regexp.MustCompile(`^\s*(NIC[0-9]+)\s*:\s*(\S+)\s*$`)
	// gluedCells matches a field made of several link cells that lost the tab between them
	// ("SYSSYS"), as seen in very wide matrices.
	gluedCells = regexp.MustCompile(`^(?:X|NV[0-9]+|PIX|PXB|PHB|NODE|SYS|SOC){2,}$`)
	linkCell   = regexp.MustCompile(`X|NV[0-9]+|PIX|PXB|PHB|NODE|SYS|SOC`)
	// gluedLabels matches a header field made of several device labels ("NIC11NIC12").
	gluedLabels = regexp.MustCompile(`^(?:(?:GPU|NIC)[0-9]+|mlx[0-9]+_[0-9]+){2,}$`)
	deviceLabel = regexp.MustCompile(`(?:GPU|NIC)[0-9]+|mlx[0-9]+_[0-9]+`)
	// numaGlued is a NUMA affinity run into the GPU NUMA ID ("0N/A").
	numaGlued = regexp.MustCompile(`^([0-9][0-9,-]*)(N/A)$`)
)

// affinityColumns are the column titles that follow the device columns, in their order.
var affinityColumns = []string{"CPU Affinity", "NUMA Affinity", "GPU NUMA ID"}

// cleanText removes what is not part of the table: terminal escapes, carriage returns
// (Windows line endings), a byte-order mark.
func cleanText(text string) []string {
	text = strings.TrimPrefix(text, "\ufeff")
	text = ansiEscape.ReplaceAllString(text, "")
	text = strings.ReplaceAll(text, "\r", "")
	return strings.Split(text, "\n")
}

// isTopoHeader reports whether a line can be the header of a `topo -m` matrix: its first
// field is GPU0 and it is not the GPU0 row.
func isTopoHeader(line string) bool {
	f := strings.Fields(line)
	return len(f) > 0 && f[0] == "GPU0" && !gpuRowStart(line)
}

// ParseTopo parses the output of `nvidia-smi topo -m` (any driver generation: with or without
// NIC rows and columns, NIC legend, NUMA affinity and GPU NUMA ID columns; tab or space
// separated, indented, as pasted into issues; terminal escapes and carriage returns
// stripped). The matrix ends when every device has its row, so text that follows it (the
// legend, another command's matrix such as `topo -p2p`) is ignored; when the text holds
// several candidate headers, the first that parses wins.
func ParseTopo(text string) (*Topology, error) {
	lines := cleanText(text)
	var firstErr error
	for i, l := range lines {
		if !isTopoHeader(l) {
			continue
		}
		t, err := parseTopoAt(lines, i)
		if err == nil {
			return t, nil
		}
		if firstErr == nil {
			firstErr = err
		}
	}
	if firstErr != nil {
		return nil, firstErr
	}
	return nil, fmt.Errorf("topology: no header line starting with GPU0 (is this `nvidia-smi topo -m` output?)")
}

// splitGluedLabels splits header fields that hold several device labels run together
// ("NIC11NIC12"): wide matrices lose a separator in the header at the same column as in
// the rows.
func splitGluedLabels(f []string) []string {
	out := make([]string, 0, len(f))
	for _, x := range f {
		if gluedLabels.MatchString(x) {
			out = append(out, deviceLabel.FindAllString(x, -1)...)
			continue
		}
		out = append(out, x)
	}
	return out
}

// splitGlued splits fields that hold several link cells run together ("SYSSYS").
func splitGlued(f []string) []string {
	out := make([]string, 0, len(f))
	for _, x := range f {
		if gluedCells.MatchString(x) {
			out = append(out, linkCell.FindAllString(x, -1)...)
			continue
		}
		out = append(out, x)
	}
	return out
}

// tabbedTail returns the affinity values of a tab-separated row (the values after its n link
// cells), keeping an empty CPU affinity in its place: nvidia-smi prints an empty cell there
// when it cannot tell a GPU's CPU affinity, and the values that follow must not move left.
// Later empty fields are alignment padding and are dropped. ok is false when the line is not
// cleanly tab separated (a paste that turned tabs into spaces, or cells run together).
func tabbedTail(line string, n int) ([]string, bool) {
	if !strings.Contains(line, "\t") {
		return nil, false
	}
	parts := strings.Split(line, "\t")
	if len(parts) < n+1 {
		return nil, false
	}
	for _, c := range parts[1 : n+1] {
		if lvl, _ := ParseLink(c); lvl == LinkUnknown {
			return nil, false
		}
	}
	rest := parts[n+1:]
	if len(rest) == 0 {
		return nil, true
	}
	out := []string{strings.TrimSpace(rest[0])}
	for _, v := range rest[1:] {
		// A field holding spaces is a value pasted with spaces inside a tabbed row.
		out = append(out, strings.Fields(v)...)
	}
	if len(out) == 1 && out[0] == "" {
		return nil, true
	}
	return out, true
}

// parseTopoAt parses the matrix whose header is lines[hdr].
func parseTopoAt(lines []string, hdr int) (*Topology, error) {
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
	t := &Topology{Devices: splitGluedLabels(strings.Fields(header[:cut])), NICNames: map[string]string{}}
	index := map[string]int{}
	for i, d := range t.Devices {
		if _, dup := index[d]; dup {
			return nil, fmt.Errorf("topology: line %d: device %s appears twice in the header", hdr+1, d)
		}
		index[d] = i
	}
	n := len(t.Devices)
	t.Links = make([][]string, n)
	t.CPUAffinity = make([]string, n)
	t.NUMAAffinity = make([]string, n)
	t.GPUNUMAID = make([]string, n)
	seen := make([]bool, n)
	rows, ended := 0, false
	for ln := hdr + 1; ln < len(lines); ln++ {
		l := lines[ln]
		if m := nicLegend.FindStringSubmatch(l); m != nil {
			t.NICNames[m[1]] = m[2]
			continue
		}
		if isTopoHeader(l) {
			break // another matrix: its legend is not ours
		}
		f := strings.Fields(l)
		if len(f) == 0 || ended {
			continue
		}
		row, ok := index[f[0]]
		if !ok {
			continue // legend text, a stray title, the tail of a row wrapped by a terminal
		}
		f = splitGlued(f)
		if len(f)-1 < n {
			return nil, fmt.Errorf("topology: line %d: row %s has %d cells, want %d", ln+1, f[0], len(f)-1, n)
		}
		if seen[row] {
			return nil, fmt.Errorf("topology: line %d: row %s appears twice", ln+1, f[0])
		}
		seen[row] = true
		rows++
		// With every row read the matrix is complete: rows after it belong to something
		// else (the `topo -p2p` matrix pasted below it, the same output pasted twice).
		ended = rows == n
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
		if tail, ok := tabbedTail(l, n); ok {
			rest = tail
		}
		if nAff == 3 && len(rest) == 2 {
			if m := numaGlued.FindStringSubmatch(rest[1]); m != nil {
				rest = []string{rest[0], m[1], m[2]}
			}
		}
		if nAff > 0 && len(rest) > 0 {
			t.CPUAffinity[row] = rest[0]
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
