package learn

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/xmr-project/xmr/bench"
	"github.com/xmr-project/xmr/data"
	"github.com/xmr-project/xmr/eval"
	"github.com/xmr-project/xmr/train"
)

func TestParse(t *testing.T) {
	cases := []struct {
		args []string
		want string // part of the error; "" for none
	}{
		{nil, "give data=DIR"},
		{[]string{"data=d", "budget=soon"}, `budget="soon": want a duration such as 30s`},
		{[]string{"data=d", "budget=-1m"}, "not negative"},
		{[]string{"data=d", "budget=0s"}, "budget=0s: want a positive duration"},
		{[]string{"data=d", "epochs=3"}, `unknown argument "epochs"`},
		{[]string{"data"}, `argument "data": want key=value`},
		{[]string{"data=d", "seed=x"}, `seed="x"`},
		{[]string{"data=d", "train-images=-3"}, `train-images="-3": want a whole number`},
		{[]string{"data=d", "train-images=many"}, `train-images="many"`},
		{[]string{"data=d", "budget=30s", "models=tern-small,vsepp-small", "seed=2", "train-images=90"}, ""},
	}
	for _, c := range cases {
		p, err := parse(bench.Options{Args: c.args})
		if c.want == "" {
			if err != nil {
				t.Errorf("%q: %v", c.args, err)
			} else if p.budget != 30*time.Second || strings.Join(p.models, ",") != "tern-small,vsepp-small" || p.seed != 2 || p.trainImages != 90 {
				t.Errorf("%q: parsed %+v", c.args, p)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %v, want %q", c.args, err, c.want)
		}
	}
}

// TestRunConfig checks what Train changes in a config: the seed when one is
// given, and the epochs, so that the budget ends a run on a small set.
func TestRunConfig(t *testing.T) {
	for _, name := range DefaultModels {
		own, err := train.LoadConfig(name)
		if err != nil {
			t.Fatal(err)
		}
		for _, seed := range []uint64{0, 7} {
			cfg, err := runConfig(name, seed)
			if err != nil {
				t.Fatal(err)
			}
			want := own
			want.Training.Epochs = maxEpochs
			if seed != 0 {
				want.Training.Seed = seed
			}
			if cfg.Marshal() != want.Marshal() {
				t.Errorf("%s seed %d: config\n%s\nwant\n%s", name, seed, cfg.Marshal(), want.Marshal())
			}
			if err := cfg.Validate(); err != nil {
				t.Errorf("%s: %v", name, err)
			}
		}
	}
	if _, err := runConfig("no-such-config", 0); err == nil || !strings.Contains(err.Error(), "no-such-config") {
		t.Errorf("unknown config: error %v", err)
	}
}

// TestTrain trains SEAM-E for a few seconds on flickr8k-mini and
// evaluates it on the test split.
func TestTrain(t *testing.T) {
	dir := filepath.Join("..", "..", "..", "shared", "data", "flickr8k-mini")
	if _, err := os.Stat(filepath.Join(dir, "test_ims.npy")); err != nil {
		t.Skipf("the real mini set is not here: %v", err)
	}
	src := data.Source{Path: dir}
	test, err := src.Load(context.Background(), "test")
	if err != nil {
		t.Fatal(err)
	}
	defer test.Close()
	rel, err := eval.RelevanceMatrices(context.Background(), test.Captions, test.CapsPerImage)
	if err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	o, err := Train(context.Background(), "seam-e-small", src, test, rel, 3*time.Second, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d iterations, %s: rsum %.1f", o.Iters, o.Stopped, o.Metrics.RSum)
	// Which comes first, the budget or early stopping, depends on the
	// CPU's speed (a fast one reaches patience inside 3 s): either is a
	// run that ended as it should, and nothing else is.
	if o.Stopped != "time budget" && !strings.HasPrefix(o.Stopped, "early stop") {
		t.Errorf("stopped by %q, want the time budget or early stopping", o.Stopped)
	}
	if o.Iters == 0 || o.Metrics.RSum <= 0 || o.Metrics.RSum > 600 {
		t.Errorf("outcome %+v", o)
	}
	if _, ok := o.Metrics.NDCG["rouge-l"]; !ok {
		t.Errorf("no ROUGE-L NDCG in %v", o.Metrics.NDCG)
	}
	if left, _ := os.ReadDir(tmp); len(left) != 0 {
		t.Errorf("the run directory was left behind: %v", left)
	}
}
