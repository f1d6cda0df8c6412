package model

import (
	"context"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/xmr-project/xmr/tensor"
)

// randomEncoded makes n items of l normalised vectors of e floats with the
// given mask (n*l entries), positions counting the masked-in slots, and
// normalised random global vectors.
func randomEncoded(rng *rand.Rand, n, l, e int, mask []float32) *Encoded {
	var tp *tensor.Tape
	pos := make([]int32, n*l)
	for i := range pos {
		pos[i] = -1
		if mask[i] != 0 {
			pos[i] = int32(i % l)
		}
	}
	return &Encoded{
		Vecs:   tp.L2Normalize(tensor.RandN(rng, n, l, e), 1e-12),
		Mask:   tensor.FromData(mask, n, l),
		Pos:    pos,
		Global: tp.L2Normalize(tensor.RandN(rng, n, e), 1e-12),
	}
}

// naiveScore computes the score of image b and caption c from the
// definitions, with plain loops over the masked vectors.
func naiveScore(img, txt *Encoded, b, c int, s Scoring) float64 {
	l1, e := img.Vecs.Shape[1], img.Vecs.Shape[2]
	l2 := txt.Vecs.Shape[1]
	dot := func(x, y []float32) float64 {
		var v float64
		for k := range x {
			v += float64(x[k]) * float64(y[k])
		}
		return v
	}
	switch s {
	case Global:
		return dot(img.Global.Data[b*e:(b+1)*e], txt.Global.Data[c*e:(c+1)*e])
	case Order:
		var v float64
		for k := 0; k < e; k++ {
			d := math.Max(0, float64(img.Global.Data[b*e+k])-float64(txt.Global.Data[c*e+k]))
			v -= d * d
		}
		return v
	}
	region := func(r int) []float32 { return img.Vecs.Data[(b*l1+r)*e : (b*l1+r+1)*e] }
	word := func(w int) []float32 { return txt.Vecs.Data[(c*l2+w)*e : (c*l2+w+1)*e] }
	rm := func(r int) bool { return img.Mask.Data[b*l1+r] != 0 }
	wm := func(w int) bool { return txt.Mask.Data[c*l2+w] != 0 }
	mrsw, mwsr, words := 0.0, 0.0, 0
	for w := 0; w < l2; w++ {
		if !wm(w) {
			continue
		}
		words++
		best, any := math.Inf(-1), false
		for r := 0; r < l1; r++ {
			if rm(r) {
				best, any = math.Max(best, dot(region(r), word(w))), true
			}
		}
		if any {
			mrsw += best
		}
	}
	for r := 0; r < l1; r++ {
		if !rm(r) {
			continue
		}
		best, any := math.Inf(-1), false
		for w := 0; w < l2; w++ {
			if wm(w) {
				best, any = math.Max(best, dot(region(r), word(w))), true
			}
		}
		if any {
			mwsr += best
		}
	}
	switch s {
	case MwSr:
		return mwsr
	case Symm:
		return mrsw + mwsr
	case MrAvgw:
		return mrsw / math.Max(float64(words), 1)
	}
	return mrsw
}

// TestTrainingAndInferenceScoresAgree holds the autodiff scores
// (Similarity, training) and the fast kernel (ScoreMatrix on Embeddings:
// evaluation, demo, index) equal to each other and to the definitions, on
// random inputs with padding, an image with no region and a caption with
// no word.
func TestTrainingAndInferenceScoresAgree(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	const nImg, nTxt, l1, l2, e = 37, 600, 5, 7, 16 // several blocks of ScoreMatrix
	imask := make([]float32, nImg*l1)
	for i := range imask {
		if rng.Float32() < 0.7 {
			imask[i] = 1
		}
	}
	for r := 0; r < l1; r++ {
		imask[3*l1+r] = 0 // image 3 has no region
	}
	tmask := make([]float32, nTxt*l2)
	for i := range tmask {
		if rng.Float32() < 0.6 {
			tmask[i] = 1
		}
	}
	for w := 0; w < l2; w++ {
		tmask[5*l2+w] = 0 // caption 5 has no word
	}
	img := randomEncoded(rng, nImg, l1, e, imask)
	txt := randomEncoded(rng, nTxt, l2, e, tmask)
	for _, s := range scorings {
		t.Run(string(s), func(t *testing.T) {
			train := Similarity(nil, img, txt, s)
			fast, err := ScoreMatrix(context.Background(), img.Embeddings(), txt.Embeddings(), s)
			if err != nil {
				t.Fatal(err)
			}
			for b := 0; b < nImg; b++ {
				for c := 0; c < nTxt; c++ {
					want := naiveScore(img, txt, b, c, s)
					tr, fa := float64(train.Data[b*nTxt+c]), float64(fast[b*nTxt+c])
					if math.Abs(tr-want) > 1e-4 || math.Abs(fa-want) > 1e-4 {
						t.Fatalf("S[%d,%d]: training %v, inference %v, definition %v", b, c, tr, fa, want)
					}
				}
			}
		})
	}
}

func TestPaddingCannotWinOrAdd(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	img := randomEncoded(rng, 1, 3, 4, []float32{0, 1, 0})
	txt := randomEncoded(rng, 1, 3, 4, []float32{0, 1, 0})
	before := Similarity(nil, img, txt, Symm).Data[0]
	// Make the padded region and word identical to the real ones' best
	// match: they would win every max if masks were ignored.
	copy(img.Vecs.Data[8:12], txt.Vecs.Data[4:8])
	copy(txt.Vecs.Data[8:12], img.Vecs.Data[4:8])
	copy(img.Vecs.Data[0:4], txt.Vecs.Data[4:8])
	after := Similarity(nil, img, txt, Symm).Data[0]
	if before != after {
		t.Fatalf("masked entries changed the score: %v -> %v", before, after)
	}
}

func TestPoolingGradients(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	iv := tensor.RandN(rng, 2, 3, 4)
	tv := tensor.RandN(rng, 2, 4, 4)
	ig := tensor.RandN(rng, 2, 4)
	tg := tensor.RandN(rng, 2, 4)
	imask := tensor.FromData([]float32{0, 1, 1, 0, 1, 0}, 2, 3)
	tmask := tensor.FromData([]float32{0, 1, 1, 0, 0, 1, 1, 1}, 2, 4)
	for _, s := range scorings {
		t.Run(string(s), func(t *testing.T) {
			f := func(tp *tensor.Tape) *tensor.Tensor {
				img := &Encoded{Vecs: tp.L2Normalize(iv, 1e-12), Mask: imask, Global: tp.L2Normalize(ig, 1e-12)}
				txt := &Encoded{Vecs: tp.L2Normalize(tv, 1e-12), Mask: tmask, Global: tp.L2Normalize(tg, 1e-12)}
				return Similarity(tp, img, txt, s)
			}
			if err := tensor.GradCheck(f, []*tensor.Tensor{iv, tv, ig, tg}, tensor.GradCheckOptions{}); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestEncodeMatchesBatch checks that encoding a collection in batches
// gives the vectors of one batch, with masked slots dropped and positions
// mapping back to regions and caption words.
func TestEncodeMatchesBatch(t *testing.T) {
	for _, name := range Names() {
		t.Run(name, func(t *testing.T) {
			m := tinyModel(t, named(name))
			rng := rand.New(rand.NewPCG(7, 7))
			imgs := newTinyImages(rng)
			ctx := context.Background()
			emb, err := EncodeImages(ctx, m, imgs, &EncodeOptions{BatchSize: 2})
			if err != nil {
				t.Fatal(err)
			}
			whole := m.EncodeImages(nil, ImageBatch(imgs, []int{0, 1, 2})).Embeddings()
			if whole.Vecs == nil { // SEAM, VSE++, MEMBER: global vectors only
				checkGlobalOnly(t, m, emb, whole)
				return
			}
			if emb.Len() != 3 || !slices.Equal(emb.Offsets, []int{0, 3, 5, 9}) {
				t.Fatalf("offsets %v, want one vector per real region [0 3 5 9]", emb.Offsets)
			}
			if !slices.Equal(emb.Pos, []int32{0, 1, 2, 0, 1, 0, 1, 2, 3}) {
				t.Fatalf("region positions %v", emb.Pos)
			}
			for k := range emb.Vecs {
				if math.Abs(float64(emb.Vecs[k]-whole.Vecs[k])) > 1e-5 {
					t.Fatalf("vector float %d: %v in batches of 2, %v in one batch", k, emb.Vecs[k], whole.Vecs[k])
				}
			}
			txt, err := EncodeTexts(ctx, m, tinyCaptions, &EncodeOptions{BatchSize: 1})
			if err != nil {
				t.Fatal(err)
			}
			// "a red circle": words 0, 1, 2; no [CLS]/[SEP].
			if got := txt.ItemPos(0); !slices.Equal(got, []int32{0, 1, 2}) {
				t.Fatalf("word positions of caption 0: %v", got)
			}
			if txt.Len() != 3 || txt.Count(1) != 7 {
				t.Fatalf("%d captions, caption 1 has %d vectors, want 3 and 7", txt.Len(), txt.Count(1))
			}
		})
	}
}

// checkGlobalOnly checks the embeddings of a model without region and word
// vectors: images encoded in batches of 2 (emb) equal those encoded at
// once (whole), and captions encoded one by one equal those of one padded
// batch: the padding changes nothing.
func checkGlobalOnly(t *testing.T, m Model, emb, whole *Embeddings) {
	t.Helper()
	if emb.Len() != 3 || !slices.Equal(emb.Offsets, []int{0, 0, 0, 0}) || len(emb.Vecs) != 0 {
		t.Fatalf("offsets %v and %d floats of vectors, want 3 items without vectors", emb.Offsets, len(emb.Vecs))
	}
	closeAll := func(what string, a, b []float32) {
		t.Helper()
		if len(a) != len(b) {
			t.Fatalf("%s: %d and %d floats", what, len(a), len(b))
		}
		for k := range a {
			if math.Abs(float64(a[k]-b[k])) > 1e-5 {
				t.Fatalf("%s, float %d: %v and %v", what, k, a[k], b[k])
			}
		}
	}
	closeAll("image global vectors in batches of 2 and of 3", emb.Global, whole.Global)
	one, err := EncodeTexts(context.Background(), m, tinyCaptions, &EncodeOptions{BatchSize: 1})
	if err != nil {
		t.Fatal(err)
	}
	padded := m.EncodeTexts(nil, TextBatch(m, tinyCaptions)).Embeddings()
	closeAll("caption global vectors alone and padded", one.Global, padded.Global)
}

func TestEncodeImagesChecksWidth(t *testing.T) {
	m := tinyModel(t, func(c *Config) { c.ImageModel.FeatDim = 7 })
	_, err := EncodeImages(context.Background(), m, newTinyImages(rand.New(rand.NewPCG(1, 1))), nil)
	if err == nil {
		t.Fatal("6-d features encoded by a model of 7-d features")
	}
}

func TestMatchWords(t *testing.T) {
	// Two regions along the axes; caption words along region 1, region 0,
	// then a second token of word 1 that must not count twice.
	images := &Embeddings{Dim: 2, Offsets: []int{0, 2}, Vecs: []float32{1, 0, 0, 1}, Pos: []int32{4, 9}, Global: []float32{1, 0}}
	texts := &Embeddings{Dim: 2, Offsets: []int{0, 3}, Vecs: []float32{0, 1, 1, 0, 0, 1}, Pos: []int32{2, 5, 5}, Global: []float32{1, 0}}
	got := MatchWords(images, 0, texts, 0)
	want := []WordMatch{{Word: 2, Region: 9, Cosine: 1}, {Word: 5, Region: 4, Cosine: 1}}
	if !slices.Equal(got, want) {
		t.Fatalf("MatchWords = %+v, want %+v", got, want)
	}
}

func TestTopK(t *testing.T) {
	nan := float32(math.NaN())
	cases := []struct {
		scores []float32
		k      int
		want   []int
	}{
		{[]float32{0.1, 0.9, 0.5, 0.9}, 3, []int{1, 3, 2}},
		{[]float32{0.1, nan, 0.2}, 3, []int{2, 0, 1}},
		{[]float32{1, 2}, 5, []int{1, 0}},
		{nil, 3, nil},
		{[]float32{1}, 0, nil},
	}
	for _, c := range cases {
		var got []int
		for _, h := range TopK(c.scores, c.k) {
			got = append(got, h.Index)
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("TopK(%v, %d) = %v, want %v", c.scores, c.k, got, c.want)
		}
	}
}

func BenchmarkScoreMatrix(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 1))
	const nImg, nTxt, l1, l2, e = 100, 500, 37, 14, 256
	mask := func(n int) []float32 {
		m := make([]float32, n)
		for i := range m {
			m[i] = 1
		}
		return m
	}
	img := randomEncoded(rng, nImg, l1, e, mask(nImg*l1)).Embeddings()
	txt := randomEncoded(rng, nTxt, l2, e, mask(nTxt*l2)).Embeddings()
	b.ResetTimer()
	for range b.N {
		if _, err := ScoreMatrix(context.Background(), img, txt, MrSw); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkScoreOneQuery scores one 12-word caption against 5,000 images
// of 36 region vectors at d = 1024 (the paper's sizes): the exhaustive
// search path.
func BenchmarkScoreOneQuery(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 1))
	const nImg, l1, l2, e = 5000, 36, 12, 1024
	img := &Embeddings{Dim: e, Offsets: make([]int, nImg+1), Vecs: make([]float32, nImg*l1*e), Pos: make([]int32, nImg*l1), Global: make([]float32, nImg*e)}
	for i := range img.Vecs {
		img.Vecs[i] = float32(rng.NormFloat64())
	}
	for i := range nImg + 1 {
		img.Offsets[i] = i * l1
	}
	txt := &Embeddings{Dim: e, Offsets: []int{0, l2}, Vecs: make([]float32, l2*e), Pos: make([]int32, l2), Global: make([]float32, e)}
	for i := range txt.Vecs {
		txt.Vecs[i] = float32(rng.NormFloat64())
	}
	b.SetBytes(int64(len(img.Vecs) * 4))
	b.ResetTimer()
	for range b.N {
		if _, err := ScoreMatrix(context.Background(), img, txt, MrSw); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkScoreMatrixOrder scores 1000 images against 5000 captions (the
// COCO 1K protocol's fold) with SEAM's order similarity at 1024
// dimensions: 5.1 billion (image, caption, dimension) terms.
func BenchmarkScoreMatrixOrder(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 1))
	const nImg, nTxt, e = 1000, 5000, 1024
	img := &Embeddings{Dim: e, Offsets: make([]int, nImg+1), Global: tensor.RandN(rng, nImg, e).Data}
	txt := &Embeddings{Dim: e, Offsets: make([]int, nTxt+1), Global: tensor.RandN(rng, nTxt, e).Data}
	b.ResetTimer()
	for range b.N {
		if _, err := ScoreMatrix(context.Background(), img, txt, Order); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(nImg)*nTxt*e*float64(b.N)/b.Elapsed().Seconds()/1e9, "Gterms/s")
}

// TestEncodeTextsByLength: captions encoded in batches by length come
// back in the list's order, each as it is encoded alone (the padding of a
// batch reaches no caption), for every model and text encoder.
func TestEncodeTextsByLength(t *testing.T) {
	captions := []string{
		"blue square left of a red circle and a small blue square",
		"a red circle",
		"a square",
		"red circle left of a blue square",
		"a blue square",
		"square",
		"a red circle right of a square left of a circle",
		"blue circle",
	}
	cases := map[string]func(*Config){}
	for _, name := range Names() {
		cases[name] = named(name)
	}
	for _, enc := range []string{"gru", "lstm", "transformer"} {
		cases["teran-"+enc] = func(c *Config) { c.TextModel.Name = enc }
	}
	cases["seam-e"], cases["seam-g"] = tinySEAM("seam-e"), tinySEAM("seam-g")
	for name, edit := range cases {
		t.Run(name, func(t *testing.T) {
			m := tinyModel(t, edit)
			// Batches of 3 out of order; one batch; the list in order of
			// length already.
			for _, in := range []struct {
				captions []string
				bs       int
			}{{captions, 3}, {captions, 100}, {[]string{"square", "a square", "a blue square left of a circle"}, 1}} {
				checkAlone(t, m, in.captions, in.bs)
			}
		})
	}
}

// checkAlone checks that EncodeTexts in batches of bs encodes each
// caption as it is encoded alone.
func checkAlone(t *testing.T, m Model, captions []string, bs int) {
	t.Helper()
	got, err := EncodeTexts(context.Background(), m, captions, &EncodeOptions{BatchSize: bs})
	if err != nil {
		t.Fatal(err)
	}
	if got.Len() != len(captions) {
		t.Fatalf("%d captions encoded, want %d", got.Len(), len(captions))
	}
	for i, c := range captions {
		alone := m.EncodeTexts(nil, TextBatch(m, []string{c})).Embeddings()
		if !slices.Equal(got.ItemPos(i), alone.ItemPos(0)) {
			t.Fatalf("caption %d %q: positions %v, alone %v", i, c, got.ItemPos(i), alone.ItemPos(0))
		}
		for what, pair := range map[string][2][]float32{"vectors": {got.Item(i), alone.Item(0)}, "global vector": {got.GlobalOf(i), alone.GlobalOf(0)}} {
			a, b := pair[0], pair[1]
			if len(a) != len(b) {
				t.Fatalf("caption %d %q: %d floats of %s, alone %d", i, c, len(a), what, len(b))
			}
			for k := range a {
				if math.Abs(float64(a[k]-b[k])) > 1e-5 {
					t.Fatalf("caption %d %q: %s float %d is %v, alone %v", i, c, what, k, a[k], b[k])
				}
			}
		}
	}
}

// BenchmarkEncodeTexts encodes 1,024 captions of Flickr8k's lengths (7 to
// 35 tokens, 13 on average) with a text side of the photo recipe's size
// (a 2-layer BERT of 256 dimensions, TERAN's joint layer), in batches of
// DefaultEncodeBatch: "by-length" as EncodeTexts batches them, "list-order"
// in the list's order, each batch padded to its longest caption.
func BenchmarkEncodeTexts(b *testing.B) {
	m := tinyModel(b, func(c *Config) {
		c.TextModel = TextConfig{Name: "bert", WordDim: 256, ExtractionHiddenLayer: 2, FineTune: true, Heads: 4, FF: 512, MaxPositions: 64}
		c.Model = JointConfig{Name: "teran", EmbedSize: 1024, Layers: 1, Heads: 4, FF: 512}
		c.MaxCaptionTokens = 40
	})
	rng := rand.New(rand.NewPCG(3, 3))
	words := []string{"a", "red", "blue", "circle", "square", "left", "of"}
	captions := make([]string, 1024)
	for i := range captions {
		// Flickr8k's val captions: 10.9 words on average, a long tail.
		n := 5 + rng.IntN(8)
		if rng.IntN(8) == 0 {
			n += rng.IntN(22)
		}
		w := make([]string, n)
		for j := range w {
			w[j] = words[rng.IntN(len(words))]
		}
		captions[i] = strings.Join(w, " ")
	}
	ctx := context.Background()
	b.Run("by-length", func(b *testing.B) {
		for b.Loop() {
			if _, err := EncodeTexts(ctx, m, captions, nil); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("list-order", func(b *testing.B) {
		for b.Loop() {
			for lo := 0; lo < len(captions); lo += DefaultEncodeBatch {
				m.EncodeTexts(nil, TextBatch(m, captions[lo:min(lo+DefaultEncodeBatch, len(captions))]))
			}
		}
	})
}
