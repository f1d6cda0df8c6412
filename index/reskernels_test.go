package index

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/xmr-project/xmr/model"
)

// TestInteract checks the centroid interaction of text queries (stage 3
// of a compressed search), through the kernel where the machine has one
// and in Go, against interactScratch.rate's pooled scores, bit for bit:
// items with and without vectors, query lengths on and off the kernel's
// 8-float chunks, runs longer than its fetch-ahead.
func TestInteract(t *testing.T) {
	for _, nq := range []int{1, 7, 8, 12, 16, 17, 33, 70} {
		rng := rand.New(rand.NewPCG(uint64(nq), 9))
		const cells, items = 37, 300
		v := &resView{cells: cells, offsets: make([]int, items+1)}
		for i := range items {
			n := rng.IntN(41) // 0 to 40 vectors
			if i%17 == 0 {
				n = 0
			}
			v.offsets[i+1] = v.offsets[i] + n
			for range n {
				v.cellOf = append(v.cellOf, uint16(rng.IntN(cells)))
				v.alphas = append(v.alphas, int8(rng.IntN(256)-128))
			}
		}
		table := make([]float32, cells*nq)
		for k := range table {
			table[k] = float32(rng.NormFloat64())
		}
		table[3] = 0 // ties between vectors at zero
		p := padTable(table, cells, nq)
		var rows []int32
		for i := range items {
			if rng.IntN(3) > 0 {
				rows = append(rows, int32(i))
			}
		}
		want := make([]float32, len(rows))
		for k, i := range rows {
			want[k] = poolText(v, table, nq, int(i))
		}
		got := make([]float32, len(rows))
		interact(v, p, nq, rows, make([]float32, p.stride), got)
		goGot := make([]float32, len(rows))
		interactGo(v, p, nq, rows, goGot)
		for k := range rows {
			if math.Float32bits(got[k]) != math.Float32bits(want[k]) || math.Float32bits(goGot[k]) != math.Float32bits(want[k]) {
				t.Fatalf("nq %d, item %d: interact %v (kernel %v), interactGo %v, pooled %v", nq, rows[k], got[k], hasDotsAsm, goGot[k], want[k])
			}
		}
	}
}

// poolText is the text-query MrSw centroid interaction of item i through
// pool: the matrix of every vector's cosine times each query vector's
// centroid product, each column's best, summed.
func poolText(v *resView, t []float32, nq, i int) float32 {
	x0, x1 := v.offsets[i], v.offsets[i+1]
	sims := make([]float32, 0, (x1-x0)*nq)
	for x := x0; x < x1; x++ {
		a := alphaValue(v.alphas[x])
		for _, ct := range t[int(v.cellOf[x])*nq : int(v.cellOf[x]+1)*nq] {
			sims = append(sims, a*ct)
		}
	}
	return pool(sims, x1-x0, nq, model.MrSw, true)
}

// TestExactAdd checks the kernel that decodes a vector's residual codes
// through a query's exact tables against exactAddGo, bit for bit, for
// query lengths on and off its 8-float chunks, and codesOf against codeAt.
func TestExactAdd(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 1))
	for _, c := range []struct{ nq, m int }{{1, 4}, {8, 16}, {12, 128}, {16, 64}, {17, 32}, {33, 8}, {70, 256}} {
		ft := make([]float32, c.nq*c.m*16)
		for k := range ft {
			ft[k] = float32(rng.NormFloat64())
		}
		stride := tableStride(c.nq)
		tab := transposeExact(ft, c.nq, c.m, stride)
		codes := make([]byte, c.m)
		for s := range codes {
			codes[s] = byte(rng.IntN(16))
		}
		got, want := make([]float32, stride), make([]float32, stride)
		for j := range c.nq {
			got[j] = float32(rng.NormFloat64())
			want[j] = got[j]
		}
		goGot := slices.Clone(got)
		exactAdd(codes, tab, stride, got)
		exactAddGo(codes, tab, stride, goGot)
		// The sums from the query's tables as floatTables lays them out,
		// subspace by subspace.
		for j := range c.nq {
			for s, code := range codes {
				want[j] += ft[(j*c.m+s)*16+int(code)]
			}
		}
		for j := range stride {
			if math.Float32bits(got[j]) != math.Float32bits(want[j]) || math.Float32bits(goGot[j]) != math.Float32bits(want[j]) {
				t.Fatalf("nq %d, m %d, lane %d: exactAdd %v, exactAddGo %v, want %v", c.nq, c.m, j, got[j], goGot[j], want[j])
			}
		}
	}
	// codesOf reads every subspace's code of every vector of a block.
	const m, n = 12, 70
	codes := make([]byte, pqBlocks(n)*16*m)
	for k := range codes {
		codes[k] = byte(rng.IntN(256))
	}
	out := make([]byte, m)
	for x := range n {
		codesOf(codes, m, x, out)
		for s := range m {
			if out[s] != codeAt(codes, m, x, s) {
				t.Fatalf("vector %d, subspace %d: codesOf %d, codeAt %d", x, s, out[s], codeAt(codes, m, x, s))
			}
		}
	}
}

// TestScoreText checks the kernel that scores text queries from fast-scan
// sums against scoreTextGo: items with and without vectors, vectors
// starting anywhere in a block and crossing blocks, odd and even query
// lengths. (Within a rounding: Go may fuse the multiply-add.)
func TestScoreText(t *testing.T) {
	for _, nq := range []int{1, 2, 7, 12, 33} {
		rng := rand.New(rand.NewPCG(uint64(nq), 4))
		const items = 60
		offsets := make([]int, items+1)
		offsets[0] = 5 + rng.IntN(40) // the run's first vector, from the view's start
		for i := range items {
			n := rng.IntN(50)
			if i%11 == 0 {
				n = 0
			}
			offsets[i+1] = offsets[i] + n
		}
		nv := offsets[items] - offsets[0]
		base := rng.IntN(pqBlock)
		nb := pqBlocks(base + nv)
		sims := make([]float32, nv*nq)
		for k := range sims {
			sims[k] = float32(rng.NormFloat64())
		}
		sums := make([]uint16, (nq+1)/2*nb*64)
		for k := range sums {
			sums[k] = uint16(rng.IntN(4096))
		}
		scale, bias := make([]float32, nq), make([]float32, nq)
		for j := range nq {
			scale[j], bias[j] = float32(rng.Float64()/100), float32(rng.NormFloat64())
		}
		got, want := make([]float32, items), make([]float32, items)
		scoreText(sims, nq, sums, nb, base, offsets, scale, bias, got)
		scoreTextGo(sims, nq, sums, nb, base, offsets, scale, bias, want)
		for k := range items {
			if math.Abs(float64(got[k]-want[k])) > 1e-5*(1+math.Abs(float64(want[k]))) || (offsets[k] == offsets[k+1] && got[k] != 0) {
				t.Fatalf("nq %d, item %d (%d vectors): scoreText %v, scoreTextGo %v", nq, k, offsets[k+1]-offsets[k], got[k], want[k])
			}
		}
	}
}

// BenchmarkInteract times stage 3's centroid interaction of a text query
// of 12 words with 24,000 items of 36 vectors spread over a segment of
// 500,000 (so that their cells are not in the caches, as in a search),
// through the kernel and in Go.
func BenchmarkInteract(b *testing.B) {
	rng := rand.New(rand.NewPCG(3, 7))
	const cells, items, nv, nq, rated = 4096, 500000, 36, 12, 24000
	v := &resView{cells: cells, offsets: make([]int, items+1), cellOf: make([]uint16, items*nv), alphas: make([]int8, items*nv)}
	for i := range v.offsets {
		v.offsets[i] = i * nv
	}
	for x := range v.cellOf {
		v.cellOf[x], v.alphas[x] = uint16(rng.IntN(cells)), int8(rng.IntN(255)-127)
	}
	table := make([]float32, cells*nq)
	for k := range table {
		table[k] = float32(rng.NormFloat64())
	}
	p := padTable(table, cells, nq)
	rows := make([]int32, 0, rated)
	for i := range items {
		if rng.IntN(items) < rated {
			rows = append(rows, int32(i))
		}
	}
	out, best := make([]float32, len(rows)), make([]float32, p.stride)
	for _, c := range []struct {
		name string
		f    func()
	}{
		{"kernel", func() { interact(v, p, nq, rows, best, out) }},
		{"go", func() { interactGo(v, p, nq, rows, out) }},
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				c.f()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(rows)), "ns/item")
		})
	}
}
