package testbed

import (
	"bufio"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestParseTopoLayouts covers row layouts seen in real `topo -m` output and pastes of it,
// each failing (or misreading) in a parser that splits rows on white space alone.
func TestParseTopoLayouts(t *testing.T) {
	// A GPU whose CPU affinity nvidia-smi cannot tell gets an empty cell; the NUMA affinity
	// after it must stay in its own column (layout of a Slurm node with 4 NV4 GPUs, 3 NICs).
	emptyCPU := "\tGPU0\tGPU1\tNIC0\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\n" +
		"GPU0\t X \tNV4\tNODE\t0\t0\t\tN/A\n" +
		"GPU1\tNV4\t X \tNODE\t\t1\t\tN/A\n" +
		"NIC0\tNODE\tNODE\t X\n\nNIC Legend:\n\n  NIC0: mlx5_0\n"
	topo, err := ParseTopo(emptyCPU)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"0", "", ""}, topo.CPUAffinity); diff != "" {
		t.Errorf("empty CPU affinity (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"0", "1", ""}, topo.NUMAAffinity); diff != "" {
		t.Errorf("NUMA affinity after an empty CPU affinity (-want +got):\n%s", diff)
	}
	if topo.GPUNUMAID[1] != "N/A" || topo.NICNames["NIC0"] != "mlx5_0" {
		t.Errorf("GPU NUMA ID %q, NIC names %v", topo.GPUNUMAID[1], topo.NICNames)
	}

	// Very wide matrices (40+ NICs) have been posted with two cells run together ("SYSSYS").
	var b strings.Builder
	n := 12
	b.WriteString("        ")
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "NIC%-5d", i)
	}
	b.WriteString("\n")
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "NIC%-5d", i)
		for j := 0; j < n; j++ {
			switch {
			case i == j:
				b.WriteString(" X      ")
			case i == n-1 && j == 5:
				b.WriteString("SYS") // the tab after this cell was lost
			default:
				b.WriteString("SYS     ")
			}
		}
		b.WriteString("\n")
	}
	// The matrix needs GPU0 first; put a GPU in front of the NICs.
	wide := strings.Replace(b.String(), "        NIC0 ", "        GPU0 ", 1)
	wide = strings.Replace(wide, "\nNIC0    ", "\nGPU0    ", 1)
	topo, err = ParseTopo(wide)
	if err != nil {
		t.Fatalf("glued cells: %v\n%s", err, wide)
	}
	if got := topo.Links[n-1][6]; got != "SYS" || topo.Links[n-1][n-1] != "X" {
		t.Errorf("glued row = %v", topo.Links[n-1])
	}
	// Run together with something that is not a link, it is still an error.
	if _, err := ParseTopo("\tGPU0\tGPU1\nGPU0\t X \tSYSFOO\nGPU1\tSYS\t X \n"); err == nil {
		t.Error("accepted a glued cell that is not made of links")
	}

	// NUMA affinity run into the GPU NUMA ID, as pasted from a collect_env report.
	glued := "        GPU0    GPU1    CPU Affinity    NUMA Affinity   GPU NUMA ID\n" +
		"GPU0     X      NV18    0-55,112-167 0N/A\n" +
		"GPU1    NV18     X      0-55,112-167 0N/A\n"
	topo, err = ParseTopo(glued)
	if err != nil {
		t.Fatal(err)
	}
	if topo.CPUAffinity[1] != "0-55,112-167" || topo.NUMAAffinity[1] != "0" || topo.GPUNUMAID[1] != "N/A" {
		t.Errorf("glued NUMA: cpu %q numa %q gpu numa %q", topo.CPUAffinity[1], topo.NUMAAffinity[1], topo.GPUNUMAID[1])
	}

	// A terminal that wraps long rows puts the affinity on a line of its own.
	wrapped := "\tGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\n" +
		"GPU0\t X \tNV4\n\t0-15\t0\n" +
		"GPU1\tNV4\t X \n\t0-15\t0\n"
	if topo, err = ParseTopo(wrapped); err != nil || topo.Interconnect() != "nvlink" {
		t.Errorf("wrapped rows: %v %v", topo, err)
	}
	// The `topo -p2p` matrix pasted before the `topo -m` one: the first header that parses wins.
	p2pFirst := " \tGPU0\tGPU1\t\n GPU0\tX\tGNS\t\n GPU1\tGNS\tX\t\n\n" +
		"\tGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\nGPU0\t X \tPHB\t0-63\t0\t\tN/A\nGPU1\tPHB\t X \t0-63\t0\t\tN/A\n"
	if topo, err = ParseTopo(p2pFirst); err != nil || topo.Links[0][1] != "PHB" || topo.NUMAAffinity[1] != "0" {
		t.Errorf("p2p matrix first: %v %v", topo, err)
	}
	// With no matrix that parses, the first header's error is the one reported.
	if _, err := ParseTopo(" \tGPU0\tGPU1\t\n GPU0\tX\tGNS\t\n GPU1\tGNS\tX\t\n"); err == nil || !strings.Contains(err.Error(), `unknown link "GNS"`) {
		t.Errorf("p2p matrix alone: %v", err)
	}

	// The header may lose its leading tab and mix a space before the affinity titles.
	polaris := "GPU0\tGPU1\tmlx5_0\tCPU Affinity NUMA Affinity\n" +
		"GPU0\t X \tNV4\tSYS\t24-31,56-63\t3\n" +
		"GPU1\tNV4\t X \tPHB\t16-23,48-55\t2\n" +
		"mlx5_0\tSYS\tPHB\t X \t\t\n"
	topo, err = ParseTopo(polaris)
	if err != nil {
		t.Fatal(err)
	}
	if topo.NUMAAffinity[0] != "3" || topo.CPUAffinity[1] != "16-23,48-55" || topo.CPUAffinity[2] != "" || topo.Interconnect() != "nvlink" {
		t.Errorf("no leading tab: %+v", topo)
	}
}

// TestParseTopoTerminalAndWindows: the same capture with CRLF line endings, a byte-order mark
// and terminal escapes (underline, bold, tput's "\x1b(B") parses to the same matrix.
func TestParseTopoTerminalAndWindows(t *testing.T) {
	for _, file := range []string{"h200x2/topo-m.txt", "public/nccl-1453-8xh100-nv18.txt", "public/gpuallocator-17-8x4090-sys-2nic.txt"} {
		plain := readFixture(t, file)
		want, err := ParseTopo(plain)
		if err != nil {
			t.Fatal(err)
		}
		dressed := "\ufeff" + strings.ReplaceAll(plain, "\n", "\r\n")
		dressed = strings.Replace(dressed, "GPU0", "\x1b[1m\x1b[4mGPU0", 1)
		dressed = strings.Replace(dressed, "Affinity", "Affinity\x1b(B\x1b[m", 1)
		got, err := ParseTopo(dressed)
		if err != nil {
			t.Fatalf("%s dressed: %v", file, err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s: CRLF/escapes change the result (-plain +dressed):\n%s", file, diff)
		}
	}
}

// TestParseSMIHeaders reads the header of many driver generations (public/smi-headers.tsv:
// source, header text with \n for new lines, driver, CUDA).
func TestParseSMIHeaders(t *testing.T) {
	sc := bufio.NewScanner(strings.NewReader(readFixture(t, "public/smi-headers.tsv")))
	rows := 0
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") || strings.TrimSpace(line) == "" {
			continue
		}
		f := strings.Split(line, "\t")
		if len(f) != 4 {
			t.Fatalf("smi-headers.tsv: %q has %d fields, want 4", line, len(f))
		}
		rows++
		text := strings.ReplaceAll(f[1], `\n`, "\n")
		drv, cuda, err := ParseSMI(text)
		if err != nil || drv != f[2] || cuda != f[3] {
			t.Errorf("%s: ParseSMI = %q, %q, %v; want %q, %q", f[0], drv, cuda, err, f[2], f[3])
		}
		// Windows line endings and a coloured terminal change nothing.
		drv, cuda, err = ParseSMI("\x1b[1m" + strings.ReplaceAll(text, "\n", "\r\n") + "\x1b[0m\r\n")
		if err != nil || drv != f[2] || cuda != f[3] {
			t.Errorf("%s with CRLF/escapes: %q, %q, %v", f[0], drv, cuda, err)
		}
	}
	if rows < 8 {
		t.Fatalf("smi-headers.tsv: %d rows", rows)
	}
	// The full table of a GPU in MIG mode, with its MIG devices table.
	drv, cuda, err := ParseSMI(readFixture(t, "public/gpu-exporter-h200-mig-580-nvidia-smi.txt"))
	if err != nil || drv != "580.173.02" || cuda != "13.0" {
		t.Errorf("MIG table: %q %q %v", drv, cuda, err)
	}
	// A localized banner translates "Driver Version": the banner's own version is the driver's.
	drv, cuda, err = ParseSMI("| NVIDIA-SMI 591.86    CUDA Version: 13.1 |\n")
	if err != nil || drv != "591.86" || cuda != "13.1" {
		t.Errorf("localized banner: %q %q %v", drv, cuda, err)
	}
}

func TestParseQueryCSVReal(t *testing.T) {
	// A wide header with units and odd values ([Requested functionality...], empty cells),
	// GPU in MIG mode.
	got, err := ParseQueryCSV(readFixture(t, "public/gpu-exporter-h200-mig-580-query.csv"), nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []GPU{{Index: 0, Name: "NVIDIA H200", UUID: "GPU-00000000-0000-0000-0000-000000000000", BusID: "00000000:83:00.0", MemoryMiB: 143771, MemoryUsedMiB: 44, Driver: "580.173.02", MIG: "Enabled", ComputeCap: "9.0"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("MIG capture (-want +got):\n%s", diff)
	}
	// An old driver prints N/A without brackets and names without "NVIDIA"
	// (https://github.com/Ricks-Lab/gpu-utils/issues/83), with Windows line endings.
	fields := strings.Split("power.limit,power.min_limit,power.max_limit,memory.total,vbios_version,driver_version,name,gpu_uuid,power.draw,temperature.gpu,temperature.memory", ",")
	old := "200.00, 105.00, 292.00, 7979, 90.04.23.00.5F, 440.64, GeForce RTX 2080, GPU-22b2c6ac-2d49-4863-197c-9c469071178a, 176.98, 45, N/A\r\n"
	got, err = ParseQueryCSV(old, fields)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]GPU{{Name: "GeForce RTX 2080", UUID: "GPU-22b2c6ac-2d49-4863-197c-9c469071178a", MemoryMiB: 7979, Driver: "440.64"}}, got); diff != "" {
		t.Errorf("old driver (-want +got):\n%s", diff)
	}
	// A warning nvidia-smi prints before the values is not a GPU.
	got, err = ParseQueryCSV("WARNING: infoROM is corrupted at gpu 0000:41:00.0\n0, NVIDIA A100-SXM4-80GB, 81920\n", []string{"index", "name", "memory.total"})
	if err != nil || len(got) != 1 || got[0].MemoryMiB != 81920 {
		t.Errorf("warning line: %+v %v", got, err)
	}
}

// TestDetectPublicMachines fingerprints public machines end to end: their topology fixture,
// GPU list and driver, through DetectWith, and checks the slug, interconnect and links.
func TestDetectPublicMachines(t *testing.T) {
	query := func(n int, name string, mib int, drv, mig string) string {
		var b strings.Builder
		for i := 0; i < n; i++ {
			fmt.Fprintf(&b, "%d, %s, GPU-%08d, 00000000:%02X:00.0, %d, 0, %s, %s, 9.0\n", i, name, i, 0x10+i, mib, drv, mig)
		}
		return b.String()
	}
	tests := []struct {
		name, topo, query, plain, visible string
		slug, interconnect                string
		links                             [][]string
	}{
		{
			name: "8x RTX 4090 all SYS", topo: "public/gpuallocator-17-8x4090-sys-2nic.txt",
			query: query(8, "NVIDIA GeForce RTX 4090", 24564, "545.29.06", "[N/A]"), plain: "| NVIDIA-SMI 545.29.06    Driver Version: 545.29.06    CUDA Version: 12.3 |",
			slug: "8xGeForce-RTX-4090-pcie-drv545", interconnect: "pcie",
		},
		{
			name: "4x H100 NV6, GPUs on 4 NUMA nodes", topo: "public/nccl-1617-4xh100-nv6-4nic.txt",
			query: query(4, "NVIDIA H100 80GB HBM3", 81559, "550.90.07", "Disabled"), plain: "Driver Version: 550.90.07 CUDA Version: 12.4",
			slug: "4xH100-80GB-HBM3-nvlink-drv550", interconnect: "nvlink",
		},
		{
			name: "GB200 4 GPUs", topo: "public/k8s-test-infra-371-gb200-4gpu-nv18.txt",
			query: query(4, "NVIDIA GB200", 189471, "570.133.20", "Disabled"), plain: "Driver Version: 570.133.20 CUDA Version: 12.8",
			slug: "4xGB200-nvlink-drv570", interconnect: "nvlink",
		},
		{
			name: "5x RTX 4090 SYS/PHB/NODE", topo: "public/club-3090-46-5gpu-sys-phb-node.txt",
			query: query(5, "NVIDIA GeForce RTX 4090", 24564, "580.126.20", "[N/A]"), plain: "| NVIDIA-SMI 580.126.20             Driver Version: 580.126.20     CUDA Version: 13.0     |",
			slug: "5xGeForce-RTX-4090-pcie-drv580", interconnect: "pcie",
		},
		{
			// CUDA_VISIBLE_DEVICES keeps the two GPUs behind one host bridge.
			name: "5x RTX 4090, GPUs 3,4 visible", topo: "public/club-3090-46-5gpu-sys-phb-node.txt", visible: "3,4",
			query: query(5, "NVIDIA GeForce RTX 4090", 24564, "580.126.20", "[N/A]"), plain: "Driver Version: 580.126.20 CUDA Version: 13.0",
			slug: "2xGeForce-RTX-4090-pcie-drv580", interconnect: "pcie", links: [][]string{{"X", "PHB"}, {"PHB", "X"}},
		},
		{
			name: "2 GPUs, topo pasted with the p2p matrix", topo: "public/club-3090-1125-2gpu-node-indented-p2p.txt",
			query: query(2, "NVIDIA GeForce RTX 3090", 24576, "580.95.05", "[N/A]"), plain: "Driver Version: 580.95.05 CUDA Version: 13.0",
			slug: "2xGeForce-RTX-3090-pcie-drv580", interconnect: "pcie", links: [][]string{{"X", "NODE"}, {"NODE", "X"}},
		},
		{
			// The real capture's CSV comes with a header and units; the GPU is in MIG mode.
			name: "H200 in MIG mode", topo: "public/gpu-exporter-h200-mig-580-topo-m.txt",
			query: readFixture(t, "public/gpu-exporter-h200-mig-580-query.csv"), plain: readFixture(t, "public/gpu-exporter-h200-mig-580-nvidia-smi.txt"),
			slug: "1xH200-mig-drv580", interconnect: "single",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			smi := &fakeSMI{query: tc.query, plain: tc.plain, topo: readFixture(t, tc.topo)}
			f, err := detect(t, smi, func(o *Options) {
				if tc.visible != "" {
					o.LookupEnv = env(map[string]string{"CUDA_VISIBLE_DEVICES": tc.visible})
				}
			})
			if err != nil {
				t.Fatal(err)
			}
			if f.Slug != tc.slug || f.Interconnect != tc.interconnect {
				t.Errorf("slug %q interconnect %q, want %q %q (notes %v)", f.Slug, f.Interconnect, tc.slug, tc.interconnect, f.Notes)
			}
			if tc.links != nil {
				if diff := cmp.Diff(tc.links, f.GPULinks); diff != "" {
					t.Errorf("links (-want +got):\n%s", diff)
				}
			}
			if tc.interconnect != "single" && len(f.GPULinks) != f.GPUCount {
				t.Errorf("%d link rows for %d GPUs", len(f.GPULinks), f.GPUCount)
			}
			for _, n := range f.Notes {
				if strings.HasPrefix(n, "topology") {
					t.Errorf("note: %s", n)
				}
			}
		})
	}
}

// TestParseTopoSixteenGPUs: two-digit GPU labels (a 16-GPU NVSwitch box, NV6 everywhere, with
// mlx5 columns and only a CPU Affinity column, as older drivers print) sort numerically.
func TestParseTopoSixteenGPUs(t *testing.T) {
	var b strings.Builder
	b.WriteString("\t")
	for i := 0; i < 16; i++ {
		fmt.Fprintf(&b, "GPU%d\t", i)
	}
	b.WriteString("mlx5_0\tmlx5_1\tCPU Affinity\n")
	for i := 0; i < 18; i++ {
		label := fmt.Sprintf("GPU%d", i)
		if i >= 16 {
			label = fmt.Sprintf("mlx5_%d", i-16)
		}
		b.WriteString(label)
		for j := 0; j < 18; j++ {
			switch {
			case i == j:
				b.WriteString("\t X ")
			case i < 16 && j < 16:
				b.WriteString("\tNV6")
			case (i < 8) == (j%16 < 8) && (i >= 16) != (j >= 16):
				b.WriteString("\tPIX")
			default:
				b.WriteString("\tSYS")
			}
		}
		if i < 16 {
			if i < 8 {
				b.WriteString("\t0-23,48-71")
			} else {
				b.WriteString("\t24-47,72-95")
			}
		}
		b.WriteString("\n")
	}
	topo, err := ParseTopo(b.String())
	if err != nil {
		t.Fatalf("%v\n%s", err, b.String())
	}
	g := topo.GPUs()
	if len(g) != 16 || topo.Devices[g[9]] != "GPU9" || topo.Devices[g[10]] != "GPU10" || topo.Devices[g[15]] != "GPU15" {
		t.Errorf("GPU order %v", g)
	}
	if topo.Interconnect() != "nvlink" || topo.CPUAffinity[g[12]] != "24-47,72-95" || topo.NUMAAffinity[g[12]] != "" {
		t.Errorf("interconnect %s, affinity %q/%q", topo.Interconnect(), topo.CPUAffinity[g[12]], topo.NUMAAffinity[g[12]])
	}
	if m, ok := topo.SubMatrix([]int{10, 15}); !ok || m[0][1] != "NV6" {
		t.Errorf("SubMatrix(10, 15) = %v, %v", m, ok)
	}
}

// TestParseTopoGluedHeader: with many NICs the header itself has been posted with two labels
// run together ("NIC11NIC12", https://github.com/vllm-project/vllm/issues/31594), and rows
// with two cells run together at the same column
// (https://github.com/sgl-project/sglang/issues/8120).
func TestParseTopoGluedHeader(t *testing.T) {
	const gpus, nics = 4, 13
	var b strings.Builder
	b.WriteString("        ")
	for i := 0; i < gpus; i++ {
		fmt.Fprintf(&b, "GPU%d    ", i)
	}
	for i := 0; i < nics; i++ {
		if i == 11 {
			fmt.Fprintf(&b, "NIC%d", i) // no separator before NIC12
			continue
		}
		fmt.Fprintf(&b, "NIC%-5d", i)
	}
	b.WriteString("CPU Affinity    NUMA Affinity   GPU NUMA ID\n")
	for r := 0; r < gpus+nics; r++ {
		if r < gpus {
			fmt.Fprintf(&b, "GPU%-5d", r)
		} else {
			fmt.Fprintf(&b, "NIC%-5d", r-gpus)
		}
		for c := 0; c < gpus+nics; c++ {
			cell := "SYS"
			switch {
			case r == c:
				cell = " X "
			case r < gpus && c < gpus:
				cell = "NV18"
			}
			if c == gpus+11 && r != c && r != gpus+12 {
				b.WriteString(strings.TrimSpace(cell)) // run into the next cell
				continue
			}
			fmt.Fprintf(&b, "%-8s", cell)
		}
		if r < gpus {
			b.WriteString("0-15    0               N/A")
		}
		b.WriteString("\n")
	}
	topo, err := ParseTopo(b.String())
	if err != nil {
		t.Fatalf("%v\n%s", err, b.String())
	}
	if len(topo.Devices) != gpus+nics || topo.Devices[gpus+11] != "NIC11" || topo.Devices[gpus+12] != "NIC12" {
		t.Fatalf("devices %v", topo.Devices)
	}
	if topo.Interconnect() != "nvlink" || topo.Links[0][gpus+12] != "SYS" || topo.NUMAAffinity[3] != "0" || topo.GPUNUMAID[3] != "N/A" {
		t.Errorf("interconnect %s, GPU0 row %v, NUMA %q %q", topo.Interconnect(), topo.Links[0], topo.NUMAAffinity[3], topo.GPUNUMAID[3])
	}
}
