//go:build !amd64 || purego

package index

// fastscan sets out[b*64+j*32+i] to the sum of query j's table entries at
// the codes of vector i of block b (see fastscanGo).
func fastscan(codes []byte, nblocks, m int, lut []byte, out []uint16) {
	fastscanGo(codes, nblocks, m, lut, out)
}
