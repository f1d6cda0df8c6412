package detect

import (
	"context"
	"slices"
	"testing"
)

// TestReleaseReuse runs images whose outputs are released in between: the
// recycled memory must never leak one image's values into another's
// output, and a released Output must not keep its maps.
func TestReleaseReuse(t *testing.T) {
	d := testDetector(t)
	ctx := context.Background()
	a, b := randomImage(11), randomImage(12)
	first, err := d.Run(ctx, a, RunOptions{MinScore: 0.2})
	if err != nil {
		t.Fatal(err)
	}
	want := make([][]float32, len(first.Maps))
	for i, m := range first.Maps {
		want[i] = slices.Clone(m.Data)
	}
	wantDet := slices.Clone(first.Detections)
	first.Release()
	for i, m := range first.Maps {
		if m.Data != nil {
			t.Fatalf("map %d still holds its data after Release", i)
		}
	}
	first.Release() // twice is harmless
	for round := range 3 {
		other, err := d.Run(ctx, b, RunOptions{MinScore: 0.2})
		if err != nil {
			t.Fatal(err)
		}
		other.Release()
		again, err := d.Run(ctx, a, RunOptions{MinScore: 0.2})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(again.Detections, wantDet) {
			t.Fatalf("round %d: detections differ after the memory was reused", round)
		}
		for i, m := range again.Maps {
			if !slices.Equal(m.Data, want[i]) {
				t.Fatalf("round %d: map %s differs after the memory was reused", round, m.Name)
			}
		}
		again.Release()
	}
}
