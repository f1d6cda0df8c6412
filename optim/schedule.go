package optim

import "math"

// Schedule gives the factor by which the base learning rates are multiplied
// at an iteration (the number of optimiser Steps taken before, from 0).
type Schedule interface {
	Factor(iter int) float64
}

// Constant is the schedule whose factor is always 1.
type Constant struct{}

// Factor implements Schedule.
func (Constant) Factor(int) float64 { return 1 }

// StepDecay multiplies the rate by Gamma every Every units, as
// torch.optim.lr_scheduler.StepLR(step_size=Every, gamma=Gamma): the factor
// at t is Gamma^(t / Every). Its unit is the iteration; wrap it in Epochs to
// count epochs, as StepLR is usually stepped.
type StepDecay struct {
	Every int
	Gamma float64
}

// Factor implements Schedule. Every <= 0 disables the decay.
func (s StepDecay) Factor(t int) float64 {
	if s.Every <= 0 || t < s.Every {
		return 1
	}
	return math.Pow(s.Gamma, float64(t/s.Every))
}

// MultiStep multiplies the rate by Gamma at each milestone, as
// torch.optim.lr_scheduler.MultiStepLR: the factor at t is Gamma^k where k
// is the number of milestones <= t. Milestones need not be sorted.
type MultiStep struct {
	Milestones []int
	Gamma      float64
}

// Factor implements Schedule.
func (s MultiStep) Factor(t int) float64 {
	k := 0
	for _, m := range s.Milestones {
		if m <= t {
			k++
		}
	}
	if k == 0 {
		return 1
	}
	return math.Pow(s.Gamma, float64(k))
}

// Warmup raises the rate linearly over the first Iters iterations: the
// factor at t is min(1, (t+1)/Iters), as pytorch_warmup.LinearWarmup, which
// TERAN uses with warmup-period 1000 on Flickr30k. Iters <= 0 disables it.
type Warmup struct {
	Iters int
}

// Factor implements Schedule.
func (w Warmup) Factor(t int) float64 {
	if w.Iters <= 0 || t+1 >= w.Iters {
		return 1
	}
	if t < 0 {
		return 0
	}
	return float64(t+1) / float64(w.Iters)
}

// Epochs runs Schedule on epochs instead of iterations: its factor at
// iteration t is Schedule.Factor(t / Iters), Iters being the iterations per
// epoch. With StepDecay or MultiStep it is StepLR or MultiStepLR stepped once
// per epoch.
type Epochs struct {
	Iters    int
	Schedule Schedule
}

// Factor implements Schedule. Iters <= 0 is taken as 1.
func (e Epochs) Factor(t int) float64 {
	return e.Schedule.Factor(t / max(e.Iters, 1))
}

// Product multiplies the factors of its schedules (warm-up times decay); the
// empty product is 1.
type Product []Schedule

// Factor implements Schedule.
func (p Product) Factor(t int) float64 {
	f := 1.0
	for _, s := range p {
		f *= s.Factor(t)
	}
	return f
}
