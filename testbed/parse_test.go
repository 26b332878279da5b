package testbed

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const fixtures = "../fixtures/testbed"

func readFixture(t *testing.T, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(fixtures, rel))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestParseTopoFixtures(t *testing.T) {
	tests := []struct {
		file         string
		devices      int
		gpus         int
		interconnect string
		worst        LinkLevel
		worstNV      int
		cells        map[[2]string]string // (row, column) -> cell
		cpuAffinity  map[string]string
		numa         map[string]string
		gpuNUMA      map[string]string
		nics         map[string]string
	}{
		{
			file: "h200x2/topo-m.txt", devices: 2, gpus: 2, interconnect: "nvlink", worst: LinkNVLink, worstNV: 18,
			cells:       map[[2]string]string{{"GPU0", "GPU1"}: "NV18", {"GPU1", "GPU1"}: "X"},
			cpuAffinity: map[string]string{"GPU0": "0-31", "GPU1": "0-31"},
			numa:        map[string]string{"GPU1": "0"},
		},
		{
			file: "h200/topo-m.txt", devices: 2, gpus: 2, interconnect: "nvlink", worst: LinkNVLink, worstNV: 18,
			cells: map[[2]string]string{{"GPU1", "GPU0"}: "NV18"},
		},
		{
			file: "public/nccl-1453-8xh100-nv18.txt", devices: 17, gpus: 8, interconnect: "nvlink", worst: LinkNVLink, worstNV: 18,
			cells:       map[[2]string]string{{"GPU0", "NIC8"}: "PIX", {"GPU7", "NIC1"}: "PIX", {"NIC5", "GPU3"}: "PIX", {"NIC0", "NIC1"}: "SYS", {"GPU5", "GPU2"}: "NV18"},
			cpuAffinity: map[string]string{"GPU0": "0-79", "GPU7": "80-159", "NIC3": ""},
			numa:        map[string]string{"GPU3": "0", "GPU4": "1"},
		},
		{
			file: "public/nccl-1530-8gpu-pcie-sys.txt", devices: 10, gpus: 8, interconnect: "pcie", worst: LinkSys,
			cells:       map[[2]string]string{{"NIC0", "NIC1"}: "PIX", {"GPU3", "GPU4"}: "SYS"},
			cpuAffinity: map[string]string{"GPU3": "16-31,80-95", "GPU7": "48-63,112-127", "NIC1": ""},
			numa:        map[string]string{"GPU3": "1", "GPU7": "3"},
			nics:        map[string]string{"NIC0": "mlx5_0", "NIC1": "mlx5_1"},
		},
		{
			file: "public/nccl-1439-8gpu-pcie-pix-phb.txt", devices: 8, gpus: 8, interconnect: "pcie", worst: LinkSys,
			cells:       map[[2]string]string{{"GPU0", "GPU1"}: "PIX", {"GPU0", "GPU2"}: "PHB", {"GPU3", "GPU4"}: "SYS", {"GPU6", "GPU7"}: "PIX"},
			cpuAffinity: map[string]string{"GPU5": "14-27,42-55"},
			numa:        map[string]string{"GPU5": "1"},
		},
		{
			file: "public/nccl-tests-29-8xv100-hybrid-mesh.txt", devices: 10, gpus: 8, interconnect: "mixed", worst: LinkSys,
			cells:       map[[2]string]string{{"GPU0", "GPU3"}: "NV1", {"GPU2", "GPU6"}: "NV2", {"GPU0", "GPU5"}: "SYS", {"mlx5_0", "GPU2"}: "PIX"},
			cpuAffinity: map[string]string{"GPU7": "24-47,72-95", "mlx5_1": ""},
		},
		{
			file: "public/quda-669-8gpu-pcie-mlx5.txt", devices: 9, gpus: 8, interconnect: "pcie", worst: LinkSys,
			cells:       map[[2]string]string{{"GPU0", "GPU2"}: "PXB", {"GPU4", "mlx5_0"}: "PHB", {"mlx5_0", "GPU0"}: "SYS"},
			cpuAffinity: map[string]string{"GPU4": "14-27"},
		},
		{
			file: "public/miss-alignment-106-4xl40s-node.txt", devices: 6, gpus: 4, interconnect: "pcie", worst: LinkSys,
			cells:       map[[2]string]string{{"GPU0", "GPU1"}: "NODE", {"GPU1", "GPU2"}: "SYS", {"NIC1", "GPU3"}: "NODE", {"NIC0", "NIC1"}: "PIX"},
			cpuAffinity: map[string]string{"GPU2": "96-191,288-383", "NIC0": ""},
			numa:        map[string]string{"GPU0": "0", "GPU3": "1"},
			nics:        map[string]string{"NIC0": "mlx5_0", "NIC1": "mlx5_1"},
		},
		{
			file: "public/club-3090-922-2x3090-phb.txt", devices: 2, gpus: 2, interconnect: "pcie", worst: LinkPHB,
			cells: map[[2]string]string{{"GPU0", "GPU1"}: "PHB"},
		},
		{
			// Tab separated with the doubled tab before GPU NUMA ID; NIC rows without legend.
			file: "public/gpuallocator-17-8x4090-sys-2nic.txt", devices: 10, gpus: 8, interconnect: "pcie", worst: LinkSys,
			cells:       map[[2]string]string{{"GPU6", "NIC0"}: "PHB", {"GPU7", "NIC1"}: "SYS", {"NIC1", "NIC0"}: "PIX", {"GPU3", "GPU4"}: "SYS"},
			cpuAffinity: map[string]string{"GPU0": "0-55,112-167", "GPU7": "56-111,168-223", "NIC0": ""},
			numa:        map[string]string{"GPU3": "0", "GPU4": "1", "NIC1": ""},
			gpuNUMA:     map[string]string{"GPU0": "N/A"},
		},
		{
			// Each GPU on its own NUMA node, affinity lists with commas.
			file: "public/nccl-1617-4xh100-nv6-4nic.txt", devices: 8, gpus: 4, interconnect: "nvlink", worst: LinkNVLink, worstNV: 6,
			cells:       map[[2]string]string{{"GPU0", "NIC0"}: "PIX", {"GPU3", "NIC3"}: "PIX", {"NIC2", "NIC3"}: "SYS", {"GPU1", "GPU2"}: "NV6"},
			cpuAffinity: map[string]string{"GPU0": "6,14,22,30", "GPU2": "7,15,23,31"},
			numa:        map[string]string{"GPU0": "3", "GPU1": "1", "GPU2": "7", "GPU3": "5"},
		},
		{
			file: "public/k8s-test-infra-371-gb200-4gpu-nv18.txt", devices: 4, gpus: 4, interconnect: "nvlink", worst: LinkNVLink, worstNV: 18,
			cells:       map[[2]string]string{{"GPU0", "GPU3"}: "NV18"},
			cpuAffinity: map[string]string{"GPU1": "0-71", "GPU2": "72-143"},
			numa:        map[string]string{"GPU1": "0", "GPU2": "1"},
		},
		{
			// One GPU alone on the other socket: every link from it is SYS.
			file: "public/club-3090-46-5gpu-sys-phb-node.txt", devices: 5, gpus: 5, interconnect: "pcie", worst: LinkSys,
			cells:       map[[2]string]string{{"GPU1", "GPU2"}: "PHB", {"GPU1", "GPU3"}: "NODE", {"GPU0", "GPU4"}: "SYS", {"GPU3", "GPU4"}: "PHB"},
			cpuAffinity: map[string]string{"GPU0": "8-15,24-31", "GPU4": "0-7,16-23"},
			numa:        map[string]string{"GPU0": "1", "GPU4": "0"},
		},
		{
			// Indented paste, wrapped legend, followed by the `topo -p2p` matrix whose GPU rows
			// must not be taken for duplicates.
			file: "public/club-3090-1125-2gpu-node-indented-p2p.txt", devices: 2, gpus: 2, interconnect: "pcie", worst: LinkNode,
			cells:       map[[2]string]string{{"GPU0", "GPU1"}: "NODE"},
			cpuAffinity: map[string]string{"GPU0": "0-15", "GPU1": "0-15"},
			numa:        map[string]string{"GPU1": "0"},
			gpuNUMA:     map[string]string{"GPU1": "N/A"},
		},
		{
			// One GPU; an old driver pads with two tabs after each affinity value.
			file: "public/hami-99-1xp4-numa-na.txt", devices: 1, gpus: 1, interconnect: "single", worst: LinkUnknown,
			cpuAffinity: map[string]string{"GPU0": "0-7"},
			numa:        map[string]string{"GPU0": "N/A"},
			gpuNUMA:     map[string]string{"GPU0": "N/A"},
		},
		{
			// A GPU in MIG mode: `topo -m` shows the physical GPU, not its instances.
			file: "public/gpu-exporter-h200-mig-580-topo-m.txt", devices: 1, gpus: 1, interconnect: "single", worst: LinkUnknown,
			cpuAffinity: map[string]string{"GPU0": "0-23"},
			numa:        map[string]string{"GPU0": "0"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			topo, err := ParseTopo(readFixture(t, tc.file))
			if err != nil {
				t.Fatal(err)
			}
			if len(topo.Devices) != tc.devices || len(topo.GPUs()) != tc.gpus {
				t.Fatalf("devices %v (%d GPUs), want %d devices, %d GPUs", topo.Devices, len(topo.GPUs()), tc.devices, tc.gpus)
			}
			if got := topo.Interconnect(); got != tc.interconnect {
				t.Errorf("Interconnect = %q, want %q", got, tc.interconnect)
			}
			if lvl, n := topo.WorstGPULink(); lvl != tc.worst || n != tc.worstNV {
				t.Errorf("WorstGPULink = %v/%d, want %v/%d", lvl, n, tc.worst, tc.worstNV)
			}
			idx := map[string]int{}
			for i, d := range topo.Devices {
				idx[d] = i
			}
			for rc, want := range tc.cells {
				if got := topo.Links[idx[rc[0]]][idx[rc[1]]]; got != want {
					t.Errorf("%s-%s = %q, want %q", rc[0], rc[1], got, want)
				}
			}
			for d, want := range tc.cpuAffinity {
				if got := topo.CPUAffinity[idx[d]]; got != want {
					t.Errorf("CPU affinity of %s = %q, want %q", d, got, want)
				}
			}
			for d, want := range tc.numa {
				if got := topo.NUMAAffinity[idx[d]]; got != want {
					t.Errorf("NUMA affinity of %s = %q, want %q", d, got, want)
				}
			}
			for d, want := range tc.gpuNUMA {
				if got := topo.GPUNUMAID[idx[d]]; got != want {
					t.Errorf("GPU NUMA ID of %s = %q, want %q", d, got, want)
				}
			}
			if diff := cmp.Diff(tc.nics, topo.NICNames); diff != "" {
				t.Errorf("NIC names (-want +got):\n%s", diff)
			}
			// The matrix of every real capture is symmetric with X on the diagonal.
			for i := range topo.Links {
				for j := range topo.Links {
					if topo.Links[i][j] != topo.Links[j][i] {
						t.Errorf("%s-%s asymmetric", topo.Devices[i], topo.Devices[j])
					}
				}
			}
		})
	}
}

func TestParseTopoSingleGPUAndOldSOC(t *testing.T) {
	topo, err := ParseTopo("\tGPU0\tCPU Affinity\nGPU0\t X \t0-7\n")
	if err != nil {
		t.Fatal(err)
	}
	if topo.Interconnect() != "single" || topo.CPUAffinity[0] != "0-7" {
		t.Errorf("single GPU: %+v", topo)
	}
	// Drivers before the SYS/NODE split printed SOC for a cross-socket path.
	topo, err = ParseTopo("\tGPU0\tGPU1\nGPU0\t X \tSOC\nGPU1\tSOC\t X \n")
	if err != nil {
		t.Fatal(err)
	}
	if lvl, _ := topo.WorstGPULink(); lvl != LinkSys || topo.CPUAffinity != nil {
		t.Errorf("SOC: worst %v, affinity %v", lvl, topo.CPUAffinity)
	}
}

func TestParseTopoErrors(t *testing.T) {
	tests := map[string]struct{ in, want string }{
		"not topo":  {"GPU 0: NVIDIA H200 (UUID: GPU-1)\n", "topology: no header line starting with GPU0 (is this `nvidia-smi topo -m` output?)"},
		"truncated": {"\tGPU0\tGPU1\tGPU2\nGPU0\t X \tNV4\tNV4\nGPU1\tNV4\t X \tNV4\n", "topology: no row for GPU2 (truncated output?)"},
		"unknown":   {"\tGPU0\tGPU1\nGPU0\t X \tNVL\nGPU1\tNVL\t X \n", `topology: line 2: row GPU0, column GPU1: unknown link "NVL" (want X, NV#, PIX, PXB, PHB, NODE or SYS)`},
		"short row": {"\tGPU0\tGPU1\nGPU0\t X \nGPU1\tPIX\t X \n", "topology: line 2: row GPU0 has 1 cells, want 2"},
		// A lost column shifts every cell: the X lands off the diagonal.
		"misaligned": {"\tGPU0\tGPU1\tGPU2\nGPU0\tNV4\t X \tNV4\nGPU1\tNV4\t X \tNV4\nGPU2\tNV4\tNV4\t X \n", `topology: line 2: row GPU0, column GPU0: "NV4" on the diagonal is wrong (X marks a device's own cell)`},
		"dup row":    {"\tGPU0\tGPU1\nGPU0\t X \tPIX\nGPU0\t X \tPIX\nGPU1\tPIX\t X \n", "topology: line 3: row GPU0 appears twice"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := ParseTopo(tc.in)
			if err == nil || err.Error() != tc.want {
				t.Errorf("err = %v\nwant %s", err, tc.want)
			}
		})
	}
}

func TestParseQueryCSV(t *testing.T) {
	got, err := ParseQueryCSV(readFixture(t, "h200x2/query.csv"), QueryFields)
	if err != nil {
		t.Fatal(err)
	}
	want := []GPU{
		{Index: 0, Name: "NVIDIA H200", UUID: "GPU-3db224f2-8b7b-3d0b-797e-4fe0482b468b", BusID: "00000000:00:06.0", MemoryMiB: 143771, Driver: "580.159.04", MIG: "Disabled", ComputeCap: "9.0"},
		{Index: 1, Name: "NVIDIA H200", UUID: "GPU-caeb3268-9936-df2a-bc13-35e47524eda0", BusID: "00000000:00:07.0", MemoryMiB: 143771, Driver: "580.159.04", MIG: "Disabled", ComputeCap: "9.0"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	// With a header line and units the header names the fields (the field list is ignored).
	withHeader, err := ParseQueryCSV(readFixture(t, "h200x2/query-header.csv"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, withHeader); diff != "" {
		t.Errorf("header form (-want +got):\n%s", diff)
	}
	// The lead's capture uses another field order.
	lead, err := ParseQueryCSV(readFixture(t, "h200/query-gpu.csv"), []string{"index", "name", "uuid", "memory.total", "memory.used", "driver_version", "pci.bus_id", "mig.mode.current", "compute_cap"})
	if err != nil {
		t.Fatal(err)
	}
	if len(lead) != 2 || lead[1].BusID != "00000000:00:07.0" || lead[1].MemoryMiB != 143771 || lead[1].MIG != "Disabled" {
		t.Errorf("lead capture: %+v", lead)
	}
	// Values the GPU cannot report stay zero.
	na, err := ParseQueryCSV("0, Tesla T4, [N/A], 15360, [Not Supported]\n", []string{"index", "name", "uuid", "memory.total", "mig.mode.current"})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]GPU{{Index: 0, Name: "Tesla T4", MemoryMiB: 15360}}, na); diff != "" {
		t.Errorf("N/A (-want +got):\n%s", diff)
	}
	for in, wantErr := range map[string]string{
		"0, NVIDIA H200\n":               `query csv: line 1: 2 values for 3 fields (index,name,memory.total): "0, NVIDIA H200"`,
		"zero, NVIDIA H200, 1\n":         `query csv: line 1: index "zero" is not a number`,
		"0, NVIDIA H200, 80 GB\n":        `query csv: line 1: memory.total: "80 GB" is not a number of MiB`,
		"0, NVIDIA H200, 1\n1, x, two\n": `query csv: line 2: memory.total: "two" is not a number of MiB`,
	} {
		if _, err := ParseQueryCSV(in, []string{"index", "name", "memory.total"}); err == nil || err.Error() != wantErr {
			t.Errorf("ParseQueryCSV(%q) err = %v\nwant %s", in, err, wantErr)
		}
	}
}

func TestParseSMI(t *testing.T) {
	for _, f := range []string{"h200x2/nvidia-smi.txt", "h200x2/q.txt", "h200/nvidia-smi.txt", "h200/nvidia-smi-q.txt"} {
		drv, cuda, err := ParseSMI(readFixture(t, f))
		if err != nil || drv != "580.159.04" || cuda != "13.0" {
			t.Errorf("%s: %q %q %v", f, drv, cuda, err)
		}
	}
	// Old drivers print no CUDA version.
	drv, cuda, err := ParseSMI("| NVIDIA-SMI 384.81                 Driver Version: 384.81                    |\n")
	if err != nil || drv != "384.81" || cuda != "" {
		t.Errorf("old header: %q %q %v", drv, cuda, err)
	}
	_, _, err = ParseSMI("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the latest NVIDIA driver is installed and running.\n")
	if err == nil || !strings.HasPrefix(err.Error(), "nvidia-smi cannot reach the driver: NVIDIA-SMI has failed") {
		t.Errorf("failed smi: %v", err)
	}
	if _, _, err := ParseSMI("hello\n"); err == nil {
		t.Error("ParseSMI accepted text without a driver version")
	}
}

func TestParseCPUInfo(t *testing.T) {
	c := ParseCPUInfo(readFixture(t, "h200x2/cpuinfo-head.txt"))
	if c.Model != "Intel(R) Xeon(R) Processor" || c.Logical != 2 || c.Cores != 2 {
		t.Errorf("x86: %+v", c)
	}
	if c := ParseCPUInfo(readFixture(t, "cpu/sandbox-cpuinfo.txt")); c.Model == "" || c.Logical != 2 || cpuSlug(c.Model) == "" {
		t.Errorf("sandbox: %+v", c)
	}
	arm := "processor\t: 0\nBogoMIPS\t: 2000.00\nCPU implementer\t: 0x41\nCPU architecture: 8\nCPU variant\t: 0x0\nCPU part\t: 0xd4f\n\nprocessor\t: 1\nCPU implementer\t: 0x41\nCPU part\t: 0xd4f\n"
	if c := ParseCPUInfo(arm); c.Model != "Arm Neoverse-V2" || c.Logical != 2 {
		t.Errorf("arm: %+v", c)
	}
	if c := ParseCPUInfo("processor\t: 0\ncpu\t\t: POWER9, altivec supported\nclock\t\t: 2300.000000MHz\nrevision\t: 2.2 (pvr 004e 1202)\n\nprocessor\t: 1\ncpu\t\t: POWER9, altivec supported\n\ntimebase\t: 512000000\nplatform\t: PowerNV\nmodel\t\t: 8335-GTH\n"); c.Model != "POWER9" || c.Logical != 2 || cpuSlug(c.Model) != "power9" {
		t.Errorf("POWER: %+v", c)
	}
	if c := ParseCPUInfo("processor : 0\nModel : Raspberry Pi 4 Model B Rev 1.4\n"); c.Model != "Raspberry Pi 4 Model B Rev 1.4" {
		t.Errorf("Model line: %+v", c)
	}
}

func TestSlugs(t *testing.T) {
	for in, want := range map[string]string{
		"NVIDIA H200":                 "H200",
		"NVIDIA H100 80GB HBM3":       "H100-80GB-HBM3",
		"Tesla V100-SXM2-32GB":        "V100-SXM2-32GB",
		"NVIDIA GeForce RTX 4090":     "GeForce-RTX-4090",
		"NVIDIA A100-SXM4-80GB":       "A100-SXM4-80GB",
		"NVIDIA RTX 6000 Ada / (x)  ": "RTX-6000-Ada-x",
	} {
		if got := ShortModel(in); got != want {
			t.Errorf("ShortModel(%q) = %q, want %q", in, got, want)
		}
	}
	for in, want := range map[string]string{
		"AMD EPYC 7B13 64-Core Processor":           "amd-epyc-7b13",
		"Intel(R) Xeon(R) Platinum 8480+":           "intel-xeon-platinum-8480plus",
		"Intel(R) Xeon(R) CPU E5-2690 v4 @ 2.60GHz": "intel-xeon-e5-2690-v4",
		"Intel(R) Xeon(R) Processor":                "intel-xeon",
		"Arm Neoverse-V2":                           "arm-neoverse-v2",
	} {
		if got := cpuSlug(in); got != want {
			t.Errorf("cpuSlug(%q) = %q, want %q", in, got, want)
		}
	}
}

// FuzzParsers: the parsers never panic on any text.
func FuzzParsers(f *testing.F) {
	for _, p := range []string{"h200x2/topo-m.txt", "public/nccl-1453-8xh100-nv18.txt", "public/nccl-tests-29-8xv100-hybrid-mesh.txt", "public/club-3090-1125-2gpu-node-indented-p2p.txt", "public/gpuallocator-17-8x4090-sys-2nic.txt", "public/hami-99-1xp4-numa-na.txt", "public/gpu-exporter-h200-mig-580-query.csv", "public/gpu-exporter-h200-mig-580-nvidia-smi.txt", "h200x2/query.csv", "h200x2/query-header.csv", "h200x2/nvidia-smi.txt", "h200x2/cpuinfo-head.txt"} {
		if b, err := os.ReadFile(filepath.Join(fixtures, p)); err == nil {
			f.Add(string(b))
		}
	}
	f.Fuzz(func(t *testing.T, text string) {
		if topo, err := ParseTopo(text); err == nil {
			_ = topo.Interconnect()
			topo.WorstGPULink()
			topo.SubMatrix([]int{0, 1})
		}
		_, _ = ParseQueryCSV(text, QueryFields)
		_, _ = ParseQueryCSV(text, nil)
		_, _, _ = ParseSMI(text)
		_ = ParseCPUInfo(text)
	})
}

func BenchmarkParseTopo(b *testing.B) {
	data, err := os.ReadFile(filepath.Join(fixtures, "public/nccl-1453-8xh100-nv18.txt"))
	if err != nil {
		b.Fatal(err)
	}
	text := string(data)
	for b.Loop() {
		if _, err := ParseTopo(text); err != nil {
			b.Fatal(err)
		}
	}
}
