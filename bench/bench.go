// Package bench holds what every `xmr bench` benchmark shares: the one
// result format (a readable table, or with --json one JSON object per result
// line), the options, the Benchmark type, process resource counters, and
// the running of Python peers. The benchmarks themselves live in the
// packages under bench/, one each, and import what they measure; cmd/xmr
// lists them.
package bench

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
)

// Result is one measured number. When a peer (raw OpenBLAS, PyTorch, FAISS)
// ran the same work in the same run, Peer, PeerValue and Ratio are set; Ratio
// is our speed over the peer's, so above 1 means xmr is faster.
type Result struct {
	Name      string  `json:"name"`
	Metric    string  `json:"metric"`
	Value     float64 `json:"value"`
	Unit      string  `json:"unit"`
	Peer      string  `json:"peer,omitempty"`
	PeerValue float64 `json:"peer_value,omitempty"`
	Ratio     float64 `json:"ratio,omitempty"`
	// Note carries context such as the shape or thread count; optional.
	Note string `json:"note,omitempty"`
}

// WithPeer returns r with the peer's value and the speed ratio filled in.
// higherIsBetter says whether Value is a rate (GFLOP/s, items/s) or a time.
func (r Result) WithPeer(peer string, peerValue float64, higherIsBetter bool) Result {
	r.Peer, r.PeerValue = peer, peerValue
	switch {
	case peerValue == 0 || r.Value == 0:
		r.Ratio = 0
	case higherIsBetter:
		r.Ratio = r.Value / peerValue
	default:
		r.Ratio = peerValue / r.Value
	}
	return r
}

// Options are the settings shared by all benchmarks.
type Options struct {
	// Quick asks for fewer repetitions (used by tests of the benchmarks).
	Quick bool
	// NoPeer skips running peers (PyTorch, FAISS, raw OpenBLAS).
	NoPeer bool
	// Python is the interpreter for Python peers; empty selects one as
	// tools.FindPython does ($XMR_PYTHON, else the first python3 on $PATH
	// that has the peer's modules).
	Python string
	// Args are extra positional arguments after the benchmark name.
	Args []string
	// Emit is called with each result as soon as it is measured.
	Emit func(Result)
}

// Func runs one benchmark, reporting its results through opts.Emit.
type Func func(ctx context.Context, opts Options) error

// Benchmark is one benchmark that `xmr bench NAME` runs.
type Benchmark struct {
	// Name is what `xmr bench` takes; results are named after it.
	Name string
	// Summary is the line `xmr bench list` shows.
	Summary string
	// Run measures and emits the results.
	Run Func
}

// WriteJSON writes r as one JSON line.
func WriteJSON(w io.Writer, r Result) error {
	b, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("bench: %s %s: %w", r.Name, r.Metric, err)
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}

// WriteTable writes results as an aligned, human-readable table.
func WriteTable(w io.Writer, rs []Result) error {
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tMETRIC\tVALUE\tUNIT\tPEER\tPEER VALUE\tRATIO\tNOTE")
	for _, r := range rs {
		peerV, ratio := "", ""
		if r.Peer != "" {
			peerV = formatValue(r.PeerValue)
			ratio = fmt.Sprintf("%.2fx", r.Ratio)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Name, r.Metric, formatValue(r.Value), r.Unit, r.Peer, peerV, ratio, r.Note)
	}
	return tw.Flush()
}

func formatValue(v float64) string {
	s := fmt.Sprintf("%.4g", v)
	if strings.Contains(s, "e") {
		s = fmt.Sprintf("%.3f", v)
	}
	return s
}

// WorkDir returns dir for a benchmark's files when it is set (they are
// kept), else a new temporary directory named after pattern, which the
// returned function removes.
func WorkDir(dir, pattern string) (string, func(), error) {
	if dir != "" {
		return dir, func() {}, nil
	}
	tmp, err := os.MkdirTemp("", pattern)
	if err != nil {
		return "", nil, err
	}
	return tmp, func() { os.RemoveAll(tmp) }, nil
}

// Percentile returns the q-quantile (0 < q <= 1) of xs by nearest rank,
// or the zero value for none; xs is not changed.
func Percentile[T cmp.Ordered](xs []T, q float64) T {
	var zero T
	if len(xs) == 0 {
		return zero
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	i := int(math.Ceil(q*float64(len(s)))) - 1
	return s[min(max(i, 0), len(s)-1)]
}

// Median returns the middle of xs (the mean of the two middle values when
// their number is even), or 0 for none.
func Median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
