package main

import (
	"context"
	"math/rand/v2"
	"os"
	"testing"
	"time"

	"github.com/xmr-project/xmr/detect"
	"github.com/xmr-project/xmr/npy"
	"github.com/xmr-project/xmr/tensor"
)

// testNet returns the part of the detector that cut c trains, skipping
// without the detector's weights (CI fetches them: there it fails).
func testNet(t *testing.T, c detect.Cut) *detect.Net {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dir, err := detect.Fetch(ctx, detect.DefaultCacheDir())
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("detector weights: %v", err)
		}
		t.Skipf("detector weights unavailable: %v", err)
	}
	d, err := detect.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	n, err := d.CutNet(c)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestFeaturesSplice checks that features replaces exactly the columns of
// the maps that the cut recomputes, with ROI-Align of the part's outputs
// over each image's boxes, and leaves the other columns and the padding
// slots as they were.
func TestFeaturesSplice(t *testing.T) {
	for _, name := range []string{"s16", "s32"} {
		t.Run(name, func(t *testing.T) {
			c, err := detect.CutNamed(name)
			if err != nil {
				t.Fatal(err)
			}
			net := testNet(t, c)
			rng := rand.New(rand.NewPCG(1, 2))
			in := net.InShape()
			per := in[0] * in[1] * in[2]
			const n, R, D = 2, 4, 1056
			act := make([]float32, n*per)
			for i := range act {
				act[i] = float32(rng.NormFloat64())
			}
			tp := &taps{arr: &npy.Array{Shape: append([]int{n}, in...), Data: act}, per: per, shape: in,
				boxes: [][][4]float32{{{0, 0, 512, 512}, {100, 50, 300, 400}}, {{10, 20, 30, 40}}}}
			tu := &tuned{net: net, cut: c}
			at := 0
			for _, spec := range detect.Maps {
				for _, m := range c.Maps {
					if m == spec.Name {
						tu.cols = append(tu.cols, [2]int{at, at + spec.C})
						tu.stride = append(tu.stride, spec.Stride)
					}
				}
				at += spec.C
			}
			feat := tensor.New(n, R, D)
			for i := range feat.Data {
				feat.Data[i] = float32(rng.NormFloat64())
			}
			got := tu.features(nil, tp, []int{0, 1}, feat)
			ys := net.Forward(nil, tp.batch([]int{0, 1}))
			inCols := func(j int) int {
				for k, c := range tu.cols {
					if j >= c[0] && j < c[1] {
						return k
					}
				}
				return -1
			}
			for k, y := range ys {
				pooled := (*tensor.Tape)(nil).ROIAlign(y, tu.stride[k], tp.boxes, R)
				C := y.Shape[3]
				for i := range n {
					for r := range R {
						for j := range D {
							g, f := got.Data[(i*R+r)*D+j], feat.Data[(i*R+r)*D+j]
							switch kk := inCols(j); {
							case kk < 0 && g != f:
								t.Fatalf("image %d slot %d column %d changed: %v, was %v", i, r, j, g, f)
							case kk == k:
								if want := pooled.Data[(i*R+r)*C+j-tu.cols[k][0]]; g != want {
									t.Fatalf("image %d slot %d column %d: %v, want the pooled %v", i, r, j, g, want)
								}
							}
						}
					}
				}
			}
		})
	}
}
