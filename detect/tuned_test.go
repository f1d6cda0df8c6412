package detect

import (
	"context"
	"errors"
	"math"
	"slices"
	"sync"
	"testing"
)

// TestTuned checks that a tuned detector with the detector's own weights
// returns what Run returns (to the rounding of the part's products), that
// changed weights change the cut's maps and nothing else (the boxes, the
// maps the part does not compute), and that it runs concurrently.
func TestTuned(t *testing.T) {
	d := testDetector(t)
	cut, err := CutNamed("s32")
	if err != nil {
		t.Fatal(err)
	}
	img := randomImage(11)
	want, err := d.Run(context.Background(), img, RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	same, err := d.Tune(cut, func(Param) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	if same.Tuning() != "s32" || same.Cut().Node != cut.Node {
		t.Fatalf("Tuning %q, cut %+v", same.Tuning(), same.Cut())
	}
	got, err := same.Run(context.Background(), img, RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.Detections, want.Detections) {
		t.Fatalf("detections differ: %v, want %v", got.Detections, want.Detections)
	}
	for i, m := range want.Maps {
		for k, v := range m.Data {
			if math.Abs(float64(got.Maps[i].Data[k]-v)) > 2e-5*(1+math.Abs(float64(v))) {
				t.Fatalf("untuned %s[%d] = %v, Run %v", m.Name, k, got.Maps[i].Data[k], v)
			}
		}
	}
	if n := len(got.Taps); n != 1 || got.Taps[0].Name != cut.Node {
		t.Fatalf("taps %d, want the cut's node", n)
	}

	// Halve the last convolution's filter: backbone_s32 changes, the
	// rest not at all.
	var halved string
	changed, err := d.Tune(cut, func(p Param) error {
		if len(p.T.Shape) == 4 && halved == "" || p.Name == halved {
			halved = p.Name
			for i := range p.T.Data {
				p.T.Data[i] *= 0.5
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	outs := make([]*Output, 4)
	errs := make([]error, 4)
	for i := range outs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			outs[i], errs[i] = changed.Run(context.Background(), img, RunOptions{})
		}()
	}
	wg.Wait()
	for i, o := range outs {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		if !slices.Equal(o.Detections, want.Detections) {
			t.Fatalf("run %d: a tuned part changed the boxes", i)
		}
		for mi, m := range want.Maps {
			eq := slices.Equal(o.Maps[mi].Data, m.Data)
			if tuned := slices.Contains(cut.Maps, m.Name); tuned == eq {
				t.Errorf("run %d: map %s equal to the detector's: %v (the cut computes it: %v)", i, m.Name, eq, tuned)
			}
		}
		if i > 0 && !slices.Equal(o.Maps[3].Data, outs[0].Maps[3].Data) {
			t.Errorf("run %d differs from run 0", i)
		}
	}

	// A loader's error names the weight.
	boom := errors.New("boom")
	if _, err := d.Tune(cut, func(Param) error { return boom }); !errors.Is(err, boom) {
		t.Fatalf("Tune with a failing loader: %v", err)
	}
}

// BenchmarkTunedRun is BenchmarkRun with the s32 part fine-tuned: the
// detector's run, tapped, then the part's forward on the tap (what a
// fine-tuned model's photos cost at index time, against BenchmarkRun).
func BenchmarkTunedRun(b *testing.B) {
	d := testDetector(b)
	cut, err := CutNamed("s32")
	if err != nil {
		b.Fatal(err)
	}
	t, err := d.Tune(cut, func(Param) error { return nil })
	if err != nil {
		b.Fatal(err)
	}
	img := randomImage(2)
	ctx := context.Background()
	for b.Loop() {
		if _, err := t.Run(ctx, img, RunOptions{MinScore: 0.2}); err != nil {
			b.Fatal(err)
		}
	}
}
