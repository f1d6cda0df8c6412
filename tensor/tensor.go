// Package tensor is xmr's compute core: float32 N-d tensors (a shape, row-major
// strides and a flat buffer) with reverse-mode automatic differentiation on a
// tape.
//
// Operations are methods of *Tape. A non-nil tape records every operation
// whose inputs require gradients, and Backward walks the record in reverse to
// accumulate gradients into Tensor.Grad. A nil *Tape is the no-grad mode used
// for inference: operations compute their results and record nothing.
//
//	tp := tensor.NewTape()
//	h := tp.ReLU(tp.Add(tp.MatMul(x, w, false, false), b)) // (B, H)
//	loss := tp.Mean(tp.Mul(h, h))
//	tp.Backward(loss) // w.Grad, b.Grad now hold dloss/dw, dloss/db
//	tp.Reset()        // recycle the step's buffers
//
// Buffers of tensors produced on a tape come from a pool that Reset refills:
// after Reset, such tensors must not be used. Tensors made with New, Zeros or
// FromData (parameters, inputs) are never recycled. A training step calls
// BackwardAndReset instead of Backward and Reset: it hands each op's
// buffers back as soon as its backward has run, so that the gradients of
// the ops before it reuse them and the step holds about the forward pass's
// activations, not those and all their gradients at once.
//
// Shape mismatches are programming errors in model code and panic with a
// *ShapeError that names the operation and the shapes; entry points that take
// user input convert them to errors with Try.
package tensor

import (
	"fmt"
	"math"
	"strings"
)

// Tensor is a dense float32 array. Data is row-major and contiguous: element
// (i0, i1, ..., in) is at offset sum(ik * Strides()[k]).
type Tensor struct {
	// Shape holds the size of each dimension.
	Shape []int
	// Data is the flat, row-major buffer (len = product of Shape).
	Data []float32
	// Grad is the gradient of the last Backward with respect to this tensor,
	// nil until one reaches it. It has the same layout as Data.
	Grad []float32

	requiresGrad bool
	owner        *Tape // tape whose pool owns Data (nil: heap / caller)
	gradOwned    bool  // Grad came from the owner's pool
	isView       bool  // Data belongs to another tensor
}

// New returns a zero tensor of the given shape.
func New(shape ...int) *Tensor {
	n := checkShape("New", shape)
	return &Tensor{Shape: append([]int(nil), shape...), Data: make([]float32, n)}
}

// Zeros is New.
func Zeros(shape ...int) *Tensor { return New(shape...) }

// Full returns a tensor of the given shape filled with v.
func Full(v float32, shape ...int) *Tensor {
	t := New(shape...)
	for i := range t.Data {
		t.Data[i] = v
	}
	return t
}

// Scalar returns a 0-d tensor holding v.
func Scalar(v float32) *Tensor { return &Tensor{Shape: []int{}, Data: []float32{v}} }

// FromData wraps data (not copied) as a tensor of the given shape.
func FromData(data []float32, shape ...int) *Tensor {
	n := checkShape("FromData", shape)
	if len(data) != n {
		panic(&ShapeError{Op: "FromData", Msg: fmt.Sprintf("%d values do not fill shape %v (%d)", len(data), shape, n)})
	}
	return &Tensor{Shape: append([]int(nil), shape...), Data: data}
}

// Param returns a tensor that requires gradients, for trainable weights.
func Param(data []float32, shape ...int) *Tensor {
	return FromData(data, shape...).SetRequiresGrad(true)
}

func checkShape(op string, shape []int) int {
	n := 1
	for _, d := range shape {
		if d < 0 {
			panic(&ShapeError{Op: op, Msg: fmt.Sprintf("negative dimension in %v", shape)})
		}
		n *= d
	}
	return n
}

// SetRequiresGrad marks t as a leaf whose gradient Backward computes. It
// returns t.
func (t *Tensor) SetRequiresGrad(v bool) *Tensor {
	t.requiresGrad = v
	return t
}

// RequiresGrad reports whether gradients flow to t.
func (t *Tensor) RequiresGrad() bool { return t.requiresGrad }

// Numel returns the number of elements.
func (t *Tensor) Numel() int { return len(t.Data) }

// Dims returns the number of dimensions.
func (t *Tensor) Dims() int { return len(t.Shape) }

// Dim returns the size of dimension i; negative i counts from the end.
func (t *Tensor) Dim(i int) int {
	if i < 0 {
		i += len(t.Shape)
	}
	return t.Shape[i]
}

// Strides returns the row-major strides of t's shape, in elements.
func (t *Tensor) Strides() []int { return stridesOf(t.Shape) }

func stridesOf(shape []int) []int {
	st := make([]int, len(shape))
	s := 1
	for i := len(shape) - 1; i >= 0; i-- {
		st[i] = s
		s *= shape[i]
	}
	return st
}

// At returns the element at the given index.
func (t *Tensor) At(idx ...int) float32 {
	if len(idx) != len(t.Shape) {
		panic(&ShapeError{Op: "At", Msg: fmt.Sprintf("index %v for shape %v", idx, t.Shape)})
	}
	off := 0
	for i, st := range t.Strides() {
		if idx[i] < 0 || idx[i] >= t.Shape[i] {
			panic(&ShapeError{Op: "At", Msg: fmt.Sprintf("index %v out of range for shape %v", idx, t.Shape)})
		}
		off += idx[i] * st
	}
	return t.Data[off]
}

// Item returns the only element of a one-element tensor.
func (t *Tensor) Item() float32 {
	if len(t.Data) != 1 {
		panic(&ShapeError{Op: "Item", Msg: fmt.Sprintf("tensor of shape %v has %d elements", t.Shape, len(t.Data))})
	}
	return t.Data[0]
}

// Clone returns a deep copy of t's data and shape (no gradient, not on a
// tape).
func (t *Tensor) Clone() *Tensor {
	return &Tensor{Shape: append([]int(nil), t.Shape...), Data: append([]float32(nil), t.Data...), requiresGrad: t.requiresGrad}
}

// ZeroGrad clears the gradient.
func (t *Tensor) ZeroGrad() {
	for i := range t.Grad {
		t.Grad[i] = 0
	}
}

// String formats small tensors fully and large ones by shape.
func (t *Tensor) String() string {
	if len(t.Data) > 32 {
		return fmt.Sprintf("Tensor%v", t.Shape)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Tensor%v%v", t.Shape, t.Data)
	return b.String()
}

// HasNaN reports whether any element is NaN or infinite.
func (t *Tensor) HasNaN() bool {
	for _, v := range t.Data {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			return true
		}
	}
	return false
}

// ShapeError reports operands whose shapes do not fit an operation.
type ShapeError struct {
	Op  string
	Msg string
}

func (e *ShapeError) Error() string { return "tensor." + e.Op + ": " + e.Msg }

func shapeErr(op, format string, args ...any) *ShapeError {
	return &ShapeError{Op: op, Msg: fmt.Sprintf(format, args...)}
}

// Try runs fn and returns a *ShapeError that it panicked with as an error;
// other panics propagate.
func Try(fn func()) (err error) {
	defer func() {
		if r := recover(); r != nil {
			if se, ok := r.(*ShapeError); ok {
				err = se
				return
			}
			panic(r)
		}
	}()
	fn()
	return nil
}

func sameShape(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func prod(s []int) int {
	n := 1
	for _, d := range s {
		n *= d
	}
	return n
}

// normAxis maps a possibly negative axis to [0, n).
func normAxis(op string, axis, n int) int {
	a := axis
	if a < 0 {
		a += n
	}
	if a < 0 || a >= n {
		panic(shapeErr(op, "axis %d out of range for %d dimensions", axis, n))
	}
	return a
}
