package synth

import (
	"context"
	"testing"
)

// BenchmarkImage measures one image: scene, render, proposals, region
// statistics and captions (everything but the projection).
func BenchmarkImage(b *testing.B) {
	w, err := New(Config{N: 100000, Seed: 1, Dim: 256})
	if err != nil {
		b.Fatal(err)
	}
	sp, _ := w.Split("train")
	wk := newWorker(w)
	img := &Image{Stats: make([]float32, w.cfg.Regions*StatsDim)}
	i := 0
	for b.Loop() {
		wk.makeImage(sp, i%sp.Len, img)
		i++
	}
}

// BenchmarkRender measures drawing one scene.
func BenchmarkRender(b *testing.B) {
	r := newRenderer()
	rg := newRNG()
	scenes := make([]Scene, 64)
	for i := range scenes {
		scenes[i] = makeScene(1, i, 0, i, rg)
	}
	i := 0
	for b.Loop() {
		r.render(&scenes[i%len(scenes)])
		i++
	}
}

// BenchmarkExtract measures the statistics of all regions of one image.
func BenchmarkExtract(b *testing.B) {
	w, _ := New(Config{N: 1000, Seed: 1, Dim: 256})
	img, _ := w.Image("train", 3)
	e := newExtractor()
	out := make([]float32, StatsDim)
	for b.Loop() {
		e.prepare(img.Pixels)
		for _, reg := range img.Regions {
			e.region(img.Pixels, reg.Box, out)
		}
	}
}

// BenchmarkGenerate measures writing a 2000-image world (256-d, no PNG).
func BenchmarkGenerate(b *testing.B) {
	defer SingleThreadBLAS()()
	for b.Loop() {
		if _, err := Generate(context.Background(), b.TempDir(), Config{N: 2000, Seed: 1, Dim: 256, NoImages: true}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(2000*b.N)/b.Elapsed().Seconds(), "images/s")
}

// BenchmarkPNG measures encoding one rendered image.
func BenchmarkPNG(b *testing.B) {
	w, _ := New(Config{N: 1000, Seed: 1, Dim: 8})
	img, _ := w.Image("train", 3)
	wk := newWorker(w)
	for b.Loop() {
		wk.pngBuf.Reset()
		if err := wk.png.encode(&wk.pngBuf, img.Pixels); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(wk.pngBuf.Len()), "bytes")
}
