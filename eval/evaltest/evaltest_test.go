package evaltest

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

func TestCaptionSets(t *testing.T) {
	cases := []struct {
		name               string
		gen                func(nImages, perImage int, seed uint64) []string
		minWords, maxWords int
	}{
		{"Captions", Captions, 8, 25},
		{"SceneCaptions", SceneCaptions, 5, 30},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			caps := c.gen(40, 5, 1)
			if len(caps) != 200 {
				t.Fatalf("%d captions, want 200", len(caps))
			}
			if !slices.Equal(caps, c.gen(40, 5, 1)) {
				t.Error("the same seed gave other captions")
			}
			if slices.Equal(caps, c.gen(40, 5, 2)) {
				t.Error("another seed gave the same captions")
			}
			words := 0
			for _, s := range caps {
				n := len(strings.Fields(s))
				if n < c.minWords || n > c.maxWords || s[:1] != strings.ToUpper(s[:1]) {
					t.Errorf("caption %q: %d words, want %d to %d, capitalised", s, n, c.minWords, c.maxWords)
				}
				words += n
			}
			if mean := float64(words) / float64(len(caps)); mean < 8 || mean > 14 {
				t.Errorf("mean length %.1f words, want COCO's 8 to 14", mean)
			}
		})
	}
}

func ExampleSceneCaptions() {
	for _, c := range SceneCaptions(1, 3, 3) {
		fmt.Println(c)
	}
	// Output:
	// A table with a wooden sandwich and a wooden surfboard.
	// A table with a wooden sandwich and a wooden surfboard in front of the court.
	// There is a horse walking with a wooden sandwich on the table beside the grass.
}
