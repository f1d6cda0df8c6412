package spice

import (
	"context"
	"testing"

	"github.com/xmr-project/xmr/eval/evaltest"
)

func benchScorer(b *testing.B, nImg int) *Scorer {
	b.Helper()
	m := testMetric(b)
	s, err := m.PrepareScorer(context.Background(), evaltest.SceneCaptions(nImg, 5, 1), 5)
	if err != nil {
		b.Fatal(err)
	}
	return s
}

// BenchmarkParse measures parsing one caption into tuples.
func BenchmarkParse(b *testing.B) {
	m := testMetric(b)
	caps := evaltest.SceneCaptions(200, 5, 1)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		parseCaption(m.lex, caps[i%len(caps)])
	}
}

// BenchmarkPrepare measures PrepareScorer on 5,000 captions (1,000 images).
func BenchmarkPrepare(b *testing.B) {
	m := testMetric(b)
	caps := evaltest.SceneCaptions(1000, 5, 1)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := m.PrepareScorer(context.Background(), caps, 5); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(caps))*float64(b.N)/b.Elapsed().Seconds(), "captions/s")
}

// BenchmarkScore measures one Score(i, j) call (5,000 captions x 1,000 images).
func BenchmarkScore(b *testing.B) {
	s := benchScorer(b, 1000)
	nc, ni := s.NumCaptions(), s.NumImages()
	b.ResetTimer()
	var sink float32
	for k := 0; k < b.N; k++ {
		sink += s.Score(k%nc, (k*7919)%ni)
	}
	_ = sink
}

// BenchmarkScoreRows measures ScoreRows, reported per pair.
func BenchmarkScoreRows(b *testing.B) {
	s := benchScorer(b, 1000)
	nc, ni := s.NumCaptions(), s.NumImages()
	out := make([]float32, 16*ni)
	b.ResetTimer()
	pairs := 0
	for k := 0; k < b.N; k++ {
		i0 := (k * 16) % (nc - 16)
		if err := s.ScoreRows(context.Background(), i0, i0+16, out); err != nil {
			b.Fatal(err)
		}
		pairs += 16 * ni
	}
	b.ReportMetric(b.Elapsed().Seconds()*1e9/float64(pairs), "ns/pair")
}
