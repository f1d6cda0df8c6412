package blas

import (
	"os"
	"testing"
)

func TestNeedsCore(t *testing.T) {
	tests := []struct {
		loaded  string
		userSet bool
		want    string
		expect  string
	}{
		{"Prescott", false, "SkylakeX", "SkylakeX"}, // an unknown CPU's fallback
		{"prescott", false, "Haswell", "Haswell"},
		{"Sandybridge", false, "Haswell", "Haswell"},
		{"Prescott", true, "SkylakeX", ""},    // the user's choice stands
		{"Prescott", false, "", ""},           // a CPU without AVX2: nothing better
		{"SkylakeX", false, "SkylakeX", ""},   // recognised
		{"Zen", false, "Haswell", ""},         // recognised AMD
		{"Cooperlake", false, "SkylakeX", ""}, // recognised, newer than ours
		{"Haswell", false, "SkylakeX", ""},    // the library's choice of AVX2 kernels stands
		{"", false, "SkylakeX", ""},           // a library that does not say
	}
	for _, tt := range tests {
		if got := needsCore(tt.loaded, tt.userSet, tt.want); got != tt.expect {
			t.Errorf("needsCore(%q, %v, %q) = %q, want %q", tt.loaded, tt.userSet, tt.want, got, tt.expect)
		}
	}
	for _, tt := range []struct {
		avx512, avx2 bool
		want         string
	}{{true, true, "SkylakeX"}, {false, true, "Haswell"}, {false, false, ""}} {
		if got := coreFor(tt.avx512, tt.avx2); got != tt.want {
			t.Errorf("coreFor(%v, %v) = %q, want %q", tt.avx512, tt.avx2, got, tt.want)
		}
	}
}

// TestOpenBLASKernelsFitCPU checks the loaded library on this machine: on a
// CPU with AVX2 and FMA, OpenBLAS must not run kernels without them unless
// the user chose so (Debian's 0.3.21 falls back to SSE3 "Prescott" kernels
// on CPUs newer than itself), and the products must still be right.
func TestOpenBLASKernelsFitCPU(t *testing.T) {
	ob, ok := Current().(*OpenBLAS)
	if !ok {
		t.Skip("OpenBLAS is not in use: " + Describe())
	}
	if _, set := os.LookupEnv("OPENBLAS_CORETYPE"); set && ob.CoreNote == "OPENBLAS_CORETYPE set by the user" {
		t.Skip("OPENBLAS_CORETYPE is set by the user")
	}
	if ob.Core == "" {
		t.Skip("this OpenBLAS does not name its kernels")
	}
	want := cpuCore()
	if want == "" {
		t.Skipf("the CPU has no AVX2+FMA; OpenBLAS runs %s kernels", ob.Core)
	}
	if preAVX2Cores[lower(ob.Core)] {
		t.Fatalf("OpenBLAS runs %s kernels on a CPU that can run %s's (%s)", ob.Core, want, ob.CoreNote)
	}
	t.Logf("OpenBLAS runs %s kernels; %s", ob.Core, Describe())
	// A product through the re-initialised library equals the pure-Go one.
	const m, n, k = 37, 29, 41
	a, b := make([]float32, m*k), make([]float32, k*n)
	for i := range a {
		a[i] = float32(i%13) - 6
	}
	for i := range b {
		b[i] = float32(i%7) - 3
	}
	c1, c2 := make([]float32, m*n), make([]float32, m*n)
	ob.Sgemm(false, false, m, n, k, 1, a, k, b, n, 0, c1, n)
	Go{}.Sgemm(false, false, m, n, k, 1, a, k, b, n, 0, c2, n)
	for i := range c1 {
		if c1[i] != c2[i] { // small integers: exact in float32
			t.Fatalf("c[%d] = %v, want %v", i, c1[i], c2[i])
		}
	}
}
