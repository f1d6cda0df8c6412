package eval

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/xmr-project/xmr/bench"
)

func init() {
	bench.Register(bench.Benchmark{
		Name:    "rouge",
		Summary: "ROUGE-L relevance matrix of 25000 synthetic COCO-length captions x 5000 images (peer: pure-Python pycocoevalcap algorithm)",
		Run:     runRougeBench,
	})
}

// syntheticCaptions returns nImages*perImage captions of COCO length (8 to
// 13 words, a few up to 25, about 10.5 on average) over a vocabulary of
// 3000 words with Zipf frequencies; the captions of one image share topic
// words, as real ones do. The same seed gives the same captions.
func syntheticCaptions(nImages, perImage int, seed uint64) []string {
	r := rand.New(rand.NewPCG(seed, 0x5eed))
	function := []string{"a", "the", "of", "on", "with", "in", "and", "is", "an", "at", "to", "two", "some", "near", "while"}
	const vocab = 3000
	words := make([]string, vocab)
	copy(words, function)
	for i := len(function); i < vocab; i++ {
		var b strings.Builder
		n := 3 + r.IntN(7)
		for k := 0; k < n; k++ {
			b.WriteByte(byte('a' + r.IntN(26)))
		}
		words[i] = b.String()
	}
	zipf := rand.NewZipf(r, 1.1, 2, vocab-1)
	caps := make([]string, 0, nImages*perImage)
	topic := make([]string, 12)
	for i := 0; i < nImages; i++ {
		for k := range topic {
			topic[k] = words[len(function)+r.IntN(vocab-len(function))]
		}
		for c := 0; c < perImage; c++ {
			n := 8 + r.IntN(6)
			if r.IntN(50) == 0 {
				n = 14 + r.IntN(12)
			}
			ws := make([]string, n)
			for k := range ws {
				if r.IntN(10) < 4 {
					ws[k] = topic[r.IntN(len(topic))]
				} else {
					ws[k] = words[zipf.Uint64()]
				}
			}
			ws[0] = strings.ToUpper(ws[0][:1]) + ws[0][1:]
			if r.IntN(3) == 0 {
				ws[n-1] += "."
			}
			caps = append(caps, strings.Join(ws, " "))
		}
	}
	return caps
}

// runRougeBench times ComputeRelevance with ROUGE-L end to end (tokenizing,
// scoring, writing the file) and, unless opts.NoPeer, a pure-Python
// implementation of the pycocoevalcap algorithm on a sample of pairs,
// extrapolated to the whole matrix with ideal scaling over the same number
// of processes (TERAN's compute_relevance.py uses a process pool). The
// Python scores of the sample must equal ours.
func runRougeBench(ctx context.Context, opts bench.Options) error {
	const per = 5
	nImg, sample := 5000, 20000
	if opts.Quick {
		nImg, sample = 500, 1000
	}
	caps := syntheticCaptions(nImg, per, 1)
	nCap := len(caps)
	dir, err := os.MkdirTemp("", "xmr-bench-rouge-*")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	out := filepath.Join(dir, "rel.bin")
	workers := runtime.GOMAXPROCS(0)
	start := time.Now()
	if err := ComputeRelevance(ctx, RougeLMetric{}, caps, per, out, RelevanceOptions{Workers: workers, Quiet: true}); err != nil {
		return err
	}
	secs := time.Since(start).Seconds()
	pairs := float64(nCap) * float64(nImg)
	shape := fmt.Sprintf("%dx%d", nCap, nImg)
	note := fmt.Sprintf("%d workers; tokenize+score+write %d MB", workers, nCap*nImg*4>>20)
	tot := bench.Result{Name: "rouge", Metric: "relevance " + shape, Value: secs, Unit: "s", Note: note}
	rate := bench.Result{Name: "rouge", Metric: "pairs/s", Value: pairs / secs, Unit: "pairs/s", Note: note}

	const python = "/usr/bin/python3"
	if _, err := os.Stat(python); opts.NoPeer || err != nil {
		opts.Emit(tot)
		opts.Emit(rate)
		return nil
	}
	rel, err := ReadRelevance(out, nCap, nImg)
	if err != nil {
		return err
	}
	pySecs, n, err := rougePythonPeer(ctx, python, dir, caps, per, rel, sample)
	if err != nil {
		return err
	}
	pyRate := float64(n) / pySecs * float64(workers)
	peer := "python rouge-l (pycocoevalcap algorithm)"
	pyNote := fmt.Sprintf("; peer: %d sampled pairs, 1 process, scaled x%d, scores identical", n, workers)
	tot.Note += pyNote
	rate.Note += pyNote
	opts.Emit(tot.WithPeer(peer, pairs/pyRate, false))
	opts.Emit(rate.WithPeer(peer, pyRate, true))
	return nil
}

// rougePeerScript is ROUGE-L as pycocoevalcap's rouge.py computes it (DP
// LCS over lower-cased, space-split tokens; beta 1.2), timed over the
// pairs of a file.
const rougePeerScript = `import sys, time

def lcs(a, b):
    if len(a) < len(b):
        a, b = b, a
    t = [[0] * (len(b) + 1) for _ in range(len(a) + 1)]
    for j in range(1, len(b) + 1):
        for i in range(1, len(a) + 1):
            if a[i - 1] == b[j - 1]:
                t[i][j] = t[i - 1][j - 1] + 1
            else:
                t[i][j] = max(t[i - 1][j], t[i][j - 1])
    return t[len(a)][len(b)]

def rouge_l(cand, refs, beta=1.2):
    c = cand.lower().split(" ")
    prec, rec = [], []
    for ref in refs:
        r = ref.lower().split(" ")
        n = lcs(r, c)
        prec.append(n / float(len(c)))
        rec.append(n / float(len(r)))
    p, r = max(prec), max(rec)
    if p != 0 and r != 0:
        return ((1 + beta ** 2) * p * r) / float(r + beta ** 2 * p)
    return 0.0

caps = open(sys.argv[1], encoding="utf-8").read().split("\n")[:-1]
pairs = [tuple(map(int, l.split())) for l in open(sys.argv[2])]
per = int(sys.argv[3])
t0 = time.perf_counter()
scores = [rouge_l(caps[i], caps[per * j:per * j + per]) for i, j in pairs]
print(time.perf_counter() - t0)
for s in scores:
    print(repr(s))
`

// rougePythonPeer runs rougePeerScript on n random pairs, checks its scores
// against rel and returns its time.
func rougePythonPeer(ctx context.Context, python, dir string, caps []string, per int, rel *Matrix, n int) (float64, int, error) {
	capsPath := filepath.Join(dir, "caps.txt")
	if err := os.WriteFile(capsPath, []byte(strings.Join(caps, "\n")+"\n"), 0o644); err != nil {
		return 0, 0, err
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
	scriptPath := filepath.Join(dir, "rouge_peer.py")
	if err := os.WriteFile(pairsPath, []byte(pb.String()), 0o644); err != nil {
		return 0, 0, err
	}
	if err := os.WriteFile(scriptPath, []byte(rougePeerScript), 0o644); err != nil {
		return 0, 0, err
	}
	cmd := exec.CommandContext(ctx, python, scriptPath, capsPath, pairsPath, strconv.Itoa(per))
	outb, err := cmd.Output()
	if err != nil {
		return 0, 0, fmt.Errorf("python peer: %w", err)
	}
	sc := bufio.NewScanner(strings.NewReader(string(outb)))
	if !sc.Scan() {
		return 0, 0, fmt.Errorf("python peer: no output")
	}
	secs, err := strconv.ParseFloat(strings.TrimSpace(sc.Text()), 64)
	if err != nil {
		return 0, 0, fmt.Errorf("python peer: time: %w", err)
	}
	k := 0
	for sc.Scan() {
		if k >= n {
			return 0, 0, fmt.Errorf("python peer: too many scores")
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(sc.Text()), 64)
		if err != nil {
			return 0, 0, fmt.Errorf("python peer: score %d: %w", k, err)
		}
		p := pairs[k]
		if got := rel.At(p.i, p.j); got != float32(v) {
			return 0, 0, fmt.Errorf("python peer disagrees on caption %d x image %d: python %v, xmr %v", p.i, p.j, v, got)
		}
		k++
	}
	if k != n {
		return 0, 0, fmt.Errorf("python peer: %d scores for %d pairs", k, n)
	}
	return secs, n, nil
}
