package synth

import (
	"image"
	"math"
	"math/rand/v2"
)

// The feature extractor. A region's feature vector is computed from the
// rendered pixels inside its box only, in two steps:
//
//  1. a statistics vector of StatsDim numbers (StatNames lists them; each is
//     scaled to be of order 1), computed from per-pixel maps of the whole
//     image: a background estimate, a foreground mask, a colour class per
//     foreground pixel and an edge map;
//  2. a fixed random projection to the feature dimension, f = max(0, s P +
//     noise), where P (StatsDim x dim) is drawn from a seed of its own
//     (ProjectionSeed), never from the world's seed, and the noise is
//     Gaussian with the world's Noise as standard deviation.
//
// Nothing of the scene description (categories, colour names, object ids)
// enters the features: a model that learns from them learns from pixels.

// ExtractorVersion names the extractor; it changes whenever features would.
const ExtractorVersion = "synth-pixstats-v1"

// ProjectionSeed seeds the random projection; it is fixed so that worlds of
// any seed share the extractor.
const ProjectionSeed uint64 = 0x7e7a_5eed_2048

// Extractor thresholds.
const (
	// fgThreshold is the L1 RGB distance from the background estimate above
	// which a pixel is foreground.
	fgThreshold = 64
	// edgeThreshold is the gradient magnitude of that distance above which a
	// pixel is an edge pixel.
	edgeThreshold = 60
	// achromaThreshold is the chroma (max-min of RGB) below which a
	// foreground pixel has no hue.
	achromaThreshold = 48
)

// StatNames names the statistics of a region, in order. Coordinates are
// relative to the box unless stated; "fg" is the foreground mask inside the
// box.
var StatNames = []string{
	// box geometry (8)
	"x1/W", "y1/H", "x2/W", "y2/H", "width/W", "height/H", "sqrt(area/(W*H))", "log(width/height)/2",
	// colour of the whole box, sampled at the pixels of even x and y (6)
	"mean R/255", "mean G/255", "mean B/255", "std R/128", "std G/128", "std B/128",
	// fill (1)
	"fg fraction",
	// colour of the foreground (4)
	"fg mean R/255", "fg mean G/255", "fg mean B/255", "fg std (mean over channels)/128",
	// colour classes of fg pixels, fractions (14): 12 hue bins of 30 degrees
	// centred on 0, 30, ..., 330, then dark and light achromatic
	"hue 0", "hue 30", "hue 60", "hue 90", "hue 120", "hue 150", "hue 180", "hue 210",
	"hue 240", "hue 270", "hue 300", "hue 330", "achromatic dark", "achromatic light",
	// fg centroid offset from the box centre, in box widths/heights (2)
	"fg centroid dx", "fg centroid dy",
	// normalised central moments of fg (3), times 4
	"4 eta20", "4 eta02", "4 eta11",
	// Hu's seven invariant moments of fg, each as sign(h) max(0, (log10|h|+10)/10)
	"hu1", "hu2", "hu3", "hu4", "hu5", "hu6", "hu7",
	// edges (10): edge pixel fraction times 2, mean magnitude/400, and the
	// magnitude-weighted histogram of gradient orientation (mod 180 degrees,
	// 8 bins of 22.5 degrees), fractions
	"edge density", "edge magnitude", "orient 0", "orient 22", "orient 45", "orient 67",
	"orient 90", "orient 112", "orient 135", "orient 157",
	// radial profile of fg around its centroid (6): fractions of fg pixels at
	// distance d/sqrt(area/pi) in [0,.35), [.35,.7), [.7,1), [1,1.3), [1.3,1.7), [1.7,inf)
	"radial 0", "radial 1", "radial 2", "radial 3", "radial 4", "radial 5",
	// fg fraction of each cell of a 3x3 grid over the box, row-major (9)
	"grid 00", "grid 01", "grid 02", "grid 10", "grid 11", "grid 12", "grid 20", "grid 21", "grid 22",
	// compactness: edge pixels squared / (4 pi fg pixels) / 10, capped at 2 (1)
	"compactness",
	// a constant 1, the projection's bias (1)
	"bias",
}

// StatsDim is the length of a region's statistics vector.
const StatsDim = 72

// Stat offsets.
const (
	stGeom    = 0
	stColour  = 8
	stFill    = 14
	stFg      = 15
	stHue     = 19
	stCentre  = 33
	stEta     = 35
	stHu      = 38
	stEdge    = 45
	stRadial  = 55
	stGrid    = 61
	stCompact = 70
	stBias    = 71
)

// extractor holds the per-pixel maps of one image, arranged so that a
// region costs O(rows + foreground and edge pixels in it) rather than
// O(area): row prefix sums give the plain colour sums (over the pixels of
// even x and y), and the foreground and edge pixels are listed row by row.
type extractor struct {
	dist []int32 // L1 distance of each pixel from the background estimate
	bg   [3]int32
	// rp holds row prefix sums of R, G, B, R², G², B² over the even
	// lattice, interleaved: rp[(j*(W/2+1)+i)*6+c] is the sum of channel c
	// over pixels (2k, 2j), k < i.
	rp []uint32
	// Foreground pixels, row by row: row y holds entries fgRow[y] to
	// fgRow[y+1] (ascending x).
	fgRow []int32
	fgX   []uint16
	fgCls []uint8 // 1..12 hue bins; 13 dark; 14 light
	fgRGB [][3]uint8
	// Edge pixels, row by row, likewise.
	edRow []int32
	edX   []uint16
	edBin []uint8 // orientation bin 0..7
	edMag []float32
	fgPix []uint32 // scratch: foreground pixels of a region, x | y<<16
}

func newExtractor() *extractor {
	n := ImageWidth * ImageHeight
	e := &extractor{dist: make([]int32, n), fgRow: make([]int32, ImageHeight+1), edRow: make([]int32, ImageHeight+1),
		fgPix: make([]uint32, 0, n)}
	e.rp = make([]uint32, 6*(ImageWidth/2+1)*(ImageHeight/2))
	return e
}

// prepare computes the per-pixel maps of img (ImageWidth x ImageHeight).
// The background colour is estimated as the per-channel median of the
// image's border pixels; a pixel is foreground when its L1 RGB distance from
// it is at least fgThreshold; an edge pixel is one where the central-
// difference gradient of that distance exceeds edgeThreshold.
func (e *extractor) prepare(img *image.RGBA) {
	w, h := ImageWidth, ImageHeight
	pix, stride := img.Pix, img.Stride
	var hist [3][256]int32
	count := 0
	addBorder := func(x, y int) {
		q := pix[y*stride+4*x:]
		hist[0][q[0]]++
		hist[1][q[1]]++
		hist[2][q[2]]++
		count++
	}
	for x := range w {
		addBorder(x, 0)
		addBorder(x, h-1)
	}
	for y := 1; y < h-1; y++ {
		addBorder(0, y)
		addBorder(w-1, y)
	}
	for c := range 3 {
		acc := int32(0)
		for v := range 256 {
			acc += hist[c][v]
			if 2*int(acc) >= count {
				e.bg[c] = int32(v)
				break
			}
		}
	}
	e.fgX, e.fgCls, e.fgRGB = e.fgX[:0], e.fgCls[:0], e.fgRGB[:0]
	W2 := w/2 + 1
	for y := range h {
		row := pix[y*stride : y*stride+4*w]
		e.fgRow[y] = int32(len(e.fgX))
		if y%2 == 0 {
			var acc [6]uint32
			cur := 6 * (y / 2) * W2
			for i := range w / 2 {
				q := row[8*i : 8*i+3 : 8*i+3]
				r, g, b := uint32(q[0]), uint32(q[1]), uint32(q[2])
				acc[0] += r
				acc[1] += g
				acc[2] += b
				acc[3] += r * r
				acc[4] += g * g
				acc[5] += b * b
				*(*[6]uint32)(e.rp[cur+6*i+6:]) = acc
			}
		}
		for x := range w {
			q := row[4*x : 4*x+3 : 4*x+3]
			r, g, b := int32(q[0]), int32(q[1]), int32(q[2])
			d := abs32(r-e.bg[0]) + abs32(g-e.bg[1]) + abs32(b-e.bg[2])
			e.dist[y*w+x] = d
			if d >= fgThreshold {
				e.fgX = append(e.fgX, uint16(x))
				e.fgCls = append(e.fgCls, colourClass(r, g, b))
				e.fgRGB = append(e.fgRGB, [3]uint8{q[0], q[1], q[2]})
			}
		}
	}
	e.fgRow[h] = int32(len(e.fgX))
	e.edX, e.edBin, e.edMag = e.edX[:0], e.edBin[:0], e.edMag[:0]
	const t2 = edgeThreshold * edgeThreshold
	for y := range h {
		e.edRow[y] = int32(len(e.edX))
		if y == 0 || y == h-1 {
			continue
		}
		for x := 1; x < w-1; x++ {
			p := y*w + x
			gx := e.dist[p+1] - e.dist[p-1]
			gy := e.dist[p+w] - e.dist[p-w]
			m2 := gx*gx + gy*gy
			if m2 <= t2 {
				continue
			}
			a := math.Atan2(float64(gy), float64(gx))
			if a < 0 {
				a += math.Pi
			}
			bin := min(7, int(a*8/math.Pi))
			e.edX = append(e.edX, uint16(x))
			e.edBin = append(e.edBin, uint8(bin))
			e.edMag = append(e.edMag, float32(math.Sqrt(float64(m2))))
		}
	}
	e.edRow[h] = int32(len(e.edX))
}

// lowerBound returns the first index of xs (ascending) with xs[i] >= v.
func lowerBound(xs []uint16, v uint16) int {
	lo, hi := 0, len(xs)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if xs[m] < v {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

// colourClass returns the class of a foreground pixel: 1..12 for hue bins
// of 30 degrees centred on 0, 30, ..., 330; 13 for dark and 14 for light
// pixels of low chroma.
func colourClass(r, g, b int32) uint8 {
	mx, mn := max(r, g, b), min(r, g, b)
	c := mx - mn
	if c < achromaThreshold {
		if mx < 110 {
			return 13
		}
		return 14
	}
	var h float64 // in [0, 6)
	fc := float64(c)
	switch mx {
	case r:
		h = float64(g-b) / fc
		if h < 0 {
			h += 6
		}
	case g:
		h = float64(b-r)/fc + 2
	default:
		h = float64(r-g)/fc + 4
	}
	bin := int(h*2+0.5) % 12
	return uint8(bin + 1)
}

func abs32(v int32) int32 {
	if v < 0 {
		return -v
	}
	return v
}

// radial bin limits, squared, in units of sqrt(area/pi).
var radialLimits = [5]float64{0.35 * 0.35, 0.7 * 0.7, 1, 1.3 * 1.3, 1.7 * 1.7}

// region writes the StatsDim statistics of box (pixels) of img into out.
func (e *extractor) region(img *image.RGBA, box [4]float32, out []float32) {
	out = out[:StatsDim]
	clear(out)
	w, h := ImageWidth, ImageHeight
	x0 := max(0, min(w-1, int(math.Floor(float64(box[0])))))
	y0 := max(0, min(h-1, int(math.Floor(float64(box[1])))))
	x1 := max(x0+1, min(w, int(math.Ceil(float64(box[2])))))
	y1 := max(y0+1, min(h, int(math.Ceil(float64(box[3])))))
	bw, bh := x1-x0, y1-y0

	bwf, bhf := float64(box[2]-box[0]), float64(box[3]-box[1])
	out[stGeom+0] = box[0] / ImageWidth
	out[stGeom+1] = box[1] / ImageHeight
	out[stGeom+2] = box[2] / ImageWidth
	out[stGeom+3] = box[3] / ImageHeight
	out[stGeom+4] = float32(bwf / ImageWidth)
	out[stGeom+5] = float32(bhf / ImageHeight)
	out[stGeom+6] = float32(math.Sqrt(bwf * bhf / (ImageWidth * ImageHeight)))
	out[stGeom+7] = float32(math.Log(bwf/bhf) / 2)
	out[stBias] = 1

	// Cells of the 3x3 grid for each column and row of the box.
	var colCell [ImageWidth]uint8
	var rowCell [ImageHeight]uint8
	for i := range bw {
		colCell[i] = uint8(i * 3 / bw)
	}
	for j := range bh {
		rowCell[j] = uint8(j * 3 / bh)
	}

	// Plain colour sums over the box's pixels of even x and y, from the
	// row prefix sums.
	var acc [6]uint64
	W2 := w/2 + 1
	i0, i1 := (x0+1)/2, (x1+1)/2 // even x in [x0, x1) are 2i, i in [i0, i1)
	rows := 0
	for y := (y0 + 1) &^ 1; y < y1; y += 2 {
		a, b := (*[6]uint32)(e.rp[6*(y/2*W2+i0):]), (*[6]uint32)(e.rp[6*(y/2*W2+i1):])
		for k := range 6 {
			acc[k] += uint64(b[k] - a[k])
		}
		rows++
	}
	var sum, sq [3]float64
	for k := range 3 {
		sum[k], sq[k] = float64(acc[k]), float64(acc[3+k])
	}
	ns := float64(max(1, rows*(i1-i0))) // sampled pixels

	// Foreground and edge pixels, row by row. Moments use integer
	// coordinates relative to the box (central moments do not depend on the
	// origin) and are combined per row.
	var (
		fgSum, fgSq        [3]int64
		hue                [14]int64
		grid               [9]int64
		orient             [8]float64
		fg, edges          int64
		magSum             float64
		m10, m01, m20, m11 float64
		m02, m30, m21, m12 float64
		m03                float64
	)
	fgPix := e.fgPix[:0]
	ux0, ux1 := uint16(x0), uint16(x1)
	for j := range bh {
		y := y0 + j
		xs := e.fgX[e.fgRow[y]:e.fgRow[y+1]]
		base := int(e.fgRow[y])
		rc := int(rowCell[j]) * 3
		var cnt, sx, sx2, sx3 int64
		for k := lowerBound(xs, ux0); k < len(xs) && xs[k] < ux1; k++ {
			i := int(xs[k]) - x0
			q := &e.fgRGB[base+k]
			r, g, b := int64(q[0]), int64(q[1]), int64(q[2])
			fgSum[0] += r
			fgSum[1] += g
			fgSum[2] += b
			fgSq[0] += r * r
			fgSq[1] += g * g
			fgSq[2] += b * b
			hue[e.fgCls[base+k]-1]++
			grid[rc+int(colCell[i])]++
			xi := int64(i)
			cnt++
			sx += xi
			sx2 += xi * xi
			sx3 += xi * xi * xi
			fgPix = append(fgPix, uint32(i)|uint32(j)<<16)
		}
		if exs := e.edX[e.edRow[y]:e.edRow[y+1]]; len(exs) > 0 {
			eb := int(e.edRow[y])
			for k := lowerBound(exs, ux0); k < len(exs) && exs[k] < ux1; k++ {
				m := float64(e.edMag[eb+k])
				edges++
				magSum += m
				orient[e.edBin[eb+k]] += m
			}
		}
		if cnt == 0 {
			continue
		}
		fy := float64(j)
		c, x1s, x2s, x3s := float64(cnt), float64(sx), float64(sx2), float64(sx3)
		fg += cnt
		m10 += x1s
		m01 += c * fy
		m20 += x2s
		m11 += fy * x1s
		m02 += c * fy * fy
		m30 += x3s
		m21 += fy * x2s
		m12 += fy * fy * x1s
		m03 += c * fy * fy * fy
	}
	e.fgPix = fgPix
	n := float64(bw * bh)
	for c := range 3 {
		mean := sum[c] / ns
		out[stColour+c] = float32(mean / 255)
		out[stColour+3+c] = float32(math.Sqrt(math.Max(0, sq[c]/ns-mean*mean)) / 128)
	}
	out[stFill] = float32(float64(fg) / n)
	if edges > 0 {
		out[stEdge] = float32(2 * float64(edges) / n)
		out[stEdge+1] = float32(magSum / float64(edges) / 400)
		for k := range 8 {
			out[stEdge+2+k] = float32(orient[k] / magSum)
		}
	}
	// Grid cells have unequal pixel counts when the box size is not a
	// multiple of 3: count them.
	var cellCols, cellRows [3]int
	for i := range bw {
		cellCols[colCell[i]]++
	}
	for j := range bh {
		cellRows[rowCell[j]]++
	}
	for k := range 9 {
		if cells := cellRows[k/3] * cellCols[k%3]; cells > 0 {
			out[stGrid+k] = float32(float64(grid[k]) / float64(cells))
		}
	}
	if fg == 0 {
		return
	}
	nf := float64(fg)
	var fgStd float64
	for c := range 3 {
		mean := float64(fgSum[c]) / nf
		out[stFg+c] = float32(mean / 255)
		fgStd += math.Sqrt(math.Max(0, float64(fgSq[c])/nf-mean*mean))
	}
	out[stFg+3] = float32(fgStd / 3 / 128)
	for k := range 14 {
		out[stHue+k] = float32(float64(hue[k]) / nf)
	}
	cx, cy := m10/nf, m01/nf // of pixel corners; +0.5 for pixel centres
	out[stCentre] = float32((cx + 0.5 - float64(bw)/2) / float64(bw))
	out[stCentre+1] = float32((cy + 0.5 - float64(bh)/2) / float64(bh))
	// Central moments from raw moments.
	mu20 := m20 - cx*m10
	mu02 := m02 - cy*m01
	mu11 := m11 - cx*m01
	mu30 := m30 - 3*cx*m20 + 2*cx*cx*m10
	mu03 := m03 - 3*cy*m02 + 2*cy*cy*m01
	mu21 := m21 - 2*cx*m11 - cy*m20 + 2*cx*cx*m01
	mu12 := m12 - 2*cy*m11 - cx*m02 + 2*cy*cy*m10
	s2, s3 := nf*nf, math.Pow(nf, 2.5)
	n20, n02, n11 := mu20/s2, mu02/s2, mu11/s2
	n30, n03, n21, n12 := mu30/s3, mu03/s3, mu21/s3, mu12/s3
	out[stEta] = float32(4 * n20)
	out[stEta+1] = float32(4 * n02)
	out[stEta+2] = float32(4 * n11)
	a, b := n30+n12, n21+n03
	c, d := n30-3*n12, 3*n21-n03
	hu := [7]float64{
		n20 + n02,
		(n20-n02)*(n20-n02) + 4*n11*n11,
		c*c + d*d,
		a*a + b*b,
		c*a*(a*a-3*b*b) + d*b*(3*a*a-b*b),
		(n20-n02)*(a*a-b*b) + 4*n11*a*b,
		d*a*(a*a-3*b*b) - c*b*(3*a*a-b*b),
	}
	for k, v := range hu {
		out[stHu+k] = float32(logScale(v))
	}
	// Radial profile around the centroid.
	var radial [6]int64
	inv := math.Pi / nf // 1 / (area/pi)
	for _, pq := range fgPix {
		dx, dy := float64(pq&0xffff)-cx, float64(pq>>16)-cy
		t := (dx*dx + dy*dy) * inv
		k := 0
		for k < 5 && t >= radialLimits[k] {
			k++
		}
		radial[k]++
	}
	for k := range 6 {
		out[stRadial+k] = float32(float64(radial[k]) / nf)
	}
	out[stCompact] = float32(math.Min(2, float64(edges)*float64(edges)/(4*math.Pi*nf)/10))
}

// logScale maps a moment invariant h to sign(h) max(0, (log10|h|+10)/10):
// |h| in [1e-10, 1] becomes [0, 1].
func logScale(h float64) float64 {
	if h == 0 {
		return 0
	}
	v := math.Max(0, (math.Log10(math.Abs(h))+10)/10)
	if h < 0 {
		return -v
	}
	return v
}

// ProjectionStd is the standard deviation of the projection's entries.
const ProjectionStd = 0.35355339059327373 // 1/sqrt(8)

// Projection returns the fixed random projection for dimension dim: a
// StatsDim x dim row-major matrix of independent Gaussians with standard
// deviation ProjectionStd. Column j depends on j alone (it is drawn from its own
// stream of ProjectionSeed), so a smaller dim is a prefix of a larger one.
func Projection(dim int) []float32 {
	p := make([]float32, StatsDim*dim)
	src := rand.NewPCG(0, 0)
	r := rand.New(src)
	for j := range dim {
		src.Seed(seeds(ProjectionSeed, tagProjection, j))
		for i := range StatsDim {
			p[i*dim+j] = float32(r.NormFloat64() * ProjectionStd)
		}
	}
	return p
}
