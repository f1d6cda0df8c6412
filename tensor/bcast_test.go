package tensor

import (
	"math/rand/v2"
	"testing"
)

// TestBcastIndex checks every kind of bcastIndex, and the gradient
// accumulation of each, against offsets computed from the strides.
func TestBcastIndex(t *testing.T) {
	out := []int{3, 4, 5}
	cases := []struct {
		in   []int
		kind int
	}{
		{[]int{3, 4, 5}, 0}, {[]int{4, 5}, 1}, {[]int{1, 1, 5}, 1}, {[]int{1}, 2},
		{[]int{3, 1, 5}, 3}, {[]int{1, 4, 1}, 3}, {[]int{4, 1}, 3},
		{[]int{3, 4, 1}, 4}, {[]int{3, 1, 1}, 4},
	}
	for _, c := range cases {
		bi := makeBcastIndex(c.in, out)
		if bi.kind != c.kind {
			t.Errorf("%v -> %v: kind %d, want %d", c.in, out, bi.kind, c.kind)
		}
		st := bcastStrides(c.in, out)
		n := prod(out)
		want := make([]float32, prod(c.in))
		for i := 0; i < n; i++ {
			off, r := 0, i
			for d := len(out) - 1; d >= 0; d-- {
				off += r % out[d] * st[d]
				r /= out[d]
			}
			if got := bi.at(i); got != off {
				t.Fatalf("%v -> %v: element %d at offset %d, want %d", c.in, out, i, got, off)
			}
			want[off] += float32(i)
		}
		got := make([]float32, len(want))
		accumulateBcast(got, &bi, n, func(i int) float32 { return float32(i) })
		for j := range want {
			if got[j] != want[j] {
				t.Fatalf("%v -> %v: accumulated %v, want %v", c.in, out, got, want)
			}
		}
	}
}

// TestAxisMask checks the offsets of axisMask against the materialised
// mask (expandMask) for masks that broadcast along every kind of dimension,
// reduced along each axis.
func TestAxisMask(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	shape := []int{3, 4, 5, 2}
	for _, ms := range [][]int{{3, 4, 5, 2}, {3, 1, 5, 1}, {1, 4, 1, 2}, {5, 2}, {5, 1}, {1}, {3, 4, 1, 1}, {4, 5, 2}} {
		mask := New(ms...)
		for i := range mask.Data {
			mask.Data[i] = float32(rng.IntN(2))
		}
		full := expandMask("test", mask, shape)
		for axis := range shape {
			am := newAxisMask("test", mask, shape, axis)
			outer, n, inner := splitAxis(shape, axis)
			for o := 0; o < outer; o++ {
				for j := 0; j < inner; j++ {
					b := am.base(o, j)
					for k := 0; k < n; k++ {
						if got, want := am.masked(b, k), full[(o*n+k)*inner+j] == 0; got != want {
							t.Fatalf("mask %v, axis %d, element (%d, %d, %d): masked %v, want %v", ms, axis, o, k, j, got, want)
						}
					}
				}
			}
		}
	}
	var nilMask *axisMask
	if nilMask.masked(nilMask.base(1, 2), 3) {
		t.Error("a nil axisMask masks an element")
	}
	defer func() {
		if recover() == nil {
			t.Error("a mask of shape (4, 1) for (3, 4, 5, 2) was accepted")
		}
	}()
	newAxisMask("test", New(4, 1), shape, 1)
}
