// Package text turns captions into token ids for the text encoders.
//
// It holds three tokenizers and their vocabularies:
//
//   - [WordPiece]: the BERT uncased tokenizer, exactly as Google's
//     tokenization.py (and HuggingFace's BasicTokenizer + WordpieceTokenizer
//     with do_lower_case=True): the basic tokenizer ([BasicTokenize]) cleans
//     the text, isolates CJK ideographs, lower-cases, strips accents and
//     splits off punctuation; then every word is cut into the longest
//     matching vocabulary pieces, "##" marking a continuation. It reads a
//     HuggingFace vocab.txt ([LoadVocab]).
//   - [WordVocab]: a word-level vocabulary for the GRU/LSTM/transformer word encoders,
//     built from training captions with the same basic tokenizer and no
//     WordPiece step.
//   - [IsStopWord] and [StopWordMask]: the NLTK English stop-word list, for
//     TERAN's stop-word-filter variant.
//
// Every token keeps the index of the whitespace word of the caption it came
// from (an index into strings.Fields(caption)), so that annotations given per
// caption word can be carried over to tokens ([WordTokens]).
//
// Batches of token sequences are padded into a row-major [Batch] with a mask.
// The tokenizers are safe for concurrent use.
package text
