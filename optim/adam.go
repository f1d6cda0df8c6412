// Package optim holds the optimisers that train xmr's models: Adam and AdamW
// as PyTorch defines them, parameter groups with their own learning rate and
// weight decay, learning-rate schedules, and gradient-norm clipping.
//
// A training step reads:
//
//	opt, err := optim.NewAdamW([]optim.Group{
//		{Name: "backbone", Params: bb, LR: 1e-5, WeightDecay: 0.01},
//		{Name: "head", Params: head, LR: 1e-4},
//	}, optim.Config{Schedule: optim.Product{optim.Warmup{Iters: 1000},
//		optim.Epochs{Iters: itersPerEpoch, Schedule: optim.StepDecay{Every: 15, Gamma: 0.1}}}})
//	...
//	opt.ZeroGrad()
//	tp.Backward(loss)
//	optim.ClipGradNorm(opt.Params(), 2.0)
//	opt.Step()
//
// The optimiser's state (the step counts and both moment estimates of every
// parameter, and the schedule's iteration) is exported by State and restored
// by LoadState as named tensors, so that a checkpoint resumes training
// exactly.
package optim

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/xmr-project/xmr/tensor"
)

// Group is a set of parameters trained with one base learning rate and one
// weight decay, like a PyTorch param_group.
type Group struct {
	// Name identifies the group in logs and errors; optional.
	Name string
	// Params are the trained tensors; their Grad is read by Step.
	Params []*tensor.Tensor
	// LR is the base learning rate; the schedule's factor multiplies it.
	LR float64
	// WeightDecay is the L2 penalty (Adam) or the decoupled decay rate
	// (AdamW).
	WeightDecay float64
}

// Config holds the hyperparameters shared by every group. The zero value is
// PyTorch's default: betas (0.9, 0.999), eps 1e-8, constant learning rate.
type Config struct {
	// Beta1 and Beta2 are the decay rates of the first and second moment
	// estimates; zero selects 0.9 and 0.999.
	Beta1, Beta2 float64
	// Eps is added to the denominator for stability; zero selects 1e-8.
	Eps float64
	// Schedule scales every group's LR by Schedule.Factor(iter) at each Step,
	// iter counting Steps from 0; nil keeps the base LR.
	Schedule Schedule
}

// Adam is the Adam optimiser (torch.optim.Adam) or, built by NewAdamW, AdamW
// (torch.optim.AdamW), over one or more parameter groups. It is used by one
// goroutine at a time; Step itself runs in parallel.
type Adam struct {
	groups    []Group
	cfg       Config
	decoupled bool
	iter      int       // Steps taken; the schedule's argument
	params    []*pstate // every parameter, in group order
	names     []string  // state keys' prefixes, parallel to params
}

// pstate is one parameter's optimiser state.
type pstate struct {
	t     *tensor.Tensor
	group int
	step  int       // updates applied (Steps where the parameter had a gradient)
	m, v  []float32 // first and second moment estimates (exp_avg, exp_avg_sq)
}

// NewAdam returns Adam: weight decay adds WeightDecay*p to the gradient
// before the moment estimates are updated (an L2 penalty).
func NewAdam(groups []Group, cfg Config) (*Adam, error) { return newAdam(groups, cfg, false) }

// WithDefaults returns c with PyTorch's defaults in place of the zero
// Beta1 (0.9), Beta2 (0.999) and Eps (1e-8): the settings NewAdam and
// NewAdamW use.
func (c Config) WithDefaults() Config {
	if c.Beta1 == 0 {
		c.Beta1 = 0.9
	}
	if c.Beta2 == 0 {
		c.Beta2 = 0.999
	}
	if c.Eps == 0 {
		c.Eps = 1e-8
	}
	return c
}

// NewAdamW returns AdamW: weight decay multiplies each parameter by
// 1 - lr*WeightDecay before the Adam update, apart from the gradient.
func NewAdamW(groups []Group, cfg Config) (*Adam, error) { return newAdam(groups, cfg, true) }

func newAdam(groups []Group, cfg Config, decoupled bool) (*Adam, error) {
	kind := "Adam"
	if decoupled {
		kind = "AdamW"
	}
	cfg = cfg.WithDefaults()
	if !(cfg.Beta1 > 0 && cfg.Beta1 < 1) || !(cfg.Beta2 > 0 && cfg.Beta2 < 1) {
		return nil, fmt.Errorf("optim: %s: betas (%g, %g) must lie in (0, 1)", kind, cfg.Beta1, cfg.Beta2)
	}
	if !(cfg.Eps > 0) {
		return nil, fmt.Errorf("optim: %s: eps %g must be positive", kind, cfg.Eps)
	}
	o := &Adam{cfg: cfg, decoupled: decoupled, groups: make([]Group, len(groups))}
	seen := map[*tensor.Tensor]string{}
	for gi, g := range groups {
		label := groupLabel(gi, g.Name)
		if !(g.LR >= 0) || math.IsInf(g.LR, 0) {
			return nil, fmt.Errorf("optim: %s: %s: learning rate %g must be finite and non-negative", kind, label, g.LR)
		}
		if !(g.WeightDecay >= 0) || math.IsInf(g.WeightDecay, 0) {
			return nil, fmt.Errorf("optim: %s: %s: weight decay %g must be finite and non-negative", kind, label, g.WeightDecay)
		}
		g.Params = append([]*tensor.Tensor(nil), g.Params...)
		o.groups[gi] = g
		for pi, p := range g.Params {
			if p == nil {
				return nil, fmt.Errorf("optim: %s: %s: parameter %d is nil", kind, label, pi)
			}
			where := fmt.Sprintf("%s parameter %d", label, pi)
			if prev, dup := seen[p]; dup {
				return nil, fmt.Errorf("optim: %s: %s is also %s; a parameter may appear only once", kind, where, prev)
			}
			seen[p] = where
			o.params = append(o.params, &pstate{t: p, group: gi, m: make([]float32, len(p.Data)), v: make([]float32, len(p.Data))})
			o.names = append(o.names, fmt.Sprintf("params.%d", len(o.params)-1))
		}
	}
	return o, nil
}

func groupLabel(i int, name string) string {
	if name != "" {
		return fmt.Sprintf("group %d (%s)", i, name)
	}
	return fmt.Sprintf("group %d", i)
}

// Decoupled reports whether o is AdamW.
func (o *Adam) Decoupled() bool { return o.decoupled }

// Config returns the hyperparameters, with defaults filled in.
func (o *Adam) Config() Config { return o.cfg }

// Groups returns a copy of the parameter groups.
func (o *Adam) Groups() []Group {
	out := make([]Group, len(o.groups))
	copy(out, o.groups)
	return out
}

// Params returns every parameter, in group order (for ClipGradNorm).
func (o *Adam) Params() []*tensor.Tensor {
	out := make([]*tensor.Tensor, len(o.params))
	for i, p := range o.params {
		out[i] = p.t
	}
	return out
}

// Iter returns the number of Steps taken, the schedule's next argument.
func (o *Adam) Iter() int { return o.iter }

// LR returns the learning rate that the next Step applies to group i: its
// base LR times the schedule's factor.
func (o *Adam) LR(i int) float64 { return o.groups[i].LR * o.factor() }

// SetBaseLR changes group i's base learning rate.
func (o *Adam) SetBaseLR(i int, lr float64) { o.groups[i].LR = lr }

func (o *Adam) factor() float64 {
	if o.cfg.Schedule == nil {
		return 1
	}
	return o.cfg.Schedule.Factor(o.iter)
}

// ZeroGrad sets every parameter's gradient to zero, keeping the buffers so
// that the next Backward accumulates into them without allocating.
func (o *Adam) ZeroGrad() {
	var jobs []job
	for i, p := range o.params {
		jobs = appendChunks(jobs, i, len(p.t.Grad))
	}
	runJobs(len(jobs), func(k int) {
		j := jobs[k]
		clear(o.params[j.p].t.Grad[j.lo:j.hi])
	})
}

// update holds the scalars of one parameter's update in one Step.
type update struct {
	stepSize  float32 // lr / (1 - beta1^step)
	bc2Sqrt   float32 // sqrt(1 - beta2^step)
	l2        float32 // Adam: added wd*p to the gradient
	decayMul  float32 // AdamW: p *= 1 - lr*wd
	decoupled bool
}

// Step applies one update to every parameter that has a gradient, exactly
// as PyTorch's Adam or AdamW (single-tensor path, float32 arithmetic):
//
//	g = grad (+ wd*p for Adam)          p *= 1 - lr*wd (AdamW)
//	m = beta1*m + (1-beta1)*g           v = beta2*v + (1-beta2)*g*g
//	p -= lr/(1-beta1^t) * m / (sqrt(v)/sqrt(1-beta2^t) + eps)
//
// where t is the parameter's own step count. Parameters whose Grad is nil
// are skipped and keep their step count, as in PyTorch. Work is split over
// GOMAXPROCS goroutines by parameter and by element range.
func (o *Adam) Step() { o.step(false, 1) }

// StepAndZeroGrad is Step followed by ZeroGrad in one pass over memory: each
// gradient element is cleared right after the update has read it, which
// saves ZeroGrad's second pass over every gradient. The result is exactly
// that of Step then ZeroGrad.
func (o *Adam) StepAndZeroGrad() { o.step(true, 1) }

// StepAndZeroGradScaled is StepAndZeroGrad with every gradient multiplied
// by scale (rounded to float32, as ClipGradNorm multiplies) as the update
// reads it: with scale from ClipScale, exactly ClipGradNorm then
// StepAndZeroGrad, in one pass over the gradients instead of two.
func (o *Adam) StepAndZeroGradScaled(scale float32) { o.step(true, scale) }

// step applies one update to the gradients times scale and, if zero is
// set, clears the gradients it read.
func (o *Adam) step(zero bool, scale float32) {
	f := o.factor()
	b1, b2 := o.cfg.Beta1, o.cfg.Beta2
	ups := make([]update, len(o.params))
	var jobs []job
	for i, p := range o.params {
		if p.t.Grad == nil {
			continue
		}
		if len(p.t.Grad) != len(p.t.Data) {
			panic(fmt.Sprintf("optim: parameter %s of shape %v has a gradient of %d values", o.names[i], p.t.Shape, len(p.t.Grad)))
		}
		g := o.groups[p.group]
		lr := g.LR * f
		p.step++
		t := float64(p.step)
		ups[i] = update{
			stepSize:  float32(lr / (1 - math.Pow(b1, t))),
			bc2Sqrt:   float32(math.Sqrt(1 - math.Pow(b2, t))),
			decoupled: o.decoupled,
		}
		if o.decoupled {
			ups[i].decayMul = float32(1 - lr*g.WeightDecay)
		} else {
			ups[i].l2 = float32(g.WeightDecay)
		}
		jobs = appendChunks(jobs, i, len(p.t.Data))
	}
	beta1, beta2 := float32(b1), float32(b2)
	omb1, omb2 := float32(1-b1), float32(1-b2)
	eps := float32(o.cfg.Eps)
	runJobs(len(jobs), func(k int) {
		j := jobs[k]
		p, u := o.params[j.p], &ups[j.p]
		adamKernel(p.t.Data[j.lo:j.hi], p.t.Grad[j.lo:j.hi], p.m[j.lo:j.hi], p.v[j.lo:j.hi], u, beta1, beta2, omb1, omb2, eps, zero, scale)
	})
	o.iter++
}

// adamKernelGo updates one element range with its gradient times scale (1:
// the gradient as it is) and, if zero is set, clears its gradient. The
// operation order follows PyTorch's _single_tensor_adam(w) so that results
// agree to rounding. adamKernel is this loop, vectorised where the CPU
// allows with the same operations in the same order.
func adamKernelGo(p, grad, m, v []float32, u *update, beta1, beta2, omb1, omb2, eps float32, zero bool, scale float32) {
	n := len(p)
	grad, m, v = grad[:n], m[:n], v[:n]
	stepSize, bc2Sqrt, l2, decayMul := u.stepSize, u.bc2Sqrt, u.l2, u.decayMul
	for i := range p {
		g := grad[i] * scale // exact for 1, as the vector kernel does it
		if zero {
			grad[i] = 0
		}
		x := p[i]
		if u.decoupled {
			x *= decayMul
		} else if l2 != 0 {
			g += l2 * x
		}
		mi := m[i]*beta1 + omb1*g
		vi := v[i]*beta2 + omb2*g*g
		m[i], v[i] = mi, vi
		denom := float32(math.Sqrt(float64(vi)))/bc2Sqrt + eps
		p[i] = x - stepSize*(mi/denom)
	}
}

// job is an element range [lo, hi) of parameter p.
type job struct{ p, lo, hi int }

// chunk is the number of elements one job covers: large enough to amortise
// scheduling, small enough to balance a few big matrices over the cores.
const chunk = 1 << 15

func appendChunks(jobs []job, p, n int) []job {
	for lo := 0; lo < n; lo += chunk {
		jobs = append(jobs, job{p, lo, min(lo+chunk, n)})
	}
	return jobs
}

// runJobs calls fn(k) for every k in [0, n), on up to GOMAXPROCS goroutines
// that take indices in turn.
func runJobs(n int, fn func(k int)) {
	workers := min(runtime.GOMAXPROCS(0), n)
	if workers <= 1 {
		for k := range n {
			fn(k)
		}
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	work := func() {
		for {
			k := int(next.Add(1)) - 1
			if k >= n {
				return
			}
			fn(k)
		}
	}
	for range workers - 1 {
		wg.Go(work)
	}
	work()
	wg.Wait()
}

// NamedParam is a parameter with its name in the model ("txt_enc.fc.weight"),
// as the layers' parameter lists give them.
type NamedParam struct {
	Name string
	T    *tensor.Tensor
}

// Tensors returns the tensors of named parameters, in order, for a Group.
func Tensors(params []NamedParam) []*tensor.Tensor {
	out := make([]*tensor.Tensor, len(params))
	for i, p := range params {
		out[i] = p.T
	}
	return out
}

// SetNames keys the state of each parameter by its model name instead of its
// index (see State). Every parameter of o must be named exactly once and
// every named tensor must be one of o's parameters.
func (o *Adam) SetNames(params []NamedParam) error {
	index := make(map[*tensor.Tensor]int, len(o.params))
	for i, p := range o.params {
		index[p.t] = i
	}
	names := make([]string, len(o.params))
	used := map[string]bool{}
	var errs []error
	for _, np := range params {
		i, ok := index[np.T]
		switch {
		case np.Name == "":
			errs = append(errs, fmt.Errorf("a parameter has an empty name"))
		case !ok:
			errs = append(errs, fmt.Errorf("%q is not a parameter of the optimiser", np.Name))
		case used[np.Name]:
			errs = append(errs, fmt.Errorf("name %q is given twice", np.Name))
		case names[i] != "":
			errs = append(errs, fmt.Errorf("parameter %q is also named %q", names[i], np.Name))
		default:
			names[i] = np.Name
			used[np.Name] = true
		}
	}
	for i, n := range names {
		if n == "" {
			errs = append(errs, fmt.Errorf("parameter %d (%s, shape %v) has no name", i, groupLabel(o.params[i].group, o.groups[o.params[i].group].Name), o.params[i].t.Shape))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("optim: set names: %w", errors.Join(errs...))
	}
	o.names = names
	return nil
}
