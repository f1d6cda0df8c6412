//go:build !purego

#include "textflag.h"
#include "kernels_amd64.h"

// The VNNI kernels of the int8 path (int8_amd64.go). Both take the query
// codes as int8, chunk-major (for every chunk of 16 elements, 16 codes of
// each of the group's 12 vectors: 192 bytes a chunk), and multiply them
// with VPDPBUSD, which sums 4 products of unsigned bytes (its first
// source) with signed bytes (its second) into each int32 lane: each row
// chunk is broadcast to every 128-bit lane, its bytes' top bits flipped
// (x+128 as an unsigned byte), and the excess, 128 times the query
// codes' sum over the span, is taken off as the sums are written out
// (corr).

// I8SPAN is the span of elements the kernels score before reducing their
// accumulators: the tile's rows (8 x 1 KiB) stay in the L1 cache while
// each group of queries streams past.
#define I8SPAN 1024

// perm8x12 puts the 12 sums that REDUCEV leaves at 4*(w%4) + w/4 into
// query order w = 0..11.
DATA perm8x12<>+0(SB)/4, $0
DATA perm8x12<>+4(SB)/4, $4
DATA perm8x12<>+8(SB)/4, $8
DATA perm8x12<>+12(SB)/4, $12
DATA perm8x12<>+16(SB)/4, $1
DATA perm8x12<>+20(SB)/4, $5
DATA perm8x12<>+24(SB)/4, $9
DATA perm8x12<>+28(SB)/4, $13
DATA perm8x12<>+32(SB)/4, $2
DATA perm8x12<>+36(SB)/4, $6
DATA perm8x12<>+40(SB)/4, $10
DATA perm8x12<>+44(SB)/4, $14
DATA perm8x12<>+48(SB)/4, $0
DATA perm8x12<>+52(SB)/4, $0
DATA perm8x12<>+56(SB)/4, $0
DATA perm8x12<>+60(SB)/4, $0
GLOBL perm8x12<>(SB), RODATA|NOPTR, $64

// VNNIARGS loads the arguments that both kernels share: R9 the rows,
// R11 their stride in bytes, AX three strides, DX dlen, SI = 0 the
// span's first element.
#define VNNIARGS \
	MOVQ v+0(FP), R9 \
	MOVQ stride+8(FP), R11 \
	LEAQ (R11)(R11*2), AX \
	MOVQ dlen+24(FP), DX \
	XORQ SI, SI

// VGROUPSTART sets R10 to the span's first query chunk of the group at DI,
// R12 to the span's start in row 0 and R13 in row 3, and CX to the span's
// length.
#define VGROUPSTART \
	LEAQ (SI)(SI*2), R10 \
	SHLQ $2, R10 \
	ADDQ DI, R10 \
	LEAQ (R9)(SI*1), R12 \
	LEAQ (R12)(AX*1), R13 \
	MOVQ BX, CX

// zero12 is 12 int32 zeros: the corrections of every span but the first.
DATA zero12<>+0(SB)/8, $0
DATA zero12<>+8(SB)/8, $0
DATA zero12<>+16(SB)/8, $0
DATA zero12<>+24(SB)/8, $0
DATA zero12<>+32(SB)/8, $0
DATA zero12<>+40(SB)/8, $0
GLOBL zero12<>(SB), RODATA|NOPTR, $48

// VOUT sets R10 to the group's first result in out and CX to its
// corrections: in corr for the first span (they are for all of dlen),
// zero12 for the others.
#define VOUT \
	MOVQ  groups+40(FP), CX \
	SUBQ  R8, CX \
	MOVQ  CX, R10 \
	IMULQ ostride+56(FP), R10 \
	SHLQ  $2, R10 \
	ADDQ  out+32(FP), R10 \
	IMULQ $48, CX \
	ADDQ  corr+64(FP), CX \
	TESTQ SI, SI \
	JZ    2(PC) \
	LEAQ  zero12<>(SB), CX

// VNEXTGROUP moves DI on to the next group of queries, then loops
// (LOOPGROUPS).
#define VNEXTGROUP(group, span) \
	ADDQ gstride+48(FP), DI \
	LOOPGROUPS(group, span)

// ROWV multiplies one row chunk (16 bytes at addr, broadcast to the four
// 128-bit lanes of Z28 and its top bits flipped by Z27) with the 12
// queries' chunks in Z24-Z26 (4 a register, one per 128-bit lane) and
// adds the products to accumulators a, b, c.
#define ROWV(addr, a, b, c) \
	VBROADCASTI32X4 addr, Z28 \
	VPXORD          Z27, Z28, Z28 \
	VPDPBUSD        Z24, Z28, a \
	VPDPBUSD        Z25, Z28, b \
	VPDPBUSD        Z26, Z28, c

// TILEV adds one chunk of 16 elements of 8 rows (R12: row 0, R13: row 3,
// R11: the stride, AX: three strides) times the 12 queries of a group (at R10)
// to Z0-Z23 (row r in Z3r-Z3r+2), and moves the pointers on to the next
// chunk: 11 loads for 24 VPDPBUSD of 64 products each.
#define TILEV \
	VMOVDQU32 0(R10), Z24 \
	VMOVDQU32 64(R10), Z25 \
	VMOVDQU32 128(R10), Z26 \
	ROWV((R12), Z0, Z1, Z2) \
	ROWV((R12)(R11*1), Z3, Z4, Z5) \
	ROWV((R12)(R11*2), Z6, Z7, Z8) \
	ROWV((R13), Z9, Z10, Z11) \
	ROWV((R13)(R11*1), Z12, Z13, Z14) \
	ROWV((R13)(R11*2), Z15, Z16, Z17) \
	ROWV((R12)(AX*2), Z18, Z19, Z20) \
	ROWV((R13)(R11*4), Z21, Z22, Z23) \
	ADDQ $16, R12 \
	ADDQ $16, R13 \
	ADDQ $192, R10

// REDUCEV sums the 4 int32 of each 128-bit lane of one row's
// accumulators a (queries 0-3, one a lane), b (4-7) and c (8-11), takes
// off the corrections in Z26, and adds the 12 sums to the 12 int32 at
// (r), with Z24, Z25, Z28, Z29, Z31 as scratch, the permutation
// perm8x12 in Z30 and the mask of 12 lanes in K1. Within each 128-bit
// lane l, the interleaves leave a[0]+a[2], b[0]+b[2], a[1]+a[3],
// b[1]+b[3] in Z24 and c's halves in Z25; the quadword interleaves then
// leave the sums of queries l, 4+l and 8+l in the lane's first three
// int32.
#define REDUCEV(a, b, c, r) \
	VPUNPCKLDQ  b, a, Z24 \
	VPUNPCKHDQ  b, a, Z28 \
	VPADDD      Z28, Z24, Z24 \
	VPUNPCKLDQ  c, c, Z25 \
	VPUNPCKHDQ  c, c, Z28 \
	VPADDD      Z28, Z25, Z25 \
	VPUNPCKLQDQ Z25, Z24, Z28 \
	VPUNPCKHQDQ Z25, Z24, Z29 \
	VPADDD      Z29, Z28, Z28 \
	VPERMD      Z28, Z30, Z28 \
	VPSUBD      Z26, Z28, Z28 \
	VMOVDQU32.Z (r), K1, Z31 \
	VPADDD      Z31, Z28, Z28 \
	VMOVDQU32   Z28, K1, (r)

// func dots8x12VNNI512(v *int8, stride int, q *int8, dlen int, out *int32, groups, gstride, ostride int, corr *int32)
//
// For the 8 rows r at v + r*stride and the groups groups of 12 query
// vectors (group g at q + g*gstride, chunk-major int8, from the span's
// first chunk), adds to out[g*ostride + r*12 + w] the dot product of row
// r and query w of group g over dlen elements less corr[g*12 + w], with
// AVX-512 VNNI: all 12 queries against all 8 rows in 24 accumulators. The
// rows are walked in spans of I8SPAN elements, each read from memory once
// and from the L1 cache by every other group; while the first group runs,
// the 8 rows that follow (if the rows are contiguous, as callers lay them
// out) are fetched ahead, 128 bytes for every chunk. dlen is a positive
// multiple of 16, groups positive.
TEXT ·dots8x12VNNI512(SB), NOSPLIT, $0-72
	VNNIARGS
	LEAQ         (R9)(R11*8), R14
	MOVQ         $0x0fff, CX
	KMOVW        CX, K1
	MOVL         $0x80808080, CX
	VPBROADCASTD CX, Z27
	VMOVDQU32    perm8x12<>(SB), Z30

vspan:
	SPANSTART(I8SPAN)

vgroup:
	ZERO6(VPXORD, Z0, Z1, Z2, Z3, Z4, Z5)
	ZERO6(VPXORD, Z6, Z7, Z8, Z9, Z10, Z11)
	ZERO6(VPXORD, Z12, Z13, Z14, Z15, Z16, Z17)
	ZERO6(VPXORD, Z18, Z19, Z20, Z21, Z22, Z23)
	VGROUPSTART
	CMPQ R8, groups+40(FP)
	JNE  vchunk

vchunkpf:
	PREFETCHT0 (R14)
	PREFETCHT0 64(R14)
	ADDQ       $128, R14
	TILEV
	SUBQ       $16, CX
	JNZ        vchunkpf
	JMP        vreduce

vchunk:
	TILEV
	SUBQ $16, CX
	JNZ  vchunk

vreduce:
	VOUT
	VMOVDQU32.Z (CX), K1, Z26
	REDUCEV(Z0, Z1, Z2, R10)
	ADDQ        $48, R10
	REDUCEV(Z3, Z4, Z5, R10)
	ADDQ        $48, R10
	REDUCEV(Z6, Z7, Z8, R10)
	ADDQ        $48, R10
	REDUCEV(Z9, Z10, Z11, R10)
	ADDQ        $48, R10
	REDUCEV(Z12, Z13, Z14, R10)
	ADDQ        $48, R10
	REDUCEV(Z15, Z16, Z17, R10)
	ADDQ        $48, R10
	REDUCEV(Z18, Z19, Z20, R10)
	ADDQ        $48, R10
	REDUCEV(Z21, Z22, Z23, R10)

	VNEXTGROUP(vgroup, vspan)

	VZEROUPPER
	RET

// VPDPBUSDY(s, u, acc) is VPDPBUSD Ys, Yu, Yacc in its VEX encoding
// (AVX-VNNI), which Go's assembler lacks (it encodes VPDPBUSD only with
// EVEX, which needs AVX-512 VNNI and AVX-512VL): acc += the products of
// the unsigned bytes of Yu with the signed bytes of Ys, 4 summed into each
// int32 lane. s, u and acc are register numbers 0-15. The bytes:
//   C4: three-byte VEX prefix;
//   R'X'B'm-mmmm: the inverted high bits of the ModRM reg (acc) and rm (s)
//     fields, X' = 1, map 0F38 (00010);
//   W vvvv' L pp: W = 0, the inverted number of Yu, L = 1 (256 bits),
//     pp = 01 (a 66 prefix);
//   50: the opcode;
//   ModRM: mod = 11 (registers), reg = acc, rm = s (their low 3 bits).
#define VPDPBUSDY(s, u, acc) \
	BYTE $0xC4 \
	BYTE $(0x42 | (((acc>>3)^1)<<7) | (((s>>3)^1)<<5)) \
	BYTE $(0x05 | ((15-u)<<3)) \
	BYTE $0x50 \
	BYTE $(0xC0 | ((acc&7)<<3) | (s&7))

// perm2x12 puts the sums that REDUCEY leaves in lanes 0, 4, 1, 5, 2, 6,
// 3, 7 in order.
DATA perm2x12<>+0(SB)/4, $0
DATA perm2x12<>+4(SB)/4, $4
DATA perm2x12<>+8(SB)/4, $1
DATA perm2x12<>+12(SB)/4, $5
DATA perm2x12<>+16(SB)/4, $2
DATA perm2x12<>+20(SB)/4, $6
DATA perm2x12<>+24(SB)/4, $3
DATA perm2x12<>+28(SB)/4, $7
GLOBL perm2x12<>(SB), RODATA|NOPTR, $32

// ROWY multiplies one row chunk (16 bytes at addr, broadcast to both
// halves of Y(u) and its top bits flipped by Y15) with query pair j's
// chunks; the pairs are loaded into Y14 by TILEY.
#define ROWY(addr, u) \
	VBROADCASTI128 addr, u \
	VPXOR          Y15, u, u

// PAIRY multiplies the chunks of queries 2j and 2j+1 (32 bytes at off(R10))
// with the two rows in Y12 and Y13, adding to accumulators a (row 0) and b
// (row 1).
#define PAIRY(off, a, b) \
	VMOVDQU off(R10), Y14 \
	VPDPBUSDY(14, 12, a) \
	VPDPBUSDY(14, 13, b)

// TILEY adds one chunk of 16 elements of 2 rows (R12: row 0, R11: the
// stride) times the 12 queries of a group (at R10) to Y0-Y11 (row 0 in
// Y0-Y5, query pair j in Yj, query 2j in its low half), and moves the
// pointers on to the next chunk: 8 loads for 12 VPDPBUSD of 32 products.
#define TILEY \
	ROWY((R12), Y12) \
	ROWY((R12)(R11*1), Y13) \
	PAIRY(0, 0, 6) \
	PAIRY(32, 1, 7) \
	PAIRY(64, 2, 8) \
	PAIRY(96, 3, 9) \
	PAIRY(128, 4, 10) \
	PAIRY(160, 5, 11) \
	ADDQ $16, R12 \
	ADDQ $192, R10

// REDUCEY sums the 4 int32 of each 128-bit lane of one row's accumulators
// a-f (query pair j in the j-th, query 2j in its low lane; ex is e's low
// half), takes off the 12 corrections at (CX), and adds the 12 sums to the 12 int32 at (r),
// with the permutation perm2x12 in Y12 and Y13 as scratch. The horizontal
// adds leave queries 0, 2, 4, 6 in the low lane of a and 1, 3, 5, 7 in its
// high lane, and 8, 10 and 9, 11 in those of e.
#define REDUCEY(a, b, c, d, e, f, ex, r) \
	VPHADDD b, a, a \
	VPHADDD d, c, c \
	VPHADDD f, e, e \
	VPHADDD c, a, a \
	VPHADDD e, e, e \
	VPERMD  a, Y12, a \
	VPERMD  e, Y12, e \
	VPSUBD  (CX), a, a \
	VPSUBD  32(CX), ex, ex \
	VPADDD  (r), a, a \
	VPADDD  32(r), ex, ex \
	VMOVDQU a, (r) \
	VMOVDQU ex, 32(r)

// func dots2x12AVXVNNI(v *int8, stride int, q *int8, dlen int, out *int32, groups, gstride, ostride int, corr *int32)
//
// dots8x12VNNI512 for 2 rows with AVX-VNNI: the same arguments, query
// layout and result, with 12 accumulators of 8 int32 and without
// fetching ahead.
TEXT ·dots2x12AVXVNNI(SB), NOSPLIT, $0-72
	VNNIARGS
	MOVL         $0x80808080, CX
	MOVQ         CX, X15
	VPBROADCASTD X15, Y15

yspan:
	SPANSTART(I8SPAN)

ygroup:
	ZERO6(VPXOR, Y0, Y1, Y2, Y3, Y4, Y5)
	ZERO6(VPXOR, Y6, Y7, Y8, Y9, Y10, Y11)
	VGROUPSTART

ychunk:
	TILEY
	SUBQ $16, CX
	JNZ  ychunk

	VOUT
	VMOVDQU perm2x12<>(SB), Y12
	REDUCEY(Y0, Y1, Y2, Y3, Y4, Y5, X4, R10)
	ADDQ    $48, R10
	REDUCEY(Y6, Y7, Y8, Y9, Y10, Y11, X10, R10)

	VNEXTGROUP(ygroup, yspan)

	VZEROUPPER
	RET
