// Package rouge is `xmr bench rouge`: the ROUGE-L relevance matrix that
// eval.ComputeRelevance writes for 25,000 synthetic COCO-length captions x
// 5,000 images, against pycocoevalcap's algorithm in pure Python
// (tools/peer_rouge.py) on a sample of the pairs, whose scores must equal
// ours.
package rouge

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/xmr-project/xmr/bench"
	"github.com/xmr-project/xmr/eval"
	"github.com/xmr-project/xmr/eval/evaltest"
	"github.com/xmr-project/xmr/tools"
)

// Benchmark is `xmr bench rouge`.
var Benchmark = bench.Benchmark{
	Name:    "rouge",
	Summary: "ROUGE-L relevance matrix of 25000 synthetic COCO-length captions x 5000 images (peer: pure-Python pycocoevalcap algorithm)",
	Run:     run,
}

// run times eval.ComputeRelevance with ROUGE-L end to end (tokenizing,
// scoring, writing the file) and, unless opts.NoPeer, the Python peer on a
// sample of pairs, extrapolated to the whole matrix with ideal scaling over
// the same number of processes (TERAN's compute_relevance.py uses a process
// pool).
func run(ctx context.Context, opts bench.Options) error {
	const per = 5
	nImg, sample := 5000, 20000
	if opts.Quick {
		nImg, sample = 500, 1000
	}
	caps := evaltest.Captions(nImg, per, 1)
	nCap := len(caps)
	dir, err := os.MkdirTemp("", "xmr-bench-rouge-*")
	if err != nil {
		return fmt.Errorf("rouge: %w", err)
	}
	defer os.RemoveAll(dir)
	out := filepath.Join(dir, "rel.bin")
	workers := runtime.GOMAXPROCS(0)
	start := time.Now()
	if err := eval.ComputeRelevance(ctx, eval.RougeLMetric{}, caps, per, out, eval.RelevanceOptions{Workers: workers, Quiet: true}); err != nil {
		return err
	}
	secs := time.Since(start).Seconds()
	pairs := float64(nCap) * float64(nImg)
	shape := fmt.Sprintf("%dx%d", nCap, nImg)
	note := fmt.Sprintf("%d workers; tokenize+score+write %d MB", workers, nCap*nImg*4>>20)
	tot := bench.Result{Name: "rouge", Metric: "relevance " + shape, Value: secs, Unit: "s", Note: note}
	rate := bench.Result{Name: "rouge", Metric: "pairs/s", Value: pairs / secs, Unit: "pairs/s", Note: note}
	if opts.NoPeer {
		opts.Emit(tot)
		opts.Emit(rate)
		return nil
	}
	rel, err := eval.ReadRelevance(out, nCap, nImg)
	if err != nil {
		return err
	}
	pySecs, err := runPeer(ctx, opts, dir, caps, per, rel, sample)
	if errors.Is(err, tools.ErrNoPython) {
		skip := "; Python peer skipped: " + err.Error()
		tot.Note += skip
		rate.Note += skip
		opts.Emit(tot)
		opts.Emit(rate)
		return nil
	}
	if err != nil {
		return err
	}
	pyRate := float64(sample) / pySecs * float64(workers)
	peer := "python rouge-l (pycocoevalcap algorithm)"
	pyNote := fmt.Sprintf("; peer: %d sampled pairs, 1 process, scaled x%d, scores identical", sample, workers)
	tot.Note += pyNote
	rate.Note += pyNote
	opts.Emit(tot.WithPeer(peer, pairs/pyRate, false))
	opts.Emit(rate.WithPeer(peer, pyRate, true))
	return nil
}

// runPeer runs tools/peer_rouge.py on n random pairs, checks its scores
// against rel and returns the seconds its scoring took.
func runPeer(ctx context.Context, opts bench.Options, dir string, caps []string, per int, rel *eval.Matrix, n int) (float64, error) {
	capsPath := filepath.Join(dir, "caps.txt")
	if err := os.WriteFile(capsPath, []byte(strings.Join(caps, "\n")+"\n"), 0o644); err != nil {
		return 0, fmt.Errorf("rouge peer: %w", err)
	}
	r := rand.New(rand.NewPCG(2, 2))
	type pair struct{ i, j int }
	pairs := make([]pair, n)
	var pb strings.Builder
	for k := range pairs {
		p := pair{r.IntN(rel.Rows), r.IntN(rel.Cols)}
		if k%10 == 0 { // include own images, where the caption is among the references
			p.j = p.i / per
		}
		pairs[k] = p
		fmt.Fprintf(&pb, "%d %d\n", p.i, p.j)
	}
	pairsPath := filepath.Join(dir, "pairs.txt")
	if err := os.WriteFile(pairsPath, []byte(pb.String()), 0o644); err != nil {
		return 0, fmt.Errorf("rouge peer: %w", err)
	}
	outb, err := bench.RunPeer(ctx, opts, "peer_rouge.py", nil, capsPath, pairsPath, strconv.Itoa(per))
	if err != nil {
		return 0, err
	}
	sc := bufio.NewScanner(bytes.NewReader(outb))
	if !sc.Scan() {
		return 0, errors.New("rouge peer: no output")
	}
	secs, err := strconv.ParseFloat(strings.TrimSpace(sc.Text()), 64)
	if err != nil {
		return 0, fmt.Errorf("rouge peer: time: %w", err)
	}
	k := 0
	for sc.Scan() {
		if k >= n {
			return 0, errors.New("rouge peer: too many scores")
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(sc.Text()), 64)
		if err != nil {
			return 0, fmt.Errorf("rouge peer: score %d: %w", k, err)
		}
		p := pairs[k]
		if got := rel.At(p.i, p.j); got != float32(v) {
			return 0, fmt.Errorf("rouge peer disagrees on caption %d x image %d: python %v, xmr %v", p.i, p.j, v, got)
		}
		k++
	}
	if k != n {
		return 0, fmt.Errorf("rouge peer: %d scores for %d pairs", k, n)
	}
	return secs, nil
}
