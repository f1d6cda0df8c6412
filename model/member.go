package model

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"

	"github.com/xmr-project/xmr/nn"
	"github.com/xmr-project/xmr/tensor"
)

// MEMBER is Memory-based EMBedding Enhancement for image-text Retrieval (Li,
// Liu and Niu, "Memorize, Associate and Match", TIP 2021): embeddings
// enhanced by fine-grained alignment with the other modality's items,
// recalled from memory banks over the training set. Notation and equation
// numbers are the paper's; d is model.embed-size, n_m model.responses.
//
// Self-learning stage (sec. III-C.1), for an image of R regions and a
// caption of T tokens:
//
//	regions I^e (B, R, d_i) -> I^d = I^e W_i + b_i (B, R, d)                 eq. 6
//	tokens  T^e (C, T, d_t) -> T^d = T^e W_t + b_t (C, T, d)                 eq. 6
//	I^s = E^s(I^d), T^s = E^s(T^d): one siamese transformer encoder         eq. 7
//	i^s, t^s = pool(I^s), pool(T^s) (first, mean or max; L2-normalised)
//
// The token features T^e are the text encoder's (text-model.name: a BERT,
// as the paper, or word embeddings with sinusoidal positions and a
// transformer layer, the paper's "Random" token features of Table IV).
//
// Memory banks (sec. III-C.2): the text bank holds, for each training
// caption j, the key k_j = t^s_j (d) and the value V_j = T^s_j (T, d); the
// image bank the same for the training images. Querying the text bank
// with an image:
//
//	cos(i^s, k_j) for every slot j -> the top n_m slots j_1..j_n
//	a_j = softmax over the n_m of cos(i^s, k_j)                             eq. 8
//	late fusion:  I^c = sum_j a_j E^c(I^s, V_j, V_j)                        eq. 10
//	early fusion: I^c = E^c(I^s, T^r, T^r), T^r = sum_j a_j V_j             eq. 9
//	i^c = pool(I^c)
//
// and symmetrically for a caption and the image bank. E^c is one cross
// transformer encoder for both modalities (Table VI's "shared cross
// transformer encoder"); its layers attend from the queries (the item's
// self-features) to the response's values, each layer's output being the
// next layer's queries. The banks are constants: no gradient flows into
// them; the weights a_j carry the gradient back to i^s.
//
// Loss (sec. III-C.3, eq. 13): the hinge with hardest negatives (eq. 11)
// on the self-embeddings and on the cross-embeddings (Encoded.Spaces, which
// train's matching loss trains one by one), plus the caption generation
// losses L_ge(I^s, T) + L_ge(I^c, T) (eq. 12): a transformer decoder
// reads the caption's tokens shifted right under a causal mask (teacher
// forcing) and attends to the image's self- or cross-features; PairLoss
// returns them, and train adds it to the objective.
//
// Retrieval (sec. III-C.4): model.space chooses the embedding that Global
// carries and the cosine compares: self (i^s), cross (i^c) or comb, with
// model.combination similarity (the mean of the self and cross cosines,
// carried as [i^s, i^c] / sqrt 2, whose dot products are exactly that
// mean: Global is then 2d wide) or embedding (i^s + i^c, L2-normalised).
// InSpace gives the same weights and banks in another space.
//
// Where the paper is silent, and what xmr chose:
//
//   - Building the banks: BuildMemory encodes the whole training set
//     (without a tape) before the first step; each step then overwrites
//     its batch's slots with the values it computed, once both encoders
//     have run ("replace the key-value pairs ... after each training
//     step"): the encoders stage their writes and EndStep applies them,
//     so that a step's image and text encoders, which train runs side by
//     side, both query the banks as they were before the step.
//   - Usage ratio (Table VIII): a bank holds a fixed random subset
//     (seeded) of ceil(ratio * N) training items, used in training and in
//     retrieval alike, as the paper does.
//   - Excluded matches: in training an image's query skips the slots of
//     its own captions and a caption's query its own image's slot.
//     Inference (no Items) uses the whole bank.
//   - Fewer eligible slots than n_m (a tiny bank) take the ones there are;
//     an empty bank (a model never trained) lets E^c attend to the item's
//     own self-features, so that a fresh model still encodes.
//   - The generation loss: the decoder has its own token embeddings with
//     sinusoidal positions and an output layer over the vocabulary; a
//     caption's term is the mean over its predicted tokens of -log p, the
//     batch's the mean over all predicted tokens times the batch size (so
//     that it sums over pairs as the hinge does), times
//     model.generation-weight (1 in the paper's eq. 13).
//   - Box coordinates are not used (eq. 6 projects the region features
//     only); the decoder, E^s and E^c have model.layers layers each (2 in
//     the paper).
//
// The banks are state, not parameters: State and LoadState carry them in
// checkpoints, so that evaluation and the index need nothing else. Encoding
// reads them only; training writes them from one goroutine.
type MEMBER struct {
	cfg        Config
	tok        Tokenizer
	featNormed // image-model.feature-norm

	ImgProj  *nn.Linear                  // W_i, b_i: (d, d_i)
	Text     TextEncoder                 // token features T^e
	TxtProj  *nn.Linear                  // W_t, b_t: (d, d_t)
	Self     *nn.TransformerEncoder      // E^s, siamese
	Cross    *nn.TransformerCrossEncoder // E^c, shared by both modalities
	DecEmbed *nn.Embedding               // the decoder's token embeddings (V, d)
	Decoder  *nn.TransformerDecoder      // generates captions from image features
	DecOut   *nn.Linear                  // (V, d): logits over the vocabulary

	mem *memoryBanks // shared with the copies InSpace makes
}

// The valid values of MEMBER's own keys.
var (
	memberPools        = []string{"first", "mean", "max"}
	memberFusions      = []string{"early", "late"}
	memberSpaces       = []string{"self", "cross", "comb"}
	memberCombinations = []string{"similarity", "embedding"}
)

// maxResponses bounds model.responses (n_m; 5 in the paper).
const maxResponses = 1024

// newMEMBER builds MEMBER with fresh weights and empty memory banks.
func newMEMBER(cfg Config, tok Tokenizer, seed uint64) (Model, error) {
	rng := rand.New(rand.NewPCG(seed, 0x6d656d62))
	jc, d := cfg.Model, cfg.Model.EmbedSize
	m := &MEMBER{cfg: cfg, tok: tok, mem: &memoryBanks{}, featNormed: featNormed{newFeatNorm(cfg.ImageModel)}}
	m.ImgProj = nn.NewLinear(rng, cfg.ImageModel.FeatDim, d, true)
	txt, err := newTextEncoder(rng, cfg.TextModel)
	if err != nil {
		return nil, fmt.Errorf("text model: %w", err)
	}
	m.Text = txt
	if bt, ok := txt.(bertText); ok && cfg.TextModel.Pretrain != "" {
		tm := &m.cfg.TextModel // the loaded BERT's sizes, as TERAN records them
		tm.VocabSize, tm.WordDim, tm.Heads = bt.Cfg.VocabSize, bt.Cfg.HiddenSize, bt.Cfg.NumAttentionHeads
		tm.FF, tm.MaxPositions, tm.ExtractionHiddenLayer = bt.Cfg.IntermediateSize, bt.Cfg.MaxPositionEmbeddings, len(bt.Layers)
	}
	m.TxtProj = nn.NewLinear(rng, txt.OutDim(), d, true)
	m.Self = nn.NewTransformerEncoder(rng, jc.Layers, d, jc.Heads, jc.FF, jc.Dropout, nn.ReLU)
	m.Cross = nn.NewTransformerCrossEncoder(rng, jc.Layers, d, jc.Heads, jc.FF, jc.Dropout, nn.ReLU)
	v := m.cfg.TextModel.VocabSize
	m.DecEmbed = nn.NewEmbedding(rng, v, d)
	m.Decoder = nn.NewTransformerDecoder(rng, jc.Layers, d, jc.Heads, jc.FF, jc.Dropout, nn.ReLU)
	m.DecOut = nn.NewLinear(rng, d, v, true)
	return m, nil
}

// validateMember checks MEMBER's part of a config (Validate has checked
// what every model shares).
func (c Config) validateMember(p *problems) {
	jm := c.Model
	c.validateText(p)
	p.oneOf("image-model.name", c.ImageModel.Name, []string{"bottomup"})
	if jm.Similarity != "" {
		p.bad("model.similarity", "member retrieves by the cosine of model.space's embeddings; leave it empty (have %q)", jm.Similarity)
	}
	if c.MaxCaptionTokens == 0 {
		p.bad("max-caption-tokens", "0 (no limit): member's text memory bank stores each caption's token features, so it needs a caption length")
	}
	p.between("model.layers", jm.Layers, 1, MaxLayers)
	p.between("model.heads", jm.Heads, 1, MaxHeads)
	p.between("model.ff", jm.FF, 1, MaxWidth)
	p.dropout("model.dropout", jm.Dropout)
	p.divides("model.heads", jm.Heads, "embed-size", jm.EmbedSize)
	p.oneOf("model.pool", jm.Pool, memberPools)
	p.oneOf("model.fusion", jm.Fusion, memberFusions)
	p.oneOf("model.space", jm.Space, memberSpaces)
	p.oneOf("model.combination", jm.Combination, memberCombinations)
	p.between("model.responses", jm.Responses, 1, maxResponses)
	if !(jm.UsageRatio > 0 && jm.UsageRatio <= 1) {
		p.bad("model.usage-ratio", "%v is not a fraction of the training set in (0, 1]", jm.UsageRatio)
	}
	if !(jm.GenerationWeight >= 0) || math.IsInf(float64(jm.GenerationWeight), 1) {
		p.bad("model.generation-weight", "must be finite and not negative, is %g", jm.GenerationWeight)
	}
}

// memberParams is NumParams for MEMBER, built the way newMEMBER builds it.
func (c Config) memberParams() float64 {
	f := func(v int) float64 { return float64(v) }
	linear := func(in, out float64) float64 { return in*out + out }
	attn := func(d float64) float64 { return 4*d*d + 4*d }
	d, ff, l, v := f(c.Model.EmbedSize), f(c.Model.FF), f(c.Model.Layers), f(c.TextModel.VocabSize)
	enc := attn(d) + linear(d, ff) + linear(ff, d) + 4*d   // E^s and E^c layers
	dec := 2*attn(d) + linear(d, ff) + linear(ff, d) + 6*d // decoder layers
	text, textOut := c.textParams()
	return linear(f(c.ImageModel.FeatDim), d) + text + linear(textOut, d) + 2*l*enc + v*d + l*dec + linear(d, v)
}

// Name returns "member".
func (m *MEMBER) Name() string { return "member" }

// Config returns the model's config.
func (m *MEMBER) Config() Config { return m.cfg }

// Tokenizer returns the caption tokenizer.
func (m *MEMBER) Tokenizer() Tokenizer { return m.tok }

// Scoring returns Global: the cosine of the embeddings of model.space.
func (m *MEMBER) Scoring() Scoring { return Global }

// InSpace returns the model with the same weights and memory banks that
// retrieves in another space: self, cross or comb, combined by similarity
// or embedding (an empty combination keeps the configured one).
func (m *MEMBER) InSpace(space, combination string) (*MEMBER, error) {
	if combination == "" {
		combination = m.cfg.Model.Combination
	}
	var p problems
	p.oneOf("model.space", space, memberSpaces)
	p.oneOf("model.combination", combination, memberCombinations)
	if err := p.err(); err != nil {
		return nil, err
	}
	c := *m
	c.cfg.Model.Space, c.cfg.Model.Combination = space, combination
	return &c, nil
}

// Params lists the projections, the text encoder, E^s, E^c and the
// decoder.
func (m *MEMBER) Params() []nn.Named {
	ps := append(m.norm.params(), nn.Prefix("img_proj", m.ImgProj.Params())...)
	textName := bertPrefix
	if _, ok := m.Text.(bertText); !ok {
		textName = "txt_enc"
	}
	ps = append(ps, nn.Prefix(textName, m.Text.Params())...)
	ps = append(ps, nn.Prefix("txt_proj", m.TxtProj.Params())...)
	ps = append(ps, nn.Prefix("self_enc", m.Self.Params())...)
	ps = append(ps, nn.Prefix("cross_enc", m.Cross.Params())...)
	ps = append(ps, nn.Prefix("decoder.embed", m.DecEmbed.Params())...)
	ps = append(ps, nn.Prefix("decoder.transformer", m.Decoder.Params())...)
	return append(ps, nn.Prefix("decoder.out", m.DecOut.Params())...)
}

// memberFeatures are an encoding's self- and cross-features: for an image,
// what PairLoss's decoder attends to.
type memberFeatures struct {
	self, cross *tensor.Tensor // I^s, I^c: (B, R, d)
	valid       *tensor.Tensor // (B, R)
}

// EncodeImages encodes images into the embedding of model.space; with a
// tape it also returns the self- and cross-embeddings for the loss, and
// with Items it stages the batch's writes into the image bank (EndStep
// applies them) and keeps each image's captions out of its responses.
func (m *MEMBER) EncodeImages(tp *tensor.Tape, im Images) *Encoded {
	b, r := im.Feat.Shape[0], im.Feat.Shape[1]
	valid := im.Valid
	if valid == nil {
		valid = tensor.Full(1, b, r)
	}
	feat := m.norm.apply(tp, im).Feat
	is := m.Self.Forward(tp, m.ImgProj.Forward(tp, feat), valid) // I^s: (B, R, d)
	se := m.pool(tp, is, valid)                                  // i^s: (B, d)
	var exclude []int
	if im.Items != nil {
		m.mem.img.stage(im.Items, se, is, valid)
		exclude = im.Items // an image's own captions belong to it
	}
	return m.encoded(tp, is, se, valid, &m.mem.txt, exclude)
}

// EncodeTexts encodes captions as EncodeImages does images, against the
// image bank.
func (m *MEMBER) EncodeTexts(tp *tensor.Tape, tx Texts) *Encoded {
	c := tx.Valid.Shape[0]
	x := m.Text.Forward(tp, tx.IDs, tx.Valid, tx.Lengths)        // T^e: (C, T, d_t)
	ts := m.Self.Forward(tp, m.TxtProj.Forward(tp, x), tx.Valid) // T^s: (C, T, d)
	se := m.pool(tp, ts, tx.Valid)                               // t^s: (C, d)
	var exclude []int
	if tx.Items != nil {
		m.mem.txt.stage(tx.Items, se, ts, tx.Valid)
		exclude = make([]int, c)
		for k, item := range tx.Items {
			exclude[k] = m.mem.captionImage(item)
		}
	}
	return m.encoded(tp, ts, se, tx.Valid, &m.mem.img, exclude)
}

// encoded runs the cross-learning stage for self-features x (N, L, d) with
// self-embeddings se (N, d) against bank (skipping, for item k, the slots
// of image exclude[k]) and returns the encoding in the configured space.
func (m *MEMBER) encoded(tp *tensor.Tape, x, se, valid *tensor.Tensor, bank *memoryBank, exclude []int) *Encoded {
	jc := m.cfg.Model
	if tp == nil && jc.Space == "self" { // the cross features are not needed
		return &Encoded{Global: se}
	}
	xc := m.cross(tp, x, se, valid, bank, exclude) // I^c or T^c: (N, L, d)
	ce := m.pool(tp, xc, valid)                    // i^c or t^c: (N, d)
	enc := &Encoded{}
	switch {
	case jc.Space == "self":
		enc.Global = se
	case jc.Space == "cross":
		enc.Global = ce
	case jc.Combination == "embedding":
		enc.Global = tp.L2Normalize(tp.Add(se, ce), 1e-12) // (N, d)
	default: // similarity: <[s, c], [s', c']> / 2 is the mean of the two cosines
		enc.Global = tp.Scale(tp.Concat(1, se, ce), float32(1/math.Sqrt2)) // (N, 2d)
	}
	if tp != nil {
		enc.Spaces = []*tensor.Tensor{se, ce}
		enc.aux = &memberFeatures{self: x, cross: xc, valid: valid}
	}
	return enc
}

// pool compacts features x (N, L, d) with valid (N, L) into L2-normalised
// embeddings (N, d) by model.pool.
func (m *MEMBER) pool(tp *tensor.Tape, x, valid *tensor.Tensor) *tensor.Tensor {
	n, l, d := x.Shape[0], x.Shape[1], x.Shape[2]
	var out *tensor.Tensor
	switch m.cfg.Model.Pool {
	case "first":
		out = tp.Reshape(tp.Narrow(x, 1, 0, 1), n, d)
	case "mean": // the mean's direction is the masked sum's
		out = tp.Sum(tp.Mul(x, tensor.FromData(valid.Data, n, l, 1)), false, 1)
	default: // max over the valid positions of each dimension
		out, _ = tp.Max(x, 1, false, tensor.FromData(valid.Data, n, l, 1))
	}
	return tp.L2Normalize(out, 1e-12)
}

// cross is the memory-enhanced cross encoding (eq. 8-10) of self-features
// x (N, L, d) with self-embeddings se (N, d).
func (m *MEMBER) cross(tp *tensor.Tape, x, se, valid *tensor.Tensor, bank *memoryBank, exclude []int) *tensor.Tensor {
	n, l, d := x.Shape[0], x.Shape[1], x.Shape[2]
	slots := bank.search(se.Data, d, m.cfg.Model.Responses, exclude) // (N, k) bank slots
	k := 0
	if len(slots) > 0 {
		k = len(slots[0])
	}
	if k == 0 { // an empty bank: attend to the item itself
		return m.Cross.Forward(tp, x, x, valid)
	}
	keys, values, vvalid := bank.gather(slots) // (N, k, d), (N, k, Lv, d), (N, k, Lv)
	lv := bank.length
	a := memoryWeights(tp, se, keys) // (N, 1, k): eq. 8
	if m.cfg.Model.Fusion == "early" {
		// T^r = sum_j a_j V_j (N, Lv, d), over the union of the responses' positions.
		tr := tp.Reshape(tp.MatMul(a, tensor.FromData(values.Data, n, k, lv*d), false, false), n, lv, d)
		union := tensor.New(n, lv)
		for i := range n {
			for j := range k {
				for s := range lv {
					union.Data[i*lv+s] = max(union.Data[i*lv+s], vvalid.Data[(i*k+j)*lv+s])
				}
			}
		}
		return m.Cross.Forward(tp, x, tr, union) // eq. 9: (N, L, d)
	}
	// Late fusion: one pass per response, the queries repeated k times.
	rows := make([]*tensor.Tensor, k)
	flat := tp.Reshape(x, n, 1, l*d)
	for j := range rows {
		rows[j] = flat
	}
	q := tp.Reshape(tp.Concat(1, rows...), n*k, l, d)                                                              // (N*k, L, d)
	out := m.Cross.Forward(tp, q, tensor.FromData(values.Data, n*k, lv, d), tensor.FromData(vvalid.Data, n*k, lv)) // (N*k, L, d)
	return tp.Reshape(tp.MatMul(a, tp.Reshape(out, n, k, l*d), false, false), n, l, d)                             // eq. 10: (N, L, d)
}

// memoryWeights returns the memory response weights of eq. 8, a_j =
// softmax over the responses of cos(q, k_j), for unit queries q (N, d) and
// the responses' unit keys (N, k, d): (N, 1, k). The keys are constants;
// the gradient flows to q.
func memoryWeights(tp *tensor.Tape, q, keys *tensor.Tensor) *tensor.Tensor {
	n, d := q.Shape[0], q.Shape[1]
	cos := tp.MatMul(tp.Reshape(q, n, 1, d), keys, false, true) // (N, 1, k)
	return tp.Softmax(cos, 2, nil)
}

// PairLoss returns the caption generation losses L_ge(I^s, T) + L_ge(I^c,
// T) of eq. 12-13 for a batch of matching pairs, weighted by
// model.generation-weight; nil when the weight is 0.
func (m *MEMBER) PairLoss(tp *tensor.Tape, img *Encoded, tx Texts) *tensor.Tensor {
	w := m.cfg.Model.GenerationWeight
	aux, ok := img.aux.(*memberFeatures)
	if w == 0 || !ok {
		return nil
	}
	if n := aux.self.Shape[0]; n != tx.Valid.Shape[0] {
		panic(&tensor.ShapeError{Op: "MEMBER.PairLoss", Msg: fmt.Sprintf("%d images for %d captions: the pairs must match", n, tx.Valid.Shape[0])})
	}
	l := tp.Add(m.generationLoss(tp, aux.self, aux.valid, tx), m.generationLoss(tp, aux.cross, aux.valid, tx))
	return tp.Scale(l, w)
}

// generationLoss is eq. 12 for every caption of tx generated from its
// image's features mem (C, R, d) with memValid (C, R): teacher forcing,
// tokens 0..T-2 predict tokens 1..T-1 under a causal mask; the mean over
// the predicted tokens of -log p, times C (a scalar).
func (m *MEMBER) generationLoss(tp *tensor.Tape, mem, memValid *tensor.Tensor, tx Texts) *tensor.Tensor {
	c, t := tx.Valid.Shape[0], tx.Valid.Shape[1]
	d := m.cfg.Model.EmbedSize
	if t < 2 {
		return tensor.New()
	}
	in := make([]int32, c*(t-1)) // tokens 0..T-2 of each caption
	inValid := tensor.New(c, t-1)
	var rows, targets []int32 // the positions that predict a real token, and that token
	for i := range c {
		for s := 0; s < t-1; s++ {
			in[i*(t-1)+s] = tx.IDs[i*t+s]
			inValid.Data[i*(t-1)+s] = tx.Valid.Data[i*t+s]
			if tx.Valid.Data[i*t+s+1] != 0 {
				rows = append(rows, int32(i*(t-1)+s))
				targets = append(targets, tx.IDs[i*t+s+1])
			}
		}
	}
	if len(rows) == 0 {
		return tensor.New()
	}
	x := m.DecEmbed.Forward(tp, in, c, t-1) // (C, T-1, d)
	pe := sinusoid(t-1, d)
	x = tp.Add(tp.Scale(x, float32(math.Sqrt(float64(d)))), tensor.FromData(pe.Data, 1, t-1, d))
	h := m.Decoder.Forward(tp, x, mem, inValid, memValid) // (C, T-1, d)
	h = tp.Embedding(tp.Reshape(h, c*(t-1), d), rows)     // (P, d): only the P predicting positions
	logits := m.DecOut.Forward(tp, h)                     // (P, V)
	return tp.Scale(tp.CrossEntropy(logits, targets, -1), float32(c))
}

// BuildMemory fills the memory banks from the training set: the self-
// embeddings and self-features of a random subset of model.usage-ratio of
// the images and of the captions (all of them at ratio 1).
func (m *MEMBER) BuildMemory(ctx context.Context, images ImageSource, captions []string, captionImage []int) error {
	if len(captionImage) != len(captions) {
		return fmt.Errorf("member memory: %d captions, %d caption images", len(captions), len(captionImage))
	}
	r, _ := images.Dims()
	d, ratio := m.cfg.Model.EmbedSize, m.cfg.Model.UsageRatio
	mem := &memoryBanks{captionImages: make([]int32, len(captionImage))}
	for c, i := range captionImage {
		mem.captionImages[c] = int32(i)
	}
	imgItems := usageSubset(images.Len(), ratio, 1)
	txtItems := usageSubset(len(captions), ratio, 2)
	mem.img.reset(imgItems, imgItems, r, d)
	owners := make([]int, len(txtItems))
	for k, c := range txtItems {
		owners[k] = captionImage[c]
	}
	mem.txt.reset(txtItems, owners, m.cfg.MaxCaptionTokens, d)
	// Encode with the old banks (empty for a fresh model): only the self
	// stage is used, which does not read them.
	bs := DefaultEncodeBatch
	for lo := 0; lo < len(imgItems); lo += bs {
		if err := ctx.Err(); err != nil {
			return err
		}
		idx := imgItems[lo:min(lo+bs, len(imgItems))]
		if err := tensor.Try(func() {
			im := ImageBatch(images, idx)
			is := m.Self.Forward(nil, m.ImgProj.Forward(nil, m.norm.apply(nil, im).Feat), im.Valid)
			mem.img.write(idx, m.pool(nil, is, im.Valid), is, im.Valid)
		}); err != nil {
			return fmt.Errorf("member memory: images %d-%d: %w", idx[0], idx[len(idx)-1], err)
		}
	}
	for lo := 0; lo < len(txtItems); lo += bs {
		if err := ctx.Err(); err != nil {
			return err
		}
		idx := txtItems[lo:min(lo+bs, len(txtItems))]
		caps := make([]string, len(idx))
		for k, c := range idx {
			caps[k] = captions[c]
		}
		if err := tensor.Try(func() {
			tx := TextBatch(m, caps)
			x := m.Text.Forward(nil, tx.IDs, tx.Valid, tx.Lengths)
			ts := m.Self.Forward(nil, m.TxtProj.Forward(nil, x), tx.Valid)
			mem.txt.write(idx, m.pool(nil, ts, tx.Valid), ts, tx.Valid)
		}); err != nil {
			return fmt.Errorf("member memory: captions %d-%d: %w", idx[0], idx[len(idx)-1], err)
		}
	}
	*m.mem = *mem
	return nil
}

// EndStep ends a training step: when ok, the bank writes that its
// encodes staged (batches with Items) replace their items' slots, in the
// order staged; else they are dropped.
func (m *MEMBER) EndStep(ok bool) {
	for _, b := range []*memoryBank{&m.mem.img, &m.mem.txt} {
		if ok {
			for _, w := range b.pending {
				b.write(w.items, w.se, w.x, w.valid)
			}
		}
		b.pending = nil
	}
}

// usageSubset returns ceil(ratio * n) of the items 0..n-1, sorted: all of
// them at ratio 1, else a random subset drawn from a fixed stream.
func usageSubset(n int, ratio float32, stream uint64) []int {
	k := min(n, int(math.Ceil(float64(ratio*float32(n))))) // in float32: 0.3 is 0.30000001
	items := make([]int, n)
	for i := range items {
		items[i] = i
	}
	if k < n {
		rng := rand.New(rand.NewPCG(0x7573616765, stream))
		rng.Shuffle(n, func(i, j int) { items[i], items[j] = items[j], items[i] })
		items = items[:k]
		sort.Ints(items)
	}
	return items
}

// memoryBanks are MEMBER's image and text banks and the image of every
// training caption (for the exclusion of a caption's own image).
type memoryBanks struct {
	img, txt      memoryBank
	captionImages []int32
}

// captionImage returns the image of training caption c, -1 when unknown.
func (mb *memoryBanks) captionImage(c int) int {
	if c < 0 || c >= len(mb.captionImages) {
		return -1
	}
	return int(mb.captionImages[c])
}

// memoryBank is one key-value memory: per slot a training item's unit
// self-embedding (the key), its self-features and their mask (the value),
// the item's index in the training split and the image it belongs to
// (itself for the image bank).
type memoryBank struct {
	keys   []float32 // (S, d)
	values []float32 // (S, L, d)
	valid  []float32 // (S, L)
	items  []int32   // (S)
	owners []int32   // (S)
	length int       // L: region slots or caption tokens
	dim    int       // d
	slot   map[int]int

	pending []bankWrite // staged by the step's encodes, applied by EndStep
}

// bankWrite is a staged write of a batch into a bank: write's arguments,
// copied out of the tape's buffers, which the step's backward pass reuses.
type bankWrite struct {
	items        []int
	se, x, valid *tensor.Tensor
}

// stage keeps a copy of a batch's write (see write) for EndStep.
func (b *memoryBank) stage(items []int, se, x, valid *tensor.Tensor) {
	if b.size() == 0 {
		return
	}
	b.pending = append(b.pending, bankWrite{items: slices.Clone(items), se: se.Clone(), x: x.Clone(), valid: valid.Clone()})
}

// reset makes an empty bank of len(items) slots of length l.
func (b *memoryBank) reset(items, owners []int, l, d int) {
	s := len(items)
	*b = memoryBank{keys: make([]float32, s*d), values: make([]float32, s*l*d), valid: make([]float32, s*l),
		items: make([]int32, s), owners: make([]int32, s), length: l, dim: d}
	for k := range items {
		b.items[k], b.owners[k] = int32(items[k]), int32(owners[k])
	}
	b.index()
}

// index maps each training item to its slot.
func (b *memoryBank) index() {
	b.slot = make(map[int]int, len(b.items))
	for k, it := range b.items {
		b.slot[int(it)] = k
	}
}

// size returns the number of slots.
func (b *memoryBank) size() int { return len(b.items) }

// write stores the embeddings se (N, d) and features x (N, L', d) with
// valid (N, L') of training items into their slots (items outside the bank
// are skipped; features are cut or zero-padded to the bank's length).
func (b *memoryBank) write(items []int, se, x, valid *tensor.Tensor) {
	if b.size() == 0 {
		return
	}
	l, d := x.Shape[1], x.Shape[2]
	if d != b.dim {
		panic(&tensor.ShapeError{Op: "MEMBER memory", Msg: fmt.Sprintf("features of width %d for a bank of width %d", d, b.dim)})
	}
	n := min(l, b.length)
	for k, it := range items {
		s, ok := b.slot[it]
		if !ok {
			continue
		}
		copy(b.keys[s*d:(s+1)*d], se.Data[k*d:(k+1)*d])
		vals := b.values[s*b.length*d : (s+1)*b.length*d]
		clear(vals)
		copy(vals, x.Data[k*l*d:k*l*d+n*d])
		vv := b.valid[s*b.length : (s+1)*b.length]
		clear(vv)
		copy(vv, valid.Data[k*l:k*l+n])
	}
}

// search returns for each unit query of q (N*d floats) the slots of its
// top-n keys by cosine, skipping the slots owned by exclude[i] (nil: none
// excluded): (N, k) with k = n or fewer when fewer slots are eligible for
// some query; nil for an empty bank.
func (b *memoryBank) search(q []float32, d, n int, exclude []int) [][]int {
	s := b.size()
	if s == 0 || b.dim != d {
		return nil
	}
	nq := len(q) / d
	scores := tensor.New(nq, s)
	blasScores(q, b.keys, nq, s, d, scores.Data)
	out := make([][]int, nq)
	k := n
	for i := range nq {
		ex := -1
		if exclude != nil {
			ex = exclude[i]
		}
		row := scores.Data[i*s : (i+1)*s]
		top := make([]int, 0, n) // the best n eligible slots, best first (ties: the lower slot)
		for j := range s {
			if int(b.owners[j]) == ex || (len(top) == n && row[j] <= row[top[n-1]]) {
				continue
			}
			if len(top) < n {
				top = append(top, j)
			} else {
				top[n-1] = j
			}
			for p := len(top) - 1; p > 0 && row[top[p]] > row[top[p-1]]; p-- {
				top[p], top[p-1] = top[p-1], top[p]
			}
		}
		out[i] = top
		k = min(k, len(out[i]))
	}
	for i := range out {
		out[i] = out[i][:k]
	}
	return out
}

// blasScores computes out (n, s) = q (n, d) keys^T (s, d) without a tape.
func blasScores(q, keys []float32, n, s, d int, out []float32) {
	var tp *tensor.Tape
	r := tp.MatMul(tensor.FromData(q, n, d), tensor.FromData(keys, s, d), false, true)
	copy(out, r.Data)
}

// gather returns the keys (N, k, d), values (N, k, L, d) and masks (N, k,
// L) of slots (N, k), as constants.
func (b *memoryBank) gather(slots [][]int) (keys, values, valid *tensor.Tensor) {
	n, k, l, d := len(slots), len(slots[0]), b.length, b.dim
	keys, values, valid = tensor.New(n, k, d), tensor.New(n, k, l, d), tensor.New(n, k, l)
	for i, row := range slots {
		for j, s := range row {
			o := i*k + j
			copy(keys.Data[o*d:(o+1)*d], b.keys[s*d:(s+1)*d])
			copy(values.Data[o*l*d:(o+1)*l*d], b.values[s*l*d:(s+1)*l*d])
			copy(valid.Data[o*l:(o+1)*l], b.valid[s*l:(s+1)*l])
		}
	}
	return keys, values, valid
}

// memoryPrefix names the banks' tensors in checkpoints.
const memoryPrefix = "member.memory."

// State returns the memory banks as checkpoint tensors: per bank
// (image, text) its keys (S, d), values (S, L, d), valid (S, L), items and
// owners (S; indices stored as float32, exact below 2^24), and the image
// of every training caption. A model whose banks were never built has
// none.
func (m *MEMBER) State() []nn.Named {
	mb := m.mem
	if mb.img.size() == 0 && mb.txt.size() == 0 {
		return nil
	}
	var out []nn.Named
	for _, b := range []struct {
		name string
		bank *memoryBank
	}{{"image", &mb.img}, {"text", &mb.txt}} {
		s, l, d := b.bank.size(), b.bank.length, b.bank.dim
		out = append(out,
			nn.Named{Name: memoryPrefix + b.name + ".keys", T: tensor.FromData(b.bank.keys, s, d)},
			nn.Named{Name: memoryPrefix + b.name + ".values", T: tensor.FromData(b.bank.values, s, l, d)},
			nn.Named{Name: memoryPrefix + b.name + ".valid", T: tensor.FromData(b.bank.valid, s, l)},
			nn.Named{Name: memoryPrefix + b.name + ".items", T: indexTensor(b.bank.items)},
			nn.Named{Name: memoryPrefix + b.name + ".owners", T: indexTensor(b.bank.owners)})
	}
	return append(out, nn.Named{Name: memoryPrefix + "caption_images", T: indexTensor(mb.captionImages)})
}

func indexTensor(v []int32) *tensor.Tensor {
	t := tensor.New(len(v))
	for i, x := range v {
		t.Data[i] = float32(x)
	}
	return t
}

// LoadState restores the memory banks that State stored; a checkpoint
// without them leaves the banks empty.
func (m *MEMBER) LoadState(get func(name string) ([]float32, []int, bool, error)) error {
	d := m.cfg.Model.EmbedSize
	ci, _, ok, err := get(memoryPrefix + "caption_images")
	if err != nil || !ok {
		return err
	}
	mb := &memoryBanks{}
	if mb.captionImages, err = toIndices(ci); err != nil {
		return fmt.Errorf("%scaption_images: %w", memoryPrefix, err)
	}
	for _, b := range []struct {
		name string
		bank *memoryBank
	}{{"image", &mb.img}, {"text", &mb.txt}} {
		t := map[string][]float32{}
		shapes := map[string][]int{}
		for _, part := range []string{"keys", "values", "valid", "items", "owners"} {
			data, shape, ok, err := get(memoryPrefix + b.name + "." + part)
			if err != nil {
				return err
			}
			if !ok {
				return fmt.Errorf("member memory: the checkpoint lacks %s%s.%s", memoryPrefix, b.name, part)
			}
			t[part], shapes[part] = data, shape
		}
		ks, vs := shapes["keys"], shapes["values"]
		if len(ks) != 2 || ks[1] != d || len(vs) != 3 || vs[0] != ks[0] || vs[2] != d ||
			!slices.Equal(shapes["valid"], vs[:2]) || !slices.Equal(shapes["items"], ks[:1]) || !slices.Equal(shapes["owners"], ks[:1]) {
			return fmt.Errorf("member memory: the %s bank's tensors disagree in shape (keys %v, values %v, valid %v, items %v, owners %v; embed-size %d)",
				b.name, ks, vs, shapes["valid"], shapes["items"], shapes["owners"], d)
		}
		items, err := toIndices(t["items"])
		if err != nil {
			return fmt.Errorf("member memory: %s items: %w", b.name, err)
		}
		owners, err := toIndices(t["owners"])
		if err != nil {
			return fmt.Errorf("member memory: %s owners: %w", b.name, err)
		}
		*b.bank = memoryBank{keys: t["keys"], values: t["values"], valid: t["valid"], items: items, owners: owners, length: vs[1], dim: d}
		b.bank.index()
	}
	*m.mem = *mb
	return nil
}

// toIndices converts float32 indices back, refusing what is not one.
func toIndices(v []float32) ([]int32, error) {
	out := make([]int32, len(v))
	for i, x := range v {
		if x != float32(math.Trunc(float64(x))) || x < 0 || x >= 1<<24 {
			return nil, fmt.Errorf("entry %d is %v, not an index", i, x)
		}
		out[i] = int32(x)
	}
	return out, nil
}
