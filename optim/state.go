package optim

import (
	"errors"
	"fmt"
	"math"
	"sort"

	"github.com/xmr-project/xmr/tensor"
)

// State key suffixes and the key of the schedule's iteration.
const (
	// KeyIter holds the number of Steps taken, shape [1].
	KeyIter = "iter"
	// SuffixStep follows a parameter's name in the key of its step count,
	// shape [1].
	SuffixStep = ".step"
	// SuffixExpAvg follows a parameter's name in the key of its first moment
	// estimate, shaped like the parameter.
	SuffixExpAvg = ".exp_avg"
	// SuffixExpAvgSq follows a parameter's name in the key of its second
	// moment estimate, shaped like the parameter.
	SuffixExpAvgSq = ".exp_avg_sq"
)

// maxExactCount is the largest count a float32 holds exactly (2^24).
const maxExactCount = 1 << 24

// State returns the optimiser's state as named tensors: KeyIter, and for
// every parameter NAME (its model name after SetNames, "params.I" by index
// otherwise) NAME.step, NAME.exp_avg and NAME.exp_avg_sq. Counts are stored
// as float32, exact up to 2^24 steps. The moment tensors share the
// optimiser's buffers: save them before the next Step.
func (o *Adam) State() map[string]*tensor.Tensor {
	st := make(map[string]*tensor.Tensor, 1+3*len(o.params))
	st[KeyIter] = tensor.FromData([]float32{float32(o.iter)}, 1)
	for i, p := range o.params {
		n := o.names[i]
		st[n+SuffixStep] = tensor.FromData([]float32{float32(p.step)}, 1)
		st[n+SuffixExpAvg] = tensor.FromData(p.m, p.t.Shape...)
		st[n+SuffixExpAvgSq] = tensor.FromData(p.v, p.t.Shape...)
	}
	return st
}

// LoadState restores a state saved by State from an optimiser over the same
// parameters (same names, or same order when unnamed). Every key must be
// present with the right number of elements and no other key may appear;
// the error lists every problem. Nothing changes unless all keys check.
func (o *Adam) LoadState(st map[string]*tensor.Tensor) error {
	var errs []error
	want := map[string]bool{}
	count := func(key string) (int, bool) {
		want[key] = true
		t, ok := st[key]
		if !ok {
			errs = append(errs, fmt.Errorf("missing %q", key))
			return 0, false
		}
		if len(t.Data) != 1 {
			errs = append(errs, fmt.Errorf("%q: %d values, want 1", key, len(t.Data)))
			return 0, false
		}
		v := float64(t.Data[0])
		if v < 0 || v > maxExactCount || v != math.Trunc(v) {
			errs = append(errs, fmt.Errorf("%q: %v is not a step count", key, t.Data[0]))
			return 0, false
		}
		return int(v), true
	}
	moment := func(key string, n int) {
		want[key] = true
		t, ok := st[key]
		if !ok {
			errs = append(errs, fmt.Errorf("missing %q", key))
			return
		}
		if len(t.Data) != n {
			errs = append(errs, fmt.Errorf("%q: shape %v, parameter has %d values", key, t.Shape, n))
		}
	}
	iter, _ := count(KeyIter)
	steps := make([]int, len(o.params))
	for i, p := range o.params {
		n := o.names[i]
		steps[i], _ = count(n + SuffixStep)
		moment(n+SuffixExpAvg, len(p.t.Data))
		moment(n+SuffixExpAvgSq, len(p.t.Data))
	}
	var extra []string
	for k := range st {
		if !want[k] {
			extra = append(extra, k)
		}
	}
	sort.Strings(extra)
	for _, k := range extra {
		errs = append(errs, fmt.Errorf("unexpected %q", k))
	}
	if len(errs) > 0 {
		return fmt.Errorf("optim: load state: %w", errors.Join(errs...))
	}
	o.iter = iter
	for i, p := range o.params {
		n := o.names[i]
		p.step = steps[i]
		copy(p.m, st[n+SuffixExpAvg].Data)
		copy(p.v, st[n+SuffixExpAvgSq].Data)
	}
	return nil
}
