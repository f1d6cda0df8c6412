//go:build !purego

package index

// fastscanAVX2 is implemented in fastscan_amd64.s.
//
//go:noescape
func fastscanAVX2(codes *byte, nblocks, m int, lut *byte, out *uint16)

// fastscan sets out[b*64+j*32+i] to the sum of query j's table entries at
// the codes of vector i of block b, for nblocks blocks and the two query
// vectors whose tables are lut (see fastscanGo), with AVX2 where the
// machine has it.
func fastscan(codes []byte, nblocks, m int, lut []byte, out []uint16) {
	if nblocks == 0 {
		return
	}
	if hasDotsAsm {
		_ = codes[nblocks*16*m-1]
		_ = lut[2*16*m-1]
		_ = out[nblocks*64-1]
		fastscanAVX2(&codes[0], nblocks, m, &lut[0], &out[0])
		return
	}
	fastscanGo(codes, nblocks, m, lut, out)
}
