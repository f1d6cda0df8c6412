package eval_test

import (
	"fmt"
	"os"

	"github.com/xmr-project/xmr/eval"
)

func ExampleRougeL() {
	// LCS("a man on a horse", "a man is riding on a brown horse") = 5:
	// P = 5/5, R = 5/8, F = (1+1.2²)·P·R / (R + 1.2²·P).
	fmt.Printf("%.4f\n", eval.RougeL("A man on a horse", []string{"a man is riding on a brown horse", "a dog"}))
	// Output: 0.7385
}

func ExampleSummarize() {
	r := eval.Summarize([]int{0, 0, 3, 12})
	fmt.Printf("R@1 %.0f R@5 %.0f R@10 %.0f medr %.0f meanr %.2f\n", r.R1, r.R5, r.R10, r.MedR, r.MeanR)
	// Output: R@1 50 R@5 75 R@10 75 medr 2 meanr 4.75
}

func ExampleEvaluate() {
	// 2 images x 4 captions, 2 captions per image.
	sims := &eval.Matrix{Rows: 2, Cols: 4, Data: []float32{
		0.9, 0.2, 0.3, 0.1,
		0.8, 0.3, 0.7, 0.6,
	}}
	rep, err := eval.Evaluate(sims, eval.Options{CaptionsPerImage: 2})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("i2t R@1 %.0f, t2i R@1 %.0f, rsum %.0f\n", rep.I2T.R1, rep.T2I.R1, rep.RSum)
	rep.WriteJSON(os.Stdout)
	// Output:
	// i2t R@1 50, t2i R@1 75, rsum 525
	// {"protocol":"all","images":2,"captions":4,"captions_per_image":2,"fold_images":2,"i2t":{"r1":50,"r5":100,"r10":100,"medr":1,"meanr":1.5},"t2i":{"r1":75,"r5":100,"r10":100,"medr":1,"meanr":1.25},"rsum":525}
}
