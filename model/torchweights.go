package model

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"

	"github.com/xmr-project/xmr/nn"
	"github.com/xmr-project/xmr/torchfile"
)

// torchWeights are the tensors of a PyTorch state dict, by name.
type torchWeights struct {
	path    string
	names   []string // in the file's order
	tensors map[string]*torchfile.Tensor
}

// readStateDict returns the state dict of a torch file: the root itself,
// or the dict under one of keys (e.g. a checkpoint's "model").
func readStateDict(f *torchfile.File, keys ...string) (*torchWeights, error) {
	v := f.Root
	if d, ok := v.(*torchfile.Dict); ok {
		for _, k := range keys {
			if sd, ok := d.Get(k); ok {
				v = sd
				break
			}
		}
	}
	names, tensors, err := torchfile.StateDict(v)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", f.Path, err)
	}
	return &torchWeights{path: f.Path, names: names, tensors: tensors}, nil
}

// floatElements counts the floating-point elements the file's storages
// hold (each storage once, whatever views it): a bound on the parameters
// the file can fill, which a model built from the file's shapes must not
// exceed (a zero-stride view may claim a large shape over little data).
func (w *torchWeights) floatElements() float64 {
	var n float64
	seen := map[*torchfile.Storage]bool{}
	for _, t := range w.tensors {
		if st := t.Storage(); t.DType.Floating() && !seen[st] {
			seen[st] = true
			n += float64(st.Numel)
		}
	}
	return n
}

// fill copies into each wanted parameter the tensor source(name) names in
// the file (name itself when source is nil), after checking them all:
// every one present, of the parameter's shape, floating-point, with finite
// values. The error lists every problem, one per line. It returns the
// names of the file it used (or would have used, on error).
func (w *torchWeights) fill(want []nn.Named, source func(name string) []string) (map[string]bool, error) {
	var errs []error
	used := map[string]bool{}
	type pair struct {
		p nn.Named
		t *torchfile.Tensor
	}
	var todo []pair
	var missing []string
	for _, p := range want {
		cands := []string{p.Name}
		if source != nil {
			cands = source(p.Name)
		}
		var t *torchfile.Tensor
		var from string
		for _, c := range cands {
			if t = w.tensors[c]; t != nil {
				from = c
				break
			}
		}
		if t == nil {
			missing = append(missing, fmt.Sprintf("%q", cands[0]))
			continue
		}
		used[from] = true
		switch {
		case !slices.Equal(t.Shape, p.T.Shape):
			errs = append(errs, fmt.Errorf("%s: tensor %q: shape %v in the file, the model expects %v", w.path, from, t.Shape, p.T.Shape))
		case !t.DType.Floating():
			errs = append(errs, fmt.Errorf("%s: tensor %q: %s, not floating-point", w.path, from, t.DType))
		default:
			todo = append(todo, pair{p, t})
		}
	}
	if len(missing) > 0 {
		errs = append(errs, fmt.Errorf("%s: %d tensors missing from the file: %s", w.path, len(missing), strings.Join(missing, ", ")))
	}
	if len(errs) > 0 {
		return used, errors.Join(errs...)
	}
	for _, pt := range todo {
		v, err := pt.t.Float32()
		if err == nil {
			for i, x := range v {
				if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
					err = fmt.Errorf("element %d is %v; weights must be finite (a diverged run or a damaged file)", i, x)
					break
				}
			}
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: tensor for %q: %w", w.path, pt.p.Name, err))
			continue
		}
		copy(pt.p.T.Data, v)
	}
	return used, errors.Join(errs...)
}

// unused returns the names of the file that used does not hold, sorted.
func (w *torchWeights) unused(used map[string]bool) []string {
	var out []string
	for _, n := range w.names {
		if !used[n] {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}
