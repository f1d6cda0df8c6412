package torchfile

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/xmr-project/xmr/internal/half"
)

// DType is the element type of a storage and of the tensors viewing it.
type DType int

// The element types a file may hold (torch's storage classes).
const (
	Float32 DType = iota + 1
	Float64
	Float16
	BFloat16
	Int64
	Int32
	Int16
	Int8
	UInt8
	Bool
)

var dtypeInfo = map[DType]struct {
	name, storage string
	size          int
}{
	Float32:  {"float32", "FloatStorage", 4},
	Float64:  {"float64", "DoubleStorage", 8},
	Float16:  {"float16", "HalfStorage", 2},
	BFloat16: {"bfloat16", "BFloat16Storage", 2},
	Int64:    {"int64", "LongStorage", 8},
	Int32:    {"int32", "IntStorage", 4},
	Int16:    {"int16", "ShortStorage", 2},
	Int8:     {"int8", "CharStorage", 1},
	UInt8:    {"uint8", "ByteStorage", 1},
	Bool:     {"bool", "BoolStorage", 1},
}

// storageTypes maps torch's storage class names to their element types.
var storageTypes = func() map[string]DType {
	m := map[string]DType{}
	for d, in := range dtypeInfo {
		m[in.storage] = d
	}
	return m
}()

// String returns the dtype's name as torch spells it ("float32").
func (d DType) String() string {
	if in, ok := dtypeInfo[d]; ok {
		return in.name
	}
	return fmt.Sprintf("DType(%d)", int(d))
}

// Size returns the bytes of one element.
func (d DType) Size() int { return dtypeInfo[d].size }

// Floating reports whether the elements are floating-point numbers.
func (d DType) Floating() bool {
	return d == Float32 || d == Float64 || d == Float16 || d == BFloat16
}

func (d DType) storageName() string { return dtypeInfo[d].storage }

// Storage is a flat array of elements that tensors view: one record of a
// zip file, or one block of a legacy file. Its data is read from the
// file's memory, never copied.
type Storage struct {
	DType DType
	Key   string // the storage's name in the file
	Numel int    // elements, as the file claims them
	// data holds Numel elements once the file's data has been matched to
	// the claim (at once in zip files, after the pickle in legacy ones).
	data []byte
	// base and off make this storage a view of elements [off, off+Numel)
	// of base (legacy files' storage views).
	base *Storage
	off  int
}

// bytes returns the storage's data, or nil when the file never supplied it.
func (s *Storage) bytes() []byte {
	if s.base != nil {
		b := s.base.bytes()
		es := s.DType.Size()
		if b == nil || (s.off+s.Numel)*es > len(b) {
			return nil
		}
		return b[s.off*es : (s.off+s.Numel)*es]
	}
	return s.data
}

// Tensor is a tensor of a file: a view (shape, strides, offset) into a
// storage. Reading its values (Float32, Int64) allocates its elements;
// nothing is allocated before.
type Tensor struct {
	DType        DType
	Shape        []int
	Stride       []int
	Offset       int
	RequiresGrad bool
	storage      *Storage
}

// Storage returns the storage the tensor views (tensors that share a
// storage in the file share it here).
func (t *Tensor) Storage() *Storage { return t.storage }

// Numel returns the number of elements.
func (t *Tensor) Numel() int {
	n := 1
	for _, d := range t.Shape {
		n *= d
	}
	return n
}

// Limits on what a tensor may claim.
const (
	// MaxDims bounds a tensor's dimensions.
	MaxDims = 64
	// maxBroadcast is how many elements a tensor may have beyond its
	// storage's (a saved expand() view, with zero strides).
	maxBroadcast = 1 << 16
	// maxElements bounds a storage's claimed element count before it is
	// checked against the file (1<<44 elements: 64 TiB of float32).
	maxElements = 1 << 44
)

// newTensor checks a tensor's view against its storage and returns it. It
// allocates nothing in proportion to the sizes it is given: a view that
// claims more elements than its storage holds is refused here.
func newTensor(st *Storage, offset int64, size, stride []int64, requiresGrad bool) (*Tensor, error) {
	if len(size) != len(stride) {
		return nil, fmt.Errorf("tensor size %v and stride %v differ in length", size, stride)
	}
	if len(size) > MaxDims {
		return nil, fmt.Errorf("tensor of %d dimensions (at most %d)", len(size), MaxDims)
	}
	if offset < 0 || offset > maxElements {
		return nil, fmt.Errorf("tensor storage offset %d is out of range", offset)
	}
	t := &Tensor{DType: st.DType, Shape: make([]int, len(size)), Stride: make([]int, len(size)), Offset: int(offset), RequiresGrad: requiresGrad, storage: st}
	numel := int64(1)
	extent := offset // index of the last element viewed
	for i := range size {
		if size[i] < 0 || size[i] > maxElements || stride[i] < 0 || stride[i] > maxElements {
			return nil, fmt.Errorf("tensor size %v, stride %v: dimension %d out of range", size, stride, i)
		}
		t.Shape[i], t.Stride[i] = int(size[i]), int(stride[i])
		if numel > 0 {
			if numel = numel * size[i]; numel > maxElements {
				return nil, fmt.Errorf("tensor of size %v claims more than %d elements", size, int64(maxElements))
			}
		}
		if size[i] > 0 {
			extent += (size[i] - 1) * stride[i] // both <= 2^44: no overflow
			if extent > maxElements {
				return nil, fmt.Errorf("tensor of size %v, stride %v reaches beyond %d elements", size, stride, int64(maxElements))
			}
		}
	}
	if numel == 0 {
		return t, nil
	}
	if extent >= int64(st.Numel) {
		return nil, fmt.Errorf("tensor of size %v, stride %v at offset %d needs %d elements of storage %q, which holds %d",
			size, stride, offset, extent+1, st.Key, st.Numel)
	}
	if numel > int64(max(st.Numel, maxBroadcast)) {
		return nil, fmt.Errorf("tensor of size %v has %d elements, more than its storage %q (%d): refused", size, numel, st.Key, st.Numel)
	}
	return t, nil
}

// elements calls f with the storage index of each element, in row-major
// order.
func (t *Tensor) elements(f func(k, idx int)) {
	n := t.Numel()
	if n == 0 {
		return
	}
	contiguous := true
	want := 1
	for i := len(t.Shape) - 1; i >= 0; i-- {
		if t.Shape[i] != 1 && t.Stride[i] != want {
			contiguous = false
			break
		}
		want *= t.Shape[i]
	}
	if contiguous {
		for k := 0; k < n; k++ {
			f(k, t.Offset+k)
		}
		return
	}
	pos := make([]int, len(t.Shape))
	idx := t.Offset
	for k := 0; k < n; k++ {
		f(k, idx)
		for d := len(pos) - 1; d >= 0; d-- {
			pos[d]++
			idx += t.Stride[d]
			if pos[d] < t.Shape[d] {
				break
			}
			idx -= pos[d] * t.Stride[d]
			pos[d] = 0
		}
	}
}

// data returns the bytes of the tensor's storage, checked to hold what
// the view needs.
func (t *Tensor) data() ([]byte, error) {
	b := t.storage.bytes()
	if b == nil || len(b) != t.storage.Numel*t.DType.Size() {
		return nil, fmt.Errorf("storage %q: the file holds no data for it", t.storage.Key)
	}
	return b, nil
}

// Float32 returns the tensor's values in row-major order as float32,
// converting float16, bfloat16 and float64. A float64 value beyond
// float32's range is an error; integer tensors are an error too.
func (t *Tensor) Float32() ([]float32, error) {
	if !t.DType.Floating() {
		return nil, fmt.Errorf("a %s tensor is not floating-point", t.DType)
	}
	b, err := t.data()
	if err != nil {
		return nil, err
	}
	out := make([]float32, t.Numel())
	var bad error
	switch t.DType {
	case Float32:
		t.elements(func(k, i int) { out[k] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:])) })
	case Float16:
		t.elements(func(k, i int) { out[k] = half.ToFloat32(binary.LittleEndian.Uint16(b[2*i:])) })
	case BFloat16:
		t.elements(func(k, i int) { out[k] = math.Float32frombits(uint32(binary.LittleEndian.Uint16(b[2*i:])) << 16) })
	case Float64:
		t.elements(func(k, i int) {
			v := math.Float64frombits(binary.LittleEndian.Uint64(b[8*i:]))
			if math.Abs(v) > math.MaxFloat32 && !math.IsInf(v, 0) && bad == nil {
				bad = fmt.Errorf("element %d is %g, beyond float32's range", k, v)
			}
			out[k] = float32(v)
		})
	}
	if bad != nil {
		return nil, bad
	}
	return out, nil
}

// Int64 returns the values of an integer or bool tensor in row-major
// order.
func (t *Tensor) Int64() ([]int64, error) {
	if t.DType.Floating() {
		return nil, fmt.Errorf("a %s tensor is not an integer tensor", t.DType)
	}
	b, err := t.data()
	if err != nil {
		return nil, err
	}
	out := make([]int64, t.Numel())
	t.elements(func(k, i int) {
		switch t.DType {
		case Int64:
			out[k] = int64(binary.LittleEndian.Uint64(b[8*i:]))
		case Int32:
			out[k] = int64(int32(binary.LittleEndian.Uint32(b[4*i:])))
		case Int16:
			out[k] = int64(int16(binary.LittleEndian.Uint16(b[2*i:])))
		case Int8:
			out[k] = int64(int8(b[i]))
		case UInt8, Bool:
			out[k] = int64(b[i])
		}
	})
	return out, nil
}
