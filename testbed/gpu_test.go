package testbed

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestSamplerRealGPU runs only on a GPU machine with RECKON_GPU_TESTS=1 (it allocates 8 GiB on
// GPU 0 through PyTorch): the real nvidia-smi loop must see the allocation as a peak on GPU 0
// and not on the other GPUs.
func TestSamplerRealGPU(t *testing.T) {
	if os.Getenv("RECKON_GPU_TESTS") != "1" {
		t.Skip("set RECKON_GPU_TESTS=1 on a GPU machine")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	f, err := Detect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if f.GPUCount == 0 {
		t.Fatalf("no GPU detected: %+v", f)
	}
	t.Logf("testbed %s: %s", f.Key(), f.Summary())

	s := NewSampler(100 * time.Millisecond)
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.WaitSamples(ctx, 2*f.GPUCount); err != nil {
		t.Fatal(err)
	}
	before := s.Snapshot()
	g0, _ := before.GPU(0)

	const alloc = 8 << 30
	py := exec.CommandContext(ctx, "python3", "-c", `import torch, sys
x = torch.empty(8 << 30, dtype=torch.uint8, device="cuda:0")
x.fill_(1)
torch.cuda.synchronize()
print("allocated", flush=True)
sys.stdin.read()
`)
	stdin, err := py.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := py.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	py.Stderr = os.Stderr
	if err := py.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || strings.TrimSpace(line) != "allocated" {
		t.Fatalf("python: %q %v", line, err)
	}
	// Wait (bounded) until the sampler sees the allocation.
	want := g0.FirstUsedMiB + alloc>>20
	for {
		r := s.Snapshot()
		if g, _ := r.GPU(0); g.PeakUsedMiB >= want {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("the sampler never saw %d MiB on GPU 0: %+v", want, r)
		}
		if err := s.WaitSamples(ctx, r.Samples+f.GPUCount); err != nil {
			t.Fatal(err)
		}
	}
	stdin.Close() // python exits and frees the memory
	if err := py.Wait(); err != nil {
		t.Fatal(err)
	}
	r, err := s.Stop()
	if err != nil {
		t.Fatal(err)
	}
	p0, _ := r.GPU(0)
	t.Logf("GPU 0: first %d MiB, peak %d MiB, last %d MiB of %d MiB, %d samples in %v", p0.FirstUsedMiB, p0.PeakUsedMiB, p0.LastUsedMiB, p0.TotalMiB, p0.Samples, r.Duration)
	if p0.PeakUsedMiB < want || p0.TotalMiB != f.GPUs[0].MemoryMiB {
		t.Errorf("GPU 0 = %+v, want a peak >= %d MiB", p0, want)
	}
	for _, g := range r.GPUs[1:] {
		t.Logf("GPU %d: peak %d MiB", g.Index, g.PeakUsedMiB)
		if g.PeakUsedMiB >= alloc>>20 {
			t.Errorf("GPU %d saw the allocation made on GPU 0: %+v", g.Index, g)
		}
	}
	if r.PeakGiB() < 8 {
		t.Errorf("PeakGiB = %v", r.PeakGiB())
	}
}
