//go:build !purego

#include "textflag.h"

// nibbles is the mask of the low 4 bits of every byte.
DATA nibbles<>+0(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA nibbles<>+8(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA nibbles<>+16(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA nibbles<>+24(SB)/8, $0x0f0f0f0f0f0f0f0f
GLOBL nibbles<>(SB), RODATA|NOPTR, $32

// LOOKUP adds, for one query whose tables are at lut(R11), the entries at
// the codes of two pairs of subspaces (indices in Y0, Y1: low and high
// nibbles of the first pair; Y2, Y3: of the second) to its accumulators:
// a0, b0 for vectors 0-15, a1, b1 for vectors 16-31. a holds, per uint16
// word, the running sum of the even byte plus 256 times the odd byte
// (mod 2^16); b the running sum of the odd byte. The two pairs' entries
// (at most 127 each) are first added as bytes.
#define LOOKUP(lut, a0, b0, a1, b1) \
	VMOVDQU 0(lut)(R11*1), Y12 \
	VPSHUFB Y0, Y12, Y13       \
	VPSHUFB Y1, Y12, Y14       \
	VMOVDQU 32(lut)(R11*1), Y12 \
	VPSHUFB Y2, Y12, Y15       \
	VPADDB  Y15, Y13, Y13      \
	VPSHUFB Y3, Y12, Y12       \
	VPADDB  Y12, Y14, Y14      \
	VPADDW  Y13, a0, a0        \
	VPSRLW  $8, Y13, Y13       \
	VPADDW  Y13, b0, b0        \
	VPADDW  Y14, a1, a1        \
	VPSRLW  $8, Y14, Y14       \
	VPADDW  Y14, b1, b1

// FINISH turns accumulators a, b (see LOOKUP) into the 16 uint16 sums of
// their vectors, in order, at dst: even words a - (b << 8), odd words b,
// the two 128-bit lanes (the two subspaces of each pair) added.
#define FINISH(a, b, xa, xb, dst) \
	VPSLLW       $8, b, Y12     \
	VPSUBW       Y12, a, a      \
	VEXTRACTI128 $1, a, X12     \
	VPADDW       X12, xa, xa    \
	VEXTRACTI128 $1, b, X13     \
	VPADDW       X13, xb, xb    \
	VPUNPCKLWD   xb, xa, X12    \
	VPUNPCKHWD   xb, xa, X13    \
	VMOVDQU      X12, dst       \
	VMOVDQU      X13, 16+dst

// func fastscanAVX2(codes *byte, nblocks, m int, lut *byte, out *uint16)
//
// For each of nblocks blocks of 32 vectors' 4-bit codes (16m bytes a
// block, laid out as pq.go describes) and each of the two query vectors
// whose tables are at lut (16m bytes each, query 1's after query 0's),
// out[b*64+j*32+i] = the sum over the m subspaces of query j's entry at
// vector i's code. m is a positive multiple of 4, at most 512, and every
// entry at most 127, so that the sums are exact.
TEXT ·fastscanAVX2(SB), NOSPLIT, $0-40
	MOVQ codes+0(FP), SI
	MOVQ nblocks+8(FP), CX
	MOVQ m+16(FP), DX
	SHLQ $4, DX            // bytes per block and per query's tables
	MOVQ lut+24(FP), DI
	LEAQ (DI)(DX*1), R10   // query 1's tables
	MOVQ out+32(FP), R8

block:
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
	XORQ  R11, R11

quad:
	VMOVDQU 0(SI)(R11*1), Y0
	VPSRLW  $4, Y0, Y1
	VPAND   nibbles<>(SB), Y0, Y0
	VPAND   nibbles<>(SB), Y1, Y1
	VMOVDQU 32(SI)(R11*1), Y2
	VPSRLW  $4, Y2, Y3
	VPAND   nibbles<>(SB), Y2, Y2
	VPAND   nibbles<>(SB), Y3, Y3
	LOOKUP(DI, Y4, Y5, Y6, Y7)
	LOOKUP(R10, Y8, Y9, Y10, Y11)
	ADDQ    $64, R11
	CMPQ    R11, DX
	JLT     quad

	FINISH(Y4, Y5, X4, X5, 0(R8))
	FINISH(Y6, Y7, X6, X7, 32(R8))
	FINISH(Y8, Y9, X8, X9, 64(R8))
	FINISH(Y10, Y11, X10, X11, 96(R8))
	ADDQ DX, SI
	ADDQ $128, R8
	DECQ CX
	JMP  block

done:
	VZEROUPPER
	RET
