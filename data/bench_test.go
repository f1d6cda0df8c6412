package data

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkLoadPrecomp loads a 2000 x 36 x 2048 float32 precomp split
// (590 MB of features, in the page cache after the write) and reports the
// load throughput; "mmap" includes the NaN/Inf scan, which touches every
// page. Run with
//
//	go test ./data -run '^$' -bench LoadPrecomp -benchtime 5x
func BenchmarkLoadPrecomp(b *testing.B) {
	dir := b.TempDir()
	const n, R, D = 2000, 36, 2048
	s := &Split{Name: "test", CapsPerImage: 5, Images: &Regions{N: n, R: R, D: D, Feat: make([]float32, n*R*D)}}
	for i := range s.Images.Feat {
		s.Images.Feat[i] = float32(i%977) / 977
	}
	s.Captions = repeat("a man riding a wave on top of a surfboard", 5*n)
	if err := WritePrecomp(context.Background(), dir, s); err != nil {
		b.Fatal(err)
	}
	s = nil
	st, err := os.Stat(filepath.Join(dir, "test_ims.npy"))
	if err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct {
		name string
		opt  PrecompOptions
	}{
		{"mmap", PrecompOptions{}},
		{"mmap-nocheck", PrecompOptions{SkipFiniteCheck: true}},
		{"read", PrecompOptions{NoMmap: true}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(st.Size())
			for b.Loop() {
				s, err := LoadPrecomp(context.Background(), dir, "test", &bc.opt)
				if err != nil {
					b.Fatal(err)
				}
				if s.Images.N != n {
					b.Fatal("wrong size")
				}
				s.Close()
			}
		})
	}
}

// BenchmarkFiniteCheck measures the NaN/Inf scan alone over 64 MB.
func BenchmarkFiniteCheck(b *testing.B) {
	v := make([]float32, 16<<20)
	b.SetBytes(int64(4 * len(v)))
	for b.Loop() {
		if j, err := parallelFirstNonFinite(context.Background(), v); j >= 0 || err != nil {
			b.Fatal("found", j, err)
		}
	}
}
