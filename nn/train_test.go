package nn

import (
	"testing"

	"github.com/xmr-project/xmr/optim"
	"github.com/xmr-project/xmr/tensor"
)

// TestTinyTransformerLearns trains embedding -> 1 encoder layer -> max-pool
// -> linear on "does the sequence contain token 3?" over padded sequences of
// random length, with Adam and dropout, and expects a low loss and perfect
// accuracy on fresh data.
func TestTinyTransformerLearns(t *testing.T) {
	const (
		vocab, d, batch, maxLen = 8, 16, 32, 7
		steps                   = 300
	)
	rng := newRNG(5)
	emb := NewEmbedding(rng, vocab, d)
	enc := NewTransformerEncoder(rng, 1, d, 2, 32, 0.1, ReLU)
	head := NewLinear(rng, d, 2, true)
	var ps []Named
	ps = append(ps, Prefix("emb", emb.Params())...)
	ps = append(ps, Prefix("enc", enc.Params())...)
	ps = append(ps, Prefix("head", head.Params())...)
	params := Tensors(ps)
	opt, err := optim.NewAdam([]optim.Group{{Params: params, LR: 3e-3}}, optim.Config{})
	if err != nil {
		t.Fatal(err)
	}

	// batchOf draws sequences; about half contain token 3. Padding uses id 0
	// and is masked out of attention and pooling.
	batchOf := func() (ids []int32, valid *tensor.Tensor, labels []int32) {
		valid = tensor.New(batch, maxLen)
		for b := 0; b < batch; b++ {
			n := 2 + rng.IntN(maxLen-1)
			has := rng.IntN(2) == 1
			pos := rng.IntN(n)
			for j := 0; j < maxLen; j++ {
				id := int32(0)
				if j < n {
					valid.Data[b*maxLen+j] = 1
					id = int32(1 + rng.IntN(vocab-1))
					for id == 3 {
						id = int32(1 + rng.IntN(vocab-1))
					}
					if has && j == pos {
						id = 3
					}
				}
				ids = append(ids, id)
			}
			labels = append(labels, map[bool]int32{false: 0, true: 1}[has])
		}
		return ids, valid, labels
	}
	forward := func(tp *tensor.Tape, ids []int32, valid *tensor.Tensor) *tensor.Tensor {
		x := emb.Forward(tp, ids, batch, maxLen)                              // (B, T, D)
		h := enc.Forward(tp, x, valid)                                        // (B, T, D)
		pooled, _ := tp.Max(h, 1, false, tp.Reshape(valid, batch, maxLen, 1)) // (B, D)
		return head.Forward(tp, pooled)                                       // (B, 2)
	}
	tp := tensor.NewTape()
	var loss float32
	for step := 0; step < steps; step++ {
		tp.Reset()
		tp.Seed(9, uint64(step))
		ids, valid, labels := batchOf()
		l := tp.CrossEntropy(forward(tp, ids, valid), labels, -100)
		tp.Backward(l)
		opt.StepAndZeroGrad()
		loss = 0.9*loss + 0.1*l.Item()
		if step == 0 {
			loss = l.Item()
		}
	}
	tp.Reset()
	t.Logf("smoothed loss after %d steps: %.4f", steps, loss)
	if loss > 0.1 {
		t.Fatalf("smoothed training loss %.3f after %d steps, want < 0.1", loss, steps)
	}
	correct := 0
	for r := 0; r < 4; r++ {
		ids, valid, labels := batchOf()
		logits := forward(nil, ids, valid)
		for b, y := range labels {
			pred := int32(0)
			if logits.At(b, 1) > logits.At(b, 0) {
				pred = 1
			}
			if pred == y {
				correct++
			}
		}
	}
	if correct < 4*batch-2 {
		t.Fatalf("accuracy %d/%d on fresh batches", correct, 4*batch)
	}
}
