package index

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/xmr-project/xmr/model"
)

// int8Case is one shape for TestInt8Kernels: nv rows of cd codes, stride
// apart, from byte off of their buffer, against n query vectors, over
// elements [k0, k0+span).
type int8Case struct {
	cd, nv, n, stride, off, k0, span int
	edge                             bool // codes of -128, 127 and a few others only
}

// fillCodes sets v to random int8 codes: with edge, whole runs of -128 and
// of 127 and a mix of -128, -127, -1, 0, 1, 127; else uniform over the
// whole range.
func fillCodes(rng *rand.Rand, v []int8, edge bool) {
	if !edge {
		for i := range v {
			v[i] = int8(rng.IntN(256) - 128)
		}
		return
	}
	picks := []int8{-128, -127, -1, 0, 1, 127}
	for i := 0; i < len(v); {
		n := min(len(v)-i, 1+rng.IntN(100))
		mode := rng.IntN(3)
		for j := range n {
			switch mode {
			case 0:
				v[i+j] = -128
			case 1:
				v[i+j] = 127
			default:
				v[i+j] = picks[rng.IntN(len(picks))]
			}
		}
		i += n
	}
}

// TestInt8Kernels holds each int8 kernel that this machine can run to the
// plain definition (int8DotsRef), exactly: random codes over the whole
// int8 range and runs of -128 and 127 on both sides; widths that are and
// are not multiples of a vector (16, 48 and 80 codes against a 64-byte
// register), that cross the kernels' internal spans (1,024) or make one
// call per span as int8Sims does (4,096); spans that start inside a row;
// rows further apart than their length and rows at every byte offset
// from an aligned address; 1 to 37 rows (whole tiles of 2 and 8, rows left
// over, fewer rows than a tile); and 1 to 100 query vectors (1 to 9 groups
// of 12, the last one partial), adding to what out holds. Kernels that
// this CPU lacks are skipped here; scripts/test runs this test under an
// emulated CPU that has them.
func TestInt8Kernels(t *testing.T) {
	cases := []int8Case{
		{cd: 16, nv: 1, n: 1, stride: 16, span: 16},
		{cd: 16, nv: 9, n: 12, stride: 16, span: 16, edge: true},
		{cd: 48, nv: 7, n: 13, stride: 48, span: 48},
		{cd: 48, nv: 8, n: 24, stride: 53, off: 1, k0: 16, span: 32},
		{cd: 80, nv: 3, n: 5, stride: 80, off: 3, span: 80, edge: true},
		{cd: 80, nv: 17, n: 36, stride: 97, span: 80},
		{cd: 1024, nv: 37, n: 12, stride: 1024, span: 1024},
		{cd: 1024, nv: 37, n: 36, stride: 1024, span: 1024, edge: true},
		{cd: 1040, nv: 10, n: 36, stride: 1040, off: 5, k0: 16, span: 1024},
		{cd: 2064, nv: 9, n: 14, stride: 2064, span: 2064, edge: true},
		{cd: 4112, nv: 8, n: 12, stride: 4112, k0: 4096, span: 16},
		{cd: 4112, nv: 16, n: 25, stride: 4112, span: 4096, edge: true},
		{cd: 64, nv: 2, n: 100, stride: 64, span: 64},
		{cd: 64, nv: 11, n: 100, stride: 70, off: 7, k0: 32, span: 32, edge: true},
	}
	for off := range 64 {
		cases = append(cases, int8Case{cd: 96, nv: 10, n: 15, stride: 96 + off%3, off: off, k0: 16 * (off % 4), span: 96 - 16*(off%4), edge: off%2 == 1})
	}
	for _, k := range int8Kernels {
		t.Run(k.name, func(t *testing.T) {
			if !k.has {
				t.Skipf("this CPU cannot run the %s kernel", k.name)
			}
			rng := rand.New(rand.NewPCG(12, 12))
			for _, c := range cases {
				checkInt8Kernel(t, rng, k, c)
			}
		})
	}
}

// checkInt8Kernel runs kernel k on one random instance of c and compares
// its sums with int8DotsRef's.
func checkInt8Kernel(t *testing.T, rng *rand.Rand, k *int8Kernel, c int8Case) {
	t.Helper()
	buf := make([]int8, c.off+(c.nv-1)*c.stride+c.cd+64)
	fillCodes(rng, buf, c.edge)
	codes := buf[c.off:]
	q := make([]int8, c.n*c.cd)
	fillCodes(rng, q, c.edge)
	p := packCodes(q, make([]float32, c.n), c.cd, k)
	ng := (c.n + 11) / 12
	// 16 guard values after the sums: a kernel must not write past them.
	const guard = 16
	got := make([]int32, ng*c.nv*12+guard)
	for i := range got {
		got[i] = int32(rng.IntN(2001) - 1000)
	}
	want := slices.Clone(got)
	k.dots(codes, c.nv, c.stride, p, c.k0, c.span, got[:ng*c.nv*12])
	int8DotsRef(codes, c.nv, c.stride, q, c.n, c.cd, c.k0, c.span, want)
	// The padding vectors of the last group are zero: their sums are
	// what out held.
	if !slices.Equal(got, want) {
		for i := range got {
			if got[i] != want[i] {
				if i >= ng*c.nv*12 {
					t.Fatalf("%+v: the kernel wrote %d past the end of its results", c, i-ng*c.nv*12)
				}
				g, r, w := i/(c.nv*12), i/12%c.nv, i%12
				t.Fatalf("%+v: group %d row %d query %d: kernel %d, definition %d", c, g, r, w, got[i], want[i])
			}
		}
	}
}

// TestInt8Layout checks the query layout the kernels share by hand: code k
// of query vector 12g+w sits at chunk k/16, slot w of its group, in q16 or
// q8, and the running sums are 128 times the sums of the codes before
// each chunk.
func TestInt8Layout(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 13))
	const cd, n = 48, 14
	q := make([]int8, n*cd)
	fillCodes(rng, q, false)
	for _, k := range []*int8Kernel{goInt8, {name: "bytes", bytes: true}} {
		p := packCodes(q, make([]float32, n), cd, k)
		if p.ng != 2 || len(p.scales) != 24 {
			t.Fatalf("%s: %d groups, %d scales for %d vectors", k.name, p.ng, len(p.scales), n)
		}
		for j := range 24 {
			g, w := j/12, j%12
			var sum int32
			for kk := range cd {
				want := int8(0)
				if j < n {
					want = q[j*cd+kk]
				}
				var got int8
				if k.bytes {
					got = p.q8[g*12*cd+(kk/16)*192+w*16+kk%16]
				} else {
					got = int8(p.q16[g][(kk/16)*192+w*16+kk%16])
				}
				if got != want {
					t.Fatalf("%s: query %d code %d is %d, want %d", k.name, j, kk, got, want)
				}
				if k.bytes && kk%16 == 0 {
					if s := p.sums[(g*(cd/16+1)+kk/16)*12+w]; s != 128*sum {
						t.Fatalf("query %d: running sum before code %d is %d, want %d", j, kk, s, 128*sum)
					}
				}
				sum += int32(want)
			}
		}
	}
}

// TestScoreCodesKernelsAgree scores one index of codes with every int8
// kernel this machine runs, through scoreCodes (blocks of items, spans,
// pooling), and wants the very same scores: the kernels' dot products are
// exact integers, so the choice of kernel must not change a score.
func TestScoreCodesKernelsAgree(t *testing.T) {
	rng := rand.New(rand.NewPCG(14, 14))
	const d = 72
	imgs := randomEmbeddings(rng, 200, 40, d)
	codes, scales := quantize(imgs.Vecs, d)
	cv := &codeView{cd: codeDim(d), codes: codes, scales: scales, offsets: imgs.Offsets}
	for _, nq := range []int{1, 12, 30} {
		qv := make([]float32, nq*d)
		fillNormal(rng, qv)
		want, err := scoreCodes(context.Background(), cv, packQueryFor(qv, d, goInt8), model.MrSw, true)
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range int8Kernels {
			if !k.has {
				continue
			}
			got, err := scoreCodes(context.Background(), cv, packQueryFor(qv, d, k), model.MrSw, true)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, want) {
				t.Fatalf("%d query vectors: the %s kernel's scores differ from the portable loops'", nq, k.name)
			}
		}
	}
	t.Logf("int8 kernel in use: %s", Int8Kernel())
}

// BenchmarkInt8Kernels measures each int8 kernel this machine runs on one
// core, on rows and queries that stay in the cache (64 rows of 1,024
// codes against 12 and 36 query vectors), in billions of multiply-adds a
// second: the arithmetic rate without the memory's.
func BenchmarkInt8Kernels(b *testing.B) {
	rng := rand.New(rand.NewPCG(15, 15))
	const nv, cd = 64, 1024
	// The VNNI kernels fetch the rows after theirs ahead, as in a block of
	// items; they must exist here too (see BenchmarkDotsInCache).
	codes := make([]int8, 2*nv*cd)
	fillCodes(rng, codes, false)
	for _, n := range []int{12, 36} {
		q := make([]int8, n*cd)
		fillCodes(rng, q, false)
		for _, k := range int8Kernels {
			b.Run(fmt.Sprintf("%s/q%d", k.name, n), func(b *testing.B) {
				if !k.has {
					b.Skipf("this CPU cannot run the %s kernel", k.name)
				}
				p := packCodes(q, make([]float32, n), cd, k)
				out := make([]int32, p.ng*nv*12)
				for range b.N {
					k.dots(codes, nv, cd, p, 0, cd, out)
				}
				b.ReportMetric(float64(nv*n*cd)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GMAC/s")
			})
		}
	}
}
