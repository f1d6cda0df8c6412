package optim_test

import (
	"fmt"

	"github.com/xmr-project/xmr/optim"
	"github.com/xmr-project/xmr/tensor"
)

// Example trains w towards 3 with AdamW, a warm-up and a step decay, and
// clips the gradient at each step.
func Example() {
	w := tensor.Param([]float32{0}, 1)
	target := tensor.FromData([]float32{3}, 1)
	opt, err := optim.NewAdamW([]optim.Group{{Name: "w", Params: []*tensor.Tensor{w}, LR: 0.1}},
		optim.Config{Schedule: optim.Product{optim.Warmup{Iters: 10}, optim.StepDecay{Every: 200, Gamma: 0.1}}})
	if err != nil {
		fmt.Println(err)
		return
	}
	tp := tensor.NewTape()
	for range 300 {
		opt.ZeroGrad()
		d := tp.Sub(w, target)
		tp.Backward(tp.MeanAll(tp.Mul(d, d)))
		tp.Reset()
		optim.ClipGradNorm(opt.Params(), 1)
		opt.Step()
	}
	fmt.Printf("w = %.3f, lr now %.3g\n", w.Data[0], opt.LR(0))
	// Output: w = 3.000, lr now 0.01
}
