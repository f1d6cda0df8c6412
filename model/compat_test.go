package model

import (
	"context"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/xmr-project/xmr/npy"
	"github.com/xmr-project/xmr/tools"
)

// embeddingsOf builds Embeddings of dim-wide vectors, one item per list
// (zero global vectors).
func embeddingsOf(dim int, items ...[][]float32) *Embeddings {
	e := &Embeddings{Dim: dim, Offsets: []int{0}, Global: make([]float32, len(items)*dim)}
	for _, it := range items {
		for k, v := range it {
			if len(v) != dim {
				panic("embeddingsOf: vector of the wrong width")
			}
			e.Vecs = append(e.Vecs, v...)
			e.Pos = append(e.Pos, int32(k))
		}
		e.Offsets = append(e.Offsets, len(e.Pos))
	}
	return e
}

// repeat returns n copies of v.
func repeat(v []float32, n int) [][]float32 {
	out := make([][]float32, n)
	for i := range out {
		out[i] = v
	}
	return out
}

func TestParseCompat(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Compat
		bad  bool
	}{
		{in: "", want: CompatNone},
		{in: "none", want: CompatNone},
		{in: "official", want: CompatOfficial},
		{in: "Official", want: CompatOfficial},
		{in: "teran", bad: true},
	} {
		got, err := ParseCompat(tc.in)
		if tc.bad {
			if err == nil || !strings.Contains(err.Error(), "want official") {
				t.Errorf("ParseCompat(%q) = %v, %v; want an error naming the valid values", tc.in, got, err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("ParseCompat(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}

// TestCompatOfficialByHand checks the official scores on cases small
// enough to compute by hand, beside xmr's own. Unit vectors in 2-d:
// x = (1, 0), y = (0, 1), d = (0.6, 0.8), -d = (-0.6, -0.8).
func TestCompatOfficialByHand(t *testing.T) {
	x, y := []float32{1, 0}, []float32{0, 1}
	d, nd, nx := []float32{0.6, 0.8}, []float32{-0.6, -0.8}, []float32{-1, 0}
	twoRegions := [][]float32{x, y}
	for _, tc := range []struct {
		name          string
		regions       [][]float32
		words         [][]float32
		s             Scoring
		xmr, official float32
	}{
		// Word cosines with (x, y): -d (-0.6, -0.8), d (0.6, 0.8), x (1, 0).
		// xmr: -0.6 + 0.8 + 1. Official: x is not scored, and -d's best
		// region (-0.6) is floored at 0 (2 regions < 36): 0 + 0.8.
		{"MrSw negative word floored", twoRegions, [][]float32{nd, d, x}, MrSw, 1.2, 0.8},
		// Region x's words: -0.6, 0.6, 1; region y's: -0.8, 0.8, 0.
		// xmr: 1 + 0.8. Official (x dropped): 0.6 + 0.8.
		{"MwSr last token dropped", twoRegions, [][]float32{nd, d, x}, MwSr, 1.8, 1.4},
		{"Symm", twoRegions, [][]float32{nd, d, x}, Symm, 3.0, 2.2},
		{"MrAvgw divides by the scored tokens", twoRegions, [][]float32{nd, d, x}, MrAvgw, 0.4, 0.4},
		// Only -d is scored: its best region -0.6 floored at 0. xmr also
		// adds the last token's, -x: max(-1, 0) = 0.
		{"MrSw all negative", twoRegions, [][]float32{nd, nx}, MrSw, -0.6, 0},
		// Region x: max(-0.6, -1) = -0.6 in xmr; official -0.6 floored
		// (1 scored token < 85). Region y: max(-0.8, 0) = 0; official
		// -0.8 floored.
		{"MwSr region's best word floored", twoRegions, [][]float32{nd, nx}, MwSr, -0.6, 0},
		// 36 regions fill the official image: no padding, no floor.
		{"MrSw 36 regions not floored", repeat(x, 36), [][]float32{nd, d}, MrSw, -0.6 + 0.6, -0.6},
		{"MrSw 35 regions floored", repeat(x, 35), [][]float32{nd, d}, MrSw, -0.6 + 0.6, 0},
		// 86 tokens: 85 scored fill the official caption: no floor. Each
		// region's best word is -x: -1 with x, 0 with y.
		{"MwSr 86 tokens not floored", twoRegions, repeat(nx, 86), MwSr, -1, -1},
		{"MwSr 85 tokens floored", twoRegions, repeat(nx, 85), MwSr, -1, 0},
		// An image with no region: every max is over padding, 0.
		{"no region", nil, [][]float32{d, d}, Symm, 0, 0},
		// One token: nothing is scored.
		{"one token", twoRegions, [][]float32{d}, Symm, 0.8 + 0.6 + 0.8, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			img, txt := embeddingsOf(2, tc.regions), embeddingsOf(2, tc.words)
			ctx := context.Background()
			own, err := ScoreMatrixCompat(ctx, img, txt, tc.s, CompatNone)
			if err != nil {
				t.Fatal(err)
			}
			off, err := ScoreMatrixCompat(ctx, img, txt, tc.s, CompatOfficial)
			if err != nil {
				t.Fatal(err)
			}
			if math.Abs(float64(own[0]-tc.xmr)) > 1e-6 || math.Abs(float64(off[0]-tc.official)) > 1e-6 {
				t.Errorf("%s: xmr %v official %v, want %v and %v", tc.s, own[0], off[0], tc.xmr, tc.official)
			}
		})
	}
}

func TestCheckCompat(t *testing.T) {
	x := []float32{1, 0}
	for _, tc := range []struct {
		name    string
		regions int
		tokens  int
		s       Scoring
		err     string // "" when accepted
	}{
		{"full image and caption", 36, 86, MrSw, ""},
		{"empty image", 0, 1, Symm, ""},
		{"37 regions", 37, 5, MrSw, "image 0 has 37 regions"},
		{"87 tokens", 5, 87, MwSr, "caption 0 has 87 tokens"},
		{"no token", 5, 0, MrSw, "caption 0 has 0 scored tokens"},
		{"MrAvgw one token", 5, 1, MrAvgw, "needs at least 2"},
		{"global scoring", 5, 5, Global, "not to global scoring"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			img, txt := embeddingsOf(2, repeat(x, tc.regions)), embeddingsOf(2, repeat(x, tc.tokens))
			_, err := ScoreMatrixCompat(context.Background(), img, txt, tc.s, CompatOfficial)
			switch {
			case tc.err == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Fatalf("got %v, want an error with %q", err, tc.err)
			}
		})
	}
	if err := CheckCompat(embeddingsOf(2), embeddingsOf(2), MrSw, "nonsense"); err == nil {
		t.Error("an unknown compatibility was accepted")
	}
	// xmr's own scoring has none of these limits.
	if err := CheckCompat(embeddingsOf(2, repeat(x, 50)), embeddingsOf(2, nil), Global, CompatNone); err != nil {
		t.Error(err)
	}
}

// compatCase builds the embeddings of the official cross-check: images of
// 36, 36, 35, 17, 1 and 0 regions, captions of 1, 2, 5, 12, 84, 85, 86
// and 86 tokens, dim 24, random unit vectors with a structure that makes
// the floors matter both ways: images 1 and 2 lean to +e0 and caption 3's
// first token to -e0 (its best region is negative: floored on image 2 of
// 35 regions, not on image 1 of 36); captions 4 to 7 lean to +e1 and
// image 0's first region to -e1 (its best word is negative: floored on
// captions of fewer than 85 scored tokens, not on 6 and 7).
func compatCase(rng *rand.Rand) (img, txt *Embeddings) {
	const e = 24
	unit := func(lean int, by float64) []float32 {
		v := make([]float32, e)
		var n float64
		for k := range v {
			x := rng.NormFloat64()
			if k == lean {
				x += by
			}
			v[k] = float32(x)
			n += x * x
		}
		for k := range v {
			v[k] /= float32(math.Sqrt(n))
		}
		return v
	}
	item := func(n, lean int, by float64) [][]float32 {
		out := make([][]float32, n)
		for k := range out {
			out[k] = unit(lean, by)
		}
		return out
	}
	imgs := [][][]float32{item(36, 0, 0), item(36, 0, 6), item(35, 0, 6), item(17, 0, 0), item(1, 0, 0), nil}
	imgs[0][0] = unit(1, -6)
	txts := [][][]float32{item(1, 0, 0), item(2, 0, 0), item(5, 0, 0), item(12, 0, 0), item(84, 1, 6), item(85, 1, 6), item(86, 1, 6), item(86, 1, 6)}
	txts[3][0] = unit(0, -6)
	return embeddingsOf(e, imgs...), embeddingsOf(e, txts...)
}

// TestCompatOfficialMatchesPyTorch is the proof of CompatOfficial:
// tools/official_scores.py lays the same vectors out as the official TERAN
// evaluation does (37 image slots, 88 caption tokens, noise in every slot
// that must not count) and scores them with the official formulas in
// PyTorch, in float32 and float64; xmr's scores must equal both to 1e-6 of
// the matrix's largest score, for MrSw, MwSr, Symm and MrAvgw.
func TestCompatOfficialMatchesPyTorch(t *testing.T) {
	py, err := tools.FindPython(context.Background(), "", "torch", "numpy")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true and no Python with torch and numpy for the PyTorch cross-check: %v", err)
		}
		t.Skipf("PyTorch cross-check skipped (Debian: apt-get install python3-torch python3-numpy; CI=true makes this a failure): %v", err)
	}
	img, txt := compatCase(rand.New(rand.NewPCG(28, 1)))
	// The case is as compatCase says: the floors matter, both ways.
	bestOf := func(a []float32, n, stride, k int) float32 { // max of a[k], a[k+stride], ... (n terms)
		m := a[k]
		for j := 1; j < n; j++ {
			m = max(m, a[k+j*stride])
		}
		return m
	}
	for _, i := range []int{1, 2} { // caption 3's first token on images 1 and 2: rows of 36 and 35 regions
		if b := bestOf(WordAlignments(img, i, txt, 3), img.Count(i), 1, 0); b >= 0 {
			t.Fatalf("caption 3's first token has best region %v >= 0 in image %d", b, i)
		}
	}
	for _, c := range []int{4, 5, 6, 7} { // image 0's first region: column 0 over the scored tokens
		if b := bestOf(WordAlignments(img, 0, txt, c), txt.Count(c)-1, img.Count(0), 0); b >= 0 {
			t.Fatalf("image 0's first region has best word %v >= 0 in caption %d", b, c)
		}
	}
	dir := t.TempDir()
	counts := func(e *Embeddings) []int32 {
		out := make([]int32, e.Len())
		for i := range out {
			out[i] = int32(e.Count(i))
		}
		return out
	}
	for _, w := range []struct {
		name string
		e    *Embeddings
	}{{"img", img}, {"txt", txt}} {
		if err := npy.WriteFile(filepath.Join(dir, w.name+"_vecs.npy"), []int{len(w.e.Pos), w.e.Dim}, w.e.Vecs); err != nil {
			t.Fatal(err)
		}
		if err := npy.WriteFile(filepath.Join(dir, w.name+"_counts.npy"), []int{w.e.Len()}, counts(w.e)); err != nil {
			t.Fatal(err)
		}
	}
	script, err := tools.WriteScript(dir, "official_scores.py")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(ctx, py, script, dir).CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v\n%s", py, script, err, out)
	}
	ni, nt := img.Len(), txt.Len()
	for _, s := range []Scoring{MrSw, MwSr, Symm, MrAvgw} {
		t.Run(string(s), func(t *testing.T) {
			texts, first := txt, 0
			if s == MrAvgw {
				texts, first = txt.Slice(1, nt), 1 // caption 0 has no scored token to divide by
			}
			got, err := ScoreMatrixCompat(context.Background(), img, texts, s, CompatOfficial)
			if err != nil {
				t.Fatal(err)
			}
			own, err := ScoreMatrix(context.Background(), img, texts, s)
			if err != nil {
				t.Fatal(err)
			}
			base := filepath.Join(dir, "official_"+strings.ToLower(string(s)))
			a, err := npy.Read(base + "_f32.npy")
			if err != nil {
				t.Fatal(err)
			}
			if len(a.Shape) != 2 || a.Shape[0] != ni || a.Shape[1] != nt {
				t.Fatalf("shape %v, want (%d, %d)", a.Shape, ni, nt)
			}
			ref := map[string][]float64{"f32": make([]float64, ni*nt), "f64": readFloat64Text(t, base+"_f64.txt", ni*nt)}
			var refDiff float64
			for k, v := range a.Data {
				ref["f32"][k] = float64(v)
				if !math.IsNaN(ref["f64"][k]) { // MrAvgw of caption 0: 0/0
					refDiff = math.Max(refDiff, math.Abs(ref["f32"][k]-ref["f64"][k]))
				}
			}
			t.Logf("%s: the official formulas in float32 and in float64 differ by up to %.2g", s, refDiff)
			for _, prec := range []string{"f32", "f64"} {
				var diff, scale, ownDiff float64
				for i := 0; i < ni; i++ {
					for c := first; c < nt; c++ {
						want := ref[prec][i*nt+c]
						k := i*texts.Len() + c - first
						diff = math.Max(diff, math.Abs(float64(got[k])-want))
						ownDiff = math.Max(ownDiff, math.Abs(float64(own[k])-want))
						scale = math.Max(scale, math.Abs(want))
					}
				}
				t.Logf("%s vs official (%s): max |diff| %.2g, relative to the largest score (%.3g) %.2g; xmr's own scoring differs by up to %.3g", s, prec, diff, scale, diff/scale, ownDiff)
				if diff > 1e-6*scale || math.IsNaN(diff) {
					t.Errorf("%s vs official (%s): max |diff| %.3g > 1e-6 x %.3g", s, prec, diff, scale)
				}
				// The case is built so that the conventions differ: a
				// kernel that ignored compat would fail here.
				if ownDiff < 1e-3 {
					t.Errorf("%s: xmr's own scores equal the official ones (%.3g): the case does not test the compat", s, ownDiff)
				}
			}
		})
	}
}

// readFloat64Text reads n numbers written as text (numpy.savetxt).
func readFloat64Text(t *testing.T, path string, n int) []float64 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b))
	if len(f) != n {
		t.Fatalf("%s: %d numbers, want %d", path, len(f), n)
	}
	out := make([]float64, n)
	for k, s := range f {
		if out[k], err = strconv.ParseFloat(s, 64); err != nil {
			t.Fatalf("%s: number %d: %v", path, k, err)
		}
	}
	return out
}
