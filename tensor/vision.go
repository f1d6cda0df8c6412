package tensor

import "math"

// hardSwishScale is the constant 1/6 of the detector graph's hard-swish,
// rounded to float32 as the graph stores it.
const hardSwishScale = float32(1.0 / 6)

// HardSwish is MobileNetV3's activation as TensorFlow's graph computes it:
//
//	y = (x * float32(1.0/6)) * min(max(x+3, 0), 6)
//
// with each step rounded to float32 in that order, so that it equals, bit
// for bit, the detector graph's four nodes mul(y=1/6, x), add(x, 3), relu6,
// mul. The gradient is that of x*relu6(x+3)/6: (2x+3)/6 where 0 < x+3 < 6,
// 0 where x+3 <= 0 and 1 where x+3 >= 6 (the endpoints as TensorFlow's
// Relu6 gradient takes them, judged on the rounded x+3 that the forward
// pass uses).
func (tp *Tape) HardSwish(x *Tensor) *Tensor { return tp.HardSwishScaled(x, hardSwishScale) }

// HardSwishScaled is HardSwish with the graph's own constant c in place of
// 1/6, y = (x * c) * min(max(x+3, 0), 6): the detector's graph stores 1/6
// in float16 (0.16662598), and its hard-swishes equal this one, bit for
// bit, with that c. The gradient is c*(2x+3) where 0 < x+3 < 6, 0 where
// x+3 <= 0 and 6c where x+3 >= 6.
func (tp *Tape) HardSwishScaled(x *Tensor, c float32) *Tensor {
	out := tp.newTensor(x.Shape)
	xd, od := x.Data, out.Data
	parallelFor(len(od), 4, func(lo, hi int) {
		o := od[lo:hi]
		for i, v := range xd[lo:hi][:len(o)] {
			m := v * c
			r := min(max(v+3, 0), 6)
			o[i] = m * r
		}
	})
	if !tp.needs(x) {
		return out
	}
	tp.record(out, func(g []float32) {
		gx := tp.grad(x)
		parallelFor(len(g), 4, func(lo, hi int) {
			gx, g := gx[lo:hi], g[lo:hi]
			for i, v := range xd[lo:hi][:len(g)] {
				s := v + 3
				switch {
				case s <= 0:
				case s >= 6:
					gx[i] += g[i] * (6 * c)
				default:
					gx[i] += g[i] * ((2*v + 3) * c)
				}
			}
		})
	})
	return out
}

// resizeAxis holds, for every destination index along one axis of
// ResizeBilinear, the two source indices and the weight of the second.
type resizeAxis struct {
	i0, i1 []int
	d      []float32
}

// newResizeAxis computes TF1's sampling along an axis of in source and out
// destination cells: source = destination * (in/out) in float32, i0 its
// floor, i1 = min(i0+1, in-1), d the fraction, as detect's addResize does.
func newResizeAxis(in, out int) resizeAxis {
	a := resizeAxis{i0: make([]int, out), i1: make([]int, out), d: make([]float32, out)}
	s := float32(in) / float32(out)
	for o := range out {
		f := float32(o) * s
		i0 := min(int(f), in-1)
		a.i0[o], a.i1[o], a.d[o] = i0, min(i0+1, in-1), f-float32(i0)
	}
	return a
}

// ResizeBilinear resizes x (N, H, W, C) to (N, OH, OW, C) as TF1's
// resize_bilinear with align_corners=false and half_pixel_centers=false:
// the source coordinate along each axis is destination * in/out (in
// float32), y0 its floor, y1 = min(y0+1, H-1) (x0, x1 likewise), and
//
//	top = tl + (tr-tl)*dx, bottom = bl + (br-bl)*dx, out = top + (bottom-top)*dy
//
// in float32, the arithmetic of detect's addResize, which it equals bit for
// bit. Each source row's horizontal interpolation (top or bottom) is
// computed once and shared by the output rows that use it. The gradient
// splits each output's gradient between its two source rows ((1-dy) and
// dy) and each such row's between its two source columns ((1-dx) and dx).
func (tp *Tape) ResizeBilinear(x *Tensor, oh, ow int) *Tensor {
	if x.Dims() != 4 || x.Shape[1] < 1 || x.Shape[2] < 1 {
		panic(shapeErr("ResizeBilinear", "input %v must be (N, H, W, C) with H, W >= 1", x.Shape))
	}
	if oh < 1 || ow < 1 {
		panic(shapeErr("ResizeBilinear", "output size %dx%d for input %v must be at least 1x1", oh, ow, x.Shape))
	}
	nb, h, w, c := x.Shape[0], x.Shape[1], x.Shape[2], x.Shape[3]
	ay, ax := newResizeAxis(h, oh), newResizeAxis(w, ow)
	out := tp.newTensor([]int{nb, oh, ow, c})
	xd, od := x.Data, out.Data
	plane, orow := h*w*c, ow*c
	// One output row (n, oy) per index; the rows of a chunk ascend, so the
	// horizontally interpolated source rows they need are cached in two
	// slots, keyed by n*h + y.
	parallelFor(nb*oh, 6*orow, func(lo, hi int) {
		rs := newResizeRows(orow)
		lerp := func(key int) []float32 {
			b, fresh := rs.slot(key)
			if !fresh {
				return b
			}
			n, y := key/h, key%h
			src := xd[n*plane+y*w*c : n*plane+(y+1)*w*c]
			for ox := range ow {
				x0, x1, dx := ax.i0[ox], ax.i1[ox], ax.d[ox]
				o := b[ox*c : (ox+1)*c]
				tl, tr := src[x0*c:][:len(o)], src[x1*c:][:len(o)]
				for j := range o {
					o[j] = tl[j] + (tr[j]-tl[j])*dx
				}
			}
			return b
		}
		for r := lo; r < hi; r++ {
			n, oy := r/oh, r%oh
			k0 := n*h + ay.i0[oy]
			top := lerp(k0)
			rs.keep = k0
			bot := lerp(n*h + ay.i1[oy])
			rs.keep = -1
			dy := ay.d[oy]
			o := od[r*orow : (r+1)*orow]
			top, bot = top[:len(o)], bot[:len(o)]
			for j := range o {
				o[j] = top[j] + (bot[j]-top[j])*dy
			}
		}
	})
	if !tp.needs(x) {
		return out
	}
	tp.record(out, func(g []float32) {
		gx := tp.grad(x)
		// Parallel over images: an image's outputs share source pixels,
		// images do not. Within an image the output rows ascend: each
		// source row's share of the gradient (OW, C) collects in one of
		// two slots and is split between its columns once no later
		// output row needs it.
		parallelFor(nb, 8*oh*orow, func(lo, hi int) {
			rs := newResizeRows(orow)
			for n := lo; n < hi; n++ {
				img := gx[n*plane : (n+1)*plane]
				rs.flush = func(y int, b []float32) {
					dst := img[y*w*c : (y+1)*w*c]
					for ox := range ow {
						x0, x1, dx := ax.i0[ox], ax.i1[ox], ax.d[ox]
						src := b[ox*c : (ox+1)*c]
						d0, d1 := dst[x0*c:][:len(src)], dst[x1*c:][:len(src)]
						for j, v := range src {
							d0[j] += (1 - dx) * v
							d1[j] += dx * v
						}
					}
					clear(b)
				}
				for oy := range oh {
					y0, dy := ay.i0[oy], ay.d[oy]
					top, _ := rs.slot(y0)
					rs.keep = y0
					bot, _ := rs.slot(ay.i1[oy])
					rs.keep = -1
					gr := g[(n*oh+oy)*orow : (n*oh+oy+1)*orow]
					top, bot = top[:len(gr)], bot[:len(gr)]
					for j, v := range gr {
						top[j] += (1 - dy) * v
						bot[j] += dy * v
					}
				}
				rs.flushAll()
			}
		})
	})
	return out
}

// resizeRows is ResizeBilinear's cache of two source rows, each a buffer
// of OW*C values under a key (-1: free).
type resizeRows struct {
	key  [2]int
	buf  [2][]float32
	keep int // a key that slot must not evict
	// flush, if set, is given a row's buffer before its slot is reused;
	// the buffers start zeroed and flush must leave them so.
	flush func(key int, b []float32)
}

func newResizeRows(n int) *resizeRows {
	return &resizeRows{key: [2]int{-1, -1}, buf: [2][]float32{make([]float32, n), make([]float32, n)}, keep: -1}
}

// slot returns the buffer of key, and whether it was just taken (its
// previous contents handed to flush) rather than found.
func (rs *resizeRows) slot(key int) ([]float32, bool) {
	for s := range rs.key {
		if rs.key[s] == key {
			return rs.buf[s], false
		}
	}
	s := 0
	if rs.key[0] == rs.keep || (rs.key[1] != rs.keep && rs.key[1] < rs.key[0]) {
		s = 1
	}
	if rs.key[s] >= 0 && rs.flush != nil {
		rs.flush(rs.key[s], rs.buf[s])
	}
	rs.key[s] = key
	return rs.buf[s], true
}

// flushAll hands every held row to flush and frees the slots.
func (rs *resizeRows) flushAll() {
	for s := range rs.key {
		if rs.key[s] >= 0 && rs.flush != nil {
			rs.flush(rs.key[s], rs.buf[s])
		}
		rs.key[s] = -1
	}
}

// roiMaxGrid is the most samples ROIAlign takes along either axis of a box.
const roiMaxGrid = 16

// roiGrid is the sampling of one ROIAlign box: nx by ny bilinear samples,
// sample (i, j) between columns x0[i], x1[i] (weight fx[i] on x1) and rows
// y0[j], y1[j] (weight fy[j] on y1), each sample weighing inv.
type roiGrid struct {
	nx, ny int
	x0, x1 [roiMaxGrid]int
	y0, y1 [roiMaxGrid]int
	fx, fy [roiMaxGrid]float32
	inv    float32
}

// newROIGrid lays out box (x1, y1, x2, y2 in input pixels) on an h by w map
// of stride input pixels per cell, with extract.ROIAlign's arithmetic:
// float64 map coordinates x/stride - 0.5, a grid of clamp(ceil(size), 2,
// 16) samples per axis at (i+0.5)*size/n from the box's corner, each
// clamped to the map before its bilinear cells and weights are taken.
func newROIGrid(box [4]float32, stride, h, w int) roiGrid {
	s := float64(stride)
	bx1, by1 := float64(box[0])/s-0.5, float64(box[1])/s-0.5
	bx2, by2 := float64(box[2])/s-0.5, float64(box[3])/s-0.5
	bw, bh := max(bx2-bx1, 1e-6), max(by2-by1, 1e-6)
	var gr roiGrid
	gr.nx = min(max(int(math.Ceil(bw)), 2), roiMaxGrid)
	gr.ny = min(max(int(math.Ceil(bh)), 2), roiMaxGrid)
	for i := range gr.nx {
		x := bx1 + (float64(i)+0.5)*bw/float64(gr.nx)
		x = min(max(x, 0), float64(w-1))
		x0 := int(x)
		gr.x0[i], gr.x1[i], gr.fx[i] = x0, min(x0+1, w-1), float32(x-float64(x0))
	}
	for j := range gr.ny {
		y := by1 + (float64(j)+0.5)*bh/float64(gr.ny)
		y = min(max(y, 0), float64(h-1))
		y0 := int(y)
		gr.y0[j], gr.y1[j], gr.fy[j] = y0, min(y0+1, h-1), float32(y-float64(y0))
	}
	gr.inv = 1 / float32(gr.nx*gr.ny)
	return gr
}

// ROIAlign pools regions of a feature map x (N, H, W, C) at stride input
// pixels per cell into (N, R, C) with R = maxBoxes: boxes[n] lists image
// n's boxes (x1, y1, x2, y2 in input pixels), at most maxBoxes of them, and
// row r of image n is the pooled box boxes[n][r]; rows past len(boxes[n])
// are zero and pass no gradient. A row is exactly extract.ROIAlign of map
// n and the box: map coordinates x/stride - 0.5 (in float64), a grid of nx
// = clamp(ceil(box width in cells), 2, 16) by ny (likewise) samples at
// (i+0.5)*width/nx from the box's corner, each a bilinear interpolation
// clamped to the map's border, summed in float32 in the same order and
// multiplied by 1/(nx*ny). The gradient with respect to x scatters each
// sample's four bilinear weights back; boxes get none.
func (tp *Tape) ROIAlign(x *Tensor, stride int, boxes [][][4]float32, maxBoxes int) *Tensor {
	if x.Dims() != 4 || x.Shape[1] < 1 || x.Shape[2] < 1 {
		panic(shapeErr("ROIAlign", "feature map %v must be (N, H, W, C) with H, W >= 1", x.Shape))
	}
	if stride < 1 {
		panic(shapeErr("ROIAlign", "stride %d for feature map %v must be at least 1", stride, x.Shape))
	}
	nb, h, w, c := x.Shape[0], x.Shape[1], x.Shape[2], x.Shape[3]
	if len(boxes) != nb {
		panic(shapeErr("ROIAlign", "boxes for %d images, feature map %v has %d", len(boxes), x.Shape, nb))
	}
	if maxBoxes < 0 {
		panic(shapeErr("ROIAlign", "maxBoxes %d for feature map %v is negative", maxBoxes, x.Shape))
	}
	for n, b := range boxes {
		if len(b) > maxBoxes {
			panic(shapeErr("ROIAlign", "image %d has %d boxes, more than maxBoxes %d (feature map %v)", n, len(b), maxBoxes, x.Shape))
		}
	}
	rb := maxBoxes
	out := tp.newTensor([]int{nb, rb, c})
	xd, od := x.Data, out.Data
	plane := h * w * c
	// One output row (n, r) per index; a full grid costs about 4*256*C.
	parallelFor(nb*rb, 4*64*c, func(lo, hi int) {
		for k := lo; k < hi; k++ {
			n, r := k/rb, k%rb
			row := od[k*c : (k+1)*c]
			clear(row)
			if r >= len(boxes[n]) {
				continue
			}
			gr := newROIGrid(boxes[n][r], stride, h, w)
			img := xd[n*plane : (n+1)*plane]
			for j := range gr.ny {
				fy := gr.fy[j]
				ry0, ry1 := gr.y0[j]*w, gr.y1[j]*w
				for i := range gr.nx {
					fx := gr.fx[i]
					w00, w01 := (1-fx)*(1-fy), fx*(1-fy)
					w10, w11 := (1-fx)*fy, fx*fy
					p00 := img[(ry0+gr.x0[i])*c:][:len(row)]
					p01 := img[(ry0+gr.x1[i])*c:][:len(row)]
					p10 := img[(ry1+gr.x0[i])*c:][:len(row)]
					p11 := img[(ry1+gr.x1[i])*c:][:len(row)]
					for ch := range row {
						row[ch] += w00*p00[ch] + w01*p01[ch] + w10*p10[ch] + w11*p11[ch]
					}
				}
			}
			for ch := range row {
				row[ch] *= gr.inv
			}
		}
	})
	if !tp.needs(x) {
		return out
	}
	// The backward pass reads the boxes: keep a copy of them.
	kept := make([][][4]float32, nb)
	for n, b := range boxes {
		kept[n] = append([][4]float32(nil), b...)
	}
	tp.record(out, func(g []float32) {
		gx := tp.grad(x)
		gs := tp.alloc(nb * c) // per image: a row's gradient times inv
		// Parallel over images: an image's boxes overlap, images do not.
		parallelFor(nb, 4*64*c*max(rb, 1), func(lo, hi int) {
			for n := lo; n < hi; n++ {
				img := gx[n*plane : (n+1)*plane]
				sc := gs[n*c : (n+1)*c]
				for r, box := range kept[n] {
					gr := newROIGrid(box, stride, h, w)
					for ch, v := range g[(n*rb+r)*c : (n*rb+r+1)*c] {
						sc[ch] = v * gr.inv
					}
					for j := range gr.ny {
						fy := gr.fy[j]
						ry0, ry1 := gr.y0[j]*w, gr.y1[j]*w
						for i := range gr.nx {
							fx := gr.fx[i]
							w00, w01 := (1-fx)*(1-fy), fx*(1-fy)
							w10, w11 := (1-fx)*fy, fx*fy
							p00 := img[(ry0+gr.x0[i])*c:][:len(sc)]
							p01 := img[(ry0+gr.x1[i])*c:][:len(sc)]
							p10 := img[(ry1+gr.x0[i])*c:][:len(sc)]
							p11 := img[(ry1+gr.x1[i])*c:][:len(sc)]
							for ch, v := range sc {
								p00[ch] += w00 * v
								p01[ch] += w01 * v
								p10[ch] += w10 * v
								p11[ch] += w11 * v
							}
						}
					}
				}
			}
		})
		tp.free(gs)
	})
	return out
}
