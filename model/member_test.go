package model

import (
	"context"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/xmr-project/xmr/tensor"
)

// tinyMember builds a small MEMBER with its banks built from the tiny set.
func tinyMember(t *testing.T, edit func(*Config)) (*MEMBER, *tinyImages) {
	t.Helper()
	m := tinyModel(t, func(c *Config) {
		tinyMEMBER("late")(c)
		c.Model.Dropout, c.TextModel.Dropout = 0, 0
		if edit != nil {
			edit(c)
		}
	}).(*MEMBER)
	imgs := newTinyImages(rand.New(rand.NewPCG(5, 5)))
	if err := m.BuildMemory(context.Background(), imgs, tinyCaptions, []int{0, 1, 2}); err != nil {
		t.Fatal(err)
	}
	return m, imgs
}

// TestMemberMemoryWeightsGradient checks eq. 8's response weights, softmax
// over the responses of cos(query, key), against finite differences in the
// queries.
func TestMemberMemoryWeightsGradient(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	q := tensor.RandN(rng, 3, 4).SetRequiresGrad(true)
	keys := tensor.RandN(rng, 3, 5, 4)
	w := tensor.RandN(rng, 3, 1, 5)
	f := func(tp *tensor.Tape) *tensor.Tensor {
		return tp.SumAll(tp.Mul(memoryWeights(tp, tp.L2Normalize(q, 1e-12), keys), w))
	}
	if err := tensor.GradCheck(f, []*tensor.Tensor{q}, tensor.GradCheckOptions{Eps: 1e-3, ATol: 1e-3, RTol: 1e-2}); err != nil {
		t.Fatal(err)
	}
	// The weights of each query sum to 1 and follow its cosines.
	a := memoryWeights(nil, tensor.FromData([]float32{1, 0}, 1, 2), tensor.FromData([]float32{1, 0, 0, 1, -1, 0}, 1, 3, 2))
	want := []float64{math.E, 1, 1 / math.E}
	sum := want[0] + want[1] + want[2]
	for j, v := range a.Data {
		if math.Abs(float64(v)-want[j]/sum) > 1e-5 {
			t.Errorf("weight %d = %v, want %v", j, v, want[j]/sum)
		}
	}
}

// TestMemberGenerationLossGradient checks the caption generation loss
// (eq. 12) against finite differences in the decoder's parameters and in
// the image features it reads.
func TestMemberGenerationLossGradient(t *testing.T) {
	m, _ := tinyMember(t, nil)
	rng := rand.New(rand.NewPCG(8, 8))
	tx := TextBatch(m, tinyCaptions)
	mem := tensor.RandN(rng, 3, 4, 8).SetRequiresGrad(true)
	valid := tensor.FromData([]float32{1, 1, 1, 0, 1, 1, 0, 0, 1, 1, 1, 1}, 3, 4)
	params := []*tensor.Tensor{mem}
	for _, p := range append(append(m.DecEmbed.Params(), m.Decoder.Params()...), m.DecOut.Params()...) {
		params = append(params, p.T)
	}
	f := func(tp *tensor.Tape) *tensor.Tensor { return m.generationLoss(tp, mem, valid, tx) }
	if err := tensor.GradCheck(f, params, tensor.GradCheckOptions{MaxPerInput: 6, Eps: 1e-3, ATol: 1e-2, RTol: 5e-2}); err != nil {
		t.Fatal(err)
	}
	// The loss is -log p of the real next tokens: about log V per token
	// for a fresh decoder, times the batch size.
	l := f(nil).Item()
	v := float64(m.cfg.TextModel.VocabSize)
	if math.Abs(float64(l)/3-math.Log(v)) > 1.5 {
		t.Errorf("generation loss %v for 3 captions over a vocabulary of %.0f: want about 3 log V = %.2f", l, v, 3*math.Log(v))
	}
}

// TestMemberSearch checks the memory search: the top n by cosine, best
// first, the excluded image's slots skipped, and fewer responses when
// fewer slots are eligible.
func TestMemberSearch(t *testing.T) {
	var b memoryBank
	// 4 captions: slots 0, 1 of image 0, slots 2, 3 of images 1 and 2.
	b.reset([]int{0, 1, 2, 3}, []int{0, 0, 1, 2}, 1, 2)
	keys := tensor.FromData([]float32{1, 0, 0.8, 0.6, 0, 1, -1, 0}, 4, 2)
	b.write([]int{0, 1, 2, 3}, keys, tensor.New(4, 1, 2), tensor.Full(1, 4, 1))
	q := []float32{1, 0, 0, 1}
	cases := []struct {
		n       int
		exclude []int
		want    [][]int
	}{
		{2, nil, [][]int{{0, 1}, {2, 1}}},
		{2, []int{0, 1}, [][]int{{2, 3}, {1, 0}}},
		// Query 0 has only slots 2 and 3 left: every query gets the fewest.
		{4, []int{0, 2}, [][]int{{2, 3}, {2, 1}}},
		{9, nil, [][]int{{0, 1, 2, 3}, {2, 1, 0, 3}}},
	}
	for _, c := range cases {
		got := b.search(q, 2, c.n, c.exclude)
		for i := range got {
			if !slices.Equal(got[i], c.want[i]) {
				t.Errorf("n %d, exclude %v: query %d got %v, want %v", c.n, c.exclude, i, got[i], c.want[i])
			}
		}
	}
	var empty memoryBank
	if got := empty.search(q, 2, 5, nil); got != nil {
		t.Errorf("an empty bank answered %v", got)
	}
}

// TestMemberSpaces checks the retrieval spaces: comb by similarity is the
// mean of the self and cross cosines, by embedding the cosine of their
// sums, and the self space ignores the banks.
func TestMemberSpaces(t *testing.T) {
	m, imgs := tinyMember(t, nil)
	ctx := context.Background()
	enc := func(space, comb string) (*Embeddings, *Embeddings) {
		t.Helper()
		ms, err := m.InSpace(space, comb)
		if err != nil {
			t.Fatal(err)
		}
		ie, err := EncodeImages(ctx, ms, imgs, nil)
		if err != nil {
			t.Fatal(err)
		}
		te, err := EncodeTexts(ctx, ms, tinyCaptions, nil)
		if err != nil {
			t.Fatal(err)
		}
		return ie, te
	}
	score := func(ie, te *Embeddings) []float32 {
		s, err := ScoreMatrix(ctx, ie, te, Global)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	selfS := score(enc("self", ""))
	crossS := score(enc("cross", ""))
	simS := score(enc("comb", "similarity"))
	for k := range simS {
		if want := (selfS[k] + crossS[k]) / 2; math.Abs(float64(simS[k]-want)) > 1e-5 {
			t.Fatalf("comb similarity %d: %v, want the mean of self %v and cross %v", k, simS[k], selfS[k], crossS[k])
		}
	}
	if slices.Equal(selfS, crossS) {
		t.Error("the cross space equals the self space: the memory did nothing")
	}
	si, st := enc("self", "")
	ci, ct := enc("cross", "")
	ei, et := enc("comb", "embedding")
	for i := range 3 {
		for c := range 3 {
			sum := func(a, b *Embeddings, k int) []float64 {
				out := make([]float64, a.Dim)
				for j := range out {
					out[j] = float64(a.GlobalOf(k)[j] + b.GlobalOf(k)[j])
				}
				return out
			}
			a, b := sum(si, ci, i), sum(st, ct, c)
			var dot, na, nb float64
			for j := range a {
				dot, na, nb = dot+a[j]*b[j], na+a[j]*a[j], nb+b[j]*b[j]
			}
			got := float64(score(ei, et)[i*3+c])
			if want := dot / math.Sqrt(na*nb); math.Abs(got-want) > 1e-5 {
				t.Errorf("comb embedding (%d, %d): %v, want %v", i, c, got, want)
			}
		}
	}
	if _, err := m.InSpace("joint", ""); err == nil || !strings.Contains(err.Error(), "model.space") {
		t.Errorf("unknown space: %v", err)
	}
	// A model without banks (never trained) still encodes, and its self
	// space is the same as with banks.
	fresh := tinyModel(t, func(c *Config) { tinyMEMBER("late")(c); c.Model.Dropout, c.TextModel.Dropout = 0, 0 }).(*MEMBER)
	fresh.ImgProj, fresh.Text, fresh.TxtProj, fresh.Self = m.ImgProj, m.Text, m.TxtProj, m.Self
	fs, err := fresh.InSpace("self", "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := EncodeImages(ctx, fresh, imgs, nil); err != nil {
		t.Fatal(err)
	}
	fi, _ := EncodeImages(ctx, fs, imgs, nil)
	if !slices.Equal(fi.Global, si.Global) {
		t.Error("the self space depends on the memory banks")
	}
}

// TestMemberTrainingWrites checks that a training batch (Items set)
// overwrites its slots when its step ends (not before, nor when the step
// failed) and keeps its own matches out of the responses, and that the
// usage ratio keeps a subset of the items.
func TestMemberTrainingWrites(t *testing.T) {
	m, imgs := tinyMember(t, nil)
	before := slices.Clone(m.mem.img.keys)
	im := ImageBatch(imgs, []int{1})
	im.Feat = tensor.RandN(rand.New(rand.NewPCG(9, 9)), im.Feat.Shape...)
	im.Items = []int{1}
	m.EncodeImages(tensor.NewTape(), im)
	d := m.cfg.Model.EmbedSize
	if !slices.Equal(before, m.mem.img.keys) {
		t.Error("an image batch wrote its slot before the step ended")
	}
	m.EndStep(false)
	if !slices.Equal(before, m.mem.img.keys) {
		t.Error("a failed step's writes were applied")
	}
	m.EncodeImages(tensor.NewTape(), im)
	m.EndStep(true)
	if slices.Equal(before[d:2*d], m.mem.img.keys[d:2*d]) || !slices.Equal(before[:d], m.mem.img.keys[:d]) {
		t.Error("an image batch must overwrite its own slot and only it")
	}
	// Image 0's only caption is slot 0; excluded, the responses are the
	// other two captions.
	q := m.mem.txt.keys[:d]
	if got := m.mem.txt.search(q, d, 5, []int{0}); !slices.Equal(slices.Sorted(slices.Values(got[0])), []int{1, 2}) {
		t.Errorf("image 0's responses %v include its own caption", got[0])
	}
	if got := usageSubset(10, 0.3, 1); len(got) != 3 || !slices.IsSorted(got) {
		t.Errorf("usage ratio 0.3 of 10 items: %v", got)
	}
	if got := usageSubset(10, 1, 1); len(got) != 10 {
		t.Errorf("usage ratio 1 of 10 items: %v", got)
	}
	half, _ := tinyMember(t, func(c *Config) { c.Model.UsageRatio = 0.5 })
	if half.mem.img.size() != 2 || half.mem.txt.size() != 2 {
		t.Errorf("usage ratio 0.5 of 3 images and 3 captions: banks of %d and %d", half.mem.img.size(), half.mem.txt.size())
	}
}

// TestMemberCheckpointState checks that the banks travel with the
// checkpoint and that a damaged bank is refused with an error.
func TestMemberCheckpointState(t *testing.T) {
	m, _ := tinyMember(t, nil)
	path := filepath.Join(t.TempDir(), "m.safetensors")
	if err := Save(path, m, nil, nil); err != nil {
		t.Fatal(err)
	}
	m2, f, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	mb := m2.(*MEMBER).mem
	if !slices.Equal(mb.txt.values, m.mem.txt.values) || !slices.Equal(mb.img.owners, m.mem.img.owners) || !slices.Equal(mb.captionImages, m.mem.captionImages) {
		t.Fatal("the memory banks did not travel with the checkpoint")
	}
	if Fingerprint(m) != Fingerprint(m2) {
		t.Error("the reloaded model has another fingerprint")
	}
	err = m.LoadState(func(name string) ([]float32, []int, bool, error) {
		for _, s := range m.State() {
			if s.Name == name {
				if strings.HasSuffix(name, "text.items") {
					return []float32{0.5, 1, 2}, s.T.Shape, true, nil
				}
				return s.T.Data, s.T.Shape, true, nil
			}
		}
		return nil, nil, false, nil
	})
	if err == nil || !strings.Contains(err.Error(), "not an index") {
		t.Errorf("a fractional item index: %v", err)
	}
}

// TestMemberValidate lists what a careless user writes in MEMBER's keys:
// each is refused, naming the key.
func TestMemberValidate(t *testing.T) {
	cases := []struct {
		name string
		edit func(*Config)
		want string
	}{
		{"ok", nil, ""},
		{"pool", func(c *Config) { c.Model.Pool = "sum" }, `model.pool: "sum" is not one of first, mean, max`},
		{"fusion", func(c *Config) { c.Model.Fusion = "" }, `model.fusion: "" is not one of early, late`},
		{"space", func(c *Config) { c.Model.Space = "both" }, `model.space: "both" is not one of self, cross, comb`},
		{"combination", func(c *Config) { c.Model.Combination = "sum" }, `model.combination: "sum" is not one of similarity, embedding`},
		{"responses", func(c *Config) { c.Model.Responses = 0 }, "model.responses: 0 is out of range [1, 1024]"},
		{"usage ratio", func(c *Config) { c.Model.UsageRatio = 1.5 }, "model.usage-ratio: 1.5 is not a fraction"},
		{"usage ratio NaN", func(c *Config) { c.Model.UsageRatio = float32(math.NaN()) }, "model.usage-ratio: NaN"},
		{"generation weight", func(c *Config) { c.Model.GenerationWeight = -1 }, "model.generation-weight: must be finite and not negative"},
		{"layers", func(c *Config) { c.Model.Layers = 0 }, "model.layers: 0 is out of range [1, 256]"},
		{"similarity", func(c *Config) { c.Model.Similarity = Order }, "model.similarity: member retrieves by the cosine"},
		{"global images", func(c *Config) { c.ImageModel.Name = "global" }, `image-model.name: "global" is not one of bottomup`},
		{"no caption length", func(c *Config) { c.MaxCaptionTokens = 0 }, "max-caption-tokens: 0 (no limit): member's text memory bank"},
		{"text encoder", func(c *Config) { c.TextModel.Name = "seam-e" }, `text-model.name: "seam-e" is not one of bert, gru, lstm, transformer`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := tinyConfig(func(cfg *Config) {
				tinyMEMBER("late")(cfg)
				if c.edit != nil {
					c.edit(cfg)
				}
			}).Validate()
			if c.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want %q", err, c.want)
			}
		})
	}
}

// TestMemberEncodersIndependent checks that a training step's two
// encoders do not see each other's bank writes: images then captions, or
// captions then images (as side by side, either may end first), give the
// same encodings and, once the step ends, the same banks.
func TestMemberEncodersIndependent(t *testing.T) {
	run := func(imagesFirst bool) (img, txt *Encoded, m *MEMBER) {
		m, imgs := tinyMember(t, nil)
		im := ImageBatch(imgs, []int{0, 1, 2})
		im.Feat = tensor.RandN(rand.New(rand.NewPCG(9, 9)), im.Feat.Shape...)
		im.Items = []int{0, 1, 2}
		tx := TextBatch(m, tinyCaptions)
		tx.Items = []int{0, 1, 2}
		tp := tensor.NewTape()
		if imagesFirst {
			img = m.EncodeImages(tp, im)
			txt = m.EncodeTexts(tp, tx)
		} else {
			txt = m.EncodeTexts(tp, tx)
			img = m.EncodeImages(tp, im)
		}
		m.EndStep(true)
		return img, txt, m
	}
	i1, t1, m1 := run(true)
	i2, t2, m2 := run(false)
	if !slices.Equal(i1.Global.Data, i2.Global.Data) || !slices.Equal(t1.Global.Data, t2.Global.Data) {
		t.Error("a step's encodings depend on which encoder ran first")
	}
	if !slices.Equal(m1.mem.img.values, m2.mem.img.values) || !slices.Equal(m1.mem.txt.keys, m2.mem.txt.keys) {
		t.Error("the banks after a step depend on which encoder ran first")
	}
	before, _ := tinyMember(t, nil)
	if slices.Equal(before.mem.img.values, m1.mem.img.values) {
		t.Error("the step did not write its images into the bank")
	}
}
