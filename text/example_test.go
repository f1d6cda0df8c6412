package text_test

import (
	"fmt"
	"strings"

	"github.com/xmr-project/xmr/text"
)

func ExampleBasicTokenize() {
	fmt.Printf("%+q\n", text.BasicTokenize("Héllo, WORLD!  A man's \u535A\u63A8."))
	// Output: ["hello" "," "world" "!" "a" "man" "'" "s" "\u535a" "\u63a8" "."]
}

func ExampleWordPiece_Encode() {
	vocab := text.NewVocab([]string{"[PAD]", "[UNK]", "[CLS]", "[SEP]", "un", "##want", "##ed", "runn", "##ing", ","})
	wp, err := text.NewWordPiece(vocab)
	if err != nil {
		panic(err)
	}
	caption := "Unwanted, running"
	e := wp.Encode(caption, 0)
	fmt.Println(wp.Tokens(e.IDs))
	fmt.Println(e.IDs)
	fmt.Println(e.Words)
	// Tokens of each whitespace word of the caption.
	fmt.Println(text.WordTokens(e.Words, len(strings.Fields(caption))))
	// Output:
	// [[CLS] un ##want ##ed , runn ##ing [SEP]]
	// [2 4 5 6 9 7 8 3]
	// [-1 0 0 0 0 1 1 -1]
	// [[1 2 3 4] [5 6]]
}

func ExampleWordPiece_EncodeBatch() {
	vocab := text.NewVocab([]string{"[PAD]", "[UNK]", "[CLS]", "[SEP]", "a", "dog", "runs"})
	wp, _ := text.NewWordPiece(vocab)
	b := wp.EncodeBatch([]string{"A dog runs", "a dog"}, text.EncodeOptions{MaxLen: 16})
	for i := range b.B {
		fmt.Println(b.Row(i), b.Mask[i*b.T:(i+1)*b.T])
	}
	// Output:
	// [2 4 5 6 3] [true true true true true]
	// [2 4 5 3 0] [true true true true false]
}

func ExampleBuildWordVocab() {
	wv := text.BuildWordVocab([]string{"A dog runs.", "A cat sleeps.", "The dog barks."}, 2)
	fmt.Println(wv.Vocab().Tokens())
	fmt.Println(wv.Encode("a dog flies.", 0).IDs)
	// Output:
	// [<pad> <start> <end> <unk> . a dog]
	// [1 5 6 3 4 2]
}

func ExampleStopWordMask() {
	tokens := []string{"[CLS]", "a", "man", "on", "the", "##ir", "boat", "[SEP]"}
	words := []int32{-1, 0, 1, 2, 3, 3, 4, -1}
	fmt.Println(text.StopWordMask(tokens, words))
	// Output: [false true false true true true false false]
}
