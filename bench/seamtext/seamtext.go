// Package seamtext is `xmr bench seam-text`: SEAM's speed claim (sec. 4.4,
// Fig. 6), the time to encode a batch of 100 captions of 25 to 500 words
// with SEAM-E, SEAM-C and SEAM-G, against TERAN's text pipeline (BERT's
// first 6 layers, the projection and 2 transformer layers), all at the
// papers' sizes with random weights, in one run.
package seamtext

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strconv"
	"time"

	"github.com/xmr-project/xmr/bench"
	"github.com/xmr-project/xmr/model"
	"github.com/xmr-project/xmr/tensor"
	"github.com/xmr-project/xmr/text"
	"github.com/xmr-project/xmr/train"
)

// Benchmark is `xmr bench seam-text [WORDS...]`.
var Benchmark = bench.Benchmark{
	Name:    "seam-text",
	Summary: "SEAM's claim: encode 100 captions of 25-500 words, SEAM-E/C/G vs TERAN's text pipeline [WORDS..., default 25 50 100 250 500]",
	Run:     run,
}

// encoders are the timed text encoders: the paper-size built-in configs.
var encoders = []struct{ label, config string }{
	{"SEAM-E", "seam-e"},
	{"SEAM-C", "seam-c"},
	{"SEAM-G", "seam-g"},
	{"TERAN", "teran-mrsw"},
}

// batchSize is the paper's batch of descriptions.
const batchSize = 100

// run builds the four models and, for each caption length, times each
// model's text encoder (no tape) on a batch of random words, model after
// model (see timeEncode).
func run(ctx context.Context, opts bench.Options) error {
	lengths := []int{25, 50, 100, 250, 500}
	reps := 10 // the paper averages 10 runs
	if opts.Quick {
		lengths, reps = []int{25}, 1
	}
	if len(opts.Args) > 0 {
		lengths = lengths[:0]
		for _, a := range opts.Args {
			n, err := strconv.Atoi(a)
			if err != nil || n < 1 || n > 510 {
				return fmt.Errorf("caption length %q: want a number of words from 1 to 510 (BERT reads 512 tokens)", a)
			}
			lengths = append(lengths, n)
		}
	}
	models := make([]model.Model, len(encoders))
	for i, e := range encoders {
		m, err := build(e.config, opts.Quick)
		if err != nil {
			return fmt.Errorf("%s: %w", e.config, err)
		}
		models[i] = m
	}
	rng := rand.New(rand.NewPCG(1, 1))
	for _, words := range lengths {
		times := make([]float64, len(models))
		runs := make([]int, len(models))
		for i, m := range models {
			if err := ctx.Err(); err != nil {
				return err
			}
			times[i], runs[i] = timeEncode(m, randomBatch(rng, m, words), reps)
		}
		teran := times[len(times)-1]
		for i, e := range encoders {
			r := bench.Result{Name: "seam-text " + e.label, Metric: fmt.Sprintf("%d x %d words", batchSize, words), Value: times[i], Unit: "s",
				Note: fmt.Sprintf("%s, mean of %d, %d CPUs", e.config, runs[i], runtime.NumCPU())}
			if i < len(encoders)-1 {
				r = r.WithPeer("TERAN text", teran, false)
			}
			opts.Emit(r)
		}
	}
	return nil
}

// timeEncode returns the mean time in seconds of encoding tx with m and
// the number of passes it averages: after an untimed first pass
// (allocations, pools), up to reps passes or 2 seconds, whichever ends
// first. A first pass longer than 2 seconds is the measurement itself:
// allocation is then noise, and repeating would take minutes.
func timeEncode(m model.Model, tx model.Texts, reps int) (float64, int) {
	const enough = 2 * time.Second
	start := time.Now()
	m.EncodeTexts(nil, tx)
	if first := time.Since(start); first > enough {
		return first.Seconds(), 1
	}
	var total time.Duration
	n := 0
	for n < reps && (n == 0 || total < enough) {
		start = time.Now()
		m.EncodeTexts(nil, tx)
		total += time.Since(start)
		n++
	}
	return total.Seconds() / float64(n), n
}

// build makes the model of a built-in config with random weights over a
// vocabulary of its size: BERT's 30,522 WordPiece tokens for TERAN, 10,000
// words (about COCO's) for SEAM. quick shrinks the models to test sizes.
func build(name string, quick bool) (model.Model, error) {
	if quick {
		name += "-small"
	}
	cfg, err := train.LoadConfig(name)
	if err != nil {
		return nil, err
	}
	mc := cfg.ModelConfig()
	mc.TextModel.Pretrain = "" // the same sizes, random weights: no download
	// Every word counts: SEAM cuts none; BERT at most its positions.
	mc.MaxCaptionTokens = 0
	if mc.TextModel.Name == "bert" {
		mc.MaxCaptionTokens = mc.TextModel.MaxPositions
	}
	var tok model.Tokenizer
	if mc.TokenizerKind() == "wordpiece" {
		tok, err = text.NewWordPiece(text.NewVocab(vocab(max(mc.TextModel.VocabSize, 5), "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")))
	} else {
		tok, err = text.NewWordVocab(text.NewVocab(vocab(10000, text.WordPad, text.WordStart, text.WordEnd, text.WordUnk)))
	}
	if err != nil {
		return nil, err
	}
	return model.New(mc, tok, 1)
}

// vocab returns n tokens: the specials, then made-up words.
func vocab(n int, specials ...string) []string {
	v := append(make([]string, 0, n), specials...)
	for i := len(v); i < n; i++ {
		v = append(v, fmt.Sprintf("w%d", i))
	}
	return v
}

// randomBatch is batchSize captions of the given number of random words,
// between m's start and end tokens (the first two ids after padding:
// <start>/<end> of a word vocabulary, [CLS]/[SEP] of BERT's).
func randomBatch(rng *rand.Rand, m model.Model, words int) model.Texts {
	first, last := text.WordStartID, text.WordEndID
	special := int32(4) // ids below are specials
	if m.Config().TokenizerKind() == "wordpiece" {
		first, last, special = 2, 3, 5
	}
	n := m.Tokenizer().Vocab().Len()
	t := words + 2
	tx := model.Texts{IDs: make([]int32, batchSize*t), Valid: tensor.Full(1, batchSize, t), Align: tensor.Full(1, batchSize, t),
		Words: make([]int32, batchSize*t), Lengths: make([]int, batchSize)}
	for i := range batchSize {
		tx.Lengths[i] = t
		row := tx.IDs[i*t : (i+1)*t]
		row[0], row[t-1] = first, last
		tx.Align.Data[i*t], tx.Align.Data[i*t+t-1] = 0, 0
		tx.Words[i*t], tx.Words[i*t+t-1] = -1, -1
		for j := 1; j < t-1; j++ {
			row[j] = special + int32(rng.IntN(n-int(special)))
			tx.Words[i*t+j] = int32(j - 1)
		}
	}
	return tx
}
