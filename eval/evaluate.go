package eval

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

// Protocol says how a similarity matrix is split for evaluation.
type Protocol string

// The protocols of the image-text matching literature.
const (
	// Protocol1K evaluates folds of 1000 images (5000 captions) separately
	// and averages each metric over the folds: COCO 1K is the 5 folds of
	// the 5K test set.
	Protocol1K Protocol = "1k"
	// Protocol5K evaluates the COCO 5K test set at once; it requires
	// exactly 5000 images.
	Protocol5K Protocol = "5k"
	// ProtocolAll evaluates the given matrix at once, whatever its size
	// (Flickr30k's 1000 test images, a validation split).
	ProtocolAll Protocol = "all"
)

// ParseProtocol accepts "1k", "5k" and "all" (case-insensitive).
func ParseProtocol(s string) (Protocol, error) {
	switch p := Protocol(strings.ToLower(s)); p {
	case Protocol1K, Protocol5K, ProtocolAll:
		return p, nil
	}
	return "", fmt.Errorf("unknown protocol %q (want 1k, 5k or all)", s)
}

// DefaultNDCGAt is the NDCG cut-off p used by TERAN.
const DefaultNDCGAt = 25

// DefaultCaptionsPerImage is the number of captions per image of COCO and
// Flickr30k.
const DefaultCaptionsPerImage = 5

// Relevance is a named relevance matrix (captions x images) for NDCG, e.g.
// {"rouge-l", m}.
type Relevance struct {
	Name   string
	Matrix *Matrix
}

// Options configure Evaluate. The zero value evaluates the whole matrix
// (ProtocolAll) with 5 captions per image and no NDCG.
type Options struct {
	Protocol         Protocol // default ProtocolAll
	CaptionsPerImage int      // default 5
	// Relevances adds NDCG@NDCGAt in both directions for each matrix; a
	// matrix covers all images and captions of the similarity matrix (for
	// the 1K protocol the folds slice it like the similarities).
	Relevances []Relevance
	NDCGAt     int // p; default 25
	// NonZeroI2T averages image-to-text NDCG over the images whose NDCG is
	// not zero, as the official TERAN evaluation code does (its
	// text-to-image NDCG averages over all captions). By default both
	// directions average over all queries.
	NonZeroI2T bool
	// Workers bounds the goroutines; default GOMAXPROCS.
	Workers int

	foldImages int // images per fold of Protocol1K; 1000 unless a test sets it
}

// Recall holds the rank metrics of one retrieval direction.
type Recall struct {
	R1    float64 `json:"r1"`    // % of queries whose ground truth ranks first
	R5    float64 `json:"r5"`    // % within the first 5
	R10   float64 `json:"r10"`   // % within the first 10
	MedR  float64 `json:"medr"`  // floor(median 0-based rank) + 1
	MeanR float64 `json:"meanr"` // mean 0-based rank + 1
}

// NDCGScore holds the mean NDCG@p of both directions for one relevance.
type NDCGScore struct {
	I2T float64 `json:"i2t"`
	T2I float64 `json:"t2i"`
}

// Metrics are the results of one evaluation (one fold, or the average of
// the folds).
type Metrics struct {
	I2T  Recall  `json:"i2t"` // image to text: sentence retrieval
	T2I  Recall  `json:"t2i"` // text to image: image retrieval
	RSum float64 `json:"rsum"`
	// NDCG maps a relevance name to its scores.
	NDCG map[string]NDCGScore `json:"ndcg,omitempty"`
}

// Summarize computes R@1, R@5, R@10, medr and meanr from 0-based ranks as
// the VSE++ code does: R@K is the percentage of ranks < K, medr is
// floor(median)+1 (the median of an even count averages the middle two),
// meanr is mean+1.
func Summarize(ranks []int) Recall {
	if len(ranks) == 0 {
		return Recall{}
	}
	var r Recall
	sum := 0.0
	for _, x := range ranks {
		if x < 1 {
			r.R1++
		}
		if x < 5 {
			r.R5++
		}
		if x < 10 {
			r.R10++
		}
		sum += float64(x)
	}
	n := float64(len(ranks))
	r.R1, r.R5, r.R10 = 100*r.R1/n, 100*r.R5/n, 100*r.R10/n
	s := slices.Clone(ranks)
	slices.Sort(s)
	med := float64(s[len(s)/2])
	if len(s)%2 == 0 {
		med = (float64(s[len(s)/2-1]) + float64(s[len(s)/2])) / 2
	}
	r.MedR = math.Floor(med) + 1
	r.MeanR = sum/n + 1
	return r
}

// Ranks returns the 0-based ranks of the whole matrix (no folds): i2t[i] is
// the best rank of image i's captions among all captions, t2i[c] the rank
// of caption c's image among all images; ties are broken by index.
func Ranks(sims *Matrix, perImage int) (i2t, t2i []int, err error) {
	if err := CheckSimilarity(sims, perImage); err != nil {
		return nil, nil, err
	}
	fr := rankFold(sims.view(), sims.view(), nil, perImage, 0, 0)
	return fr.i2t, fr.t2i, nil
}

// Evaluate computes the recall metrics, and NDCG for each relevance matrix,
// of a similarity matrix (images x captions) under opts.Protocol.
func Evaluate(sims *Matrix, opts Options) (*Report, error) {
	return evaluate(sims, sims, opts)
}

// evaluate is Evaluate with the text-to-image ranks taken from the columns
// of t2i (sims itself, or a fusion's matrix by caption).
func evaluate(sims, t2i *Matrix, opts Options) (*Report, error) {
	per := opts.CaptionsPerImage
	if per == 0 {
		per = DefaultCaptionsPerImage
	}
	p := opts.NDCGAt
	if p == 0 {
		p = DefaultNDCGAt
	}
	if p < 0 {
		return nil, fmt.Errorf("evaluate: NDCG cut-off p = %d, want > 0", p)
	}
	proto := opts.Protocol
	if proto == "" {
		proto = ProtocolAll
	}
	if err := CheckSimilarity(sims, per); err != nil {
		return nil, fmt.Errorf("evaluate: %w", err)
	}
	nImg, nCap := sims.Rows, sims.Cols
	// A NaN has no rank; an infinity ranks but is no similarity (an
	// all-+Inf matrix gave rsum 100: every tie resolved in the ground
	// truth's favour).
	if i, ok := firstNonFinite(sims.Data); ok {
		return nil, fmt.Errorf("evaluate: similarity matrix has %v at [%d, %d] (image %d, caption %d): want finite similarities", sims.Data[i], i/nCap, i%nCap, i/nCap, i%nCap)
	}
	seen := map[string]bool{}
	for _, r := range opts.Relevances {
		if r.Name == "" || seen[r.Name] {
			return nil, fmt.Errorf("evaluate: relevance names must be distinct and not empty, got %q", r.Name)
		}
		seen[r.Name] = true
		if err := checkRelevance(r, nCap, nImg); err != nil {
			return nil, fmt.Errorf("evaluate: %w", err)
		}
	}

	fold := opts.foldImages
	if fold == 0 {
		fold = 1000
	}
	if err := checkProtocol(proto, nImg, fold, "the matrix"); err != nil {
		return nil, fmt.Errorf("evaluate: %w", err)
	}
	if proto != Protocol1K {
		fold = nImg
	}

	rep := &Report{
		Protocol:         proto,
		Images:           nImg,
		Captions:         nCap,
		CaptionsPerImage: per,
		FoldImages:       fold,
	}
	if len(opts.Relevances) > 0 {
		rep.NDCGAt, rep.NDCGNonZeroI2T = p, opts.NonZeroI2T
	}
	sv, tv := sims.view(), t2i.view()
	var folds []Metrics
	for f := 0; f < nImg/fold; f++ {
		i0 := f * fold
		var rels []view
		for _, r := range opts.Relevances {
			rels = append(rels, r.Matrix.view().sub(per*i0, i0, per*fold, fold))
		}
		fr := rankFold(sv.sub(i0, per*i0, fold, per*fold), tv.sub(i0, per*i0, fold, per*fold), rels, per, p, opts.Workers)
		m := Metrics{I2T: Summarize(fr.i2t), T2I: Summarize(fr.t2i)}
		m.RSum = m.I2T.R1 + m.I2T.R5 + m.I2T.R10 + m.T2I.R1 + m.T2I.R5 + m.T2I.R10
		if len(rels) > 0 {
			m.NDCG = map[string]NDCGScore{}
			for k, r := range opts.Relevances {
				m.NDCG[r.Name] = NDCGScore{I2T: meanNDCG(fr.i2tNDCG[k], opts.NonZeroI2T), T2I: meanNDCG(fr.t2iNDCG[k], false)}
			}
		}
		folds = append(folds, m)
	}
	rep.Metrics = averageMetrics(folds)
	if len(folds) > 1 {
		rep.Folds = folds
	}
	return rep, nil
}

// CheckProtocol says whether the n images of what (e.g. "split test") can
// be evaluated with protocol p (see Evaluate): 5k needs 5000 images, 1k a
// multiple of 1000. Callers check it before the work that builds the
// similarity matrix.
func CheckProtocol(p Protocol, n int, what string) error {
	return checkProtocol(p, n, 0, what)
}

// checkProtocol is CheckProtocol with folds of fold images for 1k (0:
// 1000).
func checkProtocol(p Protocol, n, fold int, what string) error {
	if fold == 0 {
		fold = 1000
	}
	switch p {
	case ProtocolAll, "":
	case Protocol5K:
		if n != 5000 {
			return fmt.Errorf("protocol 5k needs 5000 images, %s has %d (use protocol all)", what, n)
		}
	case Protocol1K:
		if n == 0 || n%fold != 0 {
			return fmt.Errorf("protocol 1k splits the images into folds of %d; %s has %d images, not a multiple of %d (use protocol all)", fold, what, n, fold)
		}
	default:
		return fmt.Errorf("unknown protocol %q", p)
	}
	return nil
}

// meanNDCG averages per-query NDCG values, over the non-zero ones only when
// nonZero is set (0 when there are none).
func meanNDCG(v []float64, nonZero bool) float64 {
	sum, n := 0.0, 0
	for _, x := range v {
		if nonZero && x == 0 {
			continue
		}
		sum += x
		n++
	}
	if n == 0 {
		return 0
	}
	return sum / float64(n)
}

// averageMetrics averages every metric over the folds, as the official 1K
// evaluation does (medr and meanr included).
func averageMetrics(folds []Metrics) Metrics {
	if len(folds) == 1 {
		return folds[0]
	}
	var a Metrics
	add := func(dst *Recall, r Recall) {
		dst.R1 += r.R1
		dst.R5 += r.R5
		dst.R10 += r.R10
		dst.MedR += r.MedR
		dst.MeanR += r.MeanR
	}
	for _, f := range folds {
		add(&a.I2T, f.I2T)
		add(&a.T2I, f.T2I)
		for name, s := range f.NDCG {
			if a.NDCG == nil {
				a.NDCG = map[string]NDCGScore{}
			}
			t := a.NDCG[name]
			t.I2T += s.I2T
			t.T2I += s.T2I
			a.NDCG[name] = t
		}
	}
	n := float64(len(folds))
	scale := func(r *Recall) {
		r.R1, r.R5, r.R10, r.MedR, r.MeanR = r.R1/n, r.R5/n, r.R10/n, r.MedR/n, r.MeanR/n
	}
	scale(&a.I2T)
	scale(&a.T2I)
	for name, s := range a.NDCG {
		a.NDCG[name] = NDCGScore{I2T: s.I2T / n, T2I: s.T2I / n}
	}
	a.RSum = a.I2T.R1 + a.I2T.R5 + a.I2T.R10 + a.T2I.R1 + a.T2I.R5 + a.T2I.R10
	return a
}

// CheckSimilarity reports whether sims is a valid similarity matrix of N
// images x per*N captions; the error gives the shape found and the one
// expected, and says when the matrix looks transposed.
func CheckSimilarity(sims *Matrix, per int) error {
	if err := sims.check("similarity matrix"); err != nil {
		return err
	}
	if per <= 0 {
		return fmt.Errorf("captions per image = %d, want > 0", per)
	}
	if sims.Rows == 0 {
		return fmt.Errorf("similarity matrix is empty (%d x %d)", sims.Rows, sims.Cols)
	}
	if sims.Cols != per*sims.Rows {
		hint := ""
		if sims.Rows == per*sims.Cols {
			hint = "; it looks transposed (captions x images)"
		}
		return fmt.Errorf("similarity matrix has shape (%d, %d): %d images need %d captions (images x captions, %d per image)%s",
			sims.Rows, sims.Cols, sims.Rows, per*sims.Rows, per, hint)
	}
	return nil
}

// checkRelevance validates a relevance matrix of nCap x nImg values in
// [0, +inf).
func checkRelevance(r Relevance, nCap, nImg int) error {
	m := r.Matrix
	if err := m.check("relevance " + r.Name); err != nil {
		return err
	}
	if m.Rows != nCap || m.Cols != nImg {
		return fmt.Errorf("relevance %s has shape (%d, %d), want (%d captions, %d images)", r.Name, m.Rows, m.Cols, nCap, nImg)
	}
	for i, v := range m.Data {
		if !(v >= 0) || math.IsInf(float64(v), 1) {
			return fmt.Errorf("relevance %s has %v at [%d, %d]; relevances must be finite and >= 0 (TERAN's compute_relevance.py leaves -1 where it did not finish)",
				r.Name, v, i/nImg, i%nImg)
		}
	}
	return nil
}

func firstNonFinite(v []float32) (int, bool) {
	for i, x := range v {
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			return i, true
		}
	}
	return 0, false
}
