package torchfile

import (
	"fmt"
	"math"
	"math/big"
	"strings"
)

// Value is an object read from a pickle. It is one of:
//
//	nil                   None
//	bool, int64, float64  bool, int, float
//	*big.Int              an int beyond int64
//	string                str
//	[]byte                bytes, bytearray
//	Tuple                 tuple
//	*List                 list (also set and frozenset)
//	*Dict                 dict, collections.OrderedDict, argparse.Namespace
//	*Tensor               a tensor (torch._utils._rebuild_tensor_v2)
//
// and, inside the reader only, the whitelisted globals and storages.
type Value = any

// Tuple is a Python tuple.
type Tuple []Value

// List is a Python list; sets and frozensets are read as lists too.
type List struct {
	Items []Value
}

// Dict is a Python dict, OrderedDict or argparse.Namespace (whose
// attributes become its items), keeping the order in which items were set.
// Keys are None, bools, ints, floats, strings, bytes or tuples of them, as
// in Python; 1, 1.0 and True are the same key.
type Dict struct {
	keys, vals []Value
	index      map[string]int
	// Namespace is set for an argparse.Namespace.
	Namespace bool
}

// NewDict returns an empty dict.
func NewDict() *Dict { return &Dict{index: map[string]int{}} }

// Len returns the number of items.
func (d *Dict) Len() int { return len(d.keys) }

// Keys returns the keys in order.
func (d *Dict) Keys() []Value { return append([]Value(nil), d.keys...) }

// Values returns the values in the order of Keys.
func (d *Dict) Values() []Value { return append([]Value(nil), d.vals...) }

// Get returns the value of key and whether the dict has it.
func (d *Dict) Get(key Value) (Value, bool) {
	k, err := hashKey(key, 0)
	if err != nil {
		return nil, false
	}
	i, ok := d.index[k]
	if !ok {
		return nil, false
	}
	return d.vals[i], true
}

// Set sets key to v; a key seen before keeps its place. Unhashable keys
// (lists, dicts, tensors) are an error, as in Python.
func (d *Dict) Set(key, v Value) error {
	k, err := hashKey(key, 0)
	if err != nil {
		return err
	}
	if i, ok := d.index[k]; ok {
		d.vals[i] = v
		return nil
	}
	d.index[k] = len(d.keys)
	d.keys = append(d.keys, key)
	d.vals = append(d.vals, v)
	return nil
}

// maxKeyDepth bounds the nesting of tuple keys.
const maxKeyDepth = 8

// hashKey returns a string that is equal for two keys exactly when Python
// considers them the same dict key.
func hashKey(v Value, depth int) (string, error) {
	switch x := v.(type) {
	case nil:
		return "N", nil
	case bool:
		if x {
			return "i1", nil
		}
		return "i0", nil
	case int64:
		return fmt.Sprintf("i%d", x), nil
	case *big.Int:
		if x.IsInt64() {
			return fmt.Sprintf("i%d", x.Int64()), nil
		}
		return "i" + x.String(), nil
	case float64:
		if x == math.Trunc(x) && math.Abs(x) < 1<<63 {
			return fmt.Sprintf("i%d", int64(x)), nil
		}
		return fmt.Sprintf("f%v", x), nil
	case string:
		return "s" + x, nil
	case []byte:
		return "b" + string(x), nil
	case Tuple:
		if depth >= maxKeyDepth {
			return "", fmt.Errorf("tuple key nested deeper than %d", maxKeyDepth)
		}
		var b strings.Builder
		b.WriteString("t(")
		for _, e := range x {
			k, err := hashKey(e, depth+1)
			if err != nil {
				return "", err
			}
			fmt.Fprintf(&b, "%d:%s", len(k), k)
		}
		b.WriteString(")")
		return b.String(), nil
	}
	return "", fmt.Errorf("unhashable dict key of type %s", typeName(v))
}

// typeName names the Python type of a value, for errors.
func typeName(v Value) string {
	switch x := v.(type) {
	case nil:
		return "None"
	case bool:
		return "bool"
	case int64, *big.Int:
		return "int"
	case float64:
		return "float"
	case string:
		return "str"
	case []byte:
		return "bytes"
	case Tuple:
		return "tuple"
	case *List:
		return "list"
	case *Dict:
		if x.Namespace {
			return "argparse.Namespace"
		}
		return "dict"
	case *Tensor:
		return "torch.Tensor"
	case *Storage:
		return "torch." + x.DType.storageName()
	case global:
		return "global " + x.String()
	case *npDType:
		return "numpy.dtype"
	}
	return fmt.Sprintf("%T", v)
}
