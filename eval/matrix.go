package eval

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
)

// Matrix is a dense row-major float32 matrix: a similarity matrix (images x
// captions) or a relevance matrix (captions x images).
type Matrix struct {
	Rows, Cols int
	Data       []float32 // len Rows*Cols; element [i, j] at i*Cols+j
}

// NewMatrix returns a zero rows x cols matrix.
func NewMatrix(rows, cols int) *Matrix {
	return &Matrix{Rows: rows, Cols: cols, Data: make([]float32, rows*cols)}
}

// At returns element [i, j].
func (m *Matrix) At(i, j int) float32 { return m.Data[i*m.Cols+j] }

// Row returns row i, sharing memory with m.
func (m *Matrix) Row(i int) []float32 { return m.Data[i*m.Cols : (i+1)*m.Cols] }

// check reports whether len(Data) matches the shape.
func (m *Matrix) check(what string) error {
	if m == nil {
		return fmt.Errorf("%s: nil matrix", what)
	}
	if m.Rows < 0 || m.Cols < 0 || len(m.Data) != m.Rows*m.Cols {
		return fmt.Errorf("%s: %d values for a %d x %d matrix", what, len(m.Data), m.Rows, m.Cols)
	}
	return nil
}

// view is a window on a Matrix: rows x cols elements starting at data[0] with
// row stride stride. Folds of the 1K protocol are views.
type view struct {
	data               []float32
	rows, cols, stride int
}

func (m *Matrix) view() view { return view{m.Data, m.Rows, m.Cols, m.Cols} }

// sub returns the rows x cols window whose top-left element is [r0, c0].
func (v view) sub(r0, c0, rows, cols int) view {
	if rows == 0 || cols == 0 {
		return view{nil, rows, cols, v.stride}
	}
	off := r0*v.stride + c0
	return view{v.data[off : off+(rows-1)*v.stride+cols], rows, cols, v.stride}
}

func (v view) row(i int) []float32 { return v.data[i*v.stride : i*v.stride+v.cols] }

// transposeCols copies columns [c0, c0+n) of v into dst as n rows of v.rows
// values each: dst[k*v.rows+r] = v[r, c0+k].
func (v view) transposeCols(c0, n int, dst []float32) {
	for r := 0; r < v.rows; r++ {
		src := v.data[r*v.stride+c0 : r*v.stride+c0+n]
		for k, x := range src {
			dst[k*v.rows+r] = x
		}
	}
}

// maxNPYHeader bounds the header of an npy file; NumPy itself refuses
// headers over 10000 bytes by default.
const maxNPYHeader = 1 << 16

// npyHeader is the parsed header of an npy file.
type npyHeader struct {
	order    binary.ByteOrder
	itemSize int // 4 (float32) or 8 (float64)
	fortran  bool
	shape    []int
	dataOff  int64 // offset of the first data byte
}

// ReadNPY reads a 2-D float32 or float64 npy file (C or Fortran order, either
// byte order) into a float32 Matrix; float64 values are rounded to float32.
// The file size must match the header exactly.
func ReadNPY(path string) (*Matrix, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read npy: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("read npy %s: %w", path, err)
	}
	br := bufio.NewReaderSize(f, 1<<20)
	h, err := readNPYHeader(br)
	if err != nil {
		return nil, fmt.Errorf("read npy %s: %w", path, err)
	}
	n, err := h.elems()
	if err != nil {
		return nil, fmt.Errorf("read npy %s: %w", path, err)
	}
	if want := h.dataOff + int64(n)*int64(h.itemSize); st.Size() != want {
		return nil, fmt.Errorf("read npy %s: shape %v of %d-byte values needs %d bytes, file has %d", path, h.shape, h.itemSize, want, st.Size())
	}
	m, err := h.readData(br, n, n)
	if err != nil {
		return nil, fmt.Errorf("read npy %s: %w", path, err)
	}
	return m, nil
}

// DecodeNPY reads a 2-D float32 or float64 npy stream from r, as ReadNPY
// does for a file; trailing bytes after the data are an error.
func DecodeNPY(r io.Reader) (*Matrix, error) {
	br := bufio.NewReaderSize(r, 1<<20)
	h, err := readNPYHeader(br)
	if err != nil {
		return nil, fmt.Errorf("decode npy: %w", err)
	}
	n, err := h.elems()
	if err != nil {
		return nil, fmt.Errorf("decode npy: %w", err)
	}
	m, err := h.readData(br, n, min(n, 1<<16))
	if err != nil {
		return nil, fmt.Errorf("decode npy: %w", err)
	}
	if _, err := br.ReadByte(); err != io.EOF {
		return nil, errors.New("decode npy: trailing data after the array")
	}
	return m, nil
}

// WriteNPY writes m as a version 1.0 little-endian float32 npy file
// ('<f4', C order), readable by numpy.load.
func WriteNPY(w io.Writer, m *Matrix) error {
	if err := m.check("write npy"); err != nil {
		return err
	}
	dict := fmt.Sprintf("{'descr': '<f4', 'fortran_order': False, 'shape': (%d, %d), }", m.Rows, m.Cols)
	// Magic (6) + version (2) + length (2) + dict + padding + '\n' is a
	// multiple of 64 bytes.
	total := 10 + len(dict) + 1
	pad := (64 - total%64) % 64
	hdr := make([]byte, 0, total+pad)
	hdr = append(hdr, "\x93NUMPY\x01\x00"...)
	hdr = binary.LittleEndian.AppendUint16(hdr, uint16(len(dict)+pad+1))
	hdr = append(hdr, dict...)
	hdr = append(hdr, bytes.Repeat([]byte{' '}, pad)...)
	hdr = append(hdr, '\n')
	if _, err := w.Write(hdr); err != nil {
		return fmt.Errorf("write npy: %w", err)
	}
	if err := writeFloat32LE(w, m.Data); err != nil {
		return fmt.Errorf("write npy: %w", err)
	}
	return nil
}

func (h *npyHeader) elems() (int, error) {
	if len(h.shape) != 2 {
		return 0, fmt.Errorf("want a 2-D array, got shape %v", h.shape)
	}
	r, c := h.shape[0], h.shape[1]
	if r > 0 && c > math.MaxInt32/r {
		return 0, fmt.Errorf("shape %v is too large", h.shape)
	}
	return r * c, nil
}

// readData reads n values and returns them as a rows x cols Matrix. It
// starts with room for capHint values and grows the buffer as data arrives,
// so that a short stream with a huge shape fails before allocating the
// whole array.
func (h *npyHeader) readData(r io.Reader, n, capHint int) (*Matrix, error) {
	const chunk = 1 << 16 // values per read
	data := make([]float32, 0, capHint)
	buf := make([]byte, chunk*h.itemSize)
	for len(data) < n {
		k := min(chunk, n-len(data))
		b := buf[:k*h.itemSize]
		if got, err := io.ReadFull(r, b); err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				return nil, fmt.Errorf("data ends after %d of %d values", len(data)+got/h.itemSize, n)
			}
			return nil, err
		}
		if h.itemSize == 4 {
			for i := 0; i < k; i++ {
				data = append(data, math.Float32frombits(h.order.Uint32(b[4*i:])))
			}
		} else {
			for i := 0; i < k; i++ {
				data = append(data, float32(math.Float64frombits(h.order.Uint64(b[8*i:]))))
			}
		}
	}
	rows, cols := h.shape[0], h.shape[1]
	if !h.fortran {
		return &Matrix{Rows: rows, Cols: cols, Data: data}, nil
	}
	// Fortran order stores column after column.
	m := NewMatrix(rows, cols)
	for j := 0; j < cols; j++ {
		for i := 0; i < rows; i++ {
			m.Data[i*cols+j] = data[j*rows+i]
		}
	}
	return m, nil
}

// readNPYHeader parses the magic, version and header dictionary.
func readNPYHeader(r io.Reader) (*npyHeader, error) {
	var pre [10]byte
	if _, err := io.ReadFull(r, pre[:8]); err != nil {
		return nil, fmt.Errorf("not an npy file: %w", err)
	}
	if string(pre[:6]) != "\x93NUMPY" {
		return nil, errors.New("not an npy file (bad magic)")
	}
	var hlen, off int
	switch pre[6] {
	case 1:
		if _, err := io.ReadFull(r, pre[8:10]); err != nil {
			return nil, fmt.Errorf("npy header: %w", err)
		}
		hlen, off = int(binary.LittleEndian.Uint16(pre[8:10])), 10
	case 2, 3:
		var l [4]byte
		if _, err := io.ReadFull(r, l[:]); err != nil {
			return nil, fmt.Errorf("npy header: %w", err)
		}
		v := binary.LittleEndian.Uint32(l[:])
		if v > maxNPYHeader {
			return nil, fmt.Errorf("npy header of %d bytes is too long", v)
		}
		hlen, off = int(v), 12
	default:
		return nil, fmt.Errorf("unsupported npy version %d.%d", pre[6], pre[7])
	}
	hdr := make([]byte, hlen)
	if _, err := io.ReadFull(r, hdr); err != nil {
		return nil, fmt.Errorf("npy header: %w", err)
	}
	h, err := parseNPYDict(hdr)
	if err != nil {
		return nil, fmt.Errorf("npy header %q: %w", bytes.TrimRight(hdr, " \n"), err)
	}
	h.dataOff = int64(off + hlen)
	return h, nil
}

// parseNPYDict parses the Python dict literal of an npy header, e.g.
// {'descr': '<f4', 'fortran_order': False, 'shape': (5000, 25000), }.
func parseNPYDict(b []byte) (*npyHeader, error) {
	p := &dictParser{b: b}
	h := &npyHeader{}
	var haveDescr, haveOrder, haveShape bool
	if !p.eat('{') {
		return nil, errors.New("want '{'")
	}
	for !p.eat('}') {
		key, ok := p.str()
		if !ok {
			return nil, errors.New("want a quoted key")
		}
		if !p.eat(':') {
			return nil, errors.New("want ':'")
		}
		switch key {
		case "descr":
			d, ok := p.str()
			if !ok {
				return nil, errors.New("descr: want a string")
			}
			if err := h.setDescr(d); err != nil {
				return nil, err
			}
			haveDescr = true
		case "fortran_order":
			switch {
			case p.word("True"):
				h.fortran = true
			case p.word("False"):
				h.fortran = false
			default:
				return nil, errors.New("fortran_order: want True or False")
			}
			haveOrder = true
		case "shape":
			s, ok := p.tuple()
			if !ok {
				return nil, errors.New("shape: want a tuple of non-negative integers")
			}
			h.shape = s
			haveShape = true
		default:
			return nil, fmt.Errorf("unknown key %q", key)
		}
		if !p.eat(',') {
			if !p.eat('}') {
				return nil, errors.New("want ',' or '}'")
			}
			break
		}
	}
	if !haveDescr || !haveOrder || !haveShape {
		return nil, errors.New("missing descr, fortran_order or shape")
	}
	return h, nil
}

func (h *npyHeader) setDescr(d string) error {
	if len(d) != 3 {
		return fmt.Errorf("dtype %q: want float32 or float64", d)
	}
	switch d[0] {
	case '<', '|':
		h.order = binary.LittleEndian
	case '>':
		h.order = binary.BigEndian
	case '=':
		h.order = binary.NativeEndian
	default:
		return fmt.Errorf("dtype %q: want float32 or float64", d)
	}
	switch d[1:] {
	case "f4":
		h.itemSize = 4
	case "f8":
		h.itemSize = 8
	default:
		return fmt.Errorf("dtype %q: want float32 or float64", d)
	}
	return nil
}

// dictParser is a tiny scanner for the restricted Python literals of npy
// headers.
type dictParser struct {
	b []byte
	i int
}

func (p *dictParser) space() {
	for p.i < len(p.b) && (p.b[p.i] == ' ' || p.b[p.i] == '\n' || p.b[p.i] == '\t') {
		p.i++
	}
}

func (p *dictParser) eat(c byte) bool {
	p.space()
	if p.i < len(p.b) && p.b[p.i] == c {
		p.i++
		return true
	}
	return false
}

func (p *dictParser) word(w string) bool {
	p.space()
	if bytes.HasPrefix(p.b[p.i:], []byte(w)) {
		p.i += len(w)
		return true
	}
	return false
}

func (p *dictParser) str() (string, bool) {
	p.space()
	if p.i >= len(p.b) || (p.b[p.i] != '\'' && p.b[p.i] != '"') {
		return "", false
	}
	q := p.b[p.i]
	end := bytes.IndexByte(p.b[p.i+1:], q)
	if end < 0 {
		return "", false
	}
	s := string(p.b[p.i+1 : p.i+1+end])
	p.i += end + 2
	return s, true
}

func (p *dictParser) tuple() ([]int, bool) {
	if !p.eat('(') {
		return nil, false
	}
	shape := []int{}
	for !p.eat(')') {
		p.space()
		j := p.i
		for j < len(p.b) && p.b[j] >= '0' && p.b[j] <= '9' {
			j++
		}
		if j == p.i || j-p.i > 12 {
			return nil, false
		}
		v, err := strconv.Atoi(string(p.b[p.i:j]))
		if err != nil {
			return nil, false
		}
		p.i = j
		// Python writes 1-tuples as "(n,)"; accept an optional 'L' suffix
		// from Python 2 headers.
		p.eat('L')
		shape = append(shape, v)
		if !p.eat(',') {
			if !p.eat(')') {
				return nil, false
			}
			break
		}
	}
	return shape, true
}

// writeFloat32LE writes v as little-endian float32 values.
func writeFloat32LE(w io.Writer, v []float32) error {
	const chunk = 1 << 16
	buf := make([]byte, 4*min(chunk, len(v)))
	for len(v) > 0 {
		k := min(chunk, len(v))
		for i, x := range v[:k] {
			binary.LittleEndian.PutUint32(buf[4*i:], math.Float32bits(x))
		}
		if _, err := w.Write(buf[:4*k]); err != nil {
			return err
		}
		v = v[k:]
	}
	return nil
}

// readFloat32LE fills dst with little-endian float32 values from r.
func readFloat32LE(r io.Reader, dst []float32) error {
	const chunk = 1 << 16
	buf := make([]byte, 4*min(chunk, len(dst)))
	for len(dst) > 0 {
		k := min(chunk, len(dst))
		if _, err := io.ReadFull(r, buf[:4*k]); err != nil {
			return err
		}
		for i := range dst[:k] {
			dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(buf[4*i:]))
		}
		dst = dst[k:]
	}
	return nil
}
