package model

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"

	"github.com/xmr-project/xmr/tensor"
	"github.com/xmr-project/xmr/wordvec"
)

// wordTableSuffixes name the input word-embedding tables of the text
// encoders: BERT's and the word encoders' (TERAN, TERN, MEMBER, SEAM,
// VSE++). MEMBER's decoder embeddings are not among them.
var wordTableSuffixes = []string{"embeddings.word_embeddings.weight", "txt_enc.embed.weight"}

// WordTable returns m's input word-embedding table (vocabulary x width).
func WordTable(m Model) (*tensor.Tensor, error) {
	var found *tensor.Tensor
	for _, p := range m.Params() {
		for _, s := range wordTableSuffixes {
			if strings.HasSuffix(p.Name, s) {
				if found != nil {
					return nil, fmt.Errorf("model %s: two word-embedding tables", m.Config().Model.Name)
				}
				found = p.T
			}
		}
	}
	if found == nil || len(found.Shape) != 2 {
		return nil, fmt.Errorf("model %s: no word-embedding table", m.Config().Model.Name)
	}
	return found, nil
}

// WordVectorsReport says what InitWordVectors did.
type WordVectorsReport struct {
	// Found and Vocab count the vocabulary's tokens with a vector and all
	// of them.
	Found, Vocab int
	// Missing lists up to 20 tokens without one.
	Missing []string
}

// InitWordVectors sets the rows of m's word-embedding table whose tokens
// have a vector in v: each vector is standardised (every dimension
// centred and scaled with the found vectors' mean and deviation), carried
// to the table's width by a random map with orthonormal columns (rows
// when the table is narrower), drawn from seed, which keeps the words'
// dot products up to one scale, and the rows made are scaled together to
// the table's initial root-mean-square, so that the rest of the encoder
// sees the scale it was initialised for. Tokens
// without a vector (the specials, words the file lacks) keep their random
// rows. The table stays trainable.
func InitWordVectors(m Model, v *wordvec.Vectors, seed uint64) (WordVectorsReport, error) {
	w, err := WordTable(m)
	if err != nil {
		return WordVectorsReport{}, err
	}
	voc := m.Tokenizer().Vocab()
	rows, width := w.Shape[0], w.Shape[1]
	if voc.Len() != rows {
		return WordVectorsReport{}, fmt.Errorf("model %s: the vocabulary has %d tokens, the word table %d rows", m.Config().Model.Name, voc.Len(), rows)
	}
	rep := WordVectorsReport{Vocab: rows}
	ids := []int{}
	for i := 0; i < rows; i++ {
		tok := voc.Token(int32(i))
		if _, ok := v.Words[tok]; ok {
			ids = append(ids, i)
		} else if len(rep.Missing) < 20 && !(strings.HasPrefix(tok, "[") || strings.HasPrefix(tok, "<")) {
			rep.Missing = append(rep.Missing, tok)
		}
	}
	rep.Found = len(ids)
	if rep.Found < 2 {
		return rep, fmt.Errorf("word vectors: %d of the vocabulary's %d tokens have one; want at least 2 (a vocabulary of another language or case?)", rep.Found, rows)
	}
	d := v.Dim
	mean, dev := make([]float64, d), make([]float64, d)
	for _, i := range ids {
		for k, x := range v.Words[voc.Token(int32(i))] {
			mean[k] += float64(x)
		}
	}
	for k := range mean {
		mean[k] /= float64(len(ids))
	}
	for _, i := range ids {
		for k, x := range v.Words[voc.Token(int32(i))] {
			dx := float64(x) - mean[k]
			dev[k] += dx * dx
		}
	}
	for k := range dev {
		dev[k] = math.Sqrt(dev[k] / float64(len(ids)))
		if dev[k] == 0 {
			dev[k] = 1
		}
	}
	var ss float64
	for _, x := range w.Data {
		ss += float64(x) * float64(x)
	}
	rms := math.Sqrt(ss / float64(len(w.Data)))
	q := orthonormal(rand.New(rand.NewPCG(seed, 0x776f7264)), width, d) // (width, d)
	z := make([]float64, d)
	proj := make([]float64, len(ids)*width)
	var ssProj float64
	for j, i := range ids {
		for k, x := range v.Words[voc.Token(int32(i))] {
			z[k] = (float64(x) - mean[k]) / dev[k]
		}
		row := proj[j*width : (j+1)*width]
		for r := range row {
			var s float64
			for k := range z {
				s += q[r*d+k] * z[k]
			}
			row[r] = s
			ssProj += s * s
		}
	}
	scale := rms / math.Sqrt(ssProj/float64(len(proj)))
	for j, i := range ids {
		for r, x := range proj[j*width : (j+1)*width] {
			w.Data[i*width+r] = float32(scale * x)
		}
	}
	return rep, nil
}

// orthonormal returns a (rows, cols) matrix, row-major, whose columns are
// orthonormal when rows >= cols, or whose rows are otherwise: Gram-Schmidt
// over Gaussian draws.
func orthonormal(rng *rand.Rand, rows, cols int) []float64 {
	tall := rows >= cols
	n, k := cols, rows // k vectors of length n, made orthonormal
	if tall {
		n, k = rows, cols
	}
	vecs := make([][]float64, k)
	for j := range vecs {
		for {
			x := make([]float64, n)
			for i := range x {
				x[i] = rng.NormFloat64()
			}
			for _, u := range vecs[:j] {
				var dot float64
				for i := range x {
					dot += x[i] * u[i]
				}
				for i := range x {
					x[i] -= dot * u[i]
				}
			}
			var norm float64
			for _, xi := range x {
				norm += xi * xi
			}
			if norm = math.Sqrt(norm); norm > 1e-6 {
				for i := range x {
					x[i] /= norm
				}
				vecs[j] = x
				break
			}
		}
	}
	out := make([]float64, rows*cols)
	for j, u := range vecs {
		for i, x := range u {
			if tall {
				out[i*cols+j] = x // column j
			} else {
				out[j*cols+i] = x // row j
			}
		}
	}
	return out
}
