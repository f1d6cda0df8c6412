// Package colsum sums the columns of a row-major float32 matrix in float64:
// the means of a feature map's channels (the detector's Mean and the
// extractor's global vector). Each column's values are added in row order,
// so the vector kernel's sums equal the scalar loop's bit for bit.
package colsum

// tileRows is how many rows the vector kernel sums before it moves to the
// next block of columns: the tile stays in the core's first-level cache
// while each block of columns reads it (BenchmarkAdd, a map of 128
// channels on AMD EPYC Zen 2: tiles of 8 to 32 rows 0.23-0.29 ms, of 64
// to 1,024 0.40-0.48 ms, the scalar loop 1.23 ms).
const tileRows = 16

// Add adds to acc[j] (len(acc) = C) the values of column j of x, a
// row-major matrix of rows rows of C values, in row order.
func Add(acc []float64, x []float32, rows, C int) {
	if rows <= 0 || C <= 0 {
		return
	}
	_ = acc[C-1]
	_ = x[rows*C-1]
	v := 0
	if useAVX2 {
		v = C &^ 3
		for r := 0; r < rows && v > 0; r += tileRows {
			addAVX2(&acc[0], &x[r*C], min(tileRows, rows-r), v, C)
		}
	}
	if v == C {
		return
	}
	for r := range rows {
		row := x[r*C+v : r*C+C]
		a := acc[v:C]
		for j, f := range row {
			a[j] += float64(f)
		}
	}
}

// Mean sets out[j] to the mean of column j of x (rows rows of C values).
func Mean(out []float32, x []float32, rows, C int) {
	acc := make([]float64, C)
	Add(acc, x, rows, C)
	for j := range out[:C] {
		out[j] = float32(acc[j] / float64(rows))
	}
}
