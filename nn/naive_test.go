package nn

// Independent float64 implementations of the layers, written as the
// textbook equations in plain loops, against which the tensor code is
// checked.

import (
	"math"

	"github.com/xmr-project/xmr/tensor"
)

// seq is a batch of sequences of vectors: [b][t][feature].
type seq [][][]float64

func toSeq(t *tensor.Tensor) seq {
	b, n, d := t.Shape[0], t.Shape[1], t.Shape[2]
	s := make(seq, b)
	for i := range s {
		s[i] = make([][]float64, n)
		for j := range s[i] {
			s[i][j] = make([]float64, d)
			for k := range s[i][j] {
				s[i][j][k] = float64(t.Data[(i*n+j)*d+k])
			}
		}
	}
	return s
}

// row returns row r of a 2-D weight as float64.
func row(w *tensor.Tensor, r int) []float64 {
	c := w.Shape[len(w.Shape)-1]
	out := make([]float64, c)
	for i := range out {
		out[i] = float64(w.Data[r*c+i])
	}
	return out
}

func dot(a, b []float64) float64 {
	var s float64
	for i := range a {
		s += a[i] * b[i]
	}
	return s
}

// affine returns W[r0:r0+n] x + b[r0:r0+n] for W (Out, In).
func affine(w, b *tensor.Tensor, r0, n int, x []float64) []float64 {
	out := make([]float64, n)
	for r := 0; r < n; r++ {
		out[r] = dot(row(w, r0+r), x)
		if b != nil {
			out[r] += float64(b.Data[r0+r])
		}
	}
	return out
}

func naiveLinear(l *Linear, x []float64) []float64 { return affine(l.W, l.B, 0, l.Out(), x) }

func naiveLayerNorm(l *LayerNorm, x []float64) []float64 {
	var mean, vr float64
	for _, v := range x {
		mean += v
	}
	mean /= float64(len(x))
	for _, v := range x {
		vr += (v - mean) * (v - mean)
	}
	vr /= float64(len(x))
	out := make([]float64, len(x))
	for i, v := range x {
		out[i] = (v-mean)/math.Sqrt(vr+float64(l.Eps))*float64(l.Gamma.Data[i]) + float64(l.Beta.Data[i])
	}
	return out
}

func sigm(x float64) float64 { return 1 / (1 + math.Exp(-x)) }

func gelu(x float64) float64 { return 0.5 * x * (1 + math.Erf(x/math.Sqrt2)) }

func add(a, b []float64) []float64 {
	out := make([]float64, len(a))
	for i := range a {
		out[i] = a[i] + b[i]
	}
	return out
}

// naiveMHA is multi-head attention as three loops: over batch items, heads
// and queries. valid[b][j] = 0 hides key j of item b.
func naiveMHA(m *MultiheadAttention, q, k, v seq, valid [][]float64, causal bool) seq {
	d := m.Dim()
	dh := d / m.Heads
	out := make(seq, len(q))
	for b := range q {
		var qp, kp, vp [][]float64
		for _, x := range q[b] {
			qp = append(qp, affine(m.InProjW, m.InProjB, 0, d, x))
		}
		for j := range k[b] {
			kp = append(kp, affine(m.InProjW, m.InProjB, d, d, k[b][j]))
			vp = append(vp, affine(m.InProjW, m.InProjB, 2*d, d, v[b][j]))
		}
		for i := range qp {
			ctx := make([]float64, d)
			for h := 0; h < m.Heads; h++ {
				s := make([]float64, len(kp))
				mx := math.Inf(-1)
				for j := range kp {
					if (valid != nil && valid[b][j] == 0) || (causal && j > i) {
						s[j] = math.Inf(-1)
						continue
					}
					s[j] = dot(qp[i][h*dh:(h+1)*dh], kp[j][h*dh:(h+1)*dh]) / math.Sqrt(float64(dh))
					mx = math.Max(mx, s[j])
				}
				var z float64
				for j := range s {
					s[j] = math.Exp(s[j] - mx)
					z += s[j]
				}
				for j := range s {
					for c := 0; c < dh; c++ {
						ctx[h*dh+c] += s[j] / z * vp[j][h*dh+c]
					}
				}
			}
			out[b] = append(out[b], naiveLinear(m.OutProj, ctx))
		}
	}
	return out
}

func naiveFF(l1, l2 *Linear, act Activation, x []float64) []float64 {
	h := naiveLinear(l1, x)
	for i, v := range h {
		if act == GELU {
			h[i] = gelu(v)
		} else {
			h[i] = math.Max(v, 0)
		}
	}
	return naiveLinear(l2, h)
}

func naiveEncoderLayer(l *TransformerEncoderLayer, x seq, valid [][]float64) seq {
	return naiveAttendLayer(l, x, x, valid)
}

// naiveAttendLayer is the encoder layer with its attention's keys and
// values taken from kv (a cross layer when kv is not x).
func naiveAttendLayer(l *TransformerEncoderLayer, x, kv seq, valid [][]float64) seq {
	sa := naiveMHA(l.SelfAttn, x, kv, kv, valid, false)
	out := make(seq, len(x))
	for b := range x {
		for t := range x[b] {
			h := naiveLayerNorm(l.Norm1, add(x[b][t], sa[b][t]))
			out[b] = append(out[b], naiveLayerNorm(l.Norm2, add(h, naiveFF(l.Linear1, l.Linear2, l.Act, h))))
		}
	}
	return out
}

func naiveDecoderLayer(l *TransformerDecoderLayer, x, mem seq, tv, mv [][]float64) seq {
	sa := naiveMHA(l.SelfAttn, x, x, x, tv, true)
	h1 := make(seq, len(x))
	for b := range x {
		for t := range x[b] {
			h1[b] = append(h1[b], naiveLayerNorm(l.Norm1, add(x[b][t], sa[b][t])))
		}
	}
	ca := naiveMHA(l.CrossAttn, h1, mem, mem, mv, false)
	out := make(seq, len(x))
	for b := range x {
		for t := range x[b] {
			h2 := naiveLayerNorm(l.Norm2, add(h1[b][t], ca[b][t]))
			out[b] = append(out[b], naiveLayerNorm(l.Norm3, add(h2, naiveFF(l.Linear1, l.Linear2, l.Act, h2))))
		}
	}
	return out
}

// naiveRNN runs the textbook equations of a GRU (gates 3) or LSTM (gates 4)
// item by item. It returns outputs [b][t] (zero at padding) and the top
// layer's last states [b].
func naiveRNN(r *rnn, x seq, lengths []int) (seq, [][]float64) {
	hid := r.hidden
	input := x
	var last [][]float64
	for l := 0; l < r.layers; l++ {
		next := make(seq, len(x))
		last = make([][]float64, len(x))
		for b := range x {
			n := lengths[b]
			next[b] = make([][]float64, len(x[b]))
			for t := range next[b] {
				next[b][t] = make([]float64, hid*r.dirs())
			}
			for d := 0; d < r.dirs(); d++ {
				w := r.cells[l*r.dirs()+d]
				h, c := make([]float64, hid), make([]float64, hid)
				for k := 0; k < n; k++ {
					t := k
					if d == 1 {
						t = n - 1 - k
					}
					xt := input[b][t]
					gi := affine(w.WIH, w.BIH, 0, r.gates*hid, xt)
					gh := affine(w.WHH, w.BHH, 0, r.gates*hid, h)
					nh := make([]float64, hid)
					for j := 0; j < hid; j++ {
						if r.gates == 3 {
							rg := sigm(gi[j] + gh[j])
							z := sigm(gi[hid+j] + gh[hid+j])
							ng := math.Tanh(gi[2*hid+j] + rg*gh[2*hid+j])
							nh[j] = (1-z)*ng + z*h[j]
						} else {
							ig := sigm(gi[j] + gh[j])
							fg := sigm(gi[hid+j] + gh[hid+j])
							gg := math.Tanh(gi[2*hid+j] + gh[2*hid+j])
							og := sigm(gi[3*hid+j] + gh[3*hid+j])
							c[j] = fg*c[j] + ig*gg
							nh[j] = og * math.Tanh(c[j])
						}
					}
					h = nh
					copy(next[b][t][d*hid:], h)
				}
				last[b] = append(last[b], h...)
			}
		}
		input = next
	}
	return input, last
}
