package trainstep

import (
	"cmp"
	"fmt"
	"slices"
	"testing"
)

// shapeGroup is the products of a step that share one shape.
type shapeGroup struct {
	shape product
	count int
	flops float64
}

// name is the group's shape as "NT_1480x2048x2048": op(A)'s and op(B)'s
// transposes, then m x n x k.
func (g shapeGroup) name() string {
	t := func(trans bool) string {
		if trans {
			return "T"
		}
		return "N"
	}
	return fmt.Sprintf("%s%s_%dx%dx%d", t(g.shape.transA), t(g.shape.transB), g.shape.m, g.shape.n, g.shape.k)
}

// byShape groups the step's products by transposes, sizes, leading
// dimensions, alpha and beta, the groups with the most FLOP first.
func (p *products) byShape() []shapeGroup {
	idx := map[product]int{}
	var gs []shapeGroup
	for _, c := range p.calls {
		i, ok := idx[c]
		if !ok {
			i = len(gs)
			idx[c] = i
			gs = append(gs, shapeGroup{shape: c})
		}
		gs[i].count++
		gs[i].flops += c.flops()
	}
	slices.SortStableFunc(gs, func(x, y shapeGroup) int { return cmp.Compare(y.flops, x.flops) })
	return gs
}

func TestByShape(t *testing.T) {
	big := product{m: 10, n: 10, k: 10, lda: 10, ldb: 10, ldc: 10, alpha: 1}
	small := product{transA: true, m: 2, n: 3, k: 4, lda: 2, ldb: 3, ldc: 3, alpha: 1}
	accum := big
	accum.beta = 1
	p := &products{calls: []product{small, big, small, accum, small}}
	got := p.byShape()
	want := []struct {
		name  string
		count int
		flops float64
	}{
		{"NN_10x10x10", 1, 2000},
		{"NN_10x10x10", 1, 2000},
		{"TN_2x3x4", 3, 144},
	}
	if len(got) != len(want) {
		t.Fatalf("byShape gave %d groups, want %d: %+v", len(got), len(want), got)
	}
	for i, w := range want {
		if got[i].name() != w.name || got[i].count != w.count || got[i].flops != w.flops {
			t.Errorf("group %d = %s x%d, %g FLOP; want %s x%d, %g FLOP", i, got[i].name(), got[i].count, got[i].flops, w.name, w.count, w.flops)
		}
	}
	if got[0].shape.beta != 0 || got[1].shape.beta != 1 {
		t.Errorf("groups with equal FLOP not kept in first-seen order: betas %g, %g", got[0].shape.beta, got[1].shape.beta)
	}
}
