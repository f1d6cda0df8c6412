package text

import (
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// cocoCaptions returns n synthetic captions shaped like COCO's (about 10-11
// words, an upper-case first letter, some with a final period), drawn
// from common caption words.
func cocoCaptions(n int) []string {
	words := strings.Fields(`a an the man woman person people dog cat horse giraffe
		elephant bus train plane kitchen table pizza sandwich skateboarder surfer
		tennis player frisbee snowboard bathroom toilet sink street sign clock tower
		riding sitting standing holding eating walking on in with of at next to near
		top front large small white black red two three group young wooden city beach
		field grass water snow wave ball racket umbrella motorcycle bicycle laptop`)
	rng := rand.New(rand.NewPCG(7, 7))
	caps := make([]string, n)
	var b strings.Builder
	for i := range caps {
		b.Reset()
		k := 8 + rng.IntN(6)
		for j := range k {
			w := words[rng.IntN(len(words))]
			if j == 0 {
				w = strings.ToUpper(w[:1]) + w[1:]
			} else {
				b.WriteByte(' ')
			}
			b.WriteString(w)
		}
		if rng.IntN(2) == 0 {
			b.WriteByte('.')
		}
		caps[i] = b.String()
	}
	return caps
}

// BenchmarkWordPieceCOCO tokenizes COCO-length captions with bert-base-uncased
// and reports captions/s.
func BenchmarkWordPieceCOCO(b *testing.B) {
	wp := realWordPiece(b)
	caps := cocoCaptions(25000)
	var ids, words []int32
	b.ResetTimer()
	start := time.Now()
	n := 0
	for i := 0; b.Loop(); i++ {
		ids, words = wp.AppendTokenize(ids[:0], words[:0], caps[i%len(caps)])
		n++
	}
	b.ReportMetric(float64(n)/time.Since(start).Seconds(), "captions/s")
}

// BenchmarkWordPieceEncodeBatch encodes batches of 128 captions, padding
// included.
func BenchmarkWordPieceEncodeBatch(b *testing.B) {
	wp := realWordPiece(b)
	caps := cocoCaptions(128)
	start := time.Now()
	n := 0
	for b.Loop() {
		wp.EncodeBatch(caps, EncodeOptions{MaxLen: 32})
		n += len(caps)
	}
	b.ReportMetric(float64(n)/time.Since(start).Seconds(), "captions/s")
}
