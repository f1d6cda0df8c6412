package torchfile

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/big"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Limits of the unpickler. A pickle that needs more is refused: these are
// far above what a checkpoint needs (a BERT state dict with optimiser
// state pushes a few thousand values) and keep a hostile file from making
// the reader allocate without bound.
const (
	// MaxStack bounds the values on the unpickler's stack.
	MaxStack = 1 << 20
	// MaxMemo bounds the memo's entries.
	MaxMemo = 1 << 22
	// MaxDepth bounds the nesting of MARKs (tuples, lists and dicts built
	// from marked items inside one another).
	MaxDepth = 256
	// maxLongBytes bounds the bytes of one LONG1/LONG4 integer.
	maxLongBytes = 64
	// maxTextInt bounds the digits of a protocol-0 INT or LONG.
	maxTextInt = 200
)

// global is a whitelisted module attribute named by GLOBAL or
// STACK_GLOBAL.
type global struct {
	module, name string
	kind         globalKind
	dtype        DType // for storage types
}

func (g global) String() string { return g.module + "." + g.name }

type globalKind int

const (
	gOrderedDict globalKind = iota + 1
	gRebuildTensorV2
	gRebuildTensor
	gRebuildParameter
	gStorageType
	gNamespace
	gCodecsEncode
	gNumpyScalar
	gNumpyDType
	gSet
	gFrozenSet
	gTensorType // torch.FloatTensor and the like: named by tar files, never called
)

// allowedGlobals is every global a pickle may name. Anything else
// (os.system, builtins.eval, subprocess.Popen, torch.nn modules...) is
// refused when the pickle names it, before anything is called.
var allowedGlobals = func() map[string]global {
	m := map[string]global{}
	add := func(module, name string, k globalKind) {
		m[module+"."+name] = global{module: module, name: name, kind: k}
	}
	add("collections", "OrderedDict", gOrderedDict)
	add("torch._utils", "_rebuild_tensor_v2", gRebuildTensorV2)
	add("torch._utils", "_rebuild_tensor", gRebuildTensor)
	add("torch._utils", "_rebuild_parameter", gRebuildParameter)
	add("argparse", "Namespace", gNamespace)
	add("_codecs", "encode", gCodecsEncode)
	add("numpy.core.multiarray", "scalar", gNumpyScalar)
	add("numpy._core.multiarray", "scalar", gNumpyScalar)
	add("numpy", "dtype", gNumpyDType)
	add("builtins", "set", gSet)
	add("builtins", "frozenset", gFrozenSet)
	add("__builtin__", "set", gSet)
	add("__builtin__", "frozenset", gFrozenSet)
	for name, d := range storageTypes {
		m["torch."+name] = global{module: "torch", name: name, kind: gStorageType, dtype: d}
		tensor := strings.TrimSuffix(name, "Storage") + "Tensor"
		m["torch."+tensor] = global{module: "torch", name: tensor, kind: gTensorType, dtype: d}
	}
	return m
}()

// AllowedGlobals lists, sorted, the module attributes a file may name.
func AllowedGlobals() []string {
	var out []string
	for k := range allowedGlobals {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// RefusedGlobalError is the error for a pickle that names a global outside
// the whitelist: such a file would run that code when loaded with
// Python's pickle (torch.load without weights_only).
type RefusedGlobalError struct {
	Global string // "module.name"
	Offset int    // of the opcode in the pickle
}

func (e *RefusedGlobalError) Error() string {
	return fmt.Sprintf("refused global %s (at byte %d of the pickle): only tensors, storages, dicts, lists and plain values may be read; "+
		"this name would run code if the file were loaded with Python's pickle", e.Global, e.Offset)
}

// unpickler is a pickle virtual machine that builds values and calls only
// the whitelisted globals, each with checked arguments.
type unpickler struct {
	data  []byte
	pos   int
	stack []Value
	marks []int // stack lengths at each MARK
	memo  map[uint64]Value
	// persistent resolves BINPERSID/PERSID ids; nil refuses them.
	persistent func(pid Value) (Value, error)
	op         int // offset of the opcode being run
}

// unpickle runs one pickle from the start of data and returns its value
// and the bytes it used.
func unpickle(data []byte, persistent func(Value) (Value, error)) (Value, int, error) {
	u := &unpickler{data: data, memo: map[uint64]Value{}, persistent: persistent}
	v, err := u.run()
	if err != nil {
		return nil, u.pos, fmt.Errorf("pickle: %w", err)
	}
	return v, u.pos, nil
}

func (u *unpickler) errorf(format string, args ...any) error {
	return fmt.Errorf("byte %d: %s", u.op, fmt.Sprintf(format, args...))
}

var errShort = errors.New("the pickle ends early")

func (u *unpickler) read(n int) ([]byte, error) {
	if n < 0 || n > len(u.data)-u.pos {
		return nil, fmt.Errorf("byte %d: %w (%d more bytes needed, %d left)", u.op, errShort, n, len(u.data)-u.pos)
	}
	b := u.data[u.pos : u.pos+n]
	u.pos += n
	return b, nil
}

func (u *unpickler) readUint(n int) (uint64, error) {
	b, err := u.read(n)
	if err != nil {
		return 0, err
	}
	var x uint64
	for i := n - 1; i >= 0; i-- {
		x = x<<8 | uint64(b[i])
	}
	return x, nil
}

// readLine reads up to and excluding the next newline (protocol 0).
func (u *unpickler) readLine() (string, error) {
	i := bytes.IndexByte(u.data[u.pos:], '\n')
	if i < 0 {
		return "", fmt.Errorf("byte %d: %w (no end of line)", u.op, errShort)
	}
	s := string(u.data[u.pos : u.pos+i])
	u.pos += i + 1
	return s, nil
}

func (u *unpickler) push(v Value) error {
	if len(u.stack) >= MaxStack {
		return u.errorf("more than %d values on the stack", MaxStack)
	}
	u.stack = append(u.stack, v)
	return nil
}

func (u *unpickler) pop() (Value, error) {
	if len(u.stack) == 0 || (len(u.marks) > 0 && len(u.stack) <= u.marks[len(u.marks)-1]) {
		return nil, u.errorf("stack underflow")
	}
	v := u.stack[len(u.stack)-1]
	u.stack = u.stack[:len(u.stack)-1]
	return v, nil
}

// pop2 pops the two top items and returns them in the order they were
// pushed: a below b.
func (u *unpickler) pop2() (a, b Value, err error) {
	if b, err = u.pop(); err != nil {
		return nil, nil, err
	}
	if a, err = u.pop(); err != nil {
		return nil, nil, err
	}
	return a, b, nil
}

func (u *unpickler) top() (Value, error) {
	if len(u.stack) == 0 || (len(u.marks) > 0 && len(u.stack) <= u.marks[len(u.marks)-1]) {
		return nil, u.errorf("stack underflow")
	}
	return u.stack[len(u.stack)-1], nil
}

// popMark returns the items pushed since the last MARK and removes them
// and the mark.
func (u *unpickler) popMark() ([]Value, error) {
	if len(u.marks) == 0 {
		return nil, u.errorf("no MARK before this opcode")
	}
	k := u.marks[len(u.marks)-1]
	u.marks = u.marks[:len(u.marks)-1]
	items := append([]Value(nil), u.stack[k:]...)
	u.stack = u.stack[:k]
	return items, nil
}

// memoIndex reads the memo index of a PUT or GET opcode (named name): a
// decimal line for the text forms 'p' and 'g', one byte for 'q' and 'h',
// four for 'r' and 'j'.
func (u *unpickler) memoIndex(name string, op byte) (uint64, error) {
	switch op {
	case 'q', 'h':
		return u.readUint(1)
	case 'r', 'j':
		return u.readUint(4)
	}
	s, err := u.readLine()
	if err != nil {
		return 0, err
	}
	idx, err := strconv.ParseUint(s, 10, 32)
	if err != nil {
		return 0, u.errorf("%s %q: not an index", name, s)
	}
	return idx, nil
}

func (u *unpickler) memoPut(idx uint64) error {
	v, err := u.top()
	if err != nil {
		return err
	}
	if _, ok := u.memo[idx]; !ok && len(u.memo) >= MaxMemo {
		return u.errorf("more than %d memo entries", MaxMemo)
	}
	u.memo[idx] = v
	return nil
}

func (u *unpickler) memoGet(idx uint64) error {
	v, ok := u.memo[idx]
	if !ok {
		return u.errorf("memo entry %d was never stored", idx)
	}
	return u.push(v)
}

// run executes opcodes until STOP.
func (u *unpickler) run() (Value, error) {
	for {
		u.op = u.pos
		if u.pos >= len(u.data) {
			return nil, fmt.Errorf("byte %d: %w (no STOP)", u.pos, errShort)
		}
		op := u.data[u.pos]
		u.pos++
		done, err := u.step(op)
		if err != nil {
			return nil, err
		}
		if done {
			if len(u.stack) != 1 || len(u.marks) != 0 {
				return nil, u.errorf("STOP with %d values and %d marks on the stack, want one value", len(u.stack), len(u.marks))
			}
			return u.stack[0], nil
		}
	}
}

// step runs one opcode; done is true at STOP.
func (u *unpickler) step(op byte) (done bool, err error) {
	switch op {
	case '.': // STOP
		return true, nil
	case 0x80: // PROTO
		p, err := u.readUint(1)
		if err != nil {
			return false, err
		}
		if p > 5 {
			return false, u.errorf("pickle protocol %d (at most 5 is known)", p)
		}
	case 0x95: // FRAME: a length hint; the data follows inline.
		_, err = u.readUint(8)
	case '(': // MARK
		if len(u.marks) >= MaxDepth {
			return false, u.errorf("nested deeper than %d", MaxDepth)
		}
		u.marks = append(u.marks, len(u.stack))
	case '0': // POP
		if len(u.marks) > 0 && len(u.stack) == u.marks[len(u.marks)-1] {
			u.marks = u.marks[:len(u.marks)-1] // popping a MARK, as CPython does
			return false, nil
		}
		_, err = u.pop()
	case '1': // POP_MARK
		_, err = u.popMark()
	case '2': // DUP
		var v Value
		if v, err = u.top(); err == nil {
			err = u.push(v)
		}

	// Constants and numbers.
	case 'N':
		err = u.push(nil)
	case 0x88:
		err = u.push(true)
	case 0x89:
		err = u.push(false)
	case 'J': // BININT
		var x uint64
		if x, err = u.readUint(4); err == nil {
			err = u.push(int64(int32(uint32(x))))
		}
	case 'K': // BININT1
		var x uint64
		if x, err = u.readUint(1); err == nil {
			err = u.push(int64(x))
		}
	case 'M': // BININT2
		var x uint64
		if x, err = u.readUint(2); err == nil {
			err = u.push(int64(x))
		}
	case 0x8a, 0x8b: // LONG1, LONG4
		n := 1
		if op == 0x8b {
			n = 4
		}
		var size uint64
		if size, err = u.readUint(n); err != nil {
			return false, err
		}
		if size > maxLongBytes {
			return false, u.errorf("integer of %d bytes (at most %d)", size, maxLongBytes)
		}
		var b []byte
		if b, err = u.read(int(size)); err == nil {
			err = u.push(decodeLong(b))
		}
	case 'I', 'L': // INT, LONG (text)
		var s string
		if s, err = u.readLine(); err != nil {
			return false, err
		}
		var v Value
		if v, err = u.textInt(s, op == 'I'); err == nil {
			err = u.push(v)
		}
	case 'G': // BINFLOAT (big-endian)
		var b []byte
		if b, err = u.read(8); err == nil {
			err = u.push(math.Float64frombits(binary.BigEndian.Uint64(b)))
		}
	case 'F': // FLOAT (text)
		var s string
		if s, err = u.readLine(); err != nil {
			return false, err
		}
		f, perr := strconv.ParseFloat(strings.TrimSpace(s), 64)
		if perr != nil {
			return false, u.errorf("FLOAT %q: %v", s, perr)
		}
		err = u.push(f)

	// Strings and bytes.
	case 'X', 0x8c, 0x8d: // BINUNICODE, SHORT_BINUNICODE, BINUNICODE8
		n := map[byte]int{'X': 4, 0x8c: 1, 0x8d: 8}[op]
		var b []byte
		if b, err = u.lenPrefixed(n); err != nil {
			return false, err
		}
		if !utf8.Valid(b) {
			return false, u.errorf("string is not UTF-8")
		}
		err = u.push(string(b))
	case 'B', 'C', 0x8e, 0x96: // BINBYTES, SHORT_BINBYTES, BINBYTES8, BYTEARRAY8
		n := map[byte]int{'B': 4, 'C': 1, 0x8e: 8, 0x96: 8}[op]
		var b []byte
		if b, err = u.lenPrefixed(n); err == nil {
			err = u.push(append([]byte(nil), b...))
		}
	case 'T', 'U': // BINSTRING, SHORT_BINSTRING: Python 2 str, read as latin-1 text
		n := 4
		if op == 'U' {
			n = 1
		}
		var b []byte
		if b, err = u.lenPrefixed(n); err == nil {
			err = u.push(latin1(b))
		}
	case 'S': // STRING (text, quoted)
		var s string
		if s, err = u.readLine(); err != nil {
			return false, err
		}
		var v string
		if v, err = u.quoted(s); err == nil {
			err = u.push(v)
		}
	case 'V': // UNICODE (text, raw-unicode-escape)
		var s string
		if s, err = u.readLine(); err != nil {
			return false, err
		}
		var v string
		if v, err = u.rawUnicode(s); err == nil {
			err = u.push(v)
		}

	// Containers.
	case ')':
		err = u.push(Tuple{})
	case 't':
		var items []Value
		if items, err = u.popMark(); err == nil {
			err = u.push(Tuple(items))
		}
	case 0x85, 0x86, 0x87: // TUPLE1, TUPLE2, TUPLE3
		n := int(op - 0x84)
		if len(u.stack) < n || (len(u.marks) > 0 && len(u.stack)-n < u.marks[len(u.marks)-1]) {
			return false, u.errorf("stack underflow")
		}
		t := append(Tuple(nil), u.stack[len(u.stack)-n:]...)
		u.stack = u.stack[:len(u.stack)-n]
		err = u.push(t)
	case ']':
		err = u.push(&List{})
	case 'l':
		var items []Value
		if items, err = u.popMark(); err == nil {
			err = u.push(&List{Items: items})
		}
	case 'a': // APPEND
		var v Value
		if v, err = u.pop(); err != nil {
			return false, err
		}
		err = u.appendTo([]Value{v})
	case 'e': // APPENDS
		var items []Value
		if items, err = u.popMark(); err == nil {
			err = u.appendTo(items)
		}
	case '}':
		err = u.push(NewDict())
	case 'd':
		var items []Value
		if items, err = u.popMark(); err != nil {
			return false, err
		}
		d := NewDict()
		if err = u.setItems(d, items); err == nil {
			err = u.push(d)
		}
	case 's': // SETITEM
		if len(u.stack) < 3 {
			return false, u.errorf("stack underflow")
		}
		var k, v Value
		if k, v, err = u.pop2(); err != nil {
			return false, err
		}
		err = u.setItemsOnTop([]Value{k, v})
	case 'u': // SETITEMS
		var items []Value
		if items, err = u.popMark(); err == nil {
			err = u.setItemsOnTop(items)
		}
	case 0x8f: // EMPTY_SET
		err = u.push(&List{})
	case 0x90: // ADDITEMS
		var items []Value
		if items, err = u.popMark(); err == nil {
			err = u.appendTo(items)
		}
	case 0x91: // FROZENSET
		var items []Value
		if items, err = u.popMark(); err == nil {
			err = u.push(&List{Items: items})
		}

	// Memo.
	case 'p', 'q', 'r': // PUT (text), BINPUT, LONG_BINPUT
		var idx uint64
		if idx, err = u.memoIndex("PUT", op); err == nil {
			err = u.memoPut(idx)
		}
	case 0x94: // MEMOIZE
		err = u.memoPut(uint64(len(u.memo)))
	case 'g', 'h', 'j': // GET (text), BINGET, LONG_BINGET
		var idx uint64
		if idx, err = u.memoIndex("GET", op); err == nil {
			err = u.memoGet(idx)
		}

	// Globals, calls and objects.
	case 'c': // GLOBAL
		var g global
		if g, err = u.lineGlobal(); err == nil {
			err = u.push(g)
		}
	case 0x93: // STACK_GLOBAL
		var nv, mv Value
		if mv, nv, err = u.pop2(); err != nil {
			return false, err
		}
		module, ok1 := mv.(string)
		name, ok2 := nv.(string)
		if !ok1 || !ok2 {
			return false, u.errorf("STACK_GLOBAL needs two strings, has %s and %s", typeName(mv), typeName(nv))
		}
		var g global
		if g, err = u.global(module, name); err == nil {
			err = u.push(g)
		}
	case 'R': // REDUCE
		var args, fn Value
		if fn, args, err = u.pop2(); err != nil {
			return false, err
		}
		var v Value
		if v, err = u.call(fn, args); err == nil {
			err = u.push(v)
		}
	case 0x81: // NEWOBJ
		var args, cls Value
		if cls, args, err = u.pop2(); err != nil {
			return false, err
		}
		var v Value
		if v, err = u.newObject(cls, args); err == nil {
			err = u.push(v)
		}
	case 0x92: // NEWOBJ_EX
		var kwargs, args, cls Value
		if kwargs, err = u.pop(); err != nil {
			return false, err
		}
		if args, err = u.pop(); err != nil {
			return false, err
		}
		if cls, err = u.pop(); err != nil {
			return false, err
		}
		if d, ok := kwargs.(*Dict); !ok || d.Len() != 0 {
			return false, u.errorf("NEWOBJ_EX with keyword arguments")
		}
		var v Value
		if v, err = u.newObject(cls, args); err == nil {
			err = u.push(v)
		}
	case 'o': // OBJ
		var items []Value
		if items, err = u.popMark(); err != nil {
			return false, err
		}
		if len(items) == 0 {
			return false, u.errorf("OBJ without a class")
		}
		var v Value
		if v, err = u.newObject(items[0], Tuple(items[1:])); err == nil {
			err = u.push(v)
		}
	case 'i': // INST
		var g global
		if g, err = u.lineGlobal(); err != nil {
			return false, err
		}
		var items []Value
		if items, err = u.popMark(); err != nil {
			return false, err
		}
		var v Value
		if v, err = u.newObject(g, Tuple(items)); err == nil {
			err = u.push(v)
		}
	case 'b': // BUILD
		var state, obj Value
		if state, err = u.pop(); err != nil {
			return false, err
		}
		if obj, err = u.top(); err != nil {
			return false, err
		}
		err = u.build(obj, state)
	case 'Q': // BINPERSID
		var pid Value
		if pid, err = u.pop(); err != nil {
			return false, err
		}
		err = u.persistentLoad(pid)
	case 'P': // PERSID (text)
		var s string
		if s, err = u.readLine(); err == nil {
			err = u.persistentLoad(s)
		}
	case 0x82, 0x83, 0x84: // EXT1, EXT2, EXT4
		return false, u.errorf("extension registry codes (EXT1/2/4) are not supported")
	case 0x97, 0x98: // NEXT_BUFFER, READONLY_BUFFER
		return false, u.errorf("out-of-band buffers (pickle protocol 5) are not supported")
	default:
		return false, u.errorf("unknown opcode 0x%02x", op)
	}
	return false, err
}

// lenPrefixed reads an n-byte little-endian length and that many bytes.
func (u *unpickler) lenPrefixed(n int) ([]byte, error) {
	size, err := u.readUint(n)
	if err != nil {
		return nil, err
	}
	if size > uint64(len(u.data)-u.pos) {
		return nil, fmt.Errorf("byte %d: %w (a string of %d bytes, %d left)", u.op, errShort, size, len(u.data)-u.pos)
	}
	return u.read(int(size))
}

// lineGlobal reads the module and name lines of GLOBAL and INST and
// resolves them as global does.
func (u *unpickler) lineGlobal() (global, error) {
	module, err := u.readLine()
	if err != nil {
		return global{}, err
	}
	name, err := u.readLine()
	if err != nil {
		return global{}, err
	}
	return u.global(module, name)
}

func (u *unpickler) global(module, name string) (global, error) {
	g, ok := allowedGlobals[module+"."+name]
	if !ok {
		return global{}, &RefusedGlobalError{Global: module + "." + name, Offset: u.op}
	}
	return g, nil
}

func (u *unpickler) persistentLoad(pid Value) error {
	if u.persistent == nil {
		return u.errorf("a persistent id where none is expected")
	}
	v, err := u.persistent(pid)
	if err != nil {
		return u.errorf("%v", err)
	}
	return u.push(v)
}

// appendTo appends items to the list on top of the stack.
func (u *unpickler) appendTo(items []Value) error {
	v, err := u.top()
	if err != nil {
		return err
	}
	l, ok := v.(*List)
	if !ok {
		return u.errorf("APPEND to a %s", typeName(v))
	}
	if len(l.Items)+len(items) > MaxStack {
		return u.errorf("a list of more than %d items", MaxStack)
	}
	l.Items = append(l.Items, items...)
	return nil
}

// setItemsOnTop sets key, value pairs on the dict on top of the stack.
func (u *unpickler) setItemsOnTop(items []Value) error {
	v, err := u.top()
	if err != nil {
		return err
	}
	d, ok := v.(*Dict)
	if !ok {
		return u.errorf("SETITEM on a %s", typeName(v))
	}
	return u.setItems(d, items)
}

func (u *unpickler) setItems(d *Dict, items []Value) error {
	if len(items)%2 != 0 {
		return u.errorf("odd number of items (%d) for a dict", len(items))
	}
	for i := 0; i < len(items); i += 2 {
		if err := d.Set(items[i], items[i+1]); err != nil {
			return u.errorf("%v", err)
		}
	}
	return nil
}

// call runs REDUCE: fn must be a whitelisted callable.
func (u *unpickler) call(fn, argv Value) (Value, error) {
	g, ok := fn.(global)
	if !ok {
		return nil, u.errorf("REDUCE calls a %s", typeName(fn))
	}
	args, ok := argv.(Tuple)
	if !ok {
		return nil, u.errorf("%s called with a %s, not a tuple of arguments", g, typeName(argv))
	}
	switch g.kind {
	case gOrderedDict:
		d := NewDict()
		if len(args) == 0 {
			return d, nil
		}
		if len(args) == 1 {
			if l, ok := args[0].(*List); ok {
				for _, it := range l.Items {
					p, ok := it.(Tuple)
					if !ok || len(p) != 2 {
						return nil, u.errorf("OrderedDict of a list holding a %s, not pairs", typeName(it))
					}
					if err := d.Set(p[0], p[1]); err != nil {
						return nil, u.errorf("%v", err)
					}
				}
				return d, nil
			}
		}
		return nil, u.errorf("OrderedDict with arguments %s", describe(args))
	case gRebuildTensorV2, gRebuildTensor:
		return u.rebuildTensor(g, args)
	case gRebuildParameter:
		if len(args) != 3 {
			return nil, u.errorf("%s with %d arguments, want 3", g, len(args))
		}
		t, ok := args[0].(*Tensor)
		if !ok {
			return nil, u.errorf("%s of a %s, not a tensor", g, typeName(args[0]))
		}
		grad, ok := args[1].(bool)
		if !ok {
			return nil, u.errorf("%s: requires_grad is a %s", g, typeName(args[1]))
		}
		p := *t // a Parameter is an object of its own over the same data
		p.RequiresGrad = grad
		return &p, nil
	case gNamespace:
		if len(args) != 0 {
			return nil, u.errorf("argparse.Namespace with positional arguments")
		}
		return &Dict{index: map[string]int{}, Namespace: true}, nil
	case gCodecsEncode:
		if len(args) != 2 {
			return nil, u.errorf("_codecs.encode with %d arguments, want 2", len(args))
		}
		s, ok1 := args[0].(string)
		enc, ok2 := args[1].(string)
		if !ok1 || !ok2 {
			return nil, u.errorf("_codecs.encode(%s, %s): want two strings", typeName(args[0]), typeName(args[1]))
		}
		switch strings.ToLower(enc) {
		case "latin1", "latin-1", "iso-8859-1", "iso8859-1":
			b := make([]byte, 0, len(s))
			for _, r := range s {
				if r > 0xff {
					return nil, u.errorf("_codecs.encode: %q is not latin-1", r)
				}
				b = append(b, byte(r))
			}
			return b, nil
		case "utf-8", "utf8":
			return []byte(s), nil
		}
		return nil, u.errorf("_codecs.encode with encoding %q (want latin1)", enc)
	case gNumpyDType:
		if len(args) < 1 {
			return nil, u.errorf("numpy.dtype without a type")
		}
		s, ok := args[0].(string)
		if !ok {
			return nil, u.errorf("numpy.dtype of a %s", typeName(args[0]))
		}
		return newNpDType(s)
	case gNumpyScalar:
		return npScalar(args)
	case gSet, gFrozenSet:
		if len(args) == 0 {
			return &List{}, nil
		}
		if l, ok := args[0].(*List); ok && len(args) == 1 {
			return &List{Items: append([]Value(nil), l.Items...)}, nil
		}
		return nil, u.errorf("%s of %s", g, describe(args))
	}
	return nil, u.errorf("%s cannot be called", g)
}

// newObject runs NEWOBJ, OBJ and INST: only argparse.Namespace is built.
func (u *unpickler) newObject(cls, argv Value) (Value, error) {
	g, ok := cls.(global)
	if !ok || g.kind != gNamespace {
		return nil, u.errorf("cannot build an object of %s (only argparse.Namespace)", typeName(cls))
	}
	if args, ok := argv.(Tuple); !ok || len(args) != 0 {
		return nil, u.errorf("argparse.Namespace built with arguments %s", typeName(argv))
	}
	return &Dict{index: map[string]int{}, Namespace: true}, nil
}

// build runs BUILD: a Namespace takes its attributes as items; an
// OrderedDict's attributes (a state dict's _metadata) are dropped; a numpy
// dtype takes its byte order.
func (u *unpickler) build(obj, state Value) error {
	switch o := obj.(type) {
	case *Dict:
		st := state
		if t, ok := st.(Tuple); ok && len(t) == 2 { // (dict state, slot state)
			st = t[0]
		}
		if st == nil {
			return nil
		}
		sd, ok := st.(*Dict)
		if !ok {
			return u.errorf("BUILD of a dict with a %s state", typeName(state))
		}
		if !o.Namespace {
			return nil
		}
		for i := range sd.keys {
			if err := o.Set(sd.keys[i], sd.vals[i]); err != nil {
				return u.errorf("%v", err)
			}
		}
		return nil
	case *npDType:
		return o.setState(state)
	}
	return u.errorf("BUILD of a %s", typeName(obj))
}

// rebuildTensor checks the arguments of torch._utils._rebuild_tensor(_v2)
// (storage, storage_offset, size, stride[, requires_grad,
// backward_hooks[, metadata]]) and builds the tensor view.
func (u *unpickler) rebuildTensor(g global, args Tuple) (Value, error) {
	switch {
	case g.kind == gRebuildTensor && len(args) != 4:
		return nil, u.errorf("%s with %d arguments, want 4", g, len(args))
	case g.kind == gRebuildTensorV2 && (len(args) < 6 || len(args) > 7):
		return nil, u.errorf("%s with %d arguments, want 6 or 7", g, len(args))
	}
	st, ok := args[0].(*Storage)
	if !ok {
		return nil, u.errorf("%s of a %s, not a storage", g, typeName(args[0]))
	}
	offset, ok := args[1].(int64)
	if !ok {
		return nil, u.errorf("%s: storage offset is a %s", g, typeName(args[1]))
	}
	size, err := intTuple(args[2])
	if err != nil {
		return nil, u.errorf("%s: size: %v", g, err)
	}
	stride, err := intTuple(args[3])
	if err != nil {
		return nil, u.errorf("%s: stride: %v", g, err)
	}
	grad := false
	if len(args) > 4 {
		if grad, ok = args[4].(bool); !ok {
			return nil, u.errorf("%s: requires_grad is a %s", g, typeName(args[4]))
		}
		if h, ok := args[5].(*Dict); !ok || h.Len() != 0 {
			return nil, u.errorf("%s: backward hooks must be an empty OrderedDict, are %s", g, typeName(args[5]))
		}
	}
	t, err := newTensor(st, offset, size, stride, grad)
	if err != nil {
		return nil, u.errorf("%v", err)
	}
	return t, nil
}

// intTuple reads a tuple of ints (a torch.Size or a stride).
func intTuple(v Value) ([]int64, error) {
	t, ok := v.(Tuple)
	if !ok {
		return nil, fmt.Errorf("a %s, not a tuple", typeName(v))
	}
	out := make([]int64, len(t))
	for i, e := range t {
		x, ok := e.(int64)
		if !ok {
			return nil, fmt.Errorf("element %d is a %s, not an int", i, typeName(e))
		}
		out[i] = x
	}
	return out, nil
}

// describe lists the types of a tuple's elements, for errors.
func describe(args Tuple) string {
	var s []string
	for _, a := range args {
		s = append(s, typeName(a))
	}
	return "(" + strings.Join(s, ", ") + ")"
}

// decodeLong decodes a little-endian two's-complement integer.
func decodeLong(b []byte) Value {
	if len(b) == 0 {
		return int64(0)
	}
	if len(b) <= 8 {
		var x uint64
		for i := len(b) - 1; i >= 0; i-- {
			x = x<<8 | uint64(b[i])
		}
		if sh := 64 - 8*uint(len(b)); sh > 0 {
			return int64(x<<sh) >> sh // sign-extend
		}
		return int64(x)
	}
	be := make([]byte, len(b))
	for i := range b {
		be[len(b)-1-i] = b[i]
	}
	n := new(big.Int).SetBytes(be)
	if b[len(b)-1]&0x80 != 0 {
		n.Sub(n, new(big.Int).Lsh(big.NewInt(1), uint(8*len(b))))
	}
	if n.IsInt64() {
		return n.Int64()
	}
	return n
}

// textInt parses protocol 0's INT and LONG lines ("01"/"00" are True and
// False in INT).
func (u *unpickler) textInt(s string, isInt bool) (Value, error) {
	if isInt && s == "01" {
		return true, nil
	}
	if isInt && s == "00" {
		return false, nil
	}
	s = strings.TrimSuffix(s, "L")
	if len(s) > maxTextInt {
		return nil, u.errorf("integer of %d digits", len(s))
	}
	if x, err := strconv.ParseInt(s, 10, 64); err == nil {
		return x, nil
	}
	n, ok := new(big.Int).SetString(s, 10)
	if !ok {
		return nil, u.errorf("%q is not an integer", s)
	}
	return n, nil
}

// latin1 decodes bytes as latin-1 text.
func latin1(b []byte) string {
	r := make([]rune, len(b))
	for i, c := range b {
		r[i] = rune(c)
	}
	return string(r)
}

// quoted decodes protocol 0's STRING argument: a Python string literal in
// single or double quotes with backslash escapes.
func (u *unpickler) quoted(s string) (string, error) {
	if len(s) < 2 || (s[0] != '\'' && s[0] != '"') || s[len(s)-1] != s[0] {
		return "", u.errorf("STRING argument %q is not quoted", s)
	}
	b, err := unescape(s[1 : len(s)-1])
	if err != nil {
		return "", u.errorf("STRING: %v", err)
	}
	return latin1(b), nil
}

// rawUnicode decodes protocol 0's UNICODE argument in Python's
// raw-unicode-escape: \u with 4 hex digits and \U with 8 are the only
// escapes, and only after an odd number of backslashes (in a run of
// backslashes, all but an odd run's last are literal).
func (u *unpickler) rawUnicode(s string) (string, error) {
	var out []rune
	run := 0 // backslashes just before s[i]
	for i := 0; i < len(s); {
		if s[i] == '\\' && run%2 == 0 && i+1 < len(s) && (s[i+1] == 'u' || s[i+1] == 'U') {
			n := 4
			if s[i+1] == 'U' {
				n = 8
			}
			if i+2+n > len(s) {
				return "", u.errorf("UNICODE: truncated escape")
			}
			x, err := strconv.ParseUint(s[i+2:i+2+n], 16, 32)
			if err != nil || x > utf8.MaxRune {
				return "", u.errorf("UNICODE: bad escape %q", s[i:i+2+n])
			}
			out = append(out, rune(x))
			i += 2 + n
			run = 0
			continue
		}
		if s[i] == '\\' {
			run++
		} else {
			run = 0
		}
		out = append(out, rune(s[i])) // raw bytes are latin-1
		i++
	}
	return string(out), nil
}

// unescape decodes the backslash escapes of a Python bytes literal.
func unescape(s string) ([]byte, error) {
	var out []byte
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' {
			out = append(out, c)
			continue
		}
		i++
		if i >= len(s) {
			return nil, errors.New("trailing backslash")
		}
		switch s[i] {
		case '\\', '\'', '"':
			out = append(out, s[i])
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'a':
			out = append(out, 7)
		case 'b':
			out = append(out, 8)
		case 'f':
			out = append(out, 12)
		case 'v':
			out = append(out, 11)
		case '\n':
		case 'x':
			if i+3 > len(s) {
				return nil, errors.New("truncated \\x escape")
			}
			x, err := strconv.ParseUint(s[i+1:i+3], 16, 8)
			if err != nil {
				return nil, fmt.Errorf("bad escape \\x%s", s[i+1:i+3])
			}
			out = append(out, byte(x))
			i += 2
		default:
			if s[i] >= '0' && s[i] <= '7' {
				j := i
				x := 0
				for j < len(s) && j < i+3 && s[j] >= '0' && s[j] <= '7' {
					x = x*8 + int(s[j]-'0')
					j++
				}
				out = append(out, byte(x))
				i = j - 1
				continue
			}
			out = append(out, '\\', s[i]) // Python keeps unknown escapes
		}
	}
	return out, nil
}
