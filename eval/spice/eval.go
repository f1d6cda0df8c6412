package spice

import (
	"context"

	"github.com/xmr-project/xmr/eval"
)

func init() {
	eval.RegisterMetric(Name, func() (eval.Metric, error) {
		m, err := New()
		if err != nil {
			return nil, err
		}
		return m, nil
	})
}

var (
	_ eval.Metric    = (*Metric)(nil)
	_ eval.RowScorer = (*Scorer)(nil)
)

// Prepare implements eval.Metric: it returns the *Scorer of PrepareScorer,
// which also implements eval.RowScorer.
func (m *Metric) Prepare(ctx context.Context, captions []string, perImage int) (eval.Scorer, error) {
	s, err := m.PrepareScorer(ctx, captions, perImage)
	if err != nil {
		return nil, err
	}
	return s, nil
}
