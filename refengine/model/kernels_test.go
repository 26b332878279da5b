package model

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas32"
)

func randVec(n int, r *rand.Rand) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(r.NormFloat64())
	}
	return v
}

// TestMatMulRowInvariant checks MatMul against a float64 product and that a row's result does
// not depend on the batch it is in.
func TestMatMulRowInvariant(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	T, K, N := 7, 37, 29
	x, w := randVec(T*K, r), randVec(K*N, r)
	out := make([]float32, T*N)
	MatMul(out, x, w, T, K, N)
	for i := 0; i < T; i++ {
		one := make([]float32, N)
		MatMul(one, x[i*K:(i+1)*K], w, 1, K, N)
		for n := 0; n < N; n++ {
			var ref float64
			for k := 0; k < K; k++ {
				ref += float64(x[i*K+k]) * float64(w[k*N+n])
			}
			if d := float64(out[i*N+n]) - ref; d > 1e-4 || d < -1e-4 {
				t.Fatalf("out[%d,%d] = %v, float64 reference %v", i, n, out[i*N+n], ref)
			}
			if one[n] != out[i*N+n] {
				t.Fatalf("row %d col %d: batched %v != alone %v", i, n, out[i*N+n], one[n])
			}
		}
	}
}

// BenchmarkMatMul compares the hand-written kernel with gonum's Sgemm on the decode shapes of the
// default model (single core), and reports GFLOP/s.
func BenchmarkMatMul(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, s := range [][3]int{{32, 128, 128}, {32, 128, 768}, {32, 384, 128}, {256, 128, 768}} {
		T, K, N := s[0], s[1], s[2]
		x, w, out := randVec(T*K, r), randVec(K*N, r), make([]float32, T*N)
		flops := float64(2 * T * K * N)
		b.Run(fmt.Sprintf("hand/%dx%dx%d", T, K, N), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				MatMul(out, x, w, T, K, N)
			}
			b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
		b.Run(fmt.Sprintf("gonum/%dx%dx%d", T, K, N), func(b *testing.B) {
			A := blas32.General{Rows: T, Cols: K, Stride: K, Data: x}
			B := blas32.General{Rows: K, Cols: N, Stride: N, Data: w}
			C := blas32.General{Rows: T, Cols: N, Stride: N, Data: out}
			for i := 0; i < b.N; i++ {
				blas32.Gemm(blas.NoTrans, blas.NoTrans, 1, A, B, 0, C)
			}
			b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
	}
}
