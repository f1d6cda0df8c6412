package data_test

import (
	"context"
	"fmt"
	"log"
	"os"

	"github.com/xmr-project/xmr/data"
)

// Write a tiny precomp split with boxes and image sizes, then load it back.
func ExampleLoadPrecomp() {
	dir, err := os.MkdirTemp("", "precomp")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	// One image, 2 region slots of 3 features; only the first is valid.
	s := &data.Split{
		Name: "test",
		Images: &data.Regions{
			N: 1, R: 2, D: 3,
			Feat:  []float32{1, 2, 3, 0, 0, 0},
			Boxes: []float32{0.25, 0.5, 0.75, 1, 0, 0, 0, 0},
			Count: []int{1},
		},
		Captions:     []string{"a dog", "a brown dog", "a dog on grass", "dog", "the dog runs"},
		CapsPerImage: 5,
		ImageIDs:     []string{"391895"},
		Sizes:        [][2]float32{{640, 480}},
	}
	if err := data.WritePrecomp(context.Background(), dir, s); err != nil {
		log.Fatal(err)
	}

	t, err := data.LoadPrecomp(context.Background(), dir, "test", nil)
	if err != nil {
		log.Fatal(err)
	}
	defer t.Close()
	g := t.Images
	fmt.Println("images", g.N, "slots", g.R, "dim", g.D, "valid", g.NumRegions(0))
	fmt.Println("id", t.ID(0), "size", t.Sizes[0])
	fmt.Println("box", g.Box5(0, 0))
	fmt.Println("caption 3 is of image", t.ImageOf(3), "-", t.CaptionsOf(0)[3])
	// Output:
	// images 1 slots 2 dim 3 valid 1
	// id 391895 size [640 480]
	// box [0.25 0.5 0.75 1 0.25]
	// caption 3 is of image 0 - dog
}
