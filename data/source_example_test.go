package data_test

import (
	"context"
	"fmt"
	"log"
	"os"

	"github.com/xmr-project/xmr/data"
)

// Load a split from a dataset whose format is detected from its files.
// The same code reads a bottom-up directory (bu_att/, bu_box/ and a
// dataset_*.json Karpathy file) or bottom-up TSV files.
func ExampleSource() {
	dir, err := os.MkdirTemp("", "dataset")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	// A precomp directory holding a one-image dev split.
	dev := &data.Split{
		Name:         "dev",
		Images:       &data.Regions{N: 1, R: 1, D: 2, Feat: []float32{0.5, 1}},
		Global:       true,
		Captions:     []string{"a", "b", "c", "d", "e"},
		CapsPerImage: 5,
	}
	if err := data.WritePrecomp(context.Background(), dir, dev); err != nil {
		log.Fatal(err)
	}

	src, err := data.Source{Path: dir}.Resolve() // detect once, load several splits
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("format:", src.Format)
	s, err := src.Load(context.Background(), "dev")
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	fmt.Println(s.Name, s.NumImages(), "image,", s.NumCaptions(), "captions")
	_, err = src.Load(context.Background(), "test")
	fmt.Println(err != nil)
	// Output:
	// format: precomp
	// dev 1 image, 5 captions
	// true
}
