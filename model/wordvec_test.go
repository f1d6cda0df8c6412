package model

import (
	"math"
	"strings"
	"testing"

	"github.com/xmr-project/xmr/wordvec"
)

func TestInitWordVectors(t *testing.T) {
	vecs := func(dim int) *wordvec.Vectors {
		v := &wordvec.Vectors{Dim: dim, Words: map[string][]float32{}}
		for i, w := range []string{"red", "blue", "circle", "square", "triangle"} { // triangle: not in the vocabulary
			vec := make([]float32, dim)
			for k := range vec {
				vec[k] = float32(math.Sin(float64(3*i+k*k+1))) + float32(k)
			}
			v.Words[w] = vec
		}
		return v
	}
	models := []struct {
		name string
		edit func(*Config)
	}{
		{"teran bert", nil},
		{"tern", named("tern")},
		{"teran gru", func(c *Config) { c.TextModel.Name = "gru" }},
		{"seam", named("seam")},
		{"vsepp", named("vsepp")},
		{"member", named("member")},
	}
	for _, mc := range models {
		for _, dim := range []int{3, 12} { // narrower and wider than every table
			m := tinyModel(t, mc.edit)
			w, err := WordTable(m)
			if err != nil {
				t.Fatalf("%s: %v", mc.name, err)
			}
			before := append([]float32(nil), w.Data...)
			v := vecs(dim)
			rep, err := InitWordVectors(m, v, 7)
			if err != nil {
				t.Fatalf("%s: %v", mc.name, err)
			}
			if rep.Found != 4 || rep.Vocab != w.Shape[0] || strings.Join(rep.Missing, " ") != "a left of" {
				t.Fatalf("%s: report %+v", mc.name, rep)
			}
			width := w.Shape[1]
			voc := m.Tokenizer().Vocab()
			var found [][]float32
			var z [][]float64 // the standardised vectors of the found words, in vocabulary order
			var ssBefore, ssAfter float64
			for i := 0; i < voc.Len(); i++ {
				row, old := w.Data[i*width:(i+1)*width], before[i*width:(i+1)*width]
				for _, x := range old {
					ssBefore += float64(x) * float64(x)
				}
				if _, ok := v.Words[voc.Token(int32(i))]; !ok {
					for k := range row {
						if row[k] != old[k] {
							t.Fatalf("%s: the row of %q (no vector) changed", mc.name, voc.Token(int32(i)))
						}
					}
					continue
				}
				found = append(found, row)
				for _, x := range row {
					ssAfter += float64(x) * float64(x)
				}
				z = append(z, standardised(v, voc.Token(int32(i))))
			}
			// The found rows keep the table's initial mean square.
			rmsBefore := math.Sqrt(ssBefore / float64(len(before)))
			rmsAfter := math.Sqrt(ssAfter / float64(len(found)*width))
			if math.Abs(rmsAfter-rmsBefore) > 1e-3*rmsBefore {
				t.Fatalf("%s, %d-d: rms %.5f, the table's %.5f", mc.name, dim, rmsAfter, rmsBefore)
			}
			// A narrower vector keeps its dot products with the others
			// (up to the one scale): the map's columns are orthonormal.
			if dim <= width {
				var zz float64
				for _, x := range z {
					zz += dot64(x, x)
				}
				s := rmsBefore / math.Sqrt(zz/float64(len(found)*width))
				for a := range found {
					for b := range found {
						got, want := dot32(found[a], found[b]), s*s*dot64(z[a], z[b])
						if math.Abs(got-want) > 1e-4*(1+math.Abs(want)) {
							t.Fatalf("%s: rows %d.%d = %.6f, want %.6f", mc.name, a, b, got, want)
						}
					}
				}
			}
		}
	}
}

func TestInitWordVectorsErrors(t *testing.T) {
	m := tinyModel(t, nil)
	_, err := InitWordVectors(m, &wordvec.Vectors{Dim: 2, Words: map[string][]float32{"red": {1, 2}, "perro": {3, 4}}}, 1)
	if err == nil || !strings.Contains(err.Error(), "1 of the vocabulary's 11 tokens have one") {
		t.Fatalf("error %v", err)
	}
	cfg := tinyConfig(func(c *Config) { c.TextModel.WordVectors = "glove.txt"; c.TextModel.Pretrain = "bert-base" })
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "text-model.word-vectors: a pretrained BERT") {
		t.Fatalf("a pretrained BERT with word vectors: %v", err)
	}
}

// standardised is word's vector with every dimension centred and scaled by
// the mean and deviation over the vocabulary's words that have a vector.
func standardised(v *wordvec.Vectors, word string) []float64 {
	in := []string{"red", "blue", "circle", "square"}
	out := make([]float64, v.Dim)
	for k := range out {
		var mean, ss float64
		for _, w := range in {
			mean += float64(v.Words[w][k])
		}
		mean /= float64(len(in))
		for _, w := range in {
			d := float64(v.Words[w][k]) - mean
			ss += d * d
		}
		out[k] = (float64(v.Words[word][k]) - mean) / math.Sqrt(ss/float64(len(in)))
	}
	return out
}

func dot32(a, b []float32) float64 {
	var s float64
	for i := range a {
		s += float64(a[i]) * float64(b[i])
	}
	return s
}

func dot64(a, b []float64) float64 {
	var s float64
	for i := range a {
		s += a[i] * b[i]
	}
	return s
}
