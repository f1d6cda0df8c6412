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
// on CPUs newer than itself). TestSgemmSerial checks products through the
// re-initialised library.
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
}

// TestSgemmSerial checks the unsplit product (through OpenBLAS, with the
// kernels xmr chose, where it is in use) against the pure-Go one, for
// a product large enough that Sgemm would split it, and for k = 0 (C =
// beta*C).
func TestSgemmSerial(t *testing.T) {
	for _, s := range [][3]int{{300, 70, 110}, {5, 4, 0}} {
		m, n, k := s[0], s[1], s[2]
		a, b := make([]float32, m*k), make([]float32, k*n)
		for i := range a {
			a[i] = float32(i%11) - 5
		}
		for i := range b {
			b[i] = float32(i%5) - 2
		}
		c1, c2 := make([]float32, m*n), make([]float32, m*n)
		for i := range c1 {
			c1[i], c2[i] = float32(i%3), float32(i%3)
		}
		SgemmSerial(false, false, m, n, k, 1, a, max(k, 1), b, n, 2, c1, n)
		Go{}.Sgemm(false, false, m, n, k, 1, a, max(k, 1), b, n, 2, c2, n)
		for i := range c1 {
			if c1[i] != c2[i] { // small integers: exact
				t.Fatalf("%dx%dx%d: c[%d] = %v, want %v (%s)", m, n, k, i, c1[i], c2[i], Describe())
			}
		}
	}
}
