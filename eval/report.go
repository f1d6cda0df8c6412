package eval

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
)

// Report is the outcome of Evaluate: the metrics (averaged over the folds
// for Protocol1K) and, when there are several folds, each fold's metrics.
// WriteTable prints it like the papers' tables; WriteJSON as one JSON
// object.
type Report struct {
	Protocol         Protocol `json:"protocol"`
	Images           int      `json:"images"`
	Captions         int      `json:"captions"`
	CaptionsPerImage int      `json:"captions_per_image"`
	FoldImages       int      `json:"fold_images"` // images per fold
	// NDCGAt is the NDCG cut-off p, NDCGNonZeroI2T the averaging option;
	// both zero when no relevance was given.
	NDCGAt         int  `json:"ndcg_p,omitempty"`
	NDCGNonZeroI2T bool `json:"ndcg_nonzero_i2t,omitempty"`
	Metrics
	Folds []Metrics `json:"folds,omitempty"`
	// Members holds, for a fusion (ModelOptions.Weights), each model's
	// metrics alone, in the models' order: its own similarity matrix
	// evaluated as it was before fusing (without a query bank), averaged
	// over the folds as Metrics is.
	Members []Metrics `json:"members,omitempty"`
	// Alignment is the word-region alignment accuracy, when the data has
	// word-region ground truth and one model was evaluated.
	Alignment *AlignmentScore `json:"alignment,omitempty"`
}

// WriteJSON writes r as a single-line JSON object followed by a newline.
// Fields: protocol, images, captions, captions_per_image, fold_images,
// i2t and t2i ({r1, r5, r10, medr, meanr}), rsum, ndcg ({name: {i2t,
// t2i}}), ndcg_p, ndcg_nonzero_i2t, folds (a list of {i2t, t2i, rsum,
// ndcg}) when there are several folds, members (a list of {i2t, t2i,
// rsum, ndcg}, each model of a fusion alone) for a fusion, and alignment
// ({accuracy, words}) when it was measured.
func (r *Report) WriteJSON(w io.Writer) error {
	b, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("encode report: %w", err)
	}
	b = append(b, '\n')
	if _, err := w.Write(b); err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	return nil
}

// ndcgNames returns the relevance names in table order (sorted, so ROUGE-L
// comes before SPICE).
func (r *Report) ndcgNames() []string {
	var names []string
	for n := range r.NDCG {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// WriteTable writes r as a table in the layout of the TERAN paper: one line
// per fold (1K protocol) and one line for the result, with image-to-text
// (sentence retrieval) R@1 R@5 R@10 medr meanr, text-to-image (image
// retrieval) the same, rsum, then NDCG@p i2t and t2i per relevance; for
// a fusion, one more line per model alone (#1, #2, ...).
func (r *Report) WriteTable(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "protocol %s: %d images, %d captions", r.Protocol, r.Images, r.Captions)
	if len(r.Folds) > 1 {
		fmt.Fprintf(&b, ", %d folds of %d images (metrics averaged over folds)", len(r.Folds), r.FoldImages)
	}
	if r.NDCGAt > 0 {
		fmt.Fprintf(&b, "; NDCG@%d", r.NDCGAt)
		if r.NDCGNonZeroI2T {
			b.WriteString(" (i2t averaged over non-zero values, as the TERAN code)")
		}
	}
	b.WriteString("\n\n")

	names := r.ndcgNames()
	const label = 6
	recallHdr := fmt.Sprintf("%6s%6s%6s%7s%8s", "R@1", "R@5", "R@10", "medr", "meanr")
	// Group header.
	fmt.Fprintf(&b, "%-*s | %-*s | %-*s | %7s", label, "", len(recallHdr), "image-to-text (sentence retr.)", len(recallHdr), "text-to-image (image retr.)", "")
	for _, n := range names {
		fmt.Fprintf(&b, " | %-15s", "NDCG "+n)
	}
	b.WriteString("\n")
	fmt.Fprintf(&b, "%-*s | %s | %s | %7s", label, "", recallHdr, recallHdr, "rsum")
	for range names {
		fmt.Fprintf(&b, " | %7s %7s", "i2t", "t2i")
	}
	b.WriteString("\n")
	row := func(name string, m Metrics) {
		rec := func(x Recall) string {
			return fmt.Sprintf("%6.1f%6.1f%6.1f%7.1f%8.1f", x.R1, x.R5, x.R10, x.MedR, x.MeanR)
		}
		fmt.Fprintf(&b, "%-*s | %s | %s | %7.1f", label, name, rec(m.I2T), rec(m.T2I), m.RSum)
		for _, n := range names {
			s := m.NDCG[n]
			fmt.Fprintf(&b, " | %7.4f %7.4f", s.I2T, s.T2I)
		}
		b.WriteString("\n")
	}
	for i, f := range r.Folds {
		row(fmt.Sprintf("fold %d", i+1), f)
	}
	if len(r.Folds) > 1 {
		row("mean", r.Metrics)
	} else {
		row(string(r.Protocol), r.Metrics)
	}
	for k, m := range r.Members {
		row(fmt.Sprintf("#%d", k+1), m)
	}
	if len(r.Members) > 0 {
		fmt.Fprintf(&b, "\n#1 to #%d: each model alone, before the fusion above (and without its query bank, if any)\n", len(r.Members))
	}
	if a := r.Alignment; a != nil {
		fmt.Fprintf(&b, "\nword-region alignment accuracy: %.1f%% of %d grounded words\n", 100*a.Accuracy, a.Words)
	}
	lines := strings.Split(b.String(), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, " ")
	}
	if _, err := io.WriteString(w, strings.Join(lines, "\n")); err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	return nil
}
