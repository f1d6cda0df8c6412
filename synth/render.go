package synth

import (
	"image"
	"math"
)

// Shapes are drawn from signed distance functions: for every pixel of the
// object's bounding square, the distance sd (pixels, negative inside) from the
// pixel centre to the outline gives a coverage clamp(0.5-sd, 0, 1) that
// blends the object's colour over what is below (one pixel of
// anti-aliasing). Polygons use the exact polygon distance; the circle, ring
// and crescent are analytic.

type vec struct{ x, y float64 }

// unitPolygons are the polygon outlines in unit coordinates (circumradius
// about 1, y pointing down, "up" is -y).
var unitPolygons = map[int][]vec{
	Square:   {{-0.72, -0.72}, {0.72, -0.72}, {0.72, 0.72}, {-0.72, 0.72}},
	Triangle: {{0, -1}, {0.866, 0.5}, {-0.866, 0.5}},
	Star:     starVerts(5, 1, 0.42),
	Cross: {{-0.3, -0.95}, {0.3, -0.95}, {0.3, -0.3}, {0.95, -0.3}, {0.95, 0.3}, {0.3, 0.3},
		{0.3, 0.95}, {-0.3, 0.95}, {-0.3, 0.3}, {-0.95, 0.3}, {-0.95, -0.3}, {-0.3, -0.3}},
	Diamond: {{0, -1}, {0.66, 0}, {0, 1}, {-0.66, 0}},
	Hexagon: regularVerts(6, 1, 0),
	Arrow:   {{0, -1}, {0.72, -0.12}, {0.28, -0.12}, {0.28, 0.95}, {-0.28, 0.95}, {-0.28, -0.12}, {-0.72, -0.12}},
}

func starVerts(points int, outer, inner float64) []vec {
	v := make([]vec, 0, 2*points)
	for k := 0; k < 2*points; k++ {
		r := outer
		if k%2 == 1 {
			r = inner
		}
		a := -math.Pi/2 + float64(k)*math.Pi/float64(points)
		v = append(v, vec{r * math.Cos(a), r * math.Sin(a)})
	}
	return v
}

func regularVerts(n int, r, phase float64) []vec {
	v := make([]vec, n)
	for k := range v {
		a := phase + 2*math.Pi*float64(k)/float64(n)
		v[k] = vec{r * math.Cos(a), r * math.Sin(a)}
	}
	return v
}

// outline is an object's shape in pixel coordinates, ready for distance
// queries. Polygon storage lives in the fixed arrays, so setting an outline
// allocates nothing.
type outline struct {
	cat  int
	c    vec       // centre
	r    float64   // radius
	c2   vec       // crescent: centre of the cut-out circle
	r2   float64   // crescent: its radius
	v    []vec     // polygon vertices
	e    []vec     // e[i] = v[i-1] - v[i] (indices mod n)
	inv  []float64 // 1 / |e[i]|^2
	vbuf [12]vec
	ebuf [12]vec
	ibuf [12]float64
}

// set prepares the outline of o: vertices scaled, rotated and translated.
func (ol *outline) set(o *Object) {
	ol.cat, ol.c, ol.r = o.Category, vec{o.X, o.Y}, o.Radius
	sin, cos := math.Sincos(o.Angle)
	switch o.Category {
	case Crescent:
		off := vec{0.45, -0.2}
		ol.c2 = vec{o.X + o.Radius*(off.x*cos-off.y*sin), o.Y + o.Radius*(off.x*sin+off.y*cos)}
		ol.r2 = 0.82 * o.Radius
	case Circle, Ring:
	default:
		u := unitPolygons[o.Category]
		ol.v, ol.e, ol.inv = ol.vbuf[:len(u)], ol.ebuf[:len(u)], ol.ibuf[:len(u)]
		for i, p := range u {
			ol.v[i] = vec{o.X + o.Radius*(p.x*cos-p.y*sin), o.Y + o.Radius*(p.x*sin+p.y*cos)}
		}
		n := len(u)
		for i := range n {
			j := (i + n - 1) % n
			e := vec{ol.v[j].x - ol.v[i].x, ol.v[j].y - ol.v[i].y}
			ol.e[i] = e
			ol.inv[i] = 1 / (e.x*e.x + e.y*e.y)
		}
	}
}

// dist returns the signed distance in pixels from (px, py) to the outline.
func (ol *outline) dist(px, py float64) float64 {
	dx, dy := px-ol.c.x, py-ol.c.y
	switch ol.cat {
	case Circle:
		return math.Sqrt(dx*dx+dy*dy) - ol.r
	case Ring: // annulus between 0.45r and r
		return math.Abs(math.Sqrt(dx*dx+dy*dy)-0.725*ol.r) - 0.275*ol.r
	case Crescent:
		d1 := math.Sqrt(dx*dx+dy*dy) - ol.r
		ex, ey := px-ol.c2.x, py-ol.c2.y
		d2 := ol.r2 - math.Sqrt(ex*ex+ey*ey)
		return math.Max(d1, d2)
	}
	// Exact signed distance to a polygon (after Inigo Quilez): the smallest
	// distance to an edge, negative when a crossing count says inside.
	v := ol.v
	wx, wy := px-v[0].x, py-v[0].y
	d := wx*wx + wy*wy
	inside := false
	n := len(v)
	for i := range n {
		j := i - 1
		if j < 0 {
			j = n - 1
		}
		e := ol.e[i]
		wx, wy = px-v[i].x, py-v[i].y
		t := (wx*e.x + wy*e.y) * ol.inv[i]
		t = math.Max(0, math.Min(1, t))
		bx, by := wx-e.x*t, wy-e.y*t
		if bb := bx*bx + by*by; bb < d {
			d = bb
		}
		c1 := py >= v[i].y
		c2 := py < v[j].y
		c3 := e.x*wy > e.y*wx
		if (c1 && c2 && c3) || (!c1 && !c2 && !c3) {
			inside = !inside
		}
	}
	if inside {
		return -math.Sqrt(d)
	}
	return math.Sqrt(d)
}

// renderer draws scenes into a reused RGBA image.
type renderer struct {
	img  *image.RGBA
	ol   outline
	colT []int
	rowT []int
}

func newRenderer() *renderer {
	return &renderer{
		img:  image.NewRGBA(image.Rect(0, 0, ImageWidth, ImageHeight)),
		colT: make([]int, ImageWidth),
		rowT: make([]int, ImageHeight),
	}
}

// Render draws s and returns a new image; it sets every object's Box.
func Render(s *Scene) *image.RGBA {
	r := newRenderer()
	r.render(s)
	return r.img
}

// render draws s into r.img: the textured background, the objects in order,
// then per-pixel noise (uniform, -5..5 per channel). It sets each object's
// Box to the bounding box of the pixels it covers by at least a half.
func (r *renderer) render(s *Scene) {
	w, h := ImageWidth, ImageHeight
	pix := r.img.Pix
	for x := range w {
		r.colT[x] = int(math.Round(float64(s.GradX)*(float64(x)/float64(w)-0.5) + s.TexAmp*math.Sin(s.TexFreq[0]*float64(x)+s.TexPhase[0])))
	}
	for y := range h {
		r.rowT[y] = int(math.Round(float64(s.GradY)*(float64(y)/float64(h)-0.5) + s.TexAmp*math.Sin(s.TexFreq[1]*float64(y)+s.TexPhase[1])))
	}
	br, bg, bb := int(s.BgRGB[0]), int(s.BgRGB[1]), int(s.BgRGB[2])
	for y := range h {
		row := pix[y*r.img.Stride : y*r.img.Stride+4*w]
		ry := r.rowT[y]
		for x := range w {
			t := ry + r.colT[x]
			row[4*x] = clampByte(br + t)
			row[4*x+1] = clampByte(bg + t)
			row[4*x+2] = clampByte(bb + t)
			row[4*x+3] = 255
		}
	}
	for i := range s.Objects {
		r.drawObject(&s.Objects[i])
	}
	// One hash gives the noise of two pixels: six bytes, each mapped to
	// -5..5 (nearly uniformly) by noiseLUT.
	seed := s.NoiseSeed
	for p := 0; p < w*h; p += 2 {
		n := mix(seed + uint64(p))
		q := pix[4*p : 4*p+7 : 4*p+7]
		q[0] = clampByte(int(q[0]) + int(noiseLUT[n&0xff]))
		q[1] = clampByte(int(q[1]) + int(noiseLUT[n>>8&0xff]))
		q[2] = clampByte(int(q[2]) + int(noiseLUT[n>>16&0xff]))
		q[4] = clampByte(int(q[4]) + int(noiseLUT[n>>24&0xff]))
		q[5] = clampByte(int(q[5]) + int(noiseLUT[n>>32&0xff]))
		q[6] = clampByte(int(q[6]) + int(noiseLUT[n>>40&0xff]))
	}
}

// noiseLUT maps a random byte to a pixel noise value in -5..5.
var noiseLUT = func() (t [256]int8) {
	for i := range t {
		t[i] = int8(i%11 - 5)
	}
	return t
}()

// drawObject blends o into the image. The bounding square is walked in
// 4x4 blocks: the signed distance is 1-Lipschitz, so one evaluation at a
// block's centre decides blocks that lie wholly outside (skipped) or wholly
// inside (filled); only blocks near the outline are evaluated per pixel.
func (r *renderer) drawObject(o *Object) {
	const blk = 4
	const reach = 1.5*math.Sqrt2 + 0.5 // centre to farthest pixel centre, plus the AA half-width
	ol := &r.ol
	ol.set(o)
	ext := 1.1*o.Radius + 1
	x0, x1 := max(0, int(o.X-ext)), min(ImageWidth, int(o.X+ext)+2)
	y0, y1 := max(0, int(o.Y-ext)), min(ImageHeight, int(o.Y+ext)+2)
	bx0, by0, bx1, by1 := ImageWidth, ImageHeight, -1, -1
	col := [3]int{int(o.RGB[0]), int(o.RGB[1]), int(o.RGB[2])}
	pix, stride := r.img.Pix, r.img.Stride
	for by := y0; by < y1; by += blk {
		ey := min(by+blk, y1)
		for bx := x0; bx < x1; bx += blk {
			ex := min(bx+blk, x1)
			sd := ol.dist(float64(bx+ex)/2, float64(by+ey)/2)
			if sd >= reach {
				continue
			}
			full := sd <= -reach
			for y := by; y < ey; y++ {
				for x := bx; x < ex; x++ {
					cov := 256
					if !full {
						d := ol.dist(float64(x)+0.5, float64(y)+0.5)
						if d >= 0.5 {
							continue
						}
						if d > -0.5 {
							cov = int((0.5 - d) * 256)
						}
					}
					q := pix[y*stride+4*x : y*stride+4*x+3 : y*stride+4*x+3]
					for c := range 3 {
						q[c] = uint8(int(q[c]) + ((col[c]-int(q[c]))*cov)>>8)
					}
					if cov >= 128 {
						bx0, by0, bx1, by1 = min(bx0, x), min(by0, y), max(bx1, x), max(by1, y)
					}
				}
			}
		}
	}
	if bx1 < 0 { // nothing covered (cannot happen for placed objects)
		bx0, by0, bx1, by1 = int(o.X), int(o.Y), int(o.X), int(o.Y)
	}
	o.Box = [4]int{bx0, by0, bx1 + 1, by1 + 1}
}
