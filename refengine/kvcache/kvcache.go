// Package kvcache is the reference engine's paged KV cache: a page allocator shared by all
// tensor-parallel ranks (a page id means the same token slots on every rank) and, per rank and per
// model, a really allocated store of keys and values for that rank's KV heads.
package kvcache

import "fmt"

// Allocator hands out fixed-size pages of token slots. It is not safe for concurrent use; the
// scheduler owns it.
type Allocator struct {
	pageSize int
	free     []int32
	total    int
}

// NewAllocator manages numPages pages of pageSize token slots each.
func NewAllocator(numPages, pageSize int) *Allocator {
	a := &Allocator{pageSize: pageSize, total: numPages, free: make([]int32, numPages)}
	for i := range a.free {
		a.free[i] = int32(numPages - 1 - i) // pop from the end: page 0 first
	}
	return a
}

// PageSize is the number of token slots per page.
func (a *Allocator) PageSize() int { return a.pageSize }

// TotalPages is the pool's size in pages.
func (a *Allocator) TotalPages() int { return a.total }

// FreePages is the number of pages not in use.
func (a *Allocator) FreePages() int { return len(a.free) }

// CapacityTokens is the pool's size in token slots.
func (a *Allocator) CapacityTokens() int { return a.total * a.pageSize }

// PagesFor is the number of pages needed to hold n tokens.
func (a *Allocator) PagesFor(n int) int { return (n + a.pageSize - 1) / a.pageSize }

// Grow extends pages so that it holds at least n tokens. It fails, changing nothing, when the pool
// has too few free pages.
func (a *Allocator) Grow(pages []int32, n int) ([]int32, error) {
	need := a.PagesFor(n) - len(pages)
	if need <= 0 {
		return pages, nil
	}
	if need > len(a.free) {
		return pages, fmt.Errorf("kv cache: out of pages: need %d more, %d free of %d", need, len(a.free), a.total)
	}
	k := len(a.free) - need
	for i := len(a.free) - 1; i >= k; i-- {
		pages = append(pages, a.free[i])
	}
	a.free = a.free[:k]
	return pages, nil
}

// Shrink releases the pages beyond those needed for n tokens and returns the kept prefix.
func (a *Allocator) Shrink(pages []int32, n int) []int32 {
	keep := a.PagesFor(n)
	if keep >= len(pages) {
		return pages
	}
	a.free = append(a.free, pages[keep:]...)
	return pages[:keep]
}

// Release returns all pages.
func (a *Allocator) Release(pages []int32) {
	a.free = append(a.free, pages...)
}

// Store holds one rank's keys and values for one model: for each layer, page, slot and local KV
// head a vector of headDim float32. The memory is allocated once, up front.
type Store struct {
	Layers, Pages, PageSize, KVHeads, HeadDim int
	K, V                                      []float32
	layerStride, pageStride, slotStride       int
}

// NewStore allocates a store.
func NewStore(layers, pages, pageSize, kvHeads, headDim int) *Store {
	s := &Store{Layers: layers, Pages: pages, PageSize: pageSize, KVHeads: kvHeads, HeadDim: headDim}
	s.slotStride = kvHeads * headDim
	s.pageStride = pageSize * s.slotStride
	s.layerStride = pages * s.pageStride
	n := layers * s.layerStride
	s.K = make([]float32, n)
	s.V = make([]float32, n)
	return s
}

// BytesPerToken is the memory one token slot takes in a store of this shape (K and V, float32).
func BytesPerToken(layers, kvHeads, headDim int) int64 {
	return int64(2 * layers * kvHeads * headDim * 4)
}

// Bytes is the store's allocated size (K and V).
func (s *Store) Bytes() int64 { return int64(len(s.K)+len(s.V)) * 4 }

// Offset is the index in K or V of the vector for (layer, token position in a sequence whose
// pages are pages, local KV head).
func (s *Store) Offset(layer int, pages []int32, pos, head int) int {
	return layer*s.layerStride + int(pages[pos/s.PageSize])*s.pageStride + (pos%s.PageSize)*s.slotStride + head*s.HeadDim
}
