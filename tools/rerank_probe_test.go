package tools_test

import (
	"context"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/xmr-project/xmr/atomicfile"
	"github.com/xmr-project/xmr/eval"
	"github.com/xmr-project/xmr/tools"
)

// TestRerankProbeFusesAsEval holds rerank_probe.py's fusion and recall
// (the baseline of docs/photos.md's "Neighbours in the collection") to
// package eval's: the same matrices, fused and ranked by xmr, give the
// same R@1/5/10 both ways, ties broken by index in both.
func TestRerankProbeFusesAsEval(t *testing.T) {
	py, err := tools.FindPython(context.Background(), "", "numpy")
	if err != nil {
		t.Skipf("rerank_probe.py needs NumPy (Debian: apt-get install python3-numpy): %v", err)
	}
	cases := []struct {
		name    string
		weights []float32
		levels  float64 // scores rounded to 1/levels (ties), 0: not rounded
	}{
		{"three members", []float32{1, 0.3, 0.5}, 0},
		{"one member, tied scores", []float32{1}, 4},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			const n = 40
			rng := rand.New(rand.NewPCG(7, uint64(len(c.weights))))
			var val []*eval.Matrix
			for k := range c.weights {
				for _, f := range []string{"val", "valbank", "trainval", "trainbank"} {
					m := eval.NewMatrix(n, 5*n)
					for i := range n {
						for j := range 5 * n {
							v := rng.NormFloat64()
							if j/5 == i {
								v += 1.5 // its own captions: a moderate signal
							}
							if c.levels > 0 {
								v = math.Round(v*c.levels) / c.levels
							}
							m.Data[i*5*n+j] = float32(v)
						}
					}
					if err := atomicfile.Write(filepath.Join(dir, fmt.Sprintf("%s-%d.npy", f, k)), func(w io.Writer) error { return eval.WriteNPY(w, m) }); err != nil {
						t.Fatal(err)
					}
					if f == "val" {
						val = append(val, m)
					}
				}
			}
			fused, err := eval.Fuse(val, c.weights)
			if err != nil {
				t.Fatal(err)
			}
			want, err := eval.EvaluateFused(fused, eval.Options{})
			if err != nil {
				t.Fatal(err)
			}
			script, err := tools.WriteScript(t.TempDir(), "rerank_probe.py")
			if err != nil {
				t.Fatal(err)
			}
			var ws []string
			for _, w := range c.weights {
				ws = append(ws, strconv.FormatFloat(float64(w), 'g', -1, 32))
			}
			out, err := exec.Command(py, script, "score", "--sims", dir, "--weights", strings.Join(ws, ",")).CombinedOutput()
			if err != nil {
				t.Fatalf("rerank_probe.py score: %v\n%s", err, out)
			}
			line := regexp.MustCompile(`(?m)^fused +i2t ([0-9.]+)/([0-9.]+)/([0-9.]+) t2i ([0-9.]+)/([0-9.]+)/([0-9.]+) rsum`).FindStringSubmatch(string(out))
			if line == nil {
				t.Fatalf("no fused line in the script's output:\n%s", out)
			}
			wantR := []float64{want.I2T.R1, want.I2T.R5, want.I2T.R10, want.T2I.R1, want.T2I.R5, want.T2I.R10}
			for i, w := range wantR {
				got, _ := strconv.ParseFloat(line[i+1], 64)
				if math.Abs(got-w) > 0.051 {
					t.Errorf("recall %d: the script printed %v, eval gives %.2f\n%s", i, got, w, out)
				}
			}
			if want.I2T.R1 > 95 || want.T2I.R10 < 5 {
				t.Errorf("eval's recalls %+v: the data should make recall neither perfect nor nil", want.Metrics)
			}
		})
	}
}
