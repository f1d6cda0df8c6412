package checkpoint

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/xmr-project/xmr/atomicfile"
	"github.com/xmr-project/xmr/mmap"
)

// Save writes tensors and metadata to path in the safetensors format (see
// Write), atomically: readers see the old file or the complete new one, and
// a failure leaves no partial file.
func Save(path string, tensors []Entry, metadata map[string]string) error {
	err := atomicfile.Write(path, func(w io.Writer) error {
		return Write(testHookWriter(w), tensors, metadata)
	})
	if err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	return nil
}

// testHookWriter lets tests make the writer fail part-way.
var testHookWriter = func(w io.Writer) io.Writer { return w }

// File is an open safetensors file whose header has been validated. Its
// data is memory-mapped where the platform allows and read into memory
// otherwise. Methods may be called from several goroutines; Close must not
// run concurrently with them.
type File struct {
	path   string
	data   []byte // the whole file
	mapped bool
	h      *header
}

// Open opens and validates a safetensors file: the header length, the JSON,
// every tensor's dtype, shape and data_offsets, and that the tensors tile the
// data exactly. Errors name the file and the offending tensor, and wrap
// ErrFormat when the content is at fault.
func Open(path string) (*File, error) {
	data, mapped, err := mmap.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	cf, err := newFile(path, data)
	if err != nil {
		if mapped {
			mmap.Unmap(data)
		}
		return nil, err
	}
	cf.mapped = mapped
	return cf, nil
}

// OpenBytes validates data, the content of a safetensors file held in
// memory (embedded, downloaded, or a test's), as Open validates a file;
// name stands for the path in errors. The File reads data in place, which
// must not change while it is open.
func OpenBytes(name string, data []byte) (*File, error) { return newFile(name, data) }

// newFile validates data, the content of the file at path.
func newFile(path string, data []byte) (*File, error) {
	h, err := parseHeader(data, int64(len(data)))
	if err != nil {
		return nil, fmt.Errorf("checkpoint %s: %w", path, err)
	}
	return &File{path: path, data: data, h: h}, nil
}

// Close releases the file's memory. The File must not be used afterwards;
// slices returned by Tensor remain valid.
func (f *File) Close() error {
	if f.data == nil {
		return nil
	}
	var err error
	if f.mapped {
		err = mmap.Unmap(f.data)
	}
	f.data = nil
	if err != nil {
		return fmt.Errorf("checkpoint %s: unmap: %w", f.path, err)
	}
	return nil
}

// Path returns the path the file was opened from.
func (f *File) Path() string { return f.path }

// Names returns the names of the file's tensors, sorted.
func (f *File) Names() []string { return append([]string(nil), f.h.names...) }

// Metadata returns a copy of the file's string metadata (empty if none).
func (f *File) Metadata() map[string]string {
	m := make(map[string]string, len(f.h.meta))
	for k, v := range f.h.meta {
		m[k] = v
	}
	return m
}

// HasChecksums reports whether the file records the CRC-32C of its tensors
// (MetaChecksums), which Tensor and LoadInto then verify. Files written by
// other tools, and by xmr before checksums, have none.
func (f *File) HasChecksums() bool { return f.h.sums != nil }

// Verify checks every tensor's data against its recorded checksum; it
// does nothing for a file without checksums. The error names the tensor.
func (f *File) Verify() error {
	if f.data == nil {
		return f.errorf("file is closed")
	}
	for _, name := range f.h.names {
		if err := f.verify(f.h.infos[name]); err != nil {
			return err
		}
	}
	return nil
}

// raw returns the bytes of a tensor's data.
func (f *File) raw(in Info) []byte { return f.data[f.h.dataStart+in.Begin : f.h.dataStart+in.End] }

// verify checks a tensor's data against its checksum, if the file has
// checksums.
func (f *File) verify(in Info) error {
	if f.h.sums == nil {
		return nil
	}
	if err := f.h.sums.Verify(in.Name, f.raw(in)); err != nil {
		return f.errorf("tensor %v (the file is damaged: restore it or use another checkpoint)", err)
	}
	return nil
}

// Info describes the named tensor; ok is false when the file lacks it.
func (f *File) Info(name string) (info Info, ok bool) {
	in, ok := f.h.infos[name]
	in.Shape = append([]int{}, in.Shape...)
	return in, ok
}

func (f *File) errorf(format string, args ...any) error {
	return fmt.Errorf("checkpoint %s: %s", f.path, fmt.Sprintf(format, args...))
}

// Tensor returns a float32 copy of the named tensor and its shape,
// converting F16, BF16 and F64 data, after verifying its checksum when the
// file has checksums.
func (f *File) Tensor(name string) ([]float32, []int, error) {
	in, ok := f.h.infos[name]
	if !ok {
		return nil, nil, f.errorf("no tensor %q", name)
	}
	if f.data == nil {
		return nil, nil, f.errorf("tensor %q: file is closed", in.Name)
	}
	if err := f.verify(in); err != nil {
		return nil, nil, err
	}
	dst := make([]float32, in.Numel())
	if err := f.read(in, dst); err != nil {
		return nil, nil, err
	}
	return dst, append([]int{}, in.Shape...), nil
}

// read decodes the tensor described by in into dst.
func (f *File) read(in Info, dst []float32) error {
	if f.data == nil {
		return f.errorf("tensor %q: file is closed", in.Name)
	}
	if err := decode(dst, f.raw(in), in.DType); err != nil {
		return f.errorf("tensor %q: %v", in.Name, err)
	}
	return nil
}

// LoadOptions relaxes LoadInto's checks and maps names.
type LoadOptions struct {
	// AllowMissing accepts wanted tensors that the file lacks; their Data is
	// left as it is.
	AllowMissing bool
	// AllowUnexpected accepts tensors of the file that nobody wants.
	AllowUnexpected bool
	// Rename, if set, maps each name in the file to the model's name for it
	// (for example, strips HuggingFace's "bert." prefix); an empty result
	// skips the tensor.
	Rename func(fileName string) string
}

// LoadInto fills the Data of every wanted entry from the file's tensor of
// the same name (after Rename), checking that each shape matches exactly and
// converting F16, BF16 and F64 data. It verifies each tensor's checksum
// (when the file has checksums) and refuses NaN and infinite values, which
// no trained weight holds. It checks everything before writing anything: on
// error no entry has changed, and the error lists every problem, one per
// line, for example
//
//	checkpoint run/best.safetensors: tensor "img_enc.layers.0.linear1.weight": shape [2048 1024] in file, model expects [1024 2048]
//	checkpoint run/best.safetensors: 1 tensor missing from the file: "txt_enc.fc.bias"
//	checkpoint run/best.safetensors: 1 unexpected tensor in the file: "pooler.dense.weight"
func (f *File) LoadInto(want []Entry, opts LoadOptions) error {
	if f.data == nil {
		return f.errorf("file is closed")
	}
	var errs []error
	wanted := make(map[string]bool, len(want))
	for _, e := range want {
		if wanted[e.Name] {
			errs = append(errs, f.errorf("tensor %q is wanted twice", e.Name))
		}
		wanted[e.Name] = true
		if n := numel(e.Shape); n != len(e.Data) {
			errs = append(errs, f.errorf("tensor %q: the model's buffer holds %d values, its shape %v needs %d", e.Name, len(e.Data), e.Shape, n))
		}
	}
	// source maps each model name to the file's name for it.
	source := make(map[string]string, len(f.h.names))
	var unexpected []string
	for _, fn := range f.h.names {
		mn := fn
		if opts.Rename != nil {
			if mn = opts.Rename(fn); mn == "" {
				continue
			}
		}
		if prev, dup := source[mn]; dup {
			errs = append(errs, f.errorf("tensors %q and %q both map to %q", prev, fn, mn))
			continue
		}
		source[mn] = fn
		if !wanted[mn] {
			unexpected = append(unexpected, label(fn, mn))
		}
	}
	var missing []string
	for _, e := range want {
		fn, ok := source[e.Name]
		if !ok {
			missing = append(missing, fmt.Sprintf("%q", e.Name))
			continue
		}
		in := f.h.infos[fn]
		if !slices.Equal(in.Shape, e.Shape) {
			errs = append(errs, f.errorf("tensor %s: shape %v in file, model expects %v", label(fn, e.Name), in.Shape, e.Shape))
		} else if !in.Float32() {
			errs = append(errs, f.errorf("tensor %s: dtype %s cannot be read as float32", label(fn, e.Name), in.DType))
		} else if err := f.verify(in); err != nil {
			errs = append(errs, err)
		} else if i := firstNonFinite(f.raw(in), in.DType); i >= 0 {
			v := make([]float32, in.Numel())
			decode(v, f.raw(in), in.DType)
			errs = append(errs, f.errorf("tensor %s: element %d is %v; weights must be finite (a diverged run or a damaged file)", label(fn, e.Name), i, v[i]))
		}
	}
	if len(missing) > 0 && !opts.AllowMissing {
		errs = append(errs, f.errorf("%s missing from the file: %s", plural(len(missing), "tensor"), list(missing)))
	}
	if len(unexpected) > 0 && !opts.AllowUnexpected {
		errs = append(errs, f.errorf("%s in the file: %s", plural(len(unexpected), "unexpected tensor"), list(unexpected)))
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	for _, e := range want {
		if fn, ok := source[e.Name]; ok {
			if err := f.read(f.h.infos[fn], e.Data); err != nil {
				return err
			}
		}
	}
	return nil
}

// Load opens path, fills want as LoadInto does and returns the file's
// metadata.
func Load(path string, want []Entry, opts LoadOptions) (map[string]string, error) {
	f, err := Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if err := f.LoadInto(want, opts); err != nil {
		return nil, err
	}
	return f.Metadata(), nil
}

// label names a tensor by its file name and, when renamed, its model name.
func label(fileName, modelName string) string {
	if fileName == modelName {
		return fmt.Sprintf("%q", fileName)
	}
	return fmt.Sprintf("%q (model name %q)", fileName, modelName)
}

// list joins quoted names, eliding the middle of very long lists.
func list(names []string) string {
	const most = 20
	if len(names) > most {
		return strings.Join(names[:most], ", ") + fmt.Sprintf(", ... and %d more", len(names)-most)
	}
	return strings.Join(names, ", ")
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

func numel(shape []int) int {
	n := 1
	for _, d := range shape {
		n *= d
	}
	return n
}
