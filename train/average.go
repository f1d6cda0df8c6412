package train

import (
	"github.com/xmr-project/xmr/nn"
	"github.com/xmr-project/xmr/tensor"
)

// averagePrefix names the averaged weights in checkpoints that carry the
// optimiser state.
const averagePrefix = "ema."

// average is an exponential moving average of the trained weights
// (Polyak averaging), training.ema-decay.
type average struct {
	decay float64
	// avg[i] is the average of the parameter the stepper holds at i, under
	// the parameter's name with averagePrefix.
	avg []nn.Named
}

// newAverage starts the average of params (named names) at their values.
func newAverage(names []string, params []*tensor.Tensor, decay float64) *average {
	a := &average{decay: decay}
	for i, p := range params {
		a.avg = append(a.avg, nn.Named{Name: averagePrefix + names[i], T: tensor.FromData(append([]float32(nil), p.Data...), p.Shape...)})
	}
	return a
}

// decayAt is the decay of the update after step t (counted from 1): the
// configured decay, ramped up as (1+t)/(10+t) over the first steps, so that
// the random initial weights have faded from the average after a few dozen
// steps rather than a few hundred.
func (a *average) decayAt(t int) float32 {
	return float32(min(a.decay, float64(1+t)/float64(10+t)))
}

// update moves the average towards the weights after step t:
// avg += (1-d) (w - avg).
func (a *average) update(params []*tensor.Tensor, t int) {
	k := 1 - a.decayAt(t)
	for i, p := range params {
		avg := a.avg[i].T.Data
		for j, w := range p.Data {
			avg[j] += k * (w - avg[j])
		}
	}
}

// swap exchanges the weights with their averages.
func (a *average) swap(params []*tensor.Tensor) {
	for i, p := range params {
		avg := a.avg[i].T.Data
		for j, w := range p.Data {
			p.Data[j], avg[j] = avg[j], w
		}
	}
}

// WithAverage runs f with the averaged weights in the model's place when
// training keeps an average (training.ema-decay), and with the weights as
// they are otherwise; the weights are back in place when it returns, also
// after an error or a panic.
func (s *Stepper) WithAverage(f func() error) error {
	if s.avg == nil {
		return f()
	}
	s.avg.swap(s.params)
	defer s.avg.swap(s.params)
	return f()
}
