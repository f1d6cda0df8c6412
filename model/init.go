package model

import (
	"math"
	"math/rand/v2"

	"github.com/xmr-project/xmr/nn"
	"github.com/xmr-project/xmr/tensor"
)

// wordEmbeddingBound is the half-width of the uniform draw of the word
// embeddings that VSE++ and SEAM learn from scratch: their official code
// (VSE++'s EncoderText.init_weights, SEAM's global_initializer) draws them
// from U(-0.1, 0.1), not from PyTorch's default N(0, 1). The scale matters
// for learning: Adam moves every weight by about lr a step, so a table
// of N(0, 1) entries barely changes in a short run (lr 2e-4 for 100 steps
// is 0.02 against entries of size 1) and stays a fixed random code, while
// entries of size 0.06 are learned.
const wordEmbeddingBound = 0.1

// uniformEmbedding returns a vocab x dim word-embedding table drawn from
// U(-wordEmbeddingBound, wordEmbeddingBound).
func uniformEmbedding(rng *rand.Rand, vocab, dim int) *nn.Embedding {
	return &nn.Embedding{W: nn.Uniform(rng, wordEmbeddingBound, vocab, dim)}
}

// xavierLinear returns a linear map in -> out whose weight is drawn from
// Xavier's uniform U(-r, r), r = sqrt(6 / (in + out)), with a zero bias when
// bias: the initialisation of VSE++'s image projection in its official
// code (EncoderImagePrecomp.init_weights).
func xavierLinear(rng *rand.Rand, in, out int, bias bool) *nn.Linear {
	l := &nn.Linear{W: nn.Uniform(rng, math.Sqrt(6/float64(in+out)), out, in)}
	if bias {
		l.B = tensor.New(out).SetRequiresGrad(true)
	}
	return l
}
