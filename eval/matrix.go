package eval

import (
	"bufio"
	"errors"
	"fmt"
	"io"

	"github.com/xmr-project/xmr/npy"
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

// ReadNPY reads a 2-D float npy file (float16, float32 or float64, C or
// Fortran order, either byte order) into a float32 Matrix. The file size
// must match the header exactly. Errors name the file.
func ReadNPY(path string) (*Matrix, error) {
	f, err := npy.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if err := check2D(f.Header); err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	data, err := f.ReadFloat32()
	if err != nil {
		return nil, err
	}
	return &Matrix{Rows: f.Header.Shape[0], Cols: f.Header.Shape[1], Data: data}, nil
}

// DecodeNPY reads a 2-D float npy stream from r, as ReadNPY does for a
// file; trailing bytes after the data are an error.
func DecodeNPY(r io.Reader) (*Matrix, error) {
	br := bufio.NewReaderSize(r, 1<<20)
	nr, err := npy.NewReader(br)
	if err != nil {
		return nil, fmt.Errorf("decode npy: %w", err)
	}
	if err := check2D(nr.Header); err != nil {
		return nil, fmt.Errorf("decode npy: %w", err)
	}
	data, err := nr.ReadFloat32()
	if err != nil {
		return nil, fmt.Errorf("decode npy: %w", err)
	}
	if _, err := br.ReadByte(); err != io.EOF {
		return nil, errors.New("decode npy: trailing data after the array")
	}
	return &Matrix{Rows: nr.Header.Shape[0], Cols: nr.Header.Shape[1], Data: data}, nil
}

// check2D refuses arrays that are not matrices.
func check2D(h npy.Header) error {
	if len(h.Shape) != 2 {
		return fmt.Errorf("array %s: want a 2-D matrix", h)
	}
	return nil
}

// WriteNPY writes m as a version 1.0 little-endian float32 npy file
// ('<f4', C order), readable by numpy.load.
func WriteNPY(w io.Writer, m *Matrix) error {
	if err := m.check("write npy"); err != nil {
		return err
	}
	if err := npy.Write(w, []int{m.Rows, m.Cols}, m.Data); err != nil {
		return fmt.Errorf("write npy: %w", err)
	}
	return nil
}
