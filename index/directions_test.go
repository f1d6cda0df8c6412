package index

import (
	"context"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/xmr-project/xmr/model"
)

// gaussianRows returns n vectors of d drawn from a Gaussian whose standard
// deviation along the k-th of d random orthonormal directions is sigma(k).
func gaussianRows(rng *rand.Rand, n, d int, sigma func(k int) float64) []float32 {
	basis := make([][]float64, d)
	for k := range basis {
		v := make([]float64, d)
		for {
			for e := range v {
				v[e] = rng.NormFloat64()
			}
			for _, b := range basis[:k] {
				var dot float64
				for e := range v {
					dot += v[e] * b[e]
				}
				for e := range v {
					v[e] -= dot * b[e]
				}
			}
			var norm float64
			for _, x := range v {
				norm += x * x
			}
			if norm > 1e-6 {
				for e := range v {
					v[e] /= math.Sqrt(norm)
				}
				break
			}
		}
		basis[k] = v
	}
	out := make([]float32, n*d)
	for i := range n {
		for k, b := range basis {
			z := sigma(k) * rng.NormFloat64()
			for e := range b {
				out[i*d+e] += float32(z * b[e])
			}
		}
	}
	return out
}

// dirSquaredError encodes vecs (rows of cb.dim) with the direction coder
// cb and returns the mean squared error of the decoded vectors.
func dirSquaredError(cb *pqCodebook, vecs []float32) float64 {
	d, k := cb.dim, cb.dir.k
	n := len(vecs) / d
	y := make([]float32, n*k)
	var tmp []float32
	cb.dir.coords(vecs, d, y, &tmp)
	blk := make([]byte, 16*cb.m)
	codes := make([]byte, cb.m)
	out := make([]float32, d)
	var sum float64
	for i := range n {
		cb.encodeDirs(blk, 0, y[i*k:(i+1)*k])
		for s := range codes {
			codes[s] = codeAt(blk, cb.m, 0, s)
		}
		clear(out)
		cb.addDirs(codes, out)
		for e, x := range vecs[i*d : (i+1)*d] {
			sum += float64(x-out[e]) * float64(x-out[e])
		}
	}
	return sum / float64(n)
}

// TestTrainDirections checks the direction coder against product
// quantisation at the same bytes: on residuals whose variance falls along
// a few directions it errs far less, and the writer keeps it; on
// isotropic ones product quantisation errs less and is kept. The error
// the training reports is that of encoding and decoding the sample.
func TestTrainDirections(t *testing.T) {
	const n, d, dsub = 4000, 32, 2
	_, m := pqShape(d, dsub)
	for _, tc := range []struct {
		name   string
		sigma  func(k int) float64
		better bool // the direction coder should err less
	}{
		{"falling variance", func(k int) float64 { return math.Pow(0.7, float64(k)) }, true},
		{"isotropic", func(int) float64 { return 1 }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(5, uint64(len(tc.name))))
			vecs := gaussianRows(rng, n, d, tc.sigma)
			dir, dirErr := trainDirections(vecs, d, m)
			pqErr := trainPQ(vecs, d, dsub).squaredError(vecs)
			t.Logf("mean squared error: directions %.4g, PQ %.4g", dirErr, pqErr)
			if got := dirSquaredError(dir, vecs); math.Abs(got-dirErr) > 1e-3*dirErr {
				t.Fatalf("the training reports a mean squared error of %.6g, encoding and decoding gives %.6g", dirErr, got)
			}
			if dir.m != m || dir.dir.k > min(m, d) {
				t.Fatalf("%d subspaces over %d directions, want %d over at most %d", dir.m, dir.dir.k, m, min(m, d))
			}
			if tc.better && !(dirErr < 0.5*pqErr) {
				t.Fatalf("directions err %.4g, want under half of PQ's %.4g", dirErr, pqErr)
			}
			if !tc.better && !(pqErr < dirErr) {
				t.Fatalf("PQ errs %.4g, want under the directions' %.4g on isotropic vectors", pqErr, dirErr)
			}
			// The writer's choice: one item a vector, one cell.
			e := &model.Embeddings{Dim: d, Offsets: make([]int, n+1), Vecs: vecs, Pos: make([]int32, n), Global: make([]float32, n*d)}
			for i := range e.Offsets {
				e.Offsets[i] = i
			}
			qz := &quantizer{cells: 1, d: d, centroids: append([]float32{1}, make([]float32, d-1)...)}
			got := trainResidual("images", vecs, d, make([]uint16, n), qz, dsub, CoderAuto)
			if (got.dir != nil) != tc.better {
				t.Fatalf("the writer kept the direction coder: %v, want %v", got.dir != nil, tc.better)
			}
		})
	}
}

func TestNearestLevel(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 9))
	lv := make([]float32, pqCentroids)
	xs := make([]float32, 500)
	for i := range xs {
		xs[i] = float32(rng.NormFloat64())
	}
	lloyd(xs, lv)
	for c := 1; c < len(lv); c++ {
		if lv[c] < lv[c-1] {
			t.Fatalf("levels %v not ascending", lv)
		}
	}
	var lloydErr, quantileErr float64
	for _, x := range append(xs, -10, 10, lv[0], lv[15], (lv[3]+lv[4])/2) {
		got := nearestLevel(x, lv)
		best := 0
		for c := range lv {
			if math.Abs(float64(x-lv[c])) < math.Abs(float64(x-lv[best])) {
				best = c
			}
		}
		if math.Abs(float64(x-lv[got]))-math.Abs(float64(x-lv[best])) > 1e-6 { // a midpoint may round either way
			t.Fatalf("nearestLevel(%v) = %d (%v), level %d (%v) is nearer", x, got, lv[got], best, lv[best])
		}
	}
	// Lloyd's levels err less than the quantiles they start from.
	q := make([]float32, pqCentroids)
	sorted := slices.Sorted(slices.Values(xs))
	for c := range q {
		q[c] = sorted[(2*c+1)*len(xs)/(2*pqCentroids)]
	}
	for _, x := range xs {
		lloydErr += math.Pow(float64(x-lv[nearestLevel(x, lv)]), 2)
		quantileErr += math.Pow(float64(x-q[nearestLevel(x, q)]), 2)
	}
	if !(lloydErr < quantileErr) {
		t.Fatalf("squared error %.4g with Lloyd's levels, %.4g with the quantiles", lloydErr, quantileErr)
	}
}

// TestDirectionsCorrupt checks that a direction coder's subspace naming a
// direction it lacks is refused, naming the section.
func TestDirectionsCorrupt(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 4))
	const d = 32
	objects := randomObjects(rng, 10, d)
	e, _ := clusteredItems(rng, 60, 6, d, objects)
	s := compressedSegment(t, e, 2, CoderDirections)
	if s.res.cb.dir == nil || s.header.PQ.Directions != s.res.cb.dir.k {
		t.Fatalf("header names %d directions, the coder has %v", s.header.PQ.Directions, s.res.cb.dir)
	}
	b, err := os.ReadFile(s.path)
	if err != nil {
		t.Fatal(err)
	}
	sec := s.header.Sections[secResDirOf]
	b[sec.Offset] = 0xff // subspace 0 now codes direction 255 (or more)
	b[sec.Offset+1] = 0xff
	bad := filepath.Join(t.TempDir(), "bad.seg")
	if err := os.WriteFile(bad, b, 0o644); err != nil {
		t.Fatal(err)
	}
	seg := &segment{path: bad, data: b}
	if err := seg.parse(true); err == nil || !strings.Contains(err.Error(), secResDirOf) {
		t.Fatalf("a subspace naming direction 65535: error %v, want one naming %q", err, secResDirOf)
	}
}

// TestResCandidatesProbeMore checks that stage 2 of a compressed search
// probes more cells than asked when the asked ones list too few items for
// the candidates wanted.
func TestResCandidatesProbeMore(t *testing.T) {
	rng := rand.New(rand.NewPCG(6, 6))
	const d, items = 32, 2000
	objects := randomObjects(rng, 50, d)
	e, _ := clusteredItems(rng, items, 12, d, objects)
	s := compressedSegment(t, e, 2, CoderAuto)
	v := s.res
	q := queryNear(rng, objects, 4)
	rq := newResQuery([]*segment{s}, q, d)
	// The items listed in each query vector's best cell.
	met := map[int32]bool{}
	t0 := rq.tables[v.id]
	for w := range 4 {
		best := 0
		for c := range v.cells {
			if t0[c*4+w] > t0[best*4+w] {
				best = c
			}
		}
		for _, it := range v.listItems[v.listOff[best]:v.listOff[best+1]] {
			met[it] = true
		}
	}
	const want = items / 2
	if len(met) >= want {
		t.Fatalf("the best cells list %d items: the test needs fewer than %d", len(met), want)
	}
	qq := &query{vecs: q, d: d, text: true, s: model.MrSw, probes: 1, res: rq}
	got, err := resCandidates(context.Background(), []*segment{s}, qq, want)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != want {
		t.Fatalf("%d candidates with 1 probe (the best cells list %d items), want %d", len(got), len(met), want)
	}
}

// TestInteractionMrSw checks that centroid interaction's MrSw path for text
// queries gives exactly the pooled matrix's scores.
func TestInteractionMrSw(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	const d = 32
	objects := randomObjects(rng, 10, d)
	e, _ := clusteredItems(rng, 200, 9, d, objects)
	s := compressedSegment(t, e, 2, CoderAuto)
	v := s.res
	q := queryNear(rng, objects, 5)
	rq := newResQuery([]*segment{s}, q, d)
	tab := rq.tables[v.id]
	var sc interactScratch
	for i := range e.Len() {
		got := sc.rate(v, tab, 5, i, model.MrSw, true)
		x0, x1 := v.offsets[i], v.offsets[i+1]
		sims := make([]float32, 0, (x1-x0)*5)
		for x := x0; x < x1; x++ {
			for qi := range 5 {
				sims = append(sims, alphaValue(v.alphas[x])*tab[int(v.cellOf[x])*5+qi])
			}
		}
		if want := pool(sims, x1-x0, 5, model.MrSw, true); got != want {
			t.Fatalf("item %d: centroid interaction %v, pooled matrix %v", i, got, want)
		}
	}
}
