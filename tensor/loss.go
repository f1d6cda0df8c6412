package tensor

// CrossEntropy returns the mean negative log-likelihood of targets under
// softmax(logits) for logits (N, C) and N class indices; targets equal to
// ignoreIndex do not count. With no counted target the loss is 0.
func (tp *Tape) CrossEntropy(logits *Tensor, targets []int32, ignoreIndex int32) *Tensor {
	if logits.Dims() != 2 || logits.Shape[0] != len(targets) {
		panic(shapeErr("CrossEntropy", "logits %v need shape (N, C) with N = %d targets", logits.Shape, len(targets)))
	}
	c := logits.Shape[1]
	for i, t := range targets {
		if t != ignoreIndex && (t < 0 || int(t) >= c) {
			panic(shapeErr("CrossEntropy", "target %d of row %d outside [0, %d)", t, i, c))
		}
	}
	lsm := tp.LogSoftmax(logits, 1, nil)
	out := tp.newTensor([]int{})
	var loss float64
	cnt := 0
	for i, t := range targets {
		if t == ignoreIndex {
			continue
		}
		loss -= float64(lsm.Data[i*c+int(t)])
		cnt++
	}
	if cnt > 0 {
		loss /= float64(cnt)
	}
	out.Data[0] = float32(loss)
	if tp.needs(lsm) {
		tp.record(out, func(g []float32) {
			gl := tp.grad(lsm)
			for i, t := range targets {
				if t != ignoreIndex {
					gl[i*c+int(t)] -= g[0] / float32(cnt)
				}
			}
		})
	}
	return out
}
