package testbed

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"testing"
)

// fakeSMI answers nvidia-smi calls from captured files; a response starting with "!" is an
// error with that text.
type fakeSMI struct {
	query, plain, topo string
	calls              []string
}

func (f *fakeSMI) run(_ context.Context, name string, args ...string) ([]byte, error) {
	call := strings.Join(args, " ")
	f.calls = append(f.calls, call)
	var out string
	switch {
	case len(args) == 0:
		out = f.plain
	case args[0] == "topo":
		out = f.topo
	case strings.HasPrefix(args[0], "--query-gpu="):
		out = f.query
		if strings.HasPrefix(out, "!basic!") {
			if strings.Contains(args[0], "compute_cap") {
				return nil, fmt.Errorf("%s %s: exit status 2: Field \"compute_cap\" is not a valid field to query.", name, call)
			}
			out = strings.TrimPrefix(out, "!basic!")
		}
	default:
		return nil, fmt.Errorf("unexpected call %s %s", name, call)
	}
	if strings.HasPrefix(out, "!") {
		return nil, fmt.Errorf("%s %s: exit status 9: %s", name, call, out[1:])
	}
	return []byte(out), nil
}

func found(string) (string, error) { return "/usr/bin/nvidia-smi", nil }

func noEnv(string) (string, bool) { return "", false }

func env(vars map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := vars[k]; return v, ok }
}

func h200x2(t *testing.T) *fakeSMI {
	return &fakeSMI{
		query: readFixture(t, "h200x2/query.csv"),
		plain: readFixture(t, "h200x2/nvidia-smi.txt"),
		topo:  readFixture(t, "h200x2/topo-m.txt"),
	}
}

func detect(t *testing.T, f *fakeSMI, mod func(*Options)) (*Fingerprint, error) {
	t.Helper()
	o := Options{Run: f.run, LookPath: found, CPUInfo: readFixture(t, "h200x2/cpuinfo-head.txt"), NumCPU: 32, Engine: "sglang", EngineVersion: "0.5.6", LookupEnv: noEnv}
	if mod != nil {
		mod(&o)
	}
	return DetectWith(context.Background(), o)
}

// golden2xH200 is the ID of the 2xH200 testbed with the sglang engine. It changes only when
// what the hash covers changes (then bump Schema and say so in the README).
const golden2xH200 = "2xH200-nvlink-drv580-7a3bfe3e"

func TestDetectH200(t *testing.T) {
	f, err := detect(t, h200x2(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	if f.Slug != "2xH200-nvlink-drv580" || f.Key() != golden2xH200 {
		t.Errorf("ID = %q", f.Key())
	}
	if f.GPUCount != 2 || f.GPUModel != "H200" || f.GPUMemoryGiB != 140 || f.Driver != "580.159.04" || f.CUDA != "13.0" || f.MIG != "disabled" || f.Interconnect != "nvlink" {
		t.Errorf("fingerprint = %+v", f)
	}
	if len(f.Notes) != 0 {
		t.Errorf("notes: %v", f.Notes)
	}
	if got, want := f.Summary(), "2x H200 (140 GiB) nvlink [NV18], driver 580.159.04, CUDA 13.0, mig disabled"; got != want {
		t.Errorf("Summary = %q, want %q", got, want)
	}
	// JSON round trip keeps the ID.
	b, err := json.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	var back Fingerprint
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	back.Finish()
	if back.Key() != f.Key() {
		t.Errorf("after a JSON round trip ID = %q, want %q", back.Key(), f.Key())
	}

	// The suites detect first and set the engine afterwards: Key must follow.
	late, err := detect(t, h200x2(t), func(o *Options) { o.Engine = "" })
	if err != nil {
		t.Fatal(err)
	}
	before := late.Key()
	late.Engine = "sglang"
	if late.Key() != golden2xH200 || before == golden2xH200 || late.Slug+"-"+late.Hash != golden2xH200 {
		t.Errorf("Key after setting Engine = %q (before %q), want %q", late.Key(), before, golden2xH200)
	}

	// The lead's capture is another machine of the same kind (other UUIDs, other field order
	// in its CSV): the same testbed.
	lead := &fakeSMI{plain: readFixture(t, "h200/nvidia-smi.txt"), topo: readFixture(t, "h200/topo-m.txt"), query: readFixture(t, "h200x2/query.csv")}
	lead.query = strings.ReplaceAll(lead.query, "GPU-3db224f2-8b7b-3d0b-797e-4fe0482b468b", "GPU-dbba5547-1daf-950d-c569-59e85f95de12")
	g, err := detect(t, lead, func(o *Options) { o.EngineVersion = "0.6.0"; o.NumCPU = 8 })
	if err != nil {
		t.Fatal(err)
	}
	if g.Key() != f.Key() {
		t.Errorf("same kind of machine, other UUIDs, engine version and CPU count: ID %q, want %q", g.Key(), f.Key())
	}
}

func TestHashCoversIdentityOnly(t *testing.T) {
	base, err := detect(t, h200x2(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	changed := func(name string, mod func(f *Fingerprint)) *Fingerprint {
		f, _ := detect(t, h200x2(t), nil)
		mod(f)
		f.Finish()
		return f
	}
	same := map[string]func(*Fingerprint){
		"driver minor":   func(f *Fingerprint) { f.Driver = "580.200.01" },
		"engine version": func(f *Fingerprint) { f.EngineVersion = "1.0" },
		"memory used":    func(f *Fingerprint) { f.GPUs[0].MemoryUsedMiB = 5000 },
		"uuid and bus":   func(f *Fingerprint) { f.GPUs[1].UUID, f.GPUs[1].BusID = "GPU-x", "0000:99:00.0" },
		"cpu":            func(f *Fingerprint) { f.CPU = CPU{Model: "AMD EPYC 9654", Logical: 384} },
		"memory by ECC":  func(f *Fingerprint) { f.GPUs[0].MemoryMiB = 143000 },
	}
	for name, mod := range same {
		if f := changed(name, mod); f.Key() != base.Key() {
			t.Errorf("%s changed the ID: %s -> %s", name, base.Key(), f.Key())
		}
	}
	diff := map[string]func(*Fingerprint){
		"driver major": func(f *Fingerprint) { f.Driver = "570.86.15" },
		"engine":       func(f *Fingerprint) { f.Engine = "vllm" },
		"gpu count":    func(f *Fingerprint) { f.GPUs = f.GPUs[:1] },
		"model": func(f *Fingerprint) {
			f.GPUs[0].Name, f.GPUs[1].Name = "NVIDIA H100 80GB HBM3", "NVIDIA H100 80GB HBM3"
		},
		"links": func(f *Fingerprint) {
			f.Topology.Links[0][1], f.Topology.Links[1][0] = "NV12", "NV12"
		},
		"mig": func(f *Fingerprint) { f.GPUs[0].MIG = "Enabled" },
	}
	seen := map[string]string{base.Key(): "base"}
	for name, mod := range diff {
		f := changed(name, mod)
		if prev, dup := seen[f.Key()]; dup {
			t.Errorf("%s gives the same ID as %s: %s", name, prev, f.Key())
		}
		seen[f.Key()] = name
	}
	if f := changed("mig", diff["mig"]); f.Slug != "2xH200-nvlink-mig-drv580" || f.MIG != "mixed" {
		t.Errorf("mig slug = %q (%s)", f.Slug, f.MIG)
	}
	if f := changed("gpu count", diff["gpu count"]); f.Slug != "1xH200-drv580" || f.Interconnect != "single" {
		t.Errorf("single slug = %q", f.Slug)
	}
	if f := changed("model", func(f *Fingerprint) { f.GPUs[0].Name = "NVIDIA H100 80GB HBM3" }); f.Slug != "2xmixed-nvlink-drv580" || f.GPUModel != "H100-80GB-HBM3+H200" {
		t.Errorf("mixed slug = %q, model %q", f.Slug, f.GPUModel)
	}
}

func TestDetectPublicTopologies(t *testing.T) {
	for file, want := range map[string]string{
		"public/nccl-1453-8xh100-nv18.txt":            "8xH100-80GB-HBM3-nvlink-drv550",
		"public/nccl-1530-8gpu-pcie-sys.txt":          "8xH100-80GB-HBM3-pcie-drv550",
		"public/nccl-tests-29-8xv100-hybrid-mesh.txt": "8xH100-80GB-HBM3-mixed-drv550",
	} {
		var q strings.Builder
		for i := 0; i < 8; i++ {
			fmt.Fprintf(&q, "%d, NVIDIA H100 80GB HBM3, GPU-%d, 0000:%02x:00.0, 81559, 0, 550.90.07, Disabled, 9.0\n", i, i, i)
		}
		f, err := detect(t, &fakeSMI{query: q.String(), plain: "Driver Version: 550.90.07 CUDA Version: 12.4", topo: readFixture(t, file)}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if f.Slug != want || len(f.GPULinks) != 8 {
			t.Errorf("%s: slug %q, want %q", file, f.Slug, want)
		}
	}
}

func TestDetectFallbacks(t *testing.T) {
	t.Run("no nvidia-smi", func(t *testing.T) {
		f, err := detect(t, &fakeSMI{}, func(o *Options) {
			o.LookPath = func(string) (string, error) { return "", exec.ErrNotFound }
			o.NumCPU = 2
			o.CPUInfo = "processor : 0\nmodel name : AMD EPYC 7B13 64-Core Processor\n"
		})
		if err != nil {
			t.Fatal(err)
		}
		if f.Slug != "cpu-2c-amd-epyc-7b13" || f.GPUCount != 0 || f.Interconnect != "" || len(f.Notes) != 1 {
			t.Errorf("cpu fingerprint = %+v", f)
		}
		g, _ := detect(t, &fakeSMI{}, func(o *Options) {
			o.LookPath = func(string) (string, error) { return "", exec.ErrNotFound }
			o.NumCPU = 4
			o.CPUInfo = "processor : 0\nmodel name : AMD EPYC 7B13 64-Core Processor\n"
		})
		if g.Key() == f.Key() {
			t.Error("without GPUs the CPU count is part of the identity")
		}
	})
	t.Run("driver unreachable", func(t *testing.T) {
		_, err := detect(t, &fakeSMI{query: "!NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver."}, nil)
		if !errors.Is(err, ErrNoDriver) {
			t.Errorf("err = %v, want ErrNoDriver", err)
		}
	})
	t.Run("other failure", func(t *testing.T) {
		_, err := detect(t, &fakeSMI{query: "!Segmentation fault"}, nil)
		if err == nil || errors.Is(err, ErrNoDriver) || !strings.Contains(err.Error(), "list GPUs") {
			t.Errorf("err = %v", err)
		}
	})
	t.Run("no devices", func(t *testing.T) {
		f, err := detect(t, &fakeSMI{query: "!No devices were found"}, nil)
		if err != nil || f.GPUCount != 0 || !strings.HasPrefix(f.Slug, "cpu-32c-") {
			t.Errorf("f = %+v, err = %v", f, err)
		}
	})
	t.Run("old driver without compute_cap", func(t *testing.T) {
		s := h200x2(t)
		var basic strings.Builder
		for _, l := range strings.Split(strings.TrimSpace(s.query), "\n") {
			f := strings.Split(l, ", ")
			basic.WriteString(strings.Join(append(f[:4], f[4], f[5], f[6]), ", ") + "\n")
		}
		s.query = "!basic!" + basic.String()
		f, err := detect(t, s, nil)
		if err != nil {
			t.Fatal(err)
		}
		if f.GPUCount != 2 || f.MIG != "" || f.GPUs[0].ComputeCap != "" || len(s.calls) != 4 {
			t.Errorf("f = %+v, calls %q", f, s.calls)
		}
	})
	t.Run("topology unreadable", func(t *testing.T) {
		s := h200x2(t)
		s.topo = "!topo is not supported in this VM"
		f, err := detect(t, s, nil)
		if err != nil {
			t.Fatal(err)
		}
		if f.Interconnect != "unknown" || f.Slug != "2xH200-unknown-drv580" || len(f.Notes) != 1 || !strings.Contains(f.Notes[0], "topo is not supported") {
			t.Errorf("f = %+v", f)
		}
	})
	t.Run("header unreadable", func(t *testing.T) {
		s := h200x2(t)
		s.plain = "garbage"
		f, err := detect(t, s, nil)
		if err != nil {
			t.Fatal(err)
		}
		// The driver still comes from the query; the CUDA version is missing and noted.
		if f.Driver != "580.159.04" || f.CUDA != "" || len(f.Notes) != 1 {
			t.Errorf("f = %+v", f)
		}
	})
}

// TestDetectReal runs on the machine itself: it must never fail where nvidia-smi is absent
// (CPU fingerprint) and must find the GPUs where it is present.
func TestDetectReal(t *testing.T) {
	f, err := DetectWith(context.Background(), Options{Engine: "refengine"})
	if err != nil {
		t.Fatal(err)
	}
	if f.Slug == "" || len(f.Hash) != 8 {
		t.Errorf("fingerprint = %+v", f)
	}
	if _, lerr := exec.LookPath("nvidia-smi"); lerr == nil && f.GPUCount == 0 {
		t.Errorf("nvidia-smi is present but no GPU was found: %+v", f)
	}
	t.Logf("this machine: %s (%s)", f.Key(), f.Summary())
}

// TestDetectSingleH200 uses the capture of a one-GPU H200 machine: topo -m is not needed (and
// not asked for) with one GPU, but its single-row matrix must still parse.
func TestDetectSingleH200(t *testing.T) {
	s := &fakeSMI{
		query: readFixture(t, "h200x1/query.csv"),
		plain: readFixture(t, "h200x1/nvidia-smi.txt"),
		topo:  "!topo must not be called for one GPU",
	}
	f, err := detect(t, s, nil)
	if err != nil {
		t.Fatal(err)
	}
	if f.Slug != "1xH200-drv580" || f.Interconnect != "single" || f.Topology != nil || len(f.Notes) != 0 || len(s.calls) != 2 {
		t.Errorf("f = %+v, calls %q", f, s.calls)
	}
	topo, err := ParseTopo(readFixture(t, "h200x1/topo-m.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if topo.Interconnect() != "single" || topo.CPUAffinity[0] != "0-15" || topo.GPUNUMAID[0] != "N/A" {
		t.Errorf("topo = %+v", topo)
	}
}

func TestDetectCUDAVisibleDevices(t *testing.T) {
	var q strings.Builder
	for i := 0; i < 8; i++ {
		fmt.Fprintf(&q, "%d, NVIDIA H100 80GB HBM3, GPU-%d0aa-%d, 0000:%02x:00.0, 81559, 0, 550.90.07, Disabled, 9.0\n", i, i, i, i)
	}
	smi := func() *fakeSMI {
		return &fakeSMI{query: q.String(), plain: "Driver Version: 550.90.07 CUDA Version: 12.4", topo: readFixture(t, "public/nccl-tests-29-8xv100-hybrid-mesh.txt")}
	}
	tests := []struct {
		vis, slug string
		links     [][]string
		notes     int
	}{
		// GPU0 and GPU3 are joined by one NVLink on the hybrid cube mesh; GPU0 and GPU5 only by SYS.
		{vis: "0,3", slug: "2xH100-80GB-HBM3-nvlink-drv550", links: [][]string{{"X", "NV1"}, {"NV1", "X"}}, notes: 1},
		{vis: "5,GPU-00aa", slug: "2xH100-80GB-HBM3-pcie-drv550", links: [][]string{{"X", "SYS"}, {"SYS", "X"}}, notes: 1},
		{vis: "0,1,2,3,4,5,6,7", slug: "8xH100-80GB-HBM3-mixed-drv550", notes: 0},
		{vis: "2,9,3", slug: "1xH100-80GB-HBM3-drv550", notes: 1}, // 9 ends the list
		{vis: "GPU-", slug: "cpu-32c-intel-xeon", notes: 2},       // ambiguous prefix: nothing visible
		{vis: "", slug: "cpu-32c-intel-xeon", notes: 2},           // set but empty: GPUs hidden
		{vis: "MIG-8f2c1b5e-0000-0000-0000-000000000000", slug: "8xH100-80GB-HBM3-mixed-drv550", notes: 1},
	}
	for _, tc := range tests {
		f, err := detect(t, smi(), func(o *Options) { o.LookupEnv = env(map[string]string{"CUDA_VISIBLE_DEVICES": tc.vis}) })
		if err != nil {
			t.Fatal(err)
		}
		if f.Slug != tc.slug || len(f.Notes) != tc.notes || (tc.links != nil && !cmpLinks(f.GPULinks, tc.links)) {
			t.Errorf("CUDA_VISIBLE_DEVICES=%q: slug %q links %v notes %q", tc.vis, f.Slug, f.GPULinks, f.Notes)
		}
	}
}

func cmpLinks(a, b [][]string) bool { return fmt.Sprint(a) == fmt.Sprint(b) }
