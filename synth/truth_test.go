package synth

import (
	"math"
	"slices"
	"strings"
	"testing"
)

// sample generates n training images of a small world.
func sample(t *testing.T, n int, cfg Config) (*World, []*Image) {
	t.Helper()
	if cfg.N == 0 {
		cfg.N = 5 * n
	}
	w, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	imgs := make([]*Image, n)
	for i := range imgs {
		if imgs[i], err = w.Image("train", i); err != nil {
			t.Fatal(err)
		}
	}
	return w, imgs
}

// referringWords are the words that may carry a region: colour and size
// adjectives, category nouns (every word of multi-word nouns) and counts.
func referringWords() map[string]bool {
	m := map[string]bool{"pair": true}
	for _, c := range countWords {
		m[c] = c != ""
	}
	for _, c := range Colours {
		for _, w := range c.Words {
			m[w] = true
		}
	}
	for _, s := range SizeWords {
		for _, w := range s {
			m[w] = true
		}
	}
	for _, c := range Categories {
		for _, n := range c.Nouns {
			for _, w := range strings.Fields(n.Singular + " " + n.Plural) {
				m[w] = true
			}
		}
	}
	return m
}

func TestGroundTruth(t *testing.T) {
	_, imgs := sample(t, 150, Config{Seed: 3, Dim: 8})
	vocab := referringWords()
	groups := 0
	for _, img := range imgs {
		objs := img.Scene.Objects
		for _, o := range objs {
			reg := img.Regions[o.Region]
			if reg.Kind != KindObject || iou(reg.Box, boxF(o.Box)) < 0.7 {
				t.Errorf("%s: object's region %d is %v, box %v vs object box %v", img.ID, o.Region, reg.Kind, reg.Box, o.Box)
			}
		}
		seen := map[string]bool{}
		for _, c := range img.Captions {
			if bare := strings.TrimSuffix(c.Text, " ."); seen[bare] {
				t.Errorf("%s: caption %q twice", img.ID, bare)
			} else {
				seen[bare] = true
			}
			words := strings.Fields(c.Text)
			if strings.Join(words, " ") != c.Text || strings.ToLower(c.Text) != c.Text {
				t.Errorf("%s: caption %q is not lower-case single-spaced", img.ID, c.Text)
			}
			if len(c.Words) == 0 {
				t.Errorf("%s: caption %q has no aligned word", img.ID, c.Text)
			}
			for _, ref := range c.Words {
				if ref.Index < 0 || ref.Index >= len(words) || words[ref.Index] != ref.Word {
					t.Fatalf("%s: %q: ref %+v does not match the words", img.ID, c.Text, ref)
				}
				if !vocab[ref.Word] {
					t.Errorf("%s: %q: %q is not a referring word", img.ID, c.Text, ref.Word)
				}
				o := objs[ref.Object]
				if o.Region != ref.Region {
					t.Errorf("%s: %q: word %q region %d, its object's region is %d", img.ID, c.Text, ref.Word, ref.Region, o.Region)
				}
				if iou(img.Regions[ref.Region].Box, boxF(o.Box)) < 0.7 {
					t.Errorf("%s: %q: word %q region box overlaps its object little", img.ID, c.Text, ref.Word)
				}
				// The word names the object's look.
				if slices.Contains(Colours[o.Colour].Words, ref.Word) {
					continue
				}
				for ci, col := range Colours {
					if ci != o.Colour && slices.Contains(col.Words, ref.Word) {
						t.Errorf("%s: %q: colour word %q for a %s object", img.ID, c.Text, ref.Word, Colours[o.Colour].Name)
					}
				}
				if len(ref.Objects) > 0 {
					groups++
					if len(ref.Objects) != len(ref.Regions) || ref.Objects[0] != ref.Object || !slices.IsSorted(ref.Regions) || ref.Regions[0] != ref.Region {
						t.Errorf("%s: %q: bad group %+v", img.ID, c.Text, ref)
					}
					for k, oi := range ref.Objects {
						if !sameLook(&objs[oi], &o) || objs[oi].Region != ref.Regions[k] {
							t.Errorf("%s: %q: group member %d does not look like the first", img.ID, c.Text, oi)
						}
					}
				}
			}
		}
	}
	if groups == 0 {
		t.Error("no count group in 150 images")
	}
}

func TestCaptionVariety(t *testing.T) {
	_, imgs := sample(t, 200, Config{Seed: 4, Dim: 8})
	text := ""
	lengths := map[int]int{}
	n := 0
	for _, img := range imgs {
		for _, c := range img.Captions {
			text += " " + c.Text + " |"
			l := len(strings.Fields(strings.TrimSuffix(c.Text, " .")))
			lengths[l]++
			n++
		}
	}
	for _, phrase := range []string{
		" two ", " three ", " pair of ", // counts
		" left of ", " right of ", " above ", " below ", " next to ", " beside ", // relations
		" disc", " circle", " box", " square", " rhombus", " diamond", " hoop", " ring", // noun synonyms
		" crimson ", " red ", " azure ", " blue ", " small ", " tiny ", " big ", " large ", // adjectives
		"a photo of ", "there is ", " in the picture", " corner", // distractors, locations
	} {
		if !strings.Contains(text, phrase) {
			t.Errorf("no caption contains %q", phrase)
		}
	}
	inRange := 0
	for l, c := range lengths {
		if l >= 8 && l <= maxCaptionWords {
			inRange += c
		}
		if l < 5 || l > 20 {
			t.Errorf("%d captions of %d words", c, l)
		}
	}
	if float64(inRange) < 0.9*float64(n) {
		t.Errorf("only %d of %d captions have 8-%d words: %v", inRange, n, maxCaptionWords, lengths)
	}
	// Every noun of every category is used.
	for _, c := range Categories {
		for _, nn := range c.Nouns {
			if !strings.Contains(text, " "+nn.Singular+" ") && !strings.Contains(text, " "+nn.Plural+" ") {
				t.Errorf("noun %q never used", nn.Singular)
			}
		}
	}
}

// TestRelationsTrue checks the spatial words of two-object relation
// captions against the scene.
func TestRelationsTrue(t *testing.T) {
	_, imgs := sample(t, 150, Config{Seed: 6, Dim: 8})
	checked := 0
	for _, img := range imgs {
		for _, c := range img.Captions {
			words := strings.Fields(c.Text)
			// Find "A ... left of ... B" where A and B are the objects of the
			// nouns before and after the relation word.
			for k, w := range words {
				var rel int
				switch w {
				case "left":
					rel = relLeft
				case "right":
					rel = relRight
				case "above":
					rel = relAbove
				case "below", "under", "beneath", "underneath":
					rel = relBelow
				default:
					continue
				}
				if k > 0 && (words[k-1] == "top" || words[k-1] == "bottom" || words[k-1] == "upper" || words[k-1] == "lower") || (k+1 < len(words) && words[k+1] == "corner") {
					continue // "top left corner"
				}
				if slices.Contains(words[:k], "and") || slices.Contains(words[k:], "and") {
					continue // triples: checked by construction only
				}
				before, after := -1, -1
				for _, ref := range c.Words {
					if ref.Index < k {
						before = ref.Object
					} else if after < 0 {
						after = ref.Object
					}
				}
				if before < 0 || after < 0 || k+1 < len(words) && words[k+1] == "side" {
					continue
				}
				a, b := img.Scene.Objects[before], img.Scene.Objects[after]
				if words[0] == "to" || words[0] == "left" || words[0] == "right" || words[0] == "above" || words[0] == "below" || words[0] == "under" || words[0] == "beneath" || words[0] == "underneath" || words[0] == "over" {
					a, b = b, a // "left of B there is A"
				}
				dx, dy := b.X-a.X, b.Y-a.Y
				ok := map[int]bool{relLeft: dx > 0, relRight: dx < 0, relAbove: dy > 0, relBelow: dy < 0}[rel]
				if !ok {
					t.Errorf("%s: %q: wrong relation (dx %.0f, dy %.0f)", img.ID, c.Text, dx, dy)
				}
				checked++
			}
		}
	}
	if checked < 50 {
		t.Errorf("only %d relations checked", checked)
	}
}

// TestFamilies checks that variants share all but one change with their
// base scene.
func TestFamilies(t *testing.T) {
	_, imgs := sample(t, 120, Config{Seed: 8, Dim: 8})
	variants := 0
	for _, img := range imgs {
		s := img.Scene
		if s.Variant == 0 {
			continue
		}
		variants++
		base := imgs[s.Family-imgs[0].Global].Scene
		if base.Variant != 0 || base.Family != s.Family {
			t.Fatalf("%s: family %d base is not a base scene", img.ID, s.Family)
		}
		same := 0
		for _, o := range s.Objects {
			for _, p := range base.Objects {
				if o.Category == p.Category && o.Colour == p.Colour && o.X == p.X && o.Y == p.Y && o.Large == p.Large {
					same++
					break
				}
			}
		}
		if n := max(len(s.Objects), len(base.Objects)); same < n-2 || s.Change == "" {
			t.Errorf("%s: shares %d of %d objects with its base (change %q)", img.ID, same, n, s.Change)
		}
	}
	if variants < 30 {
		t.Errorf("%d variants in 120 images", variants)
	}
}

// TestFeaturesCarryPixels classifies object regions by their nearest
// neighbour in feature space (leave one out): colour and category must be
// recovered well above chance (10%), which they can only be from pixels.
func TestFeaturesCarryPixels(t *testing.T) {
	w, imgs := sample(t, 150, Config{Seed: 9, Dim: 256})
	var feats [][]float32
	var colour, cat []int
	for _, img := range imgs {
		f := w.Features(img)
		for _, o := range img.Scene.Objects {
			feats = append(feats, f[o.Region*256:(o.Region+1)*256])
			colour = append(colour, o.Colour)
			cat = append(cat, o.Category)
		}
	}
	n := len(feats)
	okColour, okCat := 0, 0
	for i := range n {
		best, bestD := -1, math.Inf(1)
		for j := range n {
			if j == i {
				continue
			}
			var d float64
			for k, v := range feats[i] {
				e := float64(v - feats[j][k])
				d += e * e
			}
			if d < bestD {
				best, bestD = j, d
			}
		}
		if colour[best] == colour[i] {
			okColour++
		}
		if cat[best] == cat[i] {
			okCat++
		}
	}
	accC, accS := float64(okColour)/float64(n), float64(okCat)/float64(n)
	t.Logf("1-NN over %d object regions: colour %.2f, category %.2f (chance 0.10)", n, accC, accS)
	if accC < 0.8 || accS < 0.5 {
		t.Errorf("features carry too little pixel information: colour %.2f, category %.2f", accC, accS)
	}
}

// TestCaptionExtremes captions scenes at the limits: six look-alikes, two
// objects only, every category and colour.
func TestCaptionExtremes(t *testing.T) {
	r := newRNG().reset(1, 99, 0)
	var c captioner
	for k := range 200 {
		var s Scene
		n := 2 + k%5
		same := k%3 == 0
		for i := range n {
			o := Object{Category: (k + i) % len(Categories), Colour: (k * 7) % len(Colours), Large: k%2 == 0}
			if same {
				o.Category = k % len(Categories)
			}
			o.RGB = Colours[o.Colour].RGB
			if !place(r, &o, s.Objects, -1) {
				continue
			}
			s.Objects = append(s.Objects, o)
		}
		Render(&s)
		regions := proposals(&s, 36, r, nil)
		caps := c.captions(&s, r, nil)
		if len(caps) != CaptionsPerImage {
			t.Fatalf("%d captions", len(caps))
		}
		for _, cp := range caps {
			words := strings.Fields(cp.Text)
			for _, ref := range cp.Words {
				if words[ref.Index] != ref.Word || ref.Region >= len(regions) {
					t.Fatalf("scene %d: %q: bad ref %+v", k, cp.Text, ref)
				}
			}
		}
	}
}
