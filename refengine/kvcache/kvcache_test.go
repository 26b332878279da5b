package kvcache

import "testing"

func TestAllocator(t *testing.T) {
	a := NewAllocator(4, 16)
	p, err := a.Grow(nil, 17)
	if err != nil || len(p) != 2 || a.FreePages() != 2 {
		t.Fatalf("grow 17 tokens: %v pages, err %v, free %d", p, err, a.FreePages())
	}
	if _, err := a.Grow(p, 80); err == nil {
		t.Fatal("grew beyond the pool")
	}
	if len(p) != 2 || a.FreePages() != 2 {
		t.Fatal("a failed grow changed the pool")
	}
	p = a.Shrink(p, 5)
	if len(p) != 1 || a.FreePages() != 3 {
		t.Fatalf("shrink: %d pages, %d free", len(p), a.FreePages())
	}
	a.Release(p)
	if a.FreePages() != 4 || a.CapacityTokens() != 64 {
		t.Fatal("release")
	}
}

func TestStoreLayout(t *testing.T) {
	s := NewStore(2, 3, 4, 2, 8)
	if s.Bytes() != int64(2*2*3*4*2*8*4) || BytesPerToken(2, 2, 8) != 2*2*2*8*4 {
		t.Fatalf("bytes %d", s.Bytes())
	}
	pages := []int32{2, 0}
	seen := map[int]bool{}
	for l := 0; l < 2; l++ {
		for pos := 0; pos < 8; pos++ {
			for h := 0; h < 2; h++ {
				o := s.Offset(l, pages, pos, h)
				if o < 0 || o+8 > len(s.K) || seen[o] {
					t.Fatalf("offset %d for layer %d pos %d head %d: out of range or reused", o, l, pos, h)
				}
				seen[o] = true
			}
		}
	}
}
