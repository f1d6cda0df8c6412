package synth

import (
	"image"
	"math"
	"testing"
)

// lone renders one object of category cat, colour red, radius 18, at the
// image centre on a plain grey background and returns the image and the
// object.
func lone(cat int) (*image.RGBA, Object) {
	s := Scene{BgRGB: [3]uint8{200, 200, 200}}
	s.Objects = []Object{{Category: cat, Colour: 0, Large: true, X: 80, Y: 60, Radius: 18, RGB: Colours[0].RGB}}
	img := Render(&s)
	return img, s.Objects[0]
}

// mask returns which pixels are drawn (red dominates).
func mask(img *image.RGBA) []bool {
	m := make([]bool, ImageWidth*ImageHeight)
	for y := range ImageHeight {
		for x := range ImageWidth {
			p := img.PixOffset(x, y)
			m[y*ImageWidth+x] = int(img.Pix[p])-int(img.Pix[p+1]) > 80
		}
	}
	return m
}

func isRed(img *image.RGBA, x, y int) bool {
	p := img.PixOffset(x, y)
	return int(img.Pix[p])-int(img.Pix[p+1]) > 80
}

func TestShapesDistinct(t *testing.T) {
	masks := make([][]bool, len(Categories))
	for c := range Categories {
		img, o := lone(c)
		masks[c] = mask(img)
		area := 0
		for _, v := range masks[c] {
			if v {
				area++
			}
		}
		if area < 150 || area > 1018+60 {
			t.Errorf("%s: area %d", Categories[c].Name, area)
		}
		b := o.Box
		if b[0] < 80-22 || b[2] > 80+22 || b[1] < 60-22 || b[3] > 60+22 || b[2]-b[0] < 10 || b[3]-b[1] < 10 {
			t.Errorf("%s: box %v", Categories[c].Name, b)
		}
	}
	// Pixel probes: offsets from the centre that tell shapes apart.
	probes := []struct {
		cat    int
		dx, dy int
		red    bool
	}{
		{Circle, 0, 0, true}, {Circle, 15, 0, true}, {Circle, 15, 15, false},
		{Square, 0, 0, true}, {Square, 11, 11, true}, {Square, 0, 16, false},
		{Triangle, 0, -14, true}, {Triangle, -12, -8, false}, {Triangle, -12, 7, true},
		{Star, 0, 0, true}, {Star, 0, -15, true}, {Star, 0, 12, false},
		{Cross, 0, 0, true}, {Cross, 14, 0, true}, {Cross, 11, 11, false},
		{Diamond, 0, 0, true}, {Diamond, 0, -15, true}, {Diamond, 9, 9, false},
		{Hexagon, 0, 0, true}, {Hexagon, 15, 0, true}, {Hexagon, 0, -14, true}, {Hexagon, 12, -13, false},
		{Ring, 0, 0, false}, {Ring, 14, 0, true}, {Ring, 0, -14, true},
		{Crescent, -14, 0, true}, {Crescent, 0, 0, false},
		{Arrow, 0, -15, true}, {Arrow, 0, 12, true}, {Arrow, 10, 10, false},
	}
	for _, p := range probes {
		img, _ := lone(p.cat)
		if got := isRed(img, 80+p.dx, 60+p.dy); got != p.red {
			t.Errorf("%s at (%+d,%+d): drawn %v, want %v", Categories[p.cat].Name, p.dx, p.dy, got, p.red)
		}
	}
	// Masks differ pairwise.
	for a := range masks {
		for b := a + 1; b < len(masks); b++ {
			inter, union := 0, 0
			for i := range masks[a] {
				if masks[a][i] && masks[b][i] {
					inter++
				}
				if masks[a][i] || masks[b][i] {
					union++
				}
			}
			// A hexagon covers 83% of its circumcircle: the masks overlap
			// most, and edges (straight, at 0/60/120 degrees) tell them apart.
			if j := float64(inter) / float64(union); j > 0.88 {
				t.Errorf("%s and %s look alike: mask IoU %.2f", Categories[a].Name, Categories[b].Name, j)
			}
		}
	}
}

func TestColoursDistinct(t *testing.T) {
	for i, a := range Colours {
		for j := i + 1; j < len(Colours); j++ {
			b := Colours[j]
			d := 0
			for c := range 3 {
				d += abs(int(a.RGB[c]) - int(b.RGB[c]))
			}
			if d < 80 {
				t.Errorf("%s and %s are close: L1 %d", a.Name, b.Name, d)
			}
		}
		// Every colour stands out from every background by more than the
		// foreground threshold even when every channel loses 31 levels to
		// jitter, texture and noise (object 12, background 6, gradient 4,
		// sinusoid 4, noise 5).
		for _, bg := range Backgrounds {
			d := 0
			for c := range 3 {
				d += max(0, abs(int(a.RGB[c])-int(bg.RGB[c]))-31)
			}
			if d < fgThreshold+10 {
				t.Errorf("%s on %s: worst-case L1 %d", a.Name, bg.Name, d)
			}
		}
	}
}

func abs(v int) int {
	if v < 0 {
		return -v
	}
	return v
}

// regionRef is a direct, slow transcription of the statistics documented in
// StatNames, to check the fast extractor against.
func regionRef(img *image.RGBA, box [4]float32) []float64 {
	out := make([]float64, StatsDim)
	W, H := float64(ImageWidth), float64(ImageHeight)
	// background: median of border pixels
	var border [3][]int
	for y := range ImageHeight {
		for x := range ImageWidth {
			if x == 0 || y == 0 || x == ImageWidth-1 || y == ImageHeight-1 {
				c := img.RGBAAt(x, y)
				border[0] = append(border[0], int(c.R))
				border[1] = append(border[1], int(c.G))
				border[2] = append(border[2], int(c.B))
			}
		}
	}
	var bg [3]int
	for c := range 3 {
		v := border[c]
		for i := range v { // insertion sort, small
			for j := i; j > 0 && v[j] < v[j-1]; j-- {
				v[j], v[j-1] = v[j-1], v[j]
			}
		}
		bg[c] = v[(len(v)-1)/2]
	}
	dist := func(x, y int) int {
		c := img.RGBAAt(x, y)
		return abs(int(c.R)-bg[0]) + abs(int(c.G)-bg[1]) + abs(int(c.B)-bg[2])
	}
	x0, y0 := int(math.Floor(float64(box[0]))), int(math.Floor(float64(box[1])))
	x1, y1 := int(math.Ceil(float64(box[2]))), int(math.Ceil(float64(box[3])))
	bw, bh := float64(box[2]-box[0]), float64(box[3]-box[1])
	copy(out, []float64{float64(box[0]) / W, float64(box[1]) / H, float64(box[2]) / W, float64(box[3]) / H, bw / W, bh / H,
		math.Sqrt(bw * bh / (W * H)), math.Log(bw/bh) / 2})
	out[stBias] = 1
	n := float64((x1 - x0) * (y1 - y0))
	var sum, sq, fs, fq [3]float64
	var fx, fy []float64
	var hue [14]float64
	var grid, cells [9]float64
	var orient [8]float64
	edges, mag := 0.0, 0.0
	ns := 0.0
	for y := y0; y < y1; y++ {
		for x := x0; x < x1; x++ {
			c := img.RGBAAt(x, y)
			rgb := [3]float64{float64(c.R), float64(c.G), float64(c.B)}
			cell := (y-y0)*3/(y1-y0)*3 + (x-x0)*3/(x1-x0)
			cells[cell]++
			if x%2 == 0 && y%2 == 0 {
				ns++
				for k := range 3 {
					sum[k] += rgb[k]
					sq[k] += rgb[k] * rgb[k]
				}
			}
			if x > 0 && y > 0 && x < ImageWidth-1 && y < ImageHeight-1 {
				gx, gy := float64(dist(x+1, y)-dist(x-1, y)), float64(dist(x, y+1)-dist(x, y-1))
				if m := math.Hypot(gx, gy); m > edgeThreshold {
					edges++
					mag += m
					a := math.Atan2(gy, gx)
					if a < 0 {
						a += math.Pi
					}
					orient[min(7, int(a*8/math.Pi))] += m
				}
			}
			if dist(x, y) < fgThreshold {
				continue
			}
			for k := range 3 {
				fs[k] += rgb[k]
				fq[k] += rgb[k] * rgb[k]
			}
			hue[colourClass(int32(c.R), int32(c.G), int32(c.B))-1]++
			grid[cell]++
			fx = append(fx, float64(x-x0)+0.5)
			fy = append(fy, float64(y-y0)+0.5)
		}
	}
	for k := range 3 {
		m := sum[k] / ns
		out[stColour+k] = m / 255
		out[stColour+3+k] = math.Sqrt(math.Max(0, sq[k]/ns-m*m)) / 128
	}
	nf := float64(len(fx))
	out[stFill] = nf / n
	if edges > 0 {
		out[stEdge] = 2 * edges / n
		out[stEdge+1] = mag / edges / 400
		for k := range 8 {
			out[stEdge+2+k] = orient[k] / mag
		}
	}
	for k := range 9 {
		out[stGrid+k] = grid[k] / cells[k]
	}
	if nf == 0 {
		return out
	}
	std := 0.0
	for k := range 3 {
		m := fs[k] / nf
		out[stFg+k] = m / 255
		std += math.Sqrt(math.Max(0, fq[k]/nf-m*m))
	}
	out[stFg+3] = std / 3 / 128
	for k := range 14 {
		out[stHue+k] = hue[k] / nf
	}
	var cx, cy float64
	for i := range fx {
		cx += fx[i]
		cy += fy[i]
	}
	cx, cy = cx/nf, cy/nf
	out[stCentre] = (cx - float64(x1-x0)/2) / float64(x1-x0)
	out[stCentre+1] = (cy - float64(y1-y0)/2) / float64(y1-y0)
	mu := func(p, q int) float64 {
		s := 0.0
		for i := range fx {
			s += math.Pow(fx[i]-cx, float64(p)) * math.Pow(fy[i]-cy, float64(q))
		}
		return s / math.Pow(nf, 1+float64(p+q)/2)
	}
	n20, n02, n11 := mu(2, 0), mu(0, 2), mu(1, 1)
	n30, n03, n21, n12 := mu(3, 0), mu(0, 3), mu(2, 1), mu(1, 2)
	out[stEta], out[stEta+1], out[stEta+2] = 4*n20, 4*n02, 4*n11
	hu := []float64{
		n20 + n02,
		math.Pow(n20-n02, 2) + 4*n11*n11,
		math.Pow(n30-3*n12, 2) + math.Pow(3*n21-n03, 2),
		math.Pow(n30+n12, 2) + math.Pow(n21+n03, 2),
		(n30-3*n12)*(n30+n12)*(math.Pow(n30+n12, 2)-3*math.Pow(n21+n03, 2)) + (3*n21-n03)*(n21+n03)*(3*math.Pow(n30+n12, 2)-math.Pow(n21+n03, 2)),
		(n20-n02)*(math.Pow(n30+n12, 2)-math.Pow(n21+n03, 2)) + 4*n11*(n30+n12)*(n21+n03),
		(3*n21-n03)*(n30+n12)*(math.Pow(n30+n12, 2)-3*math.Pow(n21+n03, 2)) - (n30-3*n12)*(n21+n03)*(3*math.Pow(n30+n12, 2)-math.Pow(n21+n03, 2)),
	}
	for k, v := range hu {
		out[stHu+k] = logScale(v)
	}
	req2 := nf / math.Pi
	limits := []float64{0.35, 0.7, 1, 1.3, 1.7}
	for i := range fx {
		d := math.Sqrt((math.Pow(fx[i]-cx, 2) + math.Pow(fy[i]-cy, 2)) / req2)
		k := 0
		for k < 5 && d >= limits[k] {
			k++
		}
		out[stRadial+k] += 1 / nf
	}
	out[stCompact] = math.Min(2, edges*edges/(4*math.Pi*nf)/10)
	return out
}

func TestExtractorMatchesReference(t *testing.T) {
	if len(StatNames) != StatsDim {
		t.Fatalf("%d stat names for %d stats", len(StatNames), StatsDim)
	}
	_, imgs := sample(t, 6, Config{Seed: 10, Dim: 8})
	e := newExtractor()
	got := make([]float32, StatsDim)
	for _, img := range imgs {
		e.prepare(img.Pixels)
		for r, reg := range img.Regions {
			e.region(img.Pixels, reg.Box, got)
			want := regionRef(img.Pixels, reg.Box)
			for k := range StatsDim {
				tol := 1e-4 + 1e-3*math.Abs(want[k])
				if k >= stHu && k < stHu+7 {
					tol = 0.02 // logs of tiny high-order invariants
				}
				if math.Abs(float64(got[k])-want[k]) > tol {
					t.Errorf("%s region %d (%v): %s = %v, reference %v", img.ID, r, reg.Kind, StatNames[k], got[k], want[k])
				}
			}
		}
	}
}
