// Package torchfile reads the files PyTorch's torch.save writes, without
// running any of their code: the zip format (torch 1.6 and later), the
// legacy format (a sequence of pickles followed by raw storages, what
// torch.save(..., _use_new_zipfile_serialization=False) writes) and the
// older tar format (sys_info, pickle, storages and tensors entries).
//
// The pickles are run by a restricted unpickler of this package: it knows
// the opcodes of pickle protocols 0 to 5, builds only plain values (None,
// bools, ints, floats, strings, bytes, tuples, lists, dicts) and calls only
// the globals a checkpoint needs (AllowedGlobals: collections.OrderedDict,
// torch._utils._rebuild_tensor_v2, _rebuild_parameter, the torch storage
// types, argparse.Namespace, _codecs.encode and numpy scalars); any other
// global (os.system, builtins.eval, a torch.nn module class...) is refused
// with a RefusedGlobalError naming it. Its stack, memo and nesting are
// bounded (MaxStack, MaxMemo, MaxDepth).
//
// A tensor's size, stride and offset are checked against its storage, and
// a storage's claimed length against the bytes the file holds for it,
// before anything is allocated: a file claiming a tensor of 10^12 elements
// is refused without allocating it. Tensor data stays in the file's memory
// (memory-mapped) until Tensor.Float32 or Tensor.Int64 copies it out.
package torchfile

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math/big"
	"strconv"
	"strings"

	"github.com/xmr-project/xmr/mmap"
)

// File is a file that torch.save wrote, unpickled.
type File struct {
	// Path is the file's path (or the name given to Parse).
	Path string
	// Format is "zip", "legacy" or "tar".
	Format string
	// Root is the object that was saved: for a checkpoint, a *Dict.
	Root   Value
	data   []byte
	mapped bool
}

// ErrFormat is wrapped by errors about a file that is not a torch.save
// file or breaks its format.
var ErrFormat = errors.New("not a valid PyTorch file")

// Open reads the torch.save file at path. Its tensors read their data
// from the file's memory: read them before Close.
func Open(path string) (*File, error) {
	data, mapped, err := mmap.ReadFile(path)
	if err != nil {
		return nil, err
	}
	tf, err := Parse(path, data)
	if err != nil {
		if mapped {
			mmap.Unmap(data)
		}
		return nil, err
	}
	tf.mapped = mapped
	return tf, nil
}

// Parse reads the content of a torch.save file held in memory; name
// stands for its path in errors. data must not change while the File is
// in use.
func Parse(name string, data []byte) (*File, error) {
	f := &File{Path: name, data: data}
	var err error
	switch {
	case bytes.HasPrefix(data, []byte("PK\x03\x04")):
		f.Format = "zip"
		f.Root, err = parseZip(data)
	case len(data) >= 512 && bytes.Equal(data[257:262], []byte("ustar")):
		f.Format = "tar"
		f.Root, err = parseTar(data)
	case len(data) >= 2 && data[0] == 0x80:
		f.Format = "legacy"
		f.Root, err = parseLegacy(data)
	case bytes.HasPrefix(data, []byte("{")) || len(data) >= 9 && data[8] == '{':
		err = fmt.Errorf("%w: this looks like a safetensors or JSON file, not one torch.save wrote", ErrFormat)
	default:
		err = fmt.Errorf("%w: neither a zip archive, a tar archive nor a pickle (torch.save writes one of these)", ErrFormat)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return f, nil
}

// Close releases the file's memory; its tensors can no longer be read.
func (f *File) Close() error {
	if f.data == nil {
		return nil
	}
	var err error
	if f.mapped {
		err = mmap.Unmap(f.data)
	}
	f.data = nil
	return err
}

func formatErr(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrFormat, fmt.Sprintf(format, args...))
}

// storageType reads a storage class from a persistent id.
func storageType(v Value) (DType, error) {
	g, ok := v.(global)
	if !ok || g.kind != gStorageType {
		return 0, fmt.Errorf("storage type is a %s, not a torch storage class", typeName(v))
	}
	return g.dtype, nil
}

// storageKey reads a storage's key (a string, or an int in old files).
func storageKey(v Value) (string, error) {
	switch k := v.(type) {
	case string:
		return k, nil
	case int64:
		return strconv.FormatInt(k, 10), nil
	}
	return "", fmt.Errorf("storage key is a %s", typeName(v))
}

// storageSize returns numel * the element size, refusing claims beyond
// maxElements.
func storageSize(numel Value, d DType) (int, int, error) {
	n, ok := numel.(int64)
	if !ok {
		return 0, 0, fmt.Errorf("storage size is a %s", typeName(numel))
	}
	if n < 0 || n > maxElements {
		return 0, 0, fmt.Errorf("storage of %d elements is out of range", n)
	}
	return int(n), int(n) * d.Size(), nil
}

// parseZip reads the zip format: ARCHIVE/data.pkl and one record
// ARCHIVE/data/KEY per storage, stored uncompressed.
func parseZip(data []byte) (Value, error) {
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return nil, formatErr("zip: %v", err)
	}
	records := map[string]*zip.File{}
	var pkl []string
	for _, f := range zr.File {
		records[f.Name] = f
		if dir, base, ok := strings.Cut(f.Name, "/"); ok && base == "data.pkl" && dir != "" {
			pkl = append(pkl, f.Name)
		}
	}
	if len(pkl) != 1 {
		return nil, formatErr("zip archive with %d ARCHIVE/data.pkl records, want 1", len(pkl))
	}
	prefix := strings.TrimSuffix(pkl[0], "data.pkl")
	if _, ok := records[prefix+"constants.pkl"]; ok {
		return nil, formatErr("a TorchScript archive (torch.jit.save), not a torch.save file: save the model's state_dict instead")
	}
	if bo, ok := records[prefix+"byteorder"]; ok {
		b, err := zipRecord(data, bo, 16)
		if err != nil {
			return nil, err
		}
		if string(b) != "little" {
			return nil, formatErr("byteorder %q: only little-endian files are read", b)
		}
	}
	pickle, err := zipRecord(data, records[pkl[0]], int64(len(data)))
	if err != nil {
		return nil, err
	}
	storages := map[string]*Storage{}
	persistent := func(pid Value) (Value, error) {
		t, ok := pid.(Tuple)
		if !ok || len(t) != 5 || t[0] != "storage" {
			return nil, fmt.Errorf("persistent id %s, want ('storage', type, key, location, numel)", describePID(pid))
		}
		d, err := storageType(t[1])
		if err != nil {
			return nil, err
		}
		key, err := storageKey(t[2])
		if err != nil {
			return nil, err
		}
		numel, size, err := storageSize(t[4], d)
		if err != nil {
			return nil, fmt.Errorf("storage %q: %v", key, err)
		}
		if st, ok := storages[key]; ok {
			if st.DType != d || st.Numel != numel {
				return nil, fmt.Errorf("storage %q is claimed as %d %s and as %d %s", key, st.Numel, st.DType, numel, d)
			}
			return st, nil
		}
		rec, ok := records[prefix+"data/"+key]
		if !ok {
			return nil, fmt.Errorf("storage %q: no record %sdata/%s in the archive", key, prefix, key)
		}
		if rec.UncompressedSize64 != uint64(size) {
			return nil, fmt.Errorf("storage %q claims %d %s elements (%d bytes), its record holds %d bytes", key, numel, d, size, rec.UncompressedSize64)
		}
		b, err := zipRecord(data, rec, int64(size))
		if err != nil {
			return nil, err
		}
		st := &Storage{DType: d, Key: key, Numel: numel, data: b}
		storages[key] = st
		return st, nil
	}
	root, _, err := unpickle(pickle, persistent)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", pkl[0], err)
	}
	return root, nil
}

// zipRecord returns the bytes of a stored (uncompressed) record in place,
// after checking its CRC-32.
func zipRecord(data []byte, f *zip.File, most int64) ([]byte, error) {
	if f.Method != zip.Store {
		return nil, formatErr("record %s is compressed (method %d); torch.save stores records uncompressed: save the file again with torch.save", f.Name, f.Method)
	}
	if f.UncompressedSize64 > uint64(most) || f.CompressedSize64 != f.UncompressedSize64 {
		return nil, formatErr("record %s: %d bytes, at most %d expected", f.Name, f.UncompressedSize64, most)
	}
	off, err := f.DataOffset()
	if err != nil {
		return nil, formatErr("record %s: %v", f.Name, err)
	}
	if off < 0 || off > int64(len(data)) || int64(f.UncompressedSize64) > int64(len(data))-off {
		return nil, formatErr("record %s: its %d bytes at offset %d lie beyond the file's %d", f.Name, f.UncompressedSize64, off, len(data))
	}
	b := data[off : off+int64(f.UncompressedSize64)]
	if got := crc32.ChecksumIEEE(b); got != f.CRC32 {
		return nil, formatErr("record %s: CRC-32 %08x, the archive says %08x: the file is damaged", f.Name, got, f.CRC32)
	}
	return b, nil
}

func describePID(pid Value) string {
	if t, ok := pid.(Tuple); ok {
		if len(t) > 0 {
			if s, ok := t[0].(string); ok {
				return fmt.Sprintf("%q%s", s, describe(t[1:]))
			}
		}
		return describe(t)
	}
	return typeName(pid)
}

// legacyMagic is the first pickle of a legacy file.
var legacyMagic, _ = new(big.Int).SetString("1950a86a20f9469cfc6c", 16)

const legacyProtocol = 1001

// parseLegacy reads the legacy format: pickles of the magic number, the
// protocol version and sys_info, the object's pickle (whose persistent ids
// name storages), a pickle of the storage keys, then each storage as an
// int64 element count and its raw data.
func parseLegacy(data []byte) (Value, error) {
	pos := 0
	next := func(what string, persistent func(Value) (Value, error)) (Value, error) {
		v, n, err := unpickle(data[pos:], persistent)
		if err != nil {
			return nil, fmt.Errorf("%s at byte %d: %w", what, pos, err)
		}
		pos += n
		return v, nil
	}
	magic, err := next("magic number", nil)
	if err != nil {
		return nil, formatErr("%v", err)
	}
	if m, ok := magic.(*big.Int); !ok || m.Cmp(legacyMagic) != 0 {
		return nil, formatErr("a pickle, but not one torch.save wrote (no magic number)")
	}
	if p, err := next("protocol version", nil); err != nil {
		return nil, err
	} else if p != int64(legacyProtocol) {
		return nil, formatErr("protocol version %v, want %d", p, legacyProtocol)
	}
	info, err := next("sys_info", nil)
	if err != nil {
		return nil, err
	}
	if err := checkSysInfo(info); err != nil {
		return nil, err
	}
	storages := map[string]*Storage{}
	persistent := func(pid Value) (Value, error) {
		t, ok := pid.(Tuple)
		if !ok || len(t) != 6 || t[0] != "storage" {
			if ok && len(t) > 0 && t[0] == "module" {
				return nil, errors.New("the file holds a whole torch.nn.Module (torch.save(model)); save model.state_dict() instead")
			}
			return nil, fmt.Errorf("persistent id %s, want ('storage', type, key, location, numel, view)", describePID(pid))
		}
		d, err := storageType(t[1])
		if err != nil {
			return nil, err
		}
		key, err := storageKey(t[2])
		if err != nil {
			return nil, err
		}
		numel, _, err := storageSize(t[4], d)
		if err != nil {
			return nil, fmt.Errorf("storage %q: %v", key, err)
		}
		root, ok := storages[key]
		if !ok {
			root = &Storage{DType: d, Key: key, Numel: numel}
			storages[key] = root
		} else if root.DType != d || root.Numel != numel {
			return nil, fmt.Errorf("storage %q is claimed as %d %s and as %d %s", key, root.Numel, root.DType, numel, d)
		}
		if t[5] == nil {
			return root, nil
		}
		view, ok := t[5].(Tuple)
		if !ok || len(view) != 3 {
			return nil, fmt.Errorf("storage %q: view %s, want (key, offset, size)", key, typeName(t[5]))
		}
		vkey, err := storageKey(view[0])
		if err != nil {
			return nil, err
		}
		off, ok1 := view[1].(int64)
		n, ok2 := view[2].(int64)
		if !ok1 || !ok2 || off < 0 || n < 0 || off > int64(root.Numel) || n > int64(root.Numel)-off {
			return nil, fmt.Errorf("storage view %q of %q: elements [%v, +%v) outside its %d", vkey, key, view[1], view[2], root.Numel)
		}
		return &Storage{DType: d, Key: vkey, Numel: int(n), base: root, off: int(off)}, nil
	}
	root, err := next("object pickle", persistent)
	if err != nil {
		return nil, err
	}
	keysV, err := next("storage keys", nil)
	if err != nil {
		return nil, err
	}
	keys, ok := keysV.(*List)
	if !ok {
		return nil, formatErr("storage keys are a %s, not a list", typeName(keysV))
	}
	for _, kv := range keys.Items {
		key, err := storageKey(kv)
		if err != nil {
			return nil, formatErr("%v", err)
		}
		st, ok := storages[key]
		if !ok {
			return nil, formatErr("data for storage %q, which no tensor uses", key)
		}
		if st.data != nil {
			return nil, formatErr("storage %q has data twice", key)
		}
		if len(data)-pos < 8 {
			return nil, formatErr("storage %q: the file ends before its size", key)
		}
		count := int64(binary.LittleEndian.Uint64(data[pos:]))
		pos += 8
		if count != int64(st.Numel) {
			return nil, formatErr("storage %q: the pickle claims %d elements, its data %d", key, st.Numel, count)
		}
		size := st.Numel * st.DType.Size()
		if size > len(data)-pos {
			return nil, formatErr("storage %q: %d elements (%d bytes) claimed, the file has %d bytes left", key, st.Numel, size, len(data)-pos)
		}
		st.data = data[pos : pos+size]
		pos += size
	}
	for key, st := range storages {
		if st.data == nil {
			return nil, formatErr("storage %q has no data in the file", key)
		}
	}
	return root, nil
}

// checkSysInfo refuses files written on a big-endian machine.
func checkSysInfo(v Value) error {
	d, ok := v.(*Dict)
	if !ok {
		return formatErr("sys_info is a %s, not a dict", typeName(v))
	}
	if le, ok := d.Get("little_endian"); ok && le != true {
		return formatErr("written on a big-endian machine: only little-endian files are read")
	}
	return nil
}

// parseTar reads the tar format of the first torch releases: entries
// sys_info, storages (a count, then each storage's (key, location, type)
// pickle, int64 element count and data, then the views), tensors (a count,
// then each tensor's (key, storage key, type) pickle, int32 ndim, 4 unused
// bytes, ndim int64 sizes, ndim int64 strides, int64 offset) and pickle
// (the object, whose persistent ids are tensor or storage keys).
func parseTar(data []byte) (Value, error) {
	entries := map[string][]byte{}
	tr := tar.NewReader(bytes.NewReader(data))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, formatErr("tar: %v", err)
		}
		if h.Size < 0 || h.Size > int64(len(data)) {
			return nil, formatErr("tar entry %s of %d bytes in a file of %d", h.Name, h.Size, len(data))
		}
		switch h.Name {
		case "sys_info", "pickle", "storages", "tensors":
			b, err := io.ReadAll(io.LimitReader(tr, h.Size))
			if err != nil {
				return nil, formatErr("tar entry %s: %v", h.Name, err)
			}
			entries[h.Name] = b
		}
	}
	for _, name := range []string{"sys_info", "pickle", "storages", "tensors"} {
		if _, ok := entries[name]; !ok {
			return nil, formatErr("tar archive without the %q entry of torch's tar format", name)
		}
	}
	info, _, err := unpickle(entries["sys_info"], nil)
	if err != nil {
		return nil, formatErr("sys_info: %v", err)
	}
	if err := checkSysInfo(info); err != nil {
		return nil, err
	}
	objects := map[string]Value{}
	if err := tarStorages(entries["storages"], objects); err != nil {
		return nil, formatErr("storages: %v", err)
	}
	if err := tarTensors(entries["tensors"], objects); err != nil {
		return nil, formatErr("tensors: %v", err)
	}
	persistent := func(pid Value) (Value, error) {
		if t, ok := pid.(Tuple); ok {
			if len(t) > 0 && t[0] == "module" {
				return nil, errors.New("the file holds a whole torch.nn.Module; save its state_dict instead")
			}
			return nil, fmt.Errorf("persistent id %s", describePID(pid))
		}
		key, err := storageKey(pid)
		if err != nil {
			return nil, err
		}
		v, ok := objects[key]
		if !ok {
			return nil, fmt.Errorf("persistent id %q names no tensor or storage of the file", key)
		}
		return v, nil
	}
	root, _, err := unpickle(entries["pickle"], persistent)
	if err != nil {
		return nil, formatErr("pickle: %v", err)
	}
	return root, nil
}

// stream reads consecutive pickles and raw fields from one tar entry.
type stream struct {
	b   []byte
	pos int
}

func (s *stream) pickle() (Value, error) {
	v, n, err := unpickle(s.b[s.pos:], nil)
	s.pos += n
	return v, err
}

func (s *stream) int64() (int64, error) {
	if len(s.b)-s.pos < 8 {
		return 0, errors.New("ends early")
	}
	x := int64(binary.LittleEndian.Uint64(s.b[s.pos:]))
	s.pos += 8
	return x, nil
}

// count reads the number of records that follow, each at least min bytes.
func (s *stream) count(min int) (int, error) {
	v, err := s.pickle()
	if err != nil {
		return 0, err
	}
	n, ok := v.(int64)
	if !ok || n < 0 || n > int64(len(s.b)-s.pos)/int64(min) {
		return 0, fmt.Errorf("record count %v does not fit the %d bytes left", v, len(s.b)-s.pos)
	}
	return int(n), nil
}

// records reads a count and as many pickled records, each a 3-tuple
// (what they are, in errors: what, as want), and hands them to each in
// turn; min is the fewest bytes a record takes.
func (s *stream) records(min int, what, want string, each func(i int, t Tuple) error) error {
	n, err := s.count(min)
	if err != nil {
		return err
	}
	for i := 0; i < n; i++ {
		v, err := s.pickle()
		if err != nil {
			return err
		}
		t, ok := v.(Tuple)
		if !ok || len(t) != 3 {
			return fmt.Errorf("%s %d is a %s, want %s", what, i, typeName(v), want)
		}
		if err := each(i, t); err != nil {
			return err
		}
	}
	return nil
}

func tarStorages(b []byte, objects map[string]Value) error {
	s := &stream{b: b}
	err := s.records(9, "storage record", "(key, location, type)", func(i int, t Tuple) error {
		key, err := storageKey(t[0])
		if err != nil {
			return err
		}
		d, err := storageType(t[2])
		if err != nil {
			return err
		}
		count, err := s.int64()
		if err != nil {
			return fmt.Errorf("storage %q: size %v", key, err)
		}
		if count < 0 || count > int64(len(b)-s.pos)/int64(d.Size()) {
			return fmt.Errorf("storage %q: %d %s elements claimed, %d bytes left", key, count, d, len(b)-s.pos)
		}
		size := int(count) * d.Size()
		objects[key] = &Storage{DType: d, Key: key, Numel: int(count), data: b[s.pos : s.pos+size]}
		s.pos += size
		return nil
	})
	if err != nil {
		return err
	}
	v, err := s.pickle()
	if err != nil {
		return fmt.Errorf("storage views: %v", err)
	}
	views, ok := v.(*List)
	if !ok {
		return fmt.Errorf("storage views are a %s", typeName(v))
	}
	for _, it := range views.Items {
		t, ok := it.(Tuple)
		if !ok || len(t) != 4 {
			return fmt.Errorf("storage view %s, want (key, root key, offset, numel)", typeName(it))
		}
		key, err1 := storageKey(t[0])
		rkey, err2 := storageKey(t[1])
		off, ok1 := t[2].(int64)
		cnt, ok2 := t[3].(int64)
		if err1 != nil || err2 != nil || !ok1 || !ok2 {
			return fmt.Errorf("storage view %s", describe(t))
		}
		root, ok := objects[rkey].(*Storage)
		if !ok {
			return fmt.Errorf("storage view %q of unknown storage %q", key, rkey)
		}
		if off < 0 || cnt < 0 || off > int64(root.Numel) || cnt > int64(root.Numel)-off {
			return fmt.Errorf("storage view %q: elements [%d, +%d) outside %q's %d", key, off, cnt, rkey, root.Numel)
		}
		objects[key] = &Storage{DType: root.DType, Key: key, Numel: int(cnt), base: root, off: int(off)}
	}
	return nil
}

func tarTensors(b []byte, objects map[string]Value) error {
	s := &stream{b: b}
	return s.records(13, "tensor record", "(key, storage key, type)", func(i int, t Tuple) error {
		key, err1 := storageKey(t[0])
		skey, err2 := storageKey(t[1])
		if err1 != nil || err2 != nil {
			return fmt.Errorf("tensor record %d: %s", i, describe(t))
		}
		st, ok := objects[skey].(*Storage)
		if !ok {
			return fmt.Errorf("tensor %q: no storage %q", key, skey)
		}
		if len(b)-s.pos < 8 {
			return fmt.Errorf("tensor %q ends early", key)
		}
		ndim := int(int32(binary.LittleEndian.Uint32(b[s.pos:])))
		s.pos += 8 // ndim and 4 unused bytes
		if ndim < 0 || ndim > MaxDims || len(b)-s.pos < 8*(2*ndim+1) {
			return fmt.Errorf("tensor %q: %d dimensions", key, ndim)
		}
		size, stride := make([]int64, ndim), make([]int64, ndim)
		for k := range size {
			size[k], _ = s.int64()
		}
		for k := range stride {
			stride[k], _ = s.int64()
		}
		off, _ := s.int64()
		tt, err := newTensor(st, off, size, stride, false)
		if err != nil {
			return fmt.Errorf("tensor %q: %v", key, err)
		}
		objects[key] = tt
		return nil
	})
}

// StateDict returns the tensors of a state dict (a dict from names to
// tensors, as module.state_dict() returns), names in the file's order.
// A value that is not a tensor is an error naming its key.
func StateDict(v Value) ([]string, map[string]*Tensor, error) {
	d, ok := v.(*Dict)
	if !ok {
		return nil, nil, fmt.Errorf("a state dict must be a dict, this is a %s", typeName(v))
	}
	names := make([]string, 0, d.Len())
	out := make(map[string]*Tensor, d.Len())
	for i, k := range d.keys {
		name, ok := k.(string)
		if !ok {
			return nil, nil, fmt.Errorf("state dict key %d is a %s, not a string", i, typeName(k))
		}
		t, ok := d.vals[i].(*Tensor)
		if !ok {
			return nil, nil, fmt.Errorf("state dict entry %q is a %s, not a tensor", name, typeName(d.vals[i]))
		}
		names = append(names, name)
		out[name] = t
	}
	return names, out, nil
}
