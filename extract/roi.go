package extract

import (
	"math"

	"github.com/xmr-project/xmr/detect"
	"github.com/xmr-project/xmr/internal/colsum"
)

// ROIAlign pools the part of map m under box (x1, y1, x2, y2 in input
// pixels, 0..InputSize) into one vector of m.C values, added to out: the
// mean of bilinear samples on a regular grid inside the box (ROI-Align, He
// et al. 2017, with half-pixel-aligned coordinates, averaged over its
// bins). The grid has about one sample per map cell the box covers in each
// direction, at least 2 and at most 16, so small boxes are still sampled
// at several points and large ones are not over-sampled. Samples outside
// the map are clamped to its border.
func ROIAlign(m *detect.FeatureMap, box [4]float32, out []float32) {
	s := float64(m.Stride)
	x1, y1 := float64(box[0])/s-0.5, float64(box[1])/s-0.5
	x2, y2 := float64(box[2])/s-0.5, float64(box[3])/s-0.5
	bw, bh := max(x2-x1, 1e-6), max(y2-y1, 1e-6)
	nx := min(max(int(math.Ceil(bw)), 2), 16)
	ny := min(max(int(math.Ceil(bh)), 2), 16)
	C := m.C
	acc := make([]float32, C)
	for j := range ny {
		y := y1 + (float64(j)+0.5)*bh/float64(ny)
		for i := range nx {
			x := x1 + (float64(i)+0.5)*bw/float64(nx)
			bilinearAdd(m, x, y, acc)
		}
	}
	inv := 1 / float32(nx*ny)
	for c := range C {
		out[c] += acc[c] * inv
	}
}

// bilinearAdd adds the bilinear interpolation of m at map coordinates
// (x, y) (cell centres at integers) to acc, clamping to the border.
func bilinearAdd(m *detect.FeatureMap, x, y float64, acc []float32) {
	x = min(max(x, 0), float64(m.W-1))
	y = min(max(y, 0), float64(m.H-1))
	x0, y0 := int(x), int(y)
	x1, y1 := min(x0+1, m.W-1), min(y0+1, m.H-1)
	fx, fy := float32(x-float64(x0)), float32(y-float64(y0))
	C := m.C
	w00, w01 := (1-fx)*(1-fy), fx*(1-fy)
	w10, w11 := (1-fx)*fy, fx*fy
	p00 := m.Data[(y0*m.W+x0)*C:][:C]
	p01 := m.Data[(y0*m.W+x1)*C:][:C]
	p10 := m.Data[(y1*m.W+x0)*C:][:C]
	p11 := m.Data[(y1*m.W+x1)*C:][:C]
	v := 0
	if hasAVX2 {
		v = C &^ 7
		if v > 0 {
			bilinearAVX2(&acc[0], &p00[0], &p01[0], &p10[0], &p11[0], &[4]float32{w00, w01, w10, w11}, v)
		}
	}
	for c := v; c < C; c++ {
		acc[c] += w00*p00[c] + w01*p01[c] + w10*p10[c] + w11*p11[c]
	}
}

// meanMap adds the mean of every cell of m to out (m.C values): the
// whole image's global feature from that map.
func meanMap(m *detect.FeatureMap, out []float32) {
	C := m.C
	acc := make([]float64, C)
	colsum.Add(acc, m.Data, m.H*m.W, C)
	n := float64(m.H * m.W)
	for c := range C {
		out[c] += float32(acc[c] / n)
	}
}
