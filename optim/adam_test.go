package optim

import (
	"math"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"

	"github.com/xmr-project/xmr/tensor"
)

func param(vals ...float32) *tensor.Tensor {
	return tensor.Param(append([]float32(nil), vals...), len(vals))
}

func randParam(rng *rand.Rand, shape ...int) *tensor.Tensor {
	t := tensor.RandN(rng, shape...)
	t.SetRequiresGrad(true)
	t.Grad = make([]float32, len(t.Data))
	return t
}

func fillGrads(rng *rand.Rand, ps ...*tensor.Tensor) {
	for _, p := range ps {
		if p.Grad == nil {
			p.Grad = make([]float32, len(p.Data))
		}
		for i := range p.Grad {
			p.Grad[i] = float32(rng.NormFloat64())
		}
	}
}

func near(a, b, tol float64) bool {
	return math.Abs(a-b) <= tol*(1+math.Abs(b))
}

func mustAdam(t *testing.T, decoupled bool, groups []Group, cfg Config) *Adam {
	t.Helper()
	var o *Adam
	var err error
	if decoupled {
		o, err = NewAdamW(groups, cfg)
	} else {
		o, err = NewAdam(groups, cfg)
	}
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// TestAdamFirstSteps checks two steps against the formulas worked by hand.
func TestAdamFirstSteps(t *testing.T) {
	p := param(1, -2)
	o := mustAdam(t, false, []Group{{Params: []*tensor.Tensor{p}, LR: 0.1}}, Config{})
	p.Grad = []float32{0.5, -3}
	o.Step()
	// Step 1: m = 0.1 g, v = 0.001 g^2, m^ = g, v^ = g^2, so p -= lr g/(|g|+eps).
	want := []float64{1 - 0.1*0.5/(0.5+1e-8), -2 + 0.1*3/(3+1e-8)}
	for i := range want {
		if !near(float64(p.Data[i]), want[i], 1e-6) {
			t.Fatalf("step 1: p[%d] = %v, want %v", i, p.Data[i], want[i])
		}
	}
	// Step 2 with g2: m = 0.09 g1 + 0.1 g2, v = 0.000999 g1^2 + 0.001 g2^2.
	g1 := []float64{0.5, -3}
	g2 := []float64{-1, 2}
	p.Grad = []float32{-1, 2}
	o.Step()
	for i := range want {
		m := 0.9*0.1*g1[i] + 0.1*g2[i]
		v := 0.999*0.001*g1[i]*g1[i] + 0.001*g2[i]*g2[i]
		mh := m / (1 - 0.9*0.9)
		vh := v / (1 - 0.999*0.999)
		want[i] -= 0.1 * mh / (math.Sqrt(vh) + 1e-8)
		if !near(float64(p.Data[i]), want[i], 1e-6) {
			t.Fatalf("step 2: p[%d] = %v, want %v", i, p.Data[i], want[i])
		}
	}
}

// refAdam is a float64 Adam/AdamW written from the paper's algorithm.
type refAdam struct {
	p, m, v        []float64
	lr, wd, b1, b2 float64
	eps            float64
	decoupled      bool
	t              int
}

func (r *refAdam) step(g []float32, factor float64) {
	r.t++
	lr := r.lr * factor
	for i := range r.p {
		gi := float64(g[i])
		if r.decoupled {
			r.p[i] *= 1 - lr*r.wd
		} else {
			gi += r.wd * r.p[i]
		}
		r.m[i] = r.b1*r.m[i] + (1-r.b1)*gi
		r.v[i] = r.b2*r.v[i] + (1-r.b2)*gi*gi
		mh := r.m[i] / (1 - math.Pow(r.b1, float64(r.t)))
		vh := r.v[i] / (1 - math.Pow(r.b2, float64(r.t)))
		r.p[i] -= lr * mh / (math.Sqrt(vh) + r.eps)
	}
}

// TestAgainstFloat64Reference runs Adam and AdamW with two groups, a
// schedule and non-default betas against the float64 reference loop.
func TestAgainstFloat64Reference(t *testing.T) {
	for _, decoupled := range []bool{false, true} {
		rng := rand.New(rand.NewPCG(1, 2))
		a, b := randParam(rng, 7, 5), randParam(rng, 40000) // b spans two jobs
		sched := Product{Warmup{Iters: 4}, StepDecay{Every: 6, Gamma: 0.5}}
		cfg := Config{Beta1: 0.8, Beta2: 0.99, Eps: 1e-6, Schedule: sched}
		groups := []Group{{Name: "a", Params: []*tensor.Tensor{a}, LR: 0.01, WeightDecay: 0.1}, {Name: "b", Params: []*tensor.Tensor{b}, LR: 0.003}}
		o := mustAdam(t, decoupled, groups, cfg)
		refs := []*refAdam{}
		for i, p := range []*tensor.Tensor{a, b} {
			r := &refAdam{lr: groups[i].LR, wd: groups[i].WeightDecay, b1: 0.8, b2: 0.99, eps: 1e-6, decoupled: decoupled}
			for _, x := range p.Data {
				r.p = append(r.p, float64(x))
			}
			r.m, r.v = make([]float64, len(r.p)), make([]float64, len(r.p))
			refs = append(refs, r)
		}
		for it := 0; it < 12; it++ {
			fillGrads(rng, a, b)
			if got, want := o.LR(0), 0.01*sched.Factor(it); got != want {
				t.Fatalf("iter %d: LR(0) = %v, want %v", it, got, want)
			}
			o.Step()
			for i, p := range []*tensor.Tensor{a, b} {
				refs[i].step(p.Grad, sched.Factor(it))
			}
		}
		for i, p := range []*tensor.Tensor{a, b} {
			for j, x := range p.Data {
				if !near(float64(x), refs[i].p[j], 1e-5) {
					t.Fatalf("decoupled=%v param %d[%d] = %v, reference %v", decoupled, i, j, x, refs[i].p[j])
				}
			}
		}
	}
}

// TestAdamVsAdamW: with a zero gradient, AdamW only shrinks the weights by
// lr*wd while Adam's L2 term moves them by about lr.
func TestAdamVsAdamW(t *testing.T) {
	pa, pw := param(2, -4), param(2, -4)
	oa := mustAdam(t, false, []Group{{Params: []*tensor.Tensor{pa}, LR: 0.1, WeightDecay: 0.5}}, Config{})
	ow := mustAdam(t, true, []Group{{Params: []*tensor.Tensor{pw}, LR: 0.1, WeightDecay: 0.5}}, Config{})
	pa.Grad, pw.Grad = []float32{0, 0}, []float32{0, 0}
	oa.Step()
	ow.Step()
	for i, p0 := range []float64{2, -4} {
		if want := p0 * (1 - 0.1*0.5); !near(float64(pw.Data[i]), want, 1e-7) {
			t.Errorf("AdamW p[%d] = %v, want %v", i, pw.Data[i], want)
		}
		if want := p0 - 0.1*math.Copysign(1, p0); !near(float64(pa.Data[i]), want, 1e-6) {
			t.Errorf("Adam p[%d] = %v, want %v", i, pa.Data[i], want)
		}
	}
}

func TestNilGradSkipped(t *testing.T) {
	p, q := param(1), param(1)
	o := mustAdam(t, false, []Group{{Params: []*tensor.Tensor{p, q}, LR: 0.1}}, Config{})
	p.Grad = []float32{1}
	o.Step()
	o.Step()
	if q.Data[0] != 1 {
		t.Fatalf("parameter without gradient moved to %v", q.Data[0])
	}
	st := o.State()
	if st["params.0.step"].Data[0] != 2 || st["params.1.step"].Data[0] != 0 || st[KeyIter].Data[0] != 2 {
		t.Fatalf("steps: p %v, q %v, iter %v", st["params.0.step"].Data, st["params.1.step"].Data, st[KeyIter].Data)
	}
}

func TestConstructorErrors(t *testing.T) {
	p := param(1)
	cases := []struct {
		groups []Group
		cfg    Config
		want   string
	}{
		{[]Group{{Params: []*tensor.Tensor{p, p}, LR: 1}}, Config{}, "only once"},
		{[]Group{{Params: []*tensor.Tensor{p}, LR: 1}, {Name: "x", Params: []*tensor.Tensor{p}}}, Config{}, "group 1 (x) parameter 0 is also group 0 parameter 0"},
		{[]Group{{Params: []*tensor.Tensor{nil}}}, Config{}, "nil"},
		{[]Group{{Params: []*tensor.Tensor{p}, LR: -1}}, Config{}, "learning rate"},
		{[]Group{{Params: []*tensor.Tensor{p}, LR: math.NaN()}}, Config{}, "learning rate"},
		{[]Group{{Params: []*tensor.Tensor{p}, WeightDecay: -1}}, Config{}, "weight decay"},
		{[]Group{{Params: []*tensor.Tensor{p}}}, Config{Beta1: 1}, "betas"},
		{[]Group{{Params: []*tensor.Tensor{p}}}, Config{Eps: -1}, "eps"},
	}
	for _, c := range cases {
		_, err := NewAdam(c.groups, c.cfg)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("NewAdam: error %v, want one containing %q", err, c.want)
		}
	}
}

// TestQuadraticConverges trains p towards a target with gradients from the
// tape.
func TestQuadraticConverges(t *testing.T) {
	target := tensor.FromData([]float32{3, -1, 0.5, 2}, 4)
	p := tensor.Param(make([]float32, 4), 4)
	o := mustAdam(t, true, []Group{{Params: []*tensor.Tensor{p}, LR: 0.05}}, Config{Schedule: Warmup{Iters: 20}})
	tp := tensor.NewTape()
	var loss float32
	for it := 0; it < 600; it++ {
		o.ZeroGrad()
		d := tp.Sub(p, target)
		l := tp.MeanAll(tp.Mul(d, d))
		tp.Backward(l)
		loss = l.Item()
		tp.Reset()
		o.Step()
	}
	if loss > 1e-6 {
		t.Fatalf("loss after 600 steps = %g, p = %v", loss, p.Data)
	}
}

// TestParallelDeterministic: a step over many jobs gives the same bits on
// one goroutine as on several.
func TestParallelDeterministic(t *testing.T) {
	run := func(procs int) []float32 {
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
		rng := rand.New(rand.NewPCG(5, 6))
		a, b := randParam(rng, 300, 500), randParam(rng, 17)
		o := mustAdam(t, false, []Group{{Params: []*tensor.Tensor{a, b}, LR: 0.01, WeightDecay: 0.01}}, Config{})
		for range 3 {
			fillGrads(rng, a, b)
			ClipGradNorm(o.Params(), 100)
			o.Step()
		}
		return append(a.Data, b.Data...)
	}
	one, many := run(1), run(4)
	for i := range one {
		if one[i] != many[i] {
			t.Fatalf("element %d: %v on one goroutine, %v on four", i, one[i], many[i])
		}
	}
}

func TestZeroGrad(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	a, b := randParam(rng, 70000), param(1)
	fillGrads(rng, a)
	o := mustAdam(t, false, []Group{{Params: []*tensor.Tensor{a, b}, LR: 0.01}}, Config{})
	g := &a.Grad[0]
	o.ZeroGrad()
	for i, v := range a.Grad {
		if v != 0 {
			t.Fatalf("grad[%d] = %v after ZeroGrad", i, v)
		}
	}
	if &a.Grad[0] != g {
		t.Fatal("ZeroGrad reallocated the gradient")
	}
	if b.Grad != nil {
		t.Fatal("ZeroGrad allocated a gradient")
	}
}

// twinAdams returns two optimisers over equal copies of the same two
// parameters (a large one and a small one, in two groups), the copies
// drawn from seed.
func twinAdams(t *testing.T, decoupled bool, seed uint64) (split, fused *Adam, a1, b1, a2, b2 *tensor.Tensor) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, seed))
	a1, b1 = randParam(rng, 70000), randParam(rng, 3, 5)
	a2, b2 = a1.Clone(), b1.Clone()
	groups := func(a, b *tensor.Tensor) []Group {
		return []Group{{Params: []*tensor.Tensor{a}, LR: 0.01, WeightDecay: 0.1}, {Params: []*tensor.Tensor{b}, LR: 0.02}}
	}
	return mustAdam(t, decoupled, groups(a1, b1), Config{}), mustAdam(t, decoupled, groups(a2, b2), Config{}), a1, b1, a2, b2
}

// twinGrads gives both copies the same random gradients for step s.
func twinGrads(seed uint64, s int, a1, b1, a2, b2 *tensor.Tensor) {
	fillGrads(rand.New(rand.NewPCG(seed, uint64(s))), a1, b1)
	fillGrads(rand.New(rand.NewPCG(seed, uint64(s))), a2, b2)
}

// TestStepAndZeroGrad checks that the fused step equals Step then ZeroGrad
// bit for bit, for Adam and AdamW, over several steps.
func TestStepAndZeroGrad(t *testing.T) {
	for _, decoupled := range []bool{false, true} {
		split, fused, a1, b1, a2, b2 := twinAdams(t, decoupled, 3)
		for s := range 3 {
			twinGrads(4, s, a1, b1, a2, b2)
			split.Step()
			split.ZeroGrad()
			fused.StepAndZeroGrad()
			for _, pair := range [][2]*tensor.Tensor{{a1, a2}, {b1, b2}} {
				for i := range pair[0].Data {
					if pair[0].Data[i] != pair[1].Data[i] || pair[1].Grad[i] != 0 {
						t.Fatalf("decoupled=%v step %d element %d: fused %v (grad %v), split %v", decoupled, s, i, pair[1].Data[i], pair[1].Grad[i], pair[0].Data[i])
					}
				}
			}
		}
	}
}

// TestStepAndZeroGradScaled checks that clipping inside the update
// (ClipScale, then StepAndZeroGradScaled) equals ClipGradNorm then
// StepAndZeroGrad bit for bit, with the clip acting (max norm below the
// gradients' norm of about 265) and not acting, for Adam and AdamW.
func TestStepAndZeroGradScaled(t *testing.T) {
	for _, decoupled := range []bool{false, true} {
		for _, maxNorm := range []float64{2, 1e6, 0} {
			split, fused, a1, b1, a2, b2 := twinAdams(t, decoupled, 5)
			for s := range 3 {
				twinGrads(6, s, a1, b1, a2, b2)
				norm1 := ClipGradNorm(split.Params(), maxNorm)
				split.StepAndZeroGrad()
				scale, norm2 := ClipScale(fused.Params(), maxNorm)
				if norm1 != norm2 || (maxNorm == 2) != (scale < 1) {
					t.Fatalf("maxNorm %v: ClipScale gave %v, norm %v; ClipGradNorm's norm %v", maxNorm, scale, norm2, norm1)
				}
				fused.StepAndZeroGradScaled(scale)
				for _, pair := range [][2]*tensor.Tensor{{a1, a2}, {b1, b2}} {
					for i := range pair[0].Data {
						if pair[0].Data[i] != pair[1].Data[i] || pair[1].Grad[i] != 0 {
							t.Fatalf("decoupled=%v maxNorm %v step %d element %d: fused %v (grad %v), split %v", decoupled, maxNorm, s, i, pair[1].Data[i], pair[1].Grad[i], pair[0].Data[i])
						}
					}
				}
			}
		}
	}
}

func TestClipGradNorm(t *testing.T) {
	a, b, c := param(0, 0), param(0), param(0)
	a.Grad, b.Grad = []float32{3, 0}, []float32{4} // c has no gradient
	ps := []*tensor.Tensor{a, b, c}
	if n := ClipGradNorm(ps, 10); n != 5 || a.Grad[0] != 3 || b.Grad[0] != 4 {
		t.Fatalf("below the limit: norm %v, grads %v %v", n, a.Grad, b.Grad)
	}
	n := ClipGradNorm(ps, 1)
	if n != 5 {
		t.Fatalf("norm = %v, want 5", n)
	}
	coef := 1 / (5 + 1e-6)
	if !near(float64(a.Grad[0]), 3*coef, 1e-7) || !near(float64(b.Grad[0]), 4*coef, 1e-7) || a.Grad[1] != 0 {
		t.Fatalf("clipped grads %v %v, want scale %v", a.Grad, b.Grad, coef)
	}
	if n := GradNorm(ps); !near(n, 1, 1e-6) {
		t.Fatalf("norm after clipping = %v, want 1", n)
	}
	// A large gradient split into several jobs.
	rng := rand.New(rand.NewPCG(3, 3))
	big := randParam(rng, 100000)
	fillGrads(rng, big)
	var want float64
	for _, g := range big.Grad {
		want += float64(g) * float64(g)
	}
	// float32 lane sums in blocks of 1024 (sumSquares): a relative error
	// of about 1e-8 here.
	if got := ClipGradNorm([]*tensor.Tensor{big}, 2); !near(got, math.Sqrt(want), 1e-6) {
		t.Fatalf("norm %v, want %v", got, math.Sqrt(want))
	}
	if got := GradNorm([]*tensor.Tensor{big}); !near(got, 2, 1e-5) {
		t.Fatalf("after clipping to 2: norm %v", got)
	}
	nan := param(0)
	nan.Grad = []float32{float32(math.NaN())}
	if got := ClipGradNorm([]*tensor.Tensor{nan, a}, 1); !math.IsNaN(got) {
		t.Fatalf("norm with a NaN = %v", got)
	}
}

func TestStateRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 9))
	a, b := randParam(rng, 3, 4), randParam(rng, 6)
	a2, b2 := a.Clone().SetRequiresGrad(true), b.Clone().SetRequiresGrad(true)
	named := []NamedParam{{"enc.w", a}, {"enc.b", b}}
	groups := func(x, y *tensor.Tensor) []Group {
		return []Group{{Params: []*tensor.Tensor{x}, LR: 0.01, WeightDecay: 0.1}, {Params: []*tensor.Tensor{y}, LR: 0.02}}
	}
	cfg := Config{Schedule: Warmup{Iters: 10}}
	o1 := mustAdam(t, true, groups(a, b), cfg)
	if err := o1.SetNames(named); err != nil {
		t.Fatal(err)
	}
	grads := make([][2][]float32, 6)
	for i := range grads {
		fillGrads(rng, a, b)
		grads[i] = [2][]float32{append([]float32(nil), a.Grad...), append([]float32(nil), b.Grad...)}
	}
	for i := range 3 {
		copy(a.Grad, grads[i][0])
		copy(b.Grad, grads[i][1])
		o1.Step()
	}
	// Copy the state (as a checkpoint would) and the weights into a fresh optimiser.
	st := map[string]*tensor.Tensor{}
	for k, v := range o1.State() {
		st[k] = v.Clone()
	}
	for _, k := range []string{"iter", "enc.w.step", "enc.w.exp_avg", "enc.w.exp_avg_sq", "enc.b.step", "enc.b.exp_avg", "enc.b.exp_avg_sq"} {
		if st[k] == nil {
			t.Fatalf("state lacks %q", k)
		}
	}
	if len(st) != 7 {
		t.Fatalf("state has %d keys", len(st))
	}
	copy(a2.Data, a.Data)
	copy(b2.Data, b.Data)
	o2 := mustAdam(t, true, groups(a2, b2), cfg)
	if err := o2.SetNames([]NamedParam{{"enc.b", b2}, {"enc.w", a2}}); err != nil {
		t.Fatal(err)
	}
	if err := o2.LoadState(st); err != nil {
		t.Fatal(err)
	}
	for i := 3; i < 6; i++ {
		a.Grad, a2.Grad = append([]float32(nil), grads[i][0]...), append([]float32(nil), grads[i][0]...)
		b.Grad, b2.Grad = append([]float32(nil), grads[i][1]...), append([]float32(nil), grads[i][1]...)
		o1.Step()
		o2.Step()
	}
	for i := range a.Data {
		if a.Data[i] != a2.Data[i] {
			t.Fatalf("resumed a[%d] = %v, uninterrupted %v", i, a2.Data[i], a.Data[i])
		}
	}
	for i := range b.Data {
		if b.Data[i] != b2.Data[i] {
			t.Fatalf("resumed b[%d] = %v, uninterrupted %v", i, b2.Data[i], b.Data[i])
		}
	}
}

func TestLoadStateErrors(t *testing.T) {
	p := param(1, 2, 3)
	o := mustAdam(t, false, []Group{{Params: []*tensor.Tensor{p}, LR: 0.1}}, Config{})
	good := func() map[string]*tensor.Tensor {
		st := map[string]*tensor.Tensor{}
		for k, v := range o.State() {
			st[k] = v.Clone()
		}
		return st
	}
	cases := []struct {
		name string
		edit func(map[string]*tensor.Tensor)
		want []string
	}{
		{"missing", func(st map[string]*tensor.Tensor) { delete(st, "params.0.exp_avg") }, []string{`missing "params.0.exp_avg"`}},
		{"unexpected", func(st map[string]*tensor.Tensor) { st["params.1.step"] = tensor.New(1) }, []string{`unexpected "params.1.step"`}},
		{"shape", func(st map[string]*tensor.Tensor) { st["params.0.exp_avg_sq"] = tensor.New(4) }, []string{`"params.0.exp_avg_sq": shape [4], parameter has 3 values`}},
		{"count", func(st map[string]*tensor.Tensor) { st["iter"] = tensor.FromData([]float32{1.5}, 1) }, []string{`"iter": 1.5 is not a step count`}},
		{"several", func(st map[string]*tensor.Tensor) { delete(st, "iter"); st["x"] = tensor.New(1) }, []string{`missing "iter"`, `unexpected "x"`}},
	}
	for _, c := range cases {
		st := good()
		c.edit(st)
		err := o.LoadState(st)
		if err == nil {
			t.Errorf("%s: no error", c.name)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q lacks %q", c.name, err, w)
			}
		}
	}
}

func TestSetNamesErrors(t *testing.T) {
	p, q, r := param(1), param(2), param(3)
	o := mustAdam(t, false, []Group{{Params: []*tensor.Tensor{p, q}}}, Config{})
	err := o.SetNames([]NamedParam{{"p", p}, {"r", r}})
	if err == nil || !strings.Contains(err.Error(), `"r" is not a parameter`) || !strings.Contains(err.Error(), "parameter 1 (group 0, shape [1]) has no name") {
		t.Fatalf("error %v", err)
	}
	if err := o.SetNames([]NamedParam{{"p", p}, {"p", q}}); err == nil || !strings.Contains(err.Error(), `name "p" is given twice`) {
		t.Fatalf("error %v", err)
	}
}

func TestSchedules(t *testing.T) {
	cases := []struct {
		name string
		s    Schedule
		want map[int]float64
	}{
		{"constant", Constant{}, map[int]float64{0: 1, 1000: 1}},
		{"step", StepDecay{Every: 3, Gamma: 0.1}, map[int]float64{0: 1, 2: 1, 3: 0.1, 5: 0.1, 6: 0.1 * 0.1, 9: 0.1 * 0.1 * 0.1}},
		{"step-off", StepDecay{Gamma: 0.1}, map[int]float64{0: 1, 100: 1}},
		{"multistep", MultiStep{Milestones: []int{5, 2}, Gamma: 0.5}, map[int]float64{0: 1, 1: 1, 2: 0.5, 4: 0.5, 5: 0.25, 50: 0.25}},
		{"warmup", Warmup{Iters: 4}, map[int]float64{0: 0.25, 1: 0.5, 2: 0.75, 3: 1, 10: 1}},
		{"warmup-off", Warmup{}, map[int]float64{0: 1}},
		{"epochs", Epochs{Iters: 10, Schedule: StepDecay{Every: 2, Gamma: 0.1}}, map[int]float64{0: 1, 19: 1, 20: 0.1, 39: 0.1, 40: 0.1 * 0.1}},
		{"product", Product{Warmup{Iters: 2}, Epochs{Iters: 5, Schedule: MultiStep{Milestones: []int{1}, Gamma: 0.1}}}, map[int]float64{0: 0.5, 1: 1, 4: 1, 5: 0.1}},
		{"empty-product", Product{}, map[int]float64{7: 1}},
	}
	for _, c := range cases {
		for it, want := range c.want {
			if got := c.s.Factor(it); !near(got, want, 1e-12) {
				t.Errorf("%s: Factor(%d) = %v, want %v", c.name, it, got, want)
			}
		}
	}
}

// BenchmarkStep measures an AdamW step over 17M parameters in transformer-
// sized matrices (the size of TERAN's trained part): Step alone, Step then
// ZeroGrad, and StepAndZeroGrad.
func BenchmarkStep(b *testing.B) {
	for _, c := range []struct {
		name string
		step func(*Adam)
	}{
		{"Step", (*Adam).Step},
		{"Step+ZeroGrad", func(o *Adam) { o.Step(); o.ZeroGrad() }},
		{"StepAndZeroGrad", (*Adam).StepAndZeroGrad},
	} {
		b.Run(c.name, func(b *testing.B) { benchmarkStep(b, c.step) })
	}
}

func benchmarkStep(b *testing.B, step func(*Adam)) {
	rng := rand.New(rand.NewPCG(1, 1))
	var ps []*tensor.Tensor
	n := 0
	for n < 17_000_000 {
		p := randParam(rng, 1024, 1024)
		fillGrads(rng, p)
		ps = append(ps, p)
		n += p.Numel()
	}
	o, err := NewAdamW([]Group{{Params: ps, LR: 1e-4, WeightDecay: 0.01}}, Config{})
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(n) * 4)
	b.ResetTimer()
	for range b.N {
		step(o)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1e6/(float64(n)/1e6), "ms/Mparam")
}

// TestWithDefaults checks the defaults that NewAdam fills in and that the
// train-step benchmark passes to its peer: PyTorch's, and only for zeros.
func TestWithDefaults(t *testing.T) {
	if got := (Config{}).WithDefaults(); got.Beta1 != 0.9 || got.Beta2 != 0.999 || got.Eps != 1e-8 {
		t.Errorf("defaults %+v", got)
	}
	c := Config{Beta1: 0.8, Beta2: 0.99, Eps: 1e-6}
	if got := c.WithDefaults(); got.Beta1 != 0.8 || got.Beta2 != 0.99 || got.Eps != 1e-6 {
		t.Errorf("set values replaced: %+v", got)
	}
	p := tensor.FromData([]float32{1}, 1).SetRequiresGrad(true)
	o, err := NewAdam([]Group{{Params: []*tensor.Tensor{p}}}, Config{})
	if err != nil {
		t.Fatal(err)
	}
	if o.Config() != (Config{}).WithDefaults() {
		t.Errorf("NewAdam's config %+v, want %+v", o.Config(), (Config{}).WithDefaults())
	}
}
