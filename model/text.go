package model

import (
	"math"
	"math/rand/v2"

	"github.com/xmr-project/xmr/nn"
	"github.com/xmr-project/xmr/tensor"
)

// TextEncoder turns token ids into contextual word vectors.
type TextEncoder interface {
	// Forward encodes ids (row-major (C, T)) whose real tokens are marked
	// in valid (C, T) and counted in lengths; it returns (C, T, OutDim()).
	Forward(tp *tensor.Tape, ids []int32, valid *tensor.Tensor, lengths []int) *tensor.Tensor
	// OutDim is the width of the word vectors.
	OutDim() int
	// Params lists the trainable parameters with their names.
	Params() []nn.Named
}

// bertText adapts BERT to TextEncoder.
type bertText struct{ *BERT }

func (b bertText) OutDim() int { return b.Cfg.HiddenSize }

// rnnText is the Bi-GRU / Bi-LSTM text encoder of the TERAN ablation (sec.
// 8.4): 300-d word embeddings, then a recurrent network of hidden size 512
// whose two directions are concatenated into 1024-d word vectors.
type rnnText struct {
	Emb  *nn.Embedding
	GRU  *nn.GRU
	LSTM *nn.LSTM
	H    int
	bi   bool
}

func (r *rnnText) OutDim() int {
	if r.bi {
		return 2 * r.H
	}
	return r.H
}

func (r *rnnText) Params() []nn.Named {
	ps := nn.Prefix("embed", r.Emb.Params())
	if r.GRU != nil {
		return append(ps, nn.Prefix("rnn", r.GRU.Params())...)
	}
	return append(ps, nn.Prefix("rnn", r.LSTM.Params())...)
}

func (r *rnnText) Forward(tp *tensor.Tape, ids []int32, valid *tensor.Tensor, lengths []int) *tensor.Tensor {
	c, t := valid.Shape[0], valid.Shape[1]
	x := r.Emb.Forward(tp, ids, c, t) // (C, T, E)
	var out *tensor.Tensor
	if r.GRU != nil {
		out, _ = r.GRU.Forward(tp, x, lengths) // (C, T, H*dirs)
	} else {
		out, _ = r.LSTM.Forward(tp, x, lengths) // (C, T, H*dirs)
	}
	return out
}

// transformerText is word embeddings plus sinusoidal positions plus
// transformer encoder layers.
type transformerText struct {
	Emb *nn.Embedding
	Enc *nn.TransformerEncoder
	pe  *tensor.Tensor // (maxLen, D) sinusoidal table
	D   int
}

func (m *transformerText) OutDim() int { return m.D }

func (m *transformerText) Params() []nn.Named {
	return append(nn.Prefix("embed", m.Emb.Params()), nn.Prefix("transformer_encoder", m.Enc.Params())...)
}

func (m *transformerText) Forward(tp *tensor.Tape, ids []int32, valid *tensor.Tensor, lengths []int) *tensor.Tensor {
	c, t := valid.Shape[0], valid.Shape[1]
	x := m.Emb.Forward(tp, ids, c, t) // (C, T, D)
	if t > m.pe.Shape[0] {
		m.pe = sinusoid(2*t, m.D)
	}
	pe := tensor.FromData(m.pe.Data[:t*m.D], 1, t, m.D)
	x = tp.Add(tp.Scale(x, float32(math.Sqrt(float64(m.D)))), pe)
	return m.Enc.Forward(tp, x, valid) // (C, T, D)
}

// sinusoid is the positional encoding of "Attention is all you need".
func sinusoid(n, d int) *tensor.Tensor {
	t := tensor.New(n, d)
	for p := 0; p < n; p++ {
		for i := 0; i < d; i += 2 {
			ang := float64(p) / math.Pow(10000, float64(i)/float64(d))
			t.Data[p*d+i] = float32(math.Sin(ang))
			if i+1 < d {
				t.Data[p*d+i+1] = float32(math.Cos(ang))
			}
		}
	}
	return t
}

// newTextEncoder builds the text pipeline that cfg selects.
func newTextEncoder(rng *rand.Rand, cfg TextConfig) (TextEncoder, error) {
	switch cfg.Name {
	case "bert":
		var b *BERT
		if cfg.Pretrain != "" {
			var err error
			if b, err = LoadBERT(cfg.Pretrain, cfg.ExtractionHiddenLayer, cfg.Dropout); err != nil {
				return nil, err
			}
		} else {
			b = NewBERT(rng, BERTConfig{VocabSize: cfg.VocabSize, HiddenSize: cfg.WordDim, NumHiddenLayers: cfg.ExtractionHiddenLayer,
				NumAttentionHeads: cfg.Heads, IntermediateSize: cfg.FF, MaxPositionEmbeddings: cfg.MaxPositions,
				TypeVocabSize: 2, LayerNormEps: 1e-12, HiddenAct: "gelu"}, cfg.ExtractionHiddenLayer, cfg.Dropout)
		}
		b.SetTrainable(cfg.FineTune)
		return bertText{b}, nil
	case "gru", "lstm":
		r := &rnnText{Emb: nn.NewEmbedding(rng, cfg.VocabSize, cfg.EmbedDim), H: cfg.Hidden, bi: cfg.Bidirectional}
		layers := max(cfg.Layers, 1)
		if cfg.Name == "gru" {
			r.GRU = nn.NewGRU(rng, cfg.EmbedDim, cfg.Hidden, layers, cfg.Bidirectional)
		} else {
			r.LSTM = nn.NewLSTM(rng, cfg.EmbedDim, cfg.Hidden, layers, cfg.Bidirectional)
		}
		return r, nil
	default: // "transformer"
		d := cfg.EmbedDim
		return &transformerText{
			Emb: nn.NewEmbedding(rng, cfg.VocabSize, d),
			Enc: nn.NewTransformerEncoder(rng, max(cfg.Layers, 1), d, max(cfg.Heads, 1), max(cfg.FF, 1), cfg.Dropout, nn.ReLU),
			pe:  sinusoid(64, d), D: d,
		}, nil
	}
}
