//go:build !purego

#include "textflag.h"

// MADD multiplies the 16 int16 of Y0 with the 16 int16 at off(R10) and
// adds the 8 pairwise int32 sums to accumulator acc.
#define MADD(off, acc) \
	VPMADDWD off(R10), Y0, Y1 \
	VPADDD   Y1, acc, acc

// HSUM4 reduces accumulators a, b, c, d (8 int32 each) to their 4 sums and
// adds them to the 4 int32 at dst.
#define HSUM4(a, b, c, d, dst) \
	VPHADDD      b, a, Y2 \
	VPHADDD      d, c, Y3 \
	VPHADDD      Y3, Y2, Y2 \
	VEXTRACTI128 $1, Y2, X3 \
	VPADDD       X3, X2, X2 \
	VPADDD       dst, X2, X2 \
	VMOVDQU      X2, dst

// func dots12AVX2(v *int8, nv, stride int, q *int16, dlen int, out *int32)
//
// For each of nv int8 rows at v (row r starts at v[r*stride]) and each of
// 12 query vectors, out[r*12+w] += sum_{k<dlen} v[r*stride+k] * query_w[k],
// with the queries as int16 in chunk-major order: q holds, for every chunk
// of 16 elements, the 16 values of query 0, then of query 1, ... of query
// 11 (384 bytes a chunk). dlen is a positive multiple of 16. Callers split
// long rows into spans of dlen so that the span of the query stays in the
// L1 cache.
TEXT ·dots12AVX2(SB), NOSPLIT, $0-48
	MOVQ v+0(FP), R9
	MOVQ nv+8(FP), CX
	MOVQ stride+16(FP), R11
	MOVQ q+24(FP), DI
	MOVQ dlen+32(FP), DX
	MOVQ out+40(FP), R8

region:
	TESTQ CX, CX
	JZ    done
	VPXOR Y4, Y4, Y4
	VPXOR Y5, Y5, Y5
	VPXOR Y6, Y6, Y6
	VPXOR Y7, Y7, Y7
	VPXOR Y8, Y8, Y8
	VPXOR Y9, Y9, Y9
	VPXOR Y10, Y10, Y10
	VPXOR Y11, Y11, Y11
	VPXOR Y12, Y12, Y12
	VPXOR Y13, Y13, Y13
	VPXOR Y14, Y14, Y14
	VPXOR Y15, Y15, Y15
	MOVQ  R9, SI
	MOVQ  DI, R10
	MOVQ  DX, BX

chunk:
	VPMOVSXBW (SI), Y0
	MADD(0, Y4)
	MADD(32, Y5)
	MADD(64, Y6)
	MADD(96, Y7)
	MADD(128, Y8)
	MADD(160, Y9)
	MADD(192, Y10)
	MADD(224, Y11)
	MADD(256, Y12)
	MADD(288, Y13)
	MADD(320, Y14)
	MADD(352, Y15)
	ADDQ $16, SI
	ADDQ $384, R10
	SUBQ $16, BX
	JNZ  chunk

	HSUM4(Y4, Y5, Y6, Y7, 0(R8))
	HSUM4(Y8, Y9, Y10, Y11, 16(R8))
	HSUM4(Y12, Y13, Y14, Y15, 32(R8))
	ADDQ $48, R8
	ADDQ R11, R9
	DECQ CX
	JMP  region

done:
	VZEROUPPER
	RET

// FMA multiplies the 8 float32 of Y0 with the 8 float32 at off(R10) and
// adds them to accumulator acc.
#define FMA(off, acc) \
	VFMADD231PS off(R10), Y0, acc

// HSUMF4 reduces float accumulators a, b, c, d (8 float32 each) to their 4
// sums and adds them to the 4 float32 at dst.
#define HSUMF4(a, b, c, d, dst) \
	VHADDPS      b, a, Y2 \
	VHADDPS      d, c, Y3 \
	VHADDPS      Y3, Y2, Y2 \
	VEXTRACTF128 $1, Y2, X3 \
	VADDPS       X3, X2, X2 \
	VADDPS       dst, X2, X2 \
	VMOVUPS      X2, dst

// func dots12fAVX2(v *float32, nv, stride int, q *float32, dlen int, out *float32)
//
// As dots12AVX2 for float32: out[r*12+w] += sum_{k<dlen} v[r*stride+k] *
// query_w[k], the queries chunk-major in chunks of 8 (for every 8 elements,
// the 8 values of query 0, ..., of query 11: 384 bytes a chunk). dlen is a
// positive multiple of 8; stride counts float32s.
TEXT ·dots12fAVX2(SB), NOSPLIT, $0-48
	MOVQ v+0(FP), R9
	MOVQ nv+8(FP), CX
	MOVQ stride+16(FP), R11
	SHLQ $2, R11
	MOVQ q+24(FP), DI
	MOVQ dlen+32(FP), DX
	MOVQ out+40(FP), R8

fregion:
	TESTQ  CX, CX
	JZ     fdone
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	VXORPS Y8, Y8, Y8
	VXORPS Y9, Y9, Y9
	VXORPS Y10, Y10, Y10
	VXORPS Y11, Y11, Y11
	VXORPS Y12, Y12, Y12
	VXORPS Y13, Y13, Y13
	VXORPS Y14, Y14, Y14
	VXORPS Y15, Y15, Y15
	MOVQ   R9, SI
	MOVQ   DI, R10
	MOVQ   DX, BX

fchunk:
	VMOVUPS (SI), Y0
	FMA(0, Y4)
	FMA(32, Y5)
	FMA(64, Y6)
	FMA(96, Y7)
	FMA(128, Y8)
	FMA(160, Y9)
	FMA(192, Y10)
	FMA(224, Y11)
	FMA(256, Y12)
	FMA(288, Y13)
	FMA(320, Y14)
	FMA(352, Y15)
	ADDQ $32, SI
	ADDQ $384, R10
	SUBQ $8, BX
	JNZ  fchunk

	HSUMF4(Y4, Y5, Y6, Y7, 0(R8))
	HSUMF4(Y8, Y9, Y10, Y11, 16(R8))
	HSUMF4(Y12, Y13, Y14, Y15, 32(R8))
	ADDQ $48, R8
	ADDQ R11, R9
	DECQ CX
	JMP  fregion

fdone:
	VZEROUPPER
	RET
