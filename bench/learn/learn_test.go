package learn

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
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
		{[]string{"data=d", "repeats=0"}, "repeats=0: want 1 or more"},
		{[]string{"data=d", "repeats=two"}, `repeats="two"`},
		{[]string{"data=d", "budget=30s", "models=tern-small,vsepp-small", "seed=2", "train-images=90", "repeats=3"}, ""},
	}
	for _, c := range cases {
		p, err := parse(bench.Options{Args: c.args})
		if c.want == "" {
			if err != nil {
				t.Errorf("%q: %v", c.args, err)
			} else if p.budget != 30*time.Second || strings.Join(p.models, ",") != "tern-small,vsepp-small" || p.seed != 2 || p.trainImages != 90 || p.repeats != 3 {
				t.Errorf("%q: parsed %+v", c.args, p)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %v, want %q", c.args, err, c.want)
		}
	}
}

// TestRunSeeds checks the seeds of the runs: 1, 2, 3 without seed=N and
// N, N+1, N+2 with it when runs repeat; a single run keeps seed=N, or the
// configs' own (0) without it.
func TestRunSeeds(t *testing.T) {
	for _, c := range []struct {
		seed    uint64
		repeats int
		want    []uint64
	}{{0, 3, []uint64{1, 2, 3}}, {5, 3, []uint64{5, 6, 7}}, {0, 1, []uint64{0}}, {5, 1, []uint64{5}}} {
		p := params{seed: c.seed, repeats: c.repeats}
		for k, w := range c.want {
			if got := p.runSeed(k); got != w {
				t.Errorf("seed=%d run %d: seed %d, want %d", c.seed, k, got, w)
			}
		}
	}
}

// TestMeanMetrics checks the means reported for repeated runs and the
// note that lists the runs.
func TestMeanMetrics(t *testing.T) {
	runs := []run1{
		{seed: 1, iters: 10, trainS: 5, stopped: "budget", metrics: eval.Metrics{I2T: eval.Recall{R1: 10, R5: 20, R10: 30}, T2I: eval.Recall{R1: 4, MedR: 3}, RSum: 64,
			NDCG: map[string]eval.NDCGScore{"rouge-l": {I2T: 0.5, T2I: 0.25}, "spice": {I2T: 1}}}},
		{seed: 2, iters: 12, trainS: 6, stopped: "early stop", metrics: eval.Metrics{I2T: eval.Recall{R1: 20, R5: 40, R10: 50}, T2I: eval.Recall{R1: 8, MedR: 5}, RSum: 118,
			NDCG: map[string]eval.NDCGScore{"rouge-l": {I2T: 0.7, T2I: 0.75}}}},
	}
	m := meanMetrics(runs)
	want := eval.Metrics{I2T: eval.Recall{R1: 15, R5: 30, R10: 40}, T2I: eval.Recall{R1: 6, MedR: 4}, RSum: 91,
		NDCG: map[string]eval.NDCGScore{"rouge-l": {I2T: 0.6, T2I: 0.5}}}
	if m.I2T != want.I2T || m.T2I != want.T2I || m.RSum != want.RSum || len(m.NDCG) != 1 || math.Abs(m.NDCG["rouge-l"].I2T-0.6) > 1e-12 || m.NDCG["rouge-l"].T2I != 0.5 {
		t.Errorf("mean %+v, want %+v", m, want)
	}
	note := runsNote(runs)
	for _, w := range []string{"mean of 2 runs, rsum 64.0 to 118.0", "seed 1: 64.0 (10 iterations in 5 s, budget)", "seed 2: 118.0 (12 iterations in 6 s, early stop)"} {
		if !strings.Contains(note, w) {
			t.Errorf("note %q lacks %q", note, w)
		}
	}
	if got := runsNote(runs[:1]); got != "10 iterations in 5 s (budget)" {
		t.Errorf("one run's note %q", got)
	}
	if got := meanMetrics(runs[:1]); got.RSum != 64 || got.NDCG["spice"].I2T != 1 {
		t.Errorf("one run's mean %+v", got)
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

// TestRunRepeats runs the benchmark with repeats=2 (no peer) on 20 train
// images of flickr8k-mini: each model trains twice with seeds 1 and 2 and
// is reported once, as the mean of the two runs that its note lists.
func TestRunRepeats(t *testing.T) {
	dir := filepath.Join("..", "..", "..", "shared", "data", "flickr8k-mini")
	if _, err := os.Stat(filepath.Join(dir, "test_ims.npy")); err != nil {
		t.Skipf("the real mini set is not here: %v", err)
	}
	var got []bench.Result
	opts := bench.Options{NoPeer: true, Emit: func(r bench.Result) { got = append(got, r) },
		Args: []string{"data=" + dir, "budget=2s", "models=seam-e-small", "train-images=20", "repeats=2"}}
	if err := run(context.Background(), opts); err != nil {
		t.Fatal(err)
	}
	var rsum *bench.Result
	for i := range got {
		if got[i].Metric == "test rsum" {
			if rsum != nil {
				t.Fatalf("two rsum results: %+v and %+v", *rsum, got[i])
			}
			rsum = &got[i]
		}
	}
	if rsum == nil || rsum.Name != "learn/seam-e-small" {
		t.Fatalf("results %+v: no test rsum of seam-e-small", got)
	}
	m := regexp.MustCompile(`seed 1: ([0-9.]+) .*seed 2: ([0-9.]+) `).FindStringSubmatch(rsum.Note)
	if m == nil {
		t.Fatalf("note %q: no runs with seeds 1 and 2", rsum.Note)
	}
	r1, _ := strconv.ParseFloat(m[1], 64)
	r2, _ := strconv.ParseFloat(m[2], 64)
	if math.Abs(rsum.Value-(r1+r2)/2) > 0.1 || !strings.Contains(rsum.Note, "mean of 2 runs") || !strings.Contains(rsum.Note, "20 of the 181 train images") {
		t.Errorf("rsum %.2f with note %q: want the mean of its runs on 20 images", rsum.Value, rsum.Note)
	}
}

// TestPhotoData checks what the benchmark does with a data set that xmr
// extract made: the photo configs by default, the global copy for the
// models of one vector per image, and dev for evaluation when there is no
// test split.
func TestPhotoData(t *testing.T) {
	dir := t.TempDir()
	touch := func(p string) {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"train_ims.npy", "dev_ims.npy", "global/train_ims.npy"} {
		touch(filepath.Join(dir, f))
	}
	if got := evalSplit(dir); got != "dev" {
		t.Errorf("no test split: evaluated on %q, want dev", got)
	}
	if extracted(dir) || globalDir(dir) != "" {
		t.Error("a data set without features.json counts as extracted")
	}
	p, err := parse(bench.Options{Args: []string{"data=" + dir}})
	if err != nil || strings.Join(p.models, ",") != strings.Join(DefaultModels, ",") {
		t.Errorf("models %v (%v), want the defaults", p.models, err)
	}
	rec := `{"format": "xmr-features/1", "extractor": {"name": "centernet-mobilenetv3-coco", "version": "v", "width": 8, "maps": ["a"], "pooling": "p"}, "kind": "regions"}`
	if err := os.WriteFile(filepath.Join(dir, "features.json"), []byte(rec), 0o644); err != nil {
		t.Fatal(err)
	}
	if !extracted(dir) || globalDir(dir) != filepath.Join(dir, "global") {
		t.Errorf("extracted %v, global copy %q", extracted(dir), globalDir(dir))
	}
	p, err = parse(bench.Options{Args: []string{"data=" + dir}})
	if err != nil || strings.Join(p.models, ",") != strings.Join(PhotoModels, ",") {
		t.Errorf("models %v (%v), want the photo configs %v", p.models, err, PhotoModels)
	}
	for _, name := range PhotoModels {
		if _, err := runConfig(name, 0); err != nil {
			t.Errorf("photo config %s: %v", name, err)
		}
	}
	touch(filepath.Join(dir, "test_ims.npy"))
	if got := evalSplit(dir); got != "test" {
		t.Errorf("with a test split: evaluated on %q", got)
	}
}
