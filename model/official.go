package model

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/xmr-project/xmr/nn"
	"github.com/xmr-project/xmr/text"
	"github.com/xmr-project/xmr/torchfile"
)

// OfficialOptions say what an official checkpoint does not hold.
type OfficialOptions struct {
	// Vocab is BERT's WordPiece vocabulary (vocab.txt of the BERT the model
	// was trained from, bert-base-uncased for the published models); the
	// checkpoint has none. Required.
	Vocab *text.Vocab
	// BERT, when not nil, is the config.json of that BERT: its attention
	// heads and layer-norm epsilon, which the weights do not show. Without
	// it, BERT's convention holds: heads of 64 dimensions, epsilon 1e-12.
	BERT *BERTConfig
	// Model ("teran" or "tern") and Pooling, when set, override what the
	// checkpoint's config says (a bare state dict has no config).
	Model   string
	Pooling Scoring
}

// ImportReport says how an official checkpoint became an xmr model.
type ImportReport struct {
	// Config is the xmr config built from the checkpoint.
	Config Config
	// Tensors is the number of tensors copied.
	Tensors int
	// Ignored lists the checkpoint's tensors that the xmr model does not
	// use, each with the reason.
	Ignored []string
	// Notes say what was inferred or computed (heads, TERN's I-CLS, ...).
	Notes []string
}

// The official code's fixed sizes (models/teran.py, visual.py): every
// nn.TransformerEncoderLayer has 4 heads.
const officialHeads = 4

// ignoredOfficial are tensors of official checkpoints that TERAN's and
// TERN's forward pass never reads, with the reason.
var ignoredOfficial = []struct {
	re     *regexp.Regexp
	reason string
}{
	{regexp.MustCompile(`^img_txt_enc\.img_enc\.fc\.(weight|bias)$`), "the visual encoder's own pooled projection, unused when the joint layers aggregate"},
	{regexp.MustCompile(`^img_txt_enc\.txt_enc\.map\.(weight|bias)$`), "the text encoder's own pooled projection, unused when the joint layers aggregate"},
	{regexp.MustCompile(`^img_txt_enc\.txt_enc\.word_embeddings\.weight$`), "the same table as bert_model.embeddings.word_embeddings (checked equal)"},
	{regexp.MustCompile(`^img_txt_enc\.txt_enc\.bert_model\.pooler\.dense\.(weight|bias)$`), "BERT's pooler, which TERAN and TERN do not use"},
	{regexp.MustCompile(`^img_txt_enc\.txt_enc\.bert_model\.embeddings\.position_ids$`), "the buffer of position indices 0..n-1"},
}

// ImportOfficial builds the xmr model that an official TERAN or TERN
// checkpoint (torch.save of a dict whose "model" is the state dict, whose
// "config" is the YAML config as a dict; or a bare state dict) holds, with
// every weight copied and every shape checked. The names map one to one
// (Params follows the official state dict), except that with separate
// final layers the official transformer_encoder_1 is the text side and
// transformer_encoder_2 the image side, the reverse of xmr's; TERN's I-CLS
// is computed from the box MLP as the official code does, and TERAN's slot
// 0 set to "zero-region" (ImageConfig.Slot0). Tensors the model does not
// use are listed in the report; unknown or missing tensors are an error
// that lists all of them.
func ImportOfficial(f *torchfile.File, o OfficialOptions) (Model, *ImportReport, error) {
	if o.Vocab == nil {
		return nil, nil, errors.New("import: no BERT vocabulary (vocab.txt): official checkpoints hold none")
	}
	w, err := readStateDict(f, "model")
	if err != nil {
		return nil, nil, fmt.Errorf("import: %w (want a checkpoint whose \"model\" is the state dict, or the state dict itself)", err)
	}
	var oc *torchfile.Dict
	if root, ok := f.Root.(*torchfile.Dict); ok {
		if c, ok := root.Get("config"); ok {
			oc, _ = c.(*torchfile.Dict)
		}
	}
	rep := &ImportReport{}
	cfg, err := officialConfig(w, officialYAML{oc}, o, rep)
	if err != nil {
		return nil, nil, fmt.Errorf("import %s: %w", f.Path, err)
	}
	// Every parameter must come from the file's data: sizes read from
	// shapes that the data does not back are refused before allocating.
	need := cfg.NumParams()
	if cfg.Model.Name == "tern" {
		need -= float64(cfg.ImageModel.Hidden) // the I-CLS is computed
	}
	if have := w.floatElements(); need > have {
		return nil, nil, fmt.Errorf("import %s: the shapes describe a model of %.0f parameters, the file holds %.0f values", f.Path, need, have)
	}
	tok, err := NewTokenizer("wordpiece", o.Vocab)
	if err != nil {
		return nil, nil, err
	}
	m, err := New(cfg, tok, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("import %s: %w", f.Path, err)
	}
	rep.Config = m.Config()
	if err := fillOfficial(m, w, rep); err != nil {
		return nil, nil, err
	}
	return m, rep, nil
}

// officialYAML reads the official config dict (nil when the file has
// none).
type officialYAML struct{ d *torchfile.Dict }

// get returns section.key, or nil.
func (y officialYAML) get(section, key string) torchfile.Value {
	if y.d == nil {
		return nil
	}
	s, ok := y.d.Get(section)
	if !ok {
		return nil
	}
	sd, ok := s.(*torchfile.Dict)
	if !ok {
		return nil
	}
	v, _ := sd.Get(key)
	return v
}

func (y officialYAML) str(section, key string) string {
	s, _ := y.get(section, key).(string)
	return s
}

// shapeOf returns a tensor's shape, or nil when the file lacks it.
func (w *torchWeights) shapeOf(name string) []int {
	if t := w.tensors[name]; t != nil {
		return t.Shape
	}
	return nil
}

// layerCount returns how many layers prefix.N.* the file holds (N from 0
// on, without gaps).
func (w *torchWeights) layerCount(prefix string) (int, error) {
	seen := map[int]bool{}
	for _, n := range w.names {
		rest, ok := strings.CutPrefix(n, prefix+".")
		if !ok {
			continue
		}
		num, _, _ := strings.Cut(rest, ".")
		i, err := strconv.Atoi(num)
		if err != nil || i < 0 || i > MaxLayers {
			return 0, fmt.Errorf("tensor %q: %q is not a layer number", n, num)
		}
		seen[i] = true
	}
	for i := 0; i < len(seen); i++ {
		if !seen[i] {
			return 0, fmt.Errorf("layers %s.*: %d layers but no layer %d", prefix, len(seen), i)
		}
	}
	return len(seen), nil
}

// officialConfig builds the xmr config of an official checkpoint: the
// sizes from the weights' shapes, the choices from the official config
// (checked against the weights) and o.
func officialConfig(w *torchWeights, y officialYAML, o OfficialOptions, rep *ImportReport) (Config, error) {
	var p problems
	// What xmr cannot build.
	if n := y.str("text-model", "name"); n != "" && n != "bert" {
		p.bad("text-model.name", "%q: only official models with a BERT text encoder are imported", n)
	}
	if l, ok := y.get("text-model", "layers").(int64); ok && l > 0 {
		p.bad("text-model.layers", "%d transformer layers after BERT: xmr's BERT text encoder has none (the published models use 0)", l)
	}
	if n := y.str("image-model", "name"); n != "" && n != "bottomup" {
		p.bad("image-model.name", "%q: only bottom-up region features are imported", n)
	}
	if pe := y.get("image-model", "pos-encoding"); pe != nil && pe != "concat-and-process" {
		p.bad("image-model.pos-encoding", "%v: only concat-and-process (the published models') is imported", pe)
	}
	if m := y.str("training", "measure"); m == "order" {
		p.bad("training.measure", "order embeddings are not imported (the published models use dot)")
	}

	name := o.Model
	if name == "" {
		name = y.str("model", "name")
	}
	if name != "teran" && name != "tern" {
		p.bad("model.name", "%q: say whether the checkpoint is teran or tern (the file's config does not)", name)
	}
	if name == "tern" {
		for _, k := range []string{"text-aggregation", "image-aggregation"} {
			if a := y.get("model", k); a != nil && a != "first" {
				p.bad("model."+k, "%v: TERN is imported with its I-CLS/T-CLS (first) aggregation only", a)
			}
		}
	}
	pooling := o.Pooling
	if pooling == "" {
		pooling = MrSw
		if a := y.str("training", "alignment-mode"); a != "" {
			s, err := ParseScoring(a)
			if err != nil || !s.Alignment() {
				p.bad("training.alignment-mode", "%q is not one of xmr's alignment poolings (%s)", a, joinScorings(alignmentPoolings))
			} else {
				pooling = s
			}
		}
	}

	// Sizes from the shapes.
	const (
		img  = "img_txt_enc.img_enc."
		bert = "img_txt_enc.txt_enc.bert_model."
	)
	need := func(name string, dims int) []int {
		s := w.shapeOf(name)
		if len(s) != dims {
			if s == nil {
				p.bad("weights", "no tensor %q", name)
			} else {
				p.bad("weights", "tensor %q has shape %v, want %d dimensions", name, s, dims)
			}
			return make([]int, dims)
		}
		return s
	}
	count := func(prefix string) int {
		n, err := w.layerCount(prefix)
		if err != nil {
			p.bad("weights", "%v", err)
		}
		return n
	}
	map0 := need(img+"pos_encoding_image.map.0.weight", 2) // (H, F+5)
	hidden, featDim := map0[0], map0[1]-5
	imgLayers := count(img + "transformer_encoder.layers")
	imgFF := hidden
	if imgLayers > 0 {
		imgFF = need(img+"transformer_encoder.layers.0.linear1.weight", 2)[0]
	}
	words := need(bert+"embeddings.word_embeddings.weight", 2) // (V, W)
	vocab, wordDim := words[0], words[1]
	positions := need(bert+"embeddings.position_embeddings.weight", 2)[0]
	bertLayers := count(bert + "encoder.layer")
	bertFF := wordDim
	if bertLayers > 0 {
		bertFF = need(bert+"encoder.layer.0.intermediate.dense.weight", 2)[0]
	}
	embed := need("img_txt_enc.img_proj.weight", 2)[0]
	jointLayers := count("img_txt_enc.transformer_encoder_1.layers")
	jointFF := embed
	if jointLayers > 0 {
		jointFF = need("img_txt_enc.transformer_encoder_1.layers.0.linear1.weight", 2)[0]
	}
	shared := true
	for _, n := range w.names {
		if strings.HasPrefix(n, "img_txt_enc.transformer_encoder_2.") {
			shared = false
			break
		}
	}
	if s, ok := y.get("model", "shared-transformer").(bool); ok && s != shared {
		p.bad("model.shared-transformer", "%v in the config, but the weights have %s", s, map[bool]string{true: "one set of final layers", false: "two sets of final layers"}[shared])
	}
	if d, ok := y.get("image-model", "feat-dim").(int64); ok && int(d) != featDim {
		p.bad("image-model.feat-dim", "%d in the config, %d in the weights", d, featDim)
	}
	if l, ok := y.get("text-model", "extraction-hidden-layer").(int64); ok && int(l) != bertLayers {
		p.bad("text-model.extraction-hidden-layer", "%d in the config, the weights hold %d BERT layers", l, bertLayers)
	}
	if vocab != o.Vocab.Len() {
		p.bad("vocabulary", "%d tokens, the checkpoint's word embeddings have %d rows: give the vocab.txt of the BERT the model was trained from", o.Vocab.Len(), vocab)
	}
	bertHeads, eps := wordDim/64, 1e-12
	if o.BERT != nil {
		bertHeads, eps = o.BERT.NumAttentionHeads, o.BERT.LayerNormEps
		if o.BERT.HiddenSize != wordDim {
			p.bad("BERT config", "hidden_size %d, the checkpoint's BERT is %d wide", o.BERT.HiddenSize, wordDim)
		}
	} else {
		rep.Notes = append(rep.Notes, fmt.Sprintf("BERT heads: %d (64 dimensions each, as every published BERT; give the BERT directory to read config.json)", bertHeads))
	}
	if eps != 1e-12 {
		p.bad("BERT config", "layer_norm_eps %v: xmr's BERT uses 1e-12, as BERT does", eps)
	}
	if bertHeads < 1 || wordDim%bertHeads != 0 {
		p.bad("BERT config", "%d attention heads do not divide the width %d", bertHeads, wordDim)
	}
	dropout := func(section string) float32 {
		switch d := y.get(section, "dropout").(type) {
		case float64:
			return float32(d)
		case int64: // "dropout: 0" in YAML
			return float32(d)
		}
		return 0.1
	}
	fineTune := true
	if ft, ok := y.get("text-model", "fine-tune").(bool); ok {
		fineTune = ft
	}
	stop, _ := y.get("model", "exclude-stopwords").(bool)
	if err := p.err(); err != nil {
		return Config{}, err
	}

	cfg := Default()
	cfg.TextModel = TextConfig{Name: "bert", WordDim: wordDim, ExtractionHiddenLayer: bertLayers, FineTune: fineTune,
		Dropout: dropout("text-model"), Heads: bertHeads, FF: bertFF, MaxPositions: positions, VocabSize: vocab}
	cfg.ImageModel = ImageConfig{Name: "bottomup", FeatDim: featDim, TransformerLayers: imgLayers, Heads: officialHeads, FF: imgFF,
		Dropout: dropout("image-model"), PosEncoding: "concat-and-process", Hidden: hidden}
	if name == "teran" {
		cfg.ImageModel.Slot0 = "zero-region"
	}
	cfg.Model = JointConfig{Name: name, EmbedSize: embed, Layers: jointLayers, Heads: officialHeads, FF: jointFF,
		SharedTransformer: shared, ExcludeStopwords: stop, Dropout: dropout("model")}
	cfg.Pooling = pooling
	// The official code cuts no caption: every caption BERT can take.
	cfg.MaxCaptionTokens = positions
	return cfg, nil
}

// officialSource names the tensor of an official checkpoint that holds
// xmr's parameter name: the same name, except the final layers when they
// are not shared (the official transformer_encoder_1 is the text side,
// xmr's the image side) and BERT's LayerNorm.gamma/beta of older files.
func officialSource(name string, shared bool) []string {
	if !shared {
		if rest, ok := strings.CutPrefix(name, "img_txt_enc.transformer_encoder_1."); ok {
			name = "img_txt_enc.transformer_encoder_2." + rest
		} else if rest, ok := strings.CutPrefix(name, "img_txt_enc.transformer_encoder_2."); ok {
			name = "img_txt_enc.transformer_encoder_1." + rest
		}
	}
	out := []string{name}
	if strings.HasSuffix(name, "LayerNorm.weight") {
		out = append(out, strings.TrimSuffix(name, "weight")+"gamma")
	} else if strings.HasSuffix(name, "LayerNorm.bias") {
		out = append(out, strings.TrimSuffix(name, "bias")+"beta")
	}
	return out
}

// fillOfficial copies the weights of w into m and accounts for every
// tensor of w.
func fillOfficial(m Model, w *torchWeights, rep *ImportReport) error {
	cfg := m.Config()
	var want []nn.Named
	var cls nn.Named
	for _, p := range m.Params() {
		if p.Name == "img_txt_enc.img_enc.cls" {
			cls = p // computed below
			continue
		}
		want = append(want, p)
	}
	used, err := w.fill(want, func(name string) []string { return officialSource(name, cfg.Model.SharedTransformer) })
	var errs []error
	if err != nil {
		errs = append(errs, err)
	}
	var unknown []string
	for _, n := range w.unused(used) {
		reason := ""
		for _, ig := range ignoredOfficial {
			if ig.re.MatchString(n) {
				reason = ig.reason
			}
		}
		if cfg.Model.Name == "teran" && (strings.HasPrefix(n, "img_txt_enc.text_aggregation.") || strings.HasPrefix(n, "img_txt_enc.image_aggregation.")) {
			reason = "the aggregator of the global vector, which TERAN's alignment score does not use"
		}
		if reason == "" {
			unknown = append(unknown, fmt.Sprintf("%q", n))
			continue
		}
		rep.Ignored = append(rep.Ignored, n+": "+reason)
	}
	if len(unknown) > 0 {
		errs = append(errs, fmt.Errorf("%s: %d tensors that xmr's %s has no place for: %s", w.path, len(unknown), cfg.Model.Name, strings.Join(unknown, ", ")))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("import: %w", err)
	}
	if err := checkAlias(w, "img_txt_enc.txt_enc.word_embeddings.weight", "img_txt_enc.txt_enc.bert_model.embeddings.word_embeddings.weight"); err != nil {
		return err
	}
	rep.Tensors = len(want)
	if cls.T != nil {
		t := m.(*TERN)
		zeroRegion(t.PosMap1, t.PosMap2, cls.T.Data)
		rep.Tensors++
		rep.Notes = append(rep.Notes, "I-CLS: the box MLP's output for the zero region of slot 0, as the official code computes it")
	}
	if cfg.ImageModel.Slot0 == "zero-region" {
		rep.Notes = append(rep.Notes, "slot 0: a zero region through the box MLP, as in the official code (image-model.slot0: zero-region)")
	}
	sort.Strings(rep.Ignored)
	return nil
}

// zeroRegion writes into out the box MLP's output for a zero feature with
// a zero box code: map.2(ReLU(map.0's bias)).
func zeroRegion(map0, map2 *nn.Linear, out []float32) {
	in, h := map2.In(), len(out)
	for j := 0; j < h; j++ {
		s := float64(map2.B.Data[j])
		for k := 0; k < in; k++ {
			s += float64(map2.W.Data[j*in+k]) * math.Max(0, float64(map0.B.Data[k]))
		}
		out[j] = float32(s)
	}
}

// checkAlias refuses a file whose alias of a tensor (saved twice under two
// names) differs from it.
func checkAlias(w *torchWeights, alias, of string) error {
	a, b := w.tensors[alias], w.tensors[of]
	if a == nil || b == nil || a == b {
		return nil
	}
	if a.Storage() == b.Storage() && a.Offset == b.Offset && fmt.Sprint(a.Shape, a.Stride) == fmt.Sprint(b.Shape, b.Stride) {
		return nil
	}
	av, err1 := a.Float32()
	bv, err2 := b.Float32()
	if err1 != nil || err2 != nil || len(av) != len(bv) {
		return fmt.Errorf("import %s: %q is not the same table as %q", w.path, alias, of)
	}
	for i := range av {
		if av[i] != bv[i] {
			return fmt.Errorf("import %s: %q differs from %q at element %d: the file is inconsistent", w.path, alias, of, i)
		}
	}
	return nil
}
