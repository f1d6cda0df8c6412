package index

import (
	"context"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/xmr-project/xmr/model"
)

// TestFastscan holds the kernel (AVX2 where the machine has it) to the
// portable loops and both to a naive sum over the codes read back one by
// one, on random codes and tables, including the largest entries (127)
// at the largest subspace count, where the uint16 sums come closest to
// overflowing.
func TestFastscan(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 21))
	for _, c := range []struct {
		m, blocks int
		maxEntry  bool
	}{{4, 1, false}, {8, 3, false}, {64, 2, false}, {256, 5, false}, {512, 2, false}, {512, 2, true}} {
		bs := 16 * c.m
		codes := make([]byte, c.blocks*bs)
		for i := range codes {
			codes[i] = byte(rng.IntN(256))
		}
		lut := make([]byte, 2*bs)
		for i := range lut {
			lut[i] = byte(rng.IntN(pqMaxEntry + 1))
			if c.maxEntry {
				lut[i] = pqMaxEntry
			}
		}
		want := make([]uint16, c.blocks*64)
		for b := 0; b < c.blocks; b++ {
			for j := 0; j < 2; j++ {
				for i := 0; i < pqBlock; i++ {
					var s int
					for sub := 0; sub < c.m; sub++ {
						s += int(lut[j*bs+(sub/2)*32+(sub%2)*16+int(codeAt(codes, c.m, b*pqBlock+i, sub))])
					}
					if s > math.MaxUint16 {
						t.Fatalf("m=%d: sum %d overflows", c.m, s)
					}
					want[b*64+j*32+i] = uint16(s)
				}
			}
		}
		goOut := make([]uint16, len(want))
		fastscanGo(codes, c.blocks, c.m, lut, goOut)
		got := make([]uint16, len(want))
		for i := range got {
			got[i] = 0xdead // fastscan sets, never adds
		}
		fastscan(codes, c.blocks, c.m, lut, got)
		for i := range want {
			if goOut[i] != want[i] || got[i] != want[i] {
				t.Fatalf("m=%d blocks=%d (asm: %v): out[%d] = %d (Go %d), want %d", c.m, c.blocks, hasDotsAsm, i, got[i], goOut[i], want[i])
			}
		}
	}
}

// TestPQShape checks the subspace shapes: covering dim, a multiple of 4,
// within the kernel's limit.
func TestPQShape(t *testing.T) {
	for _, c := range []struct{ dim, dsub, w, m int }{
		{1024, 4, 4, 256}, {1024, 2, 2, 512}, {1024, 1, 2, 512}, {256, 4, 4, 64}, {300, 4, 4, 76}, {5, 4, 4, 4}, {4096, 4, 8, 512},
	} {
		w, m := pqShape(c.dim, c.dsub)
		if w != c.w || m != c.m || m%4 != 0 || m > pqMaxSubspaces || w*m < c.dim {
			t.Errorf("pqShape(%d, %d) = %d, %d; want %d, %d", c.dim, c.dsub, w, m, c.w, c.m)
		}
	}
}

// clustered makes n items of 1..maxVecs unit vectors of dim near a few
// random directions, as encodings of related things are.
func clustered(rng *rand.Rand, n, maxVecs, dim, dirs int) *model.Embeddings {
	return clusteredNoise(rng, n, 1, maxVecs, dim, dirs, 0.6)
}

// clusteredNoise is clustered with minVecs..maxVecs vectors an item and
// noise of the given norm (before normalisation) around the directions.
func clusteredNoise(rng *rand.Rand, n, minVecs, maxVecs, dim, dirs int, noise float32) *model.Embeddings {
	centres := randomEmbeddings(rng, dirs, 1, dim)
	for centres.Vecs == nil || len(centres.Vecs) < dirs*dim {
		centres.Vecs = append(centres.Vecs, randomEmbeddings(rng, 1, 1, dim).Global...)
	}
	e := &model.Embeddings{Dim: dim, Offsets: []int{0}}
	for i := 0; i < n; i++ {
		k := minVecs + rng.IntN(maxVecs-minVecs+1)
		g := make([]float32, dim)
		for j := 0; j < k; j++ {
			c := centres.Vecs[rng.IntN(dirs)*dim:][:dim]
			v := make([]float32, dim)
			var s float64
			for x := range v {
				v[x] = c[x] + noise*float32(rng.NormFloat64())/float32(math.Sqrt(float64(dim)))
				s += float64(v[x]) * float64(v[x])
			}
			for x := range v {
				v[x] /= float32(math.Sqrt(s))
				g[x] += v[x]
			}
			e.Vecs = append(e.Vecs, v...)
			e.Pos = append(e.Pos, int32(j))
		}
		e.Offsets = append(e.Offsets, len(e.Pos))
		e.Global = append(e.Global, g...)
	}
	return e
}

// TestPQEstimateBound checks the two approximations of the PQ path: the
// quantised tables' estimate is within m/2 steps of the dot product with
// the reconstructed (centroid) vector, and the k-means codebook
// reconstructs clustered vectors far better than the plain centroid of
// everything would.
func TestPQEstimateBound(t *testing.T) {
	rng := rand.New(rand.NewPCG(22, 22))
	for _, dim := range []int{64, 100} {
		e := clustered(rng, 150, 8, dim, 12)
		cb := trainPQ(e.Vecs, dim, 4)
		codes := cb.encode(e.Vecs)
		n := len(e.Vecs) / dim
		recon := func(v int) []float32 {
			out := make([]float32, cb.m*cb.dsub)
			for s := 0; s < cb.m; s++ {
				c := int(codeAt(codes, cb.m, v, s))
				copy(out[s*cb.dsub:(s+1)*cb.dsub], cb.centroids[(s*pqCentroids+c)*cb.dsub:])
			}
			return out[:dim]
		}
		// Distortion against that of the mean vector.
		mean := make([]float64, dim)
		for v := 0; v < n; v++ {
			for k, x := range e.Vecs[v*dim : (v+1)*dim] {
				mean[k] += float64(x) / float64(n)
			}
		}
		var dist, base float64
		for v := 0; v < n; v++ {
			r := recon(v)
			for k, x := range e.Vecs[v*dim : (v+1)*dim] {
				dist += (float64(x) - float64(r[k])) * (float64(x) - float64(r[k]))
				base += (float64(x) - mean[k]) * (float64(x) - mean[k])
			}
		}
		if dist > 0.5*base {
			t.Errorf("dim %d: PQ distortion %.3f, the mean's %.3f", dim, dist/float64(n), base/float64(n))
		}
		q := clustered(rng, 1, 7, dim, 12)
		lq := cb.pqLUTs(q.Vecs)
		sums := make([]uint16, pqBlocks(n)*64)
		var worstQ, worstX float64
		for p, lut := range lq.luts {
			fastscan(codes, pqBlocks(n), cb.m, lut, sums)
			for j := 0; j < 2 && 2*p+j < lq.n; j++ {
				qi := 2*p + j
				qv := q.Vecs[qi*dim : (qi+1)*dim]
				for v := 0; v < n; v++ {
					est := float64(lq.scale[qi])*float64(sums[(v/pqBlock)*64+j*32+v%pqBlock]) + float64(lq.bias[qi])
					var dr, dx float64
					r := recon(v)
					for k := range qv {
						dr += float64(qv[k]) * float64(r[k])
						dx += float64(qv[k]) * float64(e.Vecs[v*dim+k])
					}
					bound := float64(cb.m)*float64(lq.scale[qi])/2 + 1e-4
					if math.Abs(est-dr) > bound {
						t.Fatalf("dim %d: estimate %v, reconstructed dot %v: off by more than %v", dim, est, dr, bound)
					}
					worstQ = max(worstQ, math.Abs(est-dr))
					worstX = max(worstX, math.Abs(est-dx))
				}
			}
		}
		t.Logf("dim %d: %d subspaces; distortion %.3f of the mean's %.3f; table rounding up to %.4f, estimate vs exact up to %.3f",
			dim, cb.m, dist/float64(n), base/float64(n), worstQ, worstX)
	}
}

// TestPQRerankMatchesExact searches a small clustered collection on the
// PQ codes with re-ranking of the best 300 of 1,500: the top 10 equal exhaustive
// float32 scoring's, for every scoring and both directions, except
// MrAvgw with an image query, which divides each caption's score by its
// word count, so that near-ties between captions of different lengths
// separate by less than the PQ error: there at least 6 of the 10 must be
// float32's. Items have 4 to 12 vectors, as captions and images do.
func TestPQRerankMatchesExact(t *testing.T) {
	rng := rand.New(rand.NewPCG(23, 23))
	const dim = 128
	items := clusteredNoise(rng, 1500, 4, 12, dim, 64, 0.4)
	dir := t.TempDir()
	path := filepath.Join(dir, "images-000001-0000.seg")
	if err := writeSegment(path, "images", "sha256:test", items, quantizerFor(items)); err != nil {
		t.Fatal(err)
	}
	seg, err := openSegment(path, false)
	if err != nil {
		t.Fatal(err)
	}
	defer seg.close()
	if seg.pq == nil {
		t.Fatal("a new segment has no PQ codes")
	}
	ix := &Index{}
	for qn := 0; qn < 4; qn++ {
		q := clusteredNoise(rng, 1, 4, 12, dim, 64, 0.4)
		for _, s := range []model.Scoring{model.MrSw, model.MwSr, model.Symm, model.MrAvgw} {
			for _, text := range []bool{true, false} {
				want, err := ix.rank(context.Background(), newQuery([]*segment{seg}, q, text, s, &SearchOptions{K: 10, Exact: true, Candidates: -1}))
				if err != nil {
					t.Fatal(err)
				}
				got, err := ix.rank(context.Background(), newQuery([]*segment{seg}, q, text, s, &SearchOptions{K: 10, Rerank: 300, Candidates: -1}))
				if err != nil {
					t.Fatal(err)
				}
				if s == model.MrAvgw && !text {
					// The known weak case: at least 6 of float32's top 10,
					// with their exact scores.
					common := 0
					for _, g := range got {
						for _, w := range want {
							if g.Index == w.Index {
								common++
							}
						}
					}
					if common < 6 {
						t.Fatalf("query %d %s text=%v: %d of float32's top 10", qn, s, text, common)
					}
					t.Logf("query %d MrAvgw, image query: %d of float32's top 10", qn, common)
					continue
				}
				for i := range want {
					if got[i].Index != want[i].Index || math.Abs(float64(got[i].Score-want[i].Score)) > 1e-4 {
						t.Fatalf("query %d %s text=%v: rank %d is item %d (%v), float32 gives %d (%v)", qn, s, text, i+1, got[i].Index, got[i].Score, want[i].Index, want[i].Score)
					}
				}
			}
		}
	}
}

// TestPQSegmentVersions checks that a segment of format version 1 (no PQ
// codes) still opens and is searched on its int8 codes, and that damaged
// PQ sections or shapes are clear errors.
func TestPQSegmentVersions(t *testing.T) {
	rng := rand.New(rand.NewPCG(24, 24))
	items := clustered(rng, 40, 6, 32, 4)
	src := filepath.Join(t.TempDir(), "images-000001-0000.seg")
	if err := writeSegment(src, "images", "sha256:test", items, quantizerFor(items)); err != nil {
		t.Fatal(err)
	}
	h := headerOf(t, src)
	cases := []struct {
		name   string
		damage func(b []byte) []byte
		want   string // "" opens
	}{
		{"version 1 opens", func(b []byte) []byte { binary.LittleEndian.PutUint32(b[8:], 1); return b }, ""},
		{"flipped code", func(b []byte) []byte { b[h.Sections[secPQCodes].Offset+3] ^= 0x40; return b }, `section "pqcodes": checksum mismatch`},
		{"flipped centroid", func(b []byte) []byte { b[h.Sections[secPQCodebook].Offset+1] ^= 0x40; return b }, `section "pqcodebook": checksum mismatch`},
		{"truncated codes", func(b []byte) []byte { return b[:h.Sections[secPQCodes].Offset+10] }, "truncated or corrupt"},
		{"version 2 labelled 3 (compressed)", func(b []byte) []byte { binary.LittleEndian.PutUint32(b[8:], 3); return b }, `section "alphas" missing`},
		{"version 4", func(b []byte) []byte { binary.LittleEndian.PutUint32(b[8:], 4); return b }, "rebuild the index"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b, err := os.ReadFile(src)
			if err != nil {
				t.Fatal(err)
			}
			p := filepath.Join(t.TempDir(), "x.seg")
			if err := os.WriteFile(p, c.damage(b), 0o644); err != nil {
				t.Fatal(err)
			}
			seg, err := openSegment(p, false)
			if c.want != "" {
				if err == nil || !strings.Contains(err.Error(), c.want) {
					t.Fatalf("error %v, want one mentioning %q", err, c.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer seg.close()
			if seg.pq != nil {
				t.Fatal("a version 1 segment has PQ codes")
			}
			q := clustered(rng, 1, 5, 32, 4)
			ix := &Index{}
			got, err := ix.rank(context.Background(), newQuery([]*segment{seg}, q, true, model.MrSw, &SearchOptions{K: 5, Rerank: -1, Candidates: -1}))
			if err != nil || len(got) != 5 {
				t.Fatalf("search of a version 1 segment: %v, %v", got, err)
			}
		})
	}
}

// FuzzParseSegment feeds damaged segment files to the parser: it must
// return an error or a segment, never panic.
func FuzzParseSegment(f *testing.F) {
	rng := rand.New(rand.NewPCG(25, 25))
	p := filepath.Join(f.TempDir(), "seed.seg")
	items := clustered(rng, 5, 3, 16, 2)
	if err := writeSegment(p, "images", "sha256:test", items, quantizerFor(items)); err != nil {
		f.Fatal(err)
	}
	seed, err := os.ReadFile(p)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(seed)
	f.Add(seed[:len(seed)/2])
	whole := [][]byte{seed} // the seeds of each format, for the forged ones below
	// A compressed segment (format version 3).
	qz := quantizerFor(items)
	vecs := items.Vecs[:items.Offsets[items.Len()]*items.Dim]
	cellOf := qz.assign(vecs)
	for _, c := range []ResidualCoder{CoderPQ, CoderDirections} {
		// The PQ-coded seed has coarse codes, the other none.
		rcb := trainResidual("images", vecs, items.Dim, cellOf, qz, 4, c)
		var cc *coarseCoder
		if c == CoderPQ {
			cc = trainCoarse("images", vecs, items.Dim, cellOf, qz, 4, rcb)
		}
		if err := writeCompressedSegment(p, "images", "sha256:test", items, qz, rcb, cc, cellOf); err != nil {
			f.Fatal(err)
		}
		if seed, err = os.ReadFile(p); err != nil {
			f.Fatal(err)
		}
		f.Add(seed)
		whole = append(whole, seed)
	}
	// Forged headers, their checksum valid: items or vectors of 2^62 + n
	// made every section size wrap around int64 and equal the real one,
	// and the parser indexed past the offsets.
	for _, seed := range whole {
		for _, edit := range []func(h *segmentHeader){
			func(h *segmentHeader) { h.Items += 1 << 62 },
			func(h *segmentHeader) { h.Vectors += 1 << 62 },
		} {
			forged, err := forgeBytes(slices.Clone(seed), func(h *segmentHeader, _ []byte) { edit(h) })
			if err != nil {
				f.Fatal(err)
			}
			f.Add(forged)
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) < segPrefix {
			return
		}
		s := &segment{path: "fuzz.seg", data: append([]byte(nil), b...)}
		if err := s.parse(true); err != nil {
			return
		}
		if s.pq != nil {
			q := make([]float32, 3*s.header.Dim)
			for i := range q {
				q[i] = 0.1
			}
			if _, err := scorePQ(context.Background(), s.pq, s.pq.cb.pqLUTs(q), model.MrSw, true); err != nil {
				t.Fatal(err)
			}
		}
		if s.res != nil && s.header.Dim <= 4096 {
			q := make([]float32, 3*s.header.Dim)
			for i := range q {
				q[i] = 0.1
			}
			segs := []*segment{s}
			rq := newResQuery(segs, q, s.header.Dim)
			if _, err := scoreResidual(context.Background(), s.res, rq, model.MrSw, true); err != nil {
				t.Fatal(err)
			}
			if _, err := resCandidates(context.Background(), segs, &query{vecs: q, d: s.header.Dim, text: true, s: model.MrSw, probes: 2, res: rq}, 3); err != nil {
				t.Fatal(err)
			}
		}
		// --explain on the segment's first item, as an image and as a
		// caption: its positions name regions and words.
		if d := s.header.Dim; s.header.Items > 0 && d > 0 && d <= 4096 {
			q := &model.Embeddings{Dim: d, Offsets: []int{0, 2}, Pos: []int32{0, 1}, Vecs: make([]float32, 2*d), Global: make([]float32, d)}
			for i := range q.Vecs {
				q.Vecs[i] = 0.1
			}
			words, boxes := []string{"a", "b"}, [][4]float32{{0, 0, 1, 1}, {0, 0, 0.5, 0.5}}
			explain(model.MatchWords(s.layout.item(0), 0, q, 0), words, boxes)
			explain(model.MatchWords(q, 0, s.layout.item(0), 0), words, boxes)
		}
	})
}

// scoreShapes are the scoring benchmarks' shapes: a 12-word query against
// 5,000 images of 36 regions, and a 36-region image against 25,000
// captions of 12 words, at d = 1024.
var scoreShapes = []struct {
	name             string
	items, nv, nq, d int
	queryIsText      bool
}{{"t2i", 5000, 36, 12, 1024, true}, {"i2t", 25000, 12, 36, 1024, false}}

// BenchmarkScorePQ scores on 4-bit PQ codes one 12-word query against
// 5,000 images of 36 regions and one 36-region image against 25,000
// captions of 12 words, at d = 1024 (compare BenchmarkScoreCodes).
func BenchmarkScorePQ(b *testing.B) {
	for _, c := range scoreShapes {
		b.Run(c.name, func(b *testing.B) {
			rng := rand.New(rand.NewPCG(26, 26))
			w, m := pqShape(c.d, pqDefaultDsub)
			cb := &pqCodebook{dim: c.d, dsub: w, m: m, centroids: make([]float32, m*pqCentroids*w)}
			for i := range cb.centroids {
				cb.centroids[i] = float32(rng.NormFloat64()) / 32
			}
			v := &pqView{cb: cb, codes: make([]byte, pqBlocks(c.items*c.nv)*16*m), offsets: make([]int, c.items+1)}
			for i := range v.codes {
				v.codes[i] = byte(rng.IntN(256))
			}
			for i := range v.offsets {
				v.offsets[i] = i * c.nv
			}
			q := make([]float32, c.nq*c.d)
			fillNormal(rng, q)
			b.SetBytes(int64(len(v.codes)))
			b.ResetTimer()
			for range b.N {
				if _, err := scorePQ(context.Background(), v, cb.pqLUTs(q), model.MrSw, c.queryIsText); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkFastscan runs the kernel on one core over 16 blocks (512
// vectors) of 256 subspaces for one pair of query vectors; the rate it
// reports counts look-ups (vectors x subspaces x 2) as bytes.
func BenchmarkFastscan(b *testing.B) {
	const m, nb = 256, 16
	codes := make([]byte, nb*16*m)
	lut := make([]byte, 2*16*m)
	for i := range codes {
		codes[i] = byte(i * 7)
	}
	out := make([]uint16, nb*64)
	b.SetBytes(nb * pqBlock * m * 2)
	for range b.N {
		fastscan(codes, nb, m, lut, out)
	}
}

// TestScorePQPools holds scorePQ (blocks of items cut across the kernel's
// blocks of 32 vectors, the shortcuts for MrSw) to pooling the matrix of
// estimates scale * sum + bias computed vector by vector with the portable
// kernel, for every scoring and both query sides.
func TestScorePQPools(t *testing.T) {
	rng := rand.New(rand.NewPCG(27, 27))
	const dim = 48
	items := clustered(rng, 700, 9, dim, 20)
	cb := trainPQ(items.Vecs, dim, 4)
	v := &pqView{cb: cb, codes: cb.encode(items.Vecs), offsets: items.Offsets}
	nvec := len(items.Vecs) / dim
	for _, nq := range []int{1, 5, 12} {
		qv := clustered(rng, 1, 1, dim, 20).Vecs
		for len(qv) < nq*dim {
			qv = append(qv, clustered(rng, 1, 1, dim, 20).Vecs...)
		}
		q := cb.pqLUTs(qv[:nq*dim])
		est := make([]float32, nvec*nq) // vectors x query vectors
		sums := make([]uint16, pqBlocks(nvec)*64)
		for p, lut := range q.luts {
			fastscanGo(v.codes, pqBlocks(nvec), cb.m, lut, sums)
			for j := 0; j < 2 && 2*p+j < nq; j++ {
				for x := 0; x < nvec; x++ {
					est[x*nq+2*p+j] = q.scale[2*p+j]*float32(sums[(x/pqBlock)*64+j*32+x%pqBlock]) + q.bias[2*p+j]
				}
			}
		}
		for _, s := range []model.Scoring{model.MrSw, model.MwSr, model.Symm, model.MrAvgw} {
			for _, text := range []bool{true, false} {
				got, err := scorePQ(context.Background(), v, q, s, text)
				if err != nil {
					t.Fatal(err)
				}
				for i := range got {
					a, b := items.Offsets[i], items.Offsets[i+1]
					want := pool(est[a*nq:b*nq], b-a, nq, s, text)
					if math.Abs(float64(got[i]-want)) > 1e-4*(1+math.Abs(float64(want))) {
						t.Fatalf("%d query vectors, %s, text=%v: item %d scores %v, pooled estimates %v", nq, s, text, i, got[i], want)
					}
				}
			}
		}
	}
}
