package model

import (
	"fmt"
	"strings"

	"github.com/xmr-project/xmr/text"
)

// Tokenizer turns captions into padded id batches. BERT models use
// WordPiece; the word encoders (GRU, LSTM, transformer) a word vocabulary.
type Tokenizer interface {
	EncodeBatch(texts []string, opt text.EncodeOptions) *text.Batch
	// Vocab is the vocabulary (saved in checkpoints).
	Vocab() *text.Vocab
}

// NewTokenizer builds the tokenizer of kind "wordpiece" or "words" over a
// vocabulary.
func NewTokenizer(kind string, v *text.Vocab) (Tokenizer, error) {
	switch kind {
	case "wordpiece":
		return text.NewWordPiece(v)
	case "words":
		return text.NewWordVocab(v)
	}
	return nil, fmt.Errorf("unknown tokenizer %q (want wordpiece or words)", kind)
}

// BuildTokenizer makes the tokenizer a config asks for: the WordPiece
// vocabulary of a pretrained BERT (or the configured vocab file), or, for a
// randomly initialised BERT and the word encoders, a vocabulary of the
// training captions' words (those seen text-model.min-word-count times
// or more; every word by default).
func BuildTokenizer(cfg Config, trainCaptions []string) (Tokenizer, error) {
	tm := cfg.TextModel
	vocabPath := tm.Vocab
	if vocabPath == "" && tm.Name == "bert" && tm.Pretrain != "" {
		vocabPath = strings.TrimRight(tm.Pretrain, "/") + "/vocab.txt"
	}
	if vocabPath != "" {
		v, err := text.LoadVocab(vocabPath)
		if err != nil {
			return nil, err
		}
		return NewTokenizer(cfg.TokenizerKind(), v)
	}
	words := text.BuildWordVocab(trainCaptions, max(tm.MinWordCount, 1))
	if tm.Name != "bert" {
		return words, nil
	}
	// A WordPiece vocabulary whose pieces are the whole training words: the
	// tokenizer then splits exactly as BERT's basic tokenizer does.
	toks := []string{"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"}
	toks = append(toks, words.Vocab().Tokens()[4:]...)
	return text.NewWordPiece(text.NewVocab(toks))
}

// alignMask marks the tokens of a batch that take part in the alignment:
// real tokens except the start/end specials ([CLS]/[SEP], <start>/<end>)
// and, with excludeStop, stop words.
func alignMask(tok Tokenizer, b *text.Batch, excludeStop bool) []float32 {
	m := make([]float32, b.B*b.T)
	for i := 0; i < b.B; i++ {
		row := b.IDs[i*b.T : (i+1)*b.T]
		words := b.Words[i*b.T : (i+1)*b.T]
		var stop []bool
		if excludeStop {
			toks := make([]string, b.Lens[i])
			for k := range toks {
				toks[k] = tok.Vocab().Token(row[k])
			}
			stop = text.StopWordMask(toks, words[:b.Lens[i]])
		}
		for t := 0; t < b.Lens[i]; t++ {
			if words[t] < 0 || (stop != nil && stop[t]) {
				continue
			}
			m[i*b.T+t] = 1
		}
	}
	return m
}
