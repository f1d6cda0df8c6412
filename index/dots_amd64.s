//go:build !purego

#include "textflag.h"
#include "kernels_amd64.h"

// TILEARGS loads the arguments that dots4x12fAVX2 and dots4x12fAVX512
// share: R9 the rows, R11 their stride in bytes, DX dlen, SI = 0 the
// span's first element, R14 the rows after these 4 (to fetch ahead).
#define TILEARGS \
	MOVQ v+0(FP), R9 \
	MOVQ stride+8(FP), R11 \
	SHLQ $2, R11 \
	MOVQ dlen+24(FP), DX \
	XORQ SI, SI \
	LEAQ (R9)(R11*4), R14

// NEXTGROUP moves DI on to the next group of queries, then loops
// (LOOPGROUPS).
#define NEXTGROUP(group, span) \
	MOVQ gstride+48(FP), CX \
	SHLQ $2, CX \
	ADDQ CX, DI \
	LOOPGROUPS(group, span)

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

// ZERO4F clears four vector registers.
#define ZERO4F(a, b, c, d) \
	VXORPS a, a, a \
	VXORPS b, b, b \
	VXORPS c, c, c \
	VXORPS d, d, d

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
	ZERO4F(Y4, Y5, Y6, Y7)
	ZERO4F(Y8, Y9, Y10, Y11)
	ZERO4F(Y12, Y13, Y14, Y15)
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

// TILESPAN is the span of elements dots4x12fAVX2 scores before reducing
// its accumulators: 4 rows of it (16 KiB) stay in the L1 cache while the
// queries stream past. 1,024 ran 8-9% faster than 256 on the float32
// search benchmarks (BenchmarkScoreFloats, Zen 1, 2026-11-24).
#define TILESPAN 1024

// HSUM3 reduces accumulators a, b, c (8 float32 each) to their 3 sums
// and adds them to the 3 float32 at (r), with Y12-Y14 as scratch.
#define HSUM3(a, b, c, r) \
	VHADDPS      b, a, Y12 \
	VHADDPS      c, c, Y13 \
	VHADDPS      Y13, Y12, Y12 \
	VEXTRACTF128 $1, Y12, X13 \
	VADDPS       X13, X12, X12 \
	VMOVSD       (r), X13 \
	VMOVSS       8(r), X14 \
	VMOVLHPS     X14, X13, X13 \
	VADDPS       X13, X12, X12 \
	VMOVSD       X12, (r) \
	VEXTRACTPS   $2, X12, 8(r)

// ROW4 multiplies the 8 floats at addr (one chunk of one row) with the
// three query chunks in Y12-Y14 and adds them to accumulators a, b, c.
#define ROW4(addr, a, b, c) \
	VMOVUPS     addr, Y15 \
	VFMADD231PS Y12, Y15, a \
	VFMADD231PS Y13, Y15, b \
	VFMADD231PS Y14, Y15, c

// TILE adds one chunk of 8 elements of 4 rows (R12: row 0, R13: row 1,
// R11: the stride) times 3 query vectors (at R10) to Y0-Y11, and moves the
// pointers on to the next chunk.
#define TILE \
	VMOVUPS 0(R10), Y12 \
	VMOVUPS 32(R10), Y13 \
	VMOVUPS 64(R10), Y14 \
	ROW4((R12), Y0, Y1, Y2) \
	ROW4((R12)(R11*1), Y3, Y4, Y5) \
	ROW4((R12)(R11*2), Y6, Y7, Y8) \
	ROW4((R13)(R11*2), Y9, Y10, Y11) \
	ADDQ    $32, R12 \
	ADDQ    $32, R13 \
	ADDQ    $384, R10

// func dots4x12fAVX2(v *float32, stride int, q *float32, dlen int, out *float32, groups, gstride, ostride, rstride int)
//
// The register-tiled form of dots12fAVX2 for 4 rows and groups groups of
// 12 queries (each packed as for dots12fAVX2, gstride floats apart): for
// r < 4, group g and its queries w, it adds the dot product of row r (at
// v[r*stride]) and query w over dlen elements to
// out[g*ostride + r*rstride + w]. Each
// chunk of 8 elements loads 3 query chunks and 4 row chunks for 12 FMAs
// (dots12fAVX2 loads 13 for 12). The rows are walked in spans of TILESPAN
// elements, each read from memory once and from the L1 cache by every
// other triple of queries; while the first group runs, the 4 rows that
// follow these (if the rows are contiguous, as callers lay them out) are
// fetched ahead, 32 bytes further for every chunk. dlen is a positive
// multiple of 8, groups positive.
TEXT ·dots4x12fAVX2(SB), NOSPLIT, $0-72
	TILEARGS

tspan:
	SPANSTART(TILESPAN)

tgroup:
	XORQ AX, AX

ttriple:
	ZERO4F(Y0, Y1, Y2, Y3)
	ZERO4F(Y4, Y5, Y6, Y7)
	ZERO4F(Y8, Y9, Y10, Y11)
	LEAQ (SI)(SI*2), R10
	SHLQ $4, R10
	ADDQ DI, R10
	ADDQ AX, R10
	LEAQ (R9)(SI*4), R12
	LEAQ (R12)(R11*1), R13
	MOVQ BX, CX
	CMPQ R8, groups+40(FP)
	JNE  tchunk

tchunkpf:
	PREFETCHT0 (R14)
	ADDQ       $32, R14
	TILE
	SUBQ       $8, CX
	JNZ        tchunkpf
	JMP        treduce

tchunk:
	TILE
	SUBQ $8, CX
	JNZ  tchunk

treduce:
	MOVQ  groups+40(FP), R10
	SUBQ  R8, R10
	IMULQ ostride+56(FP), R10
	SHLQ  $2, R10
	MOVQ  AX, CX
	SHRQ  $3, CX
	ADDQ  CX, R10
	ADDQ  out+32(FP), R10
	MOVQ  rstride+64(FP), CX
	SHLQ  $2, CX
	LEAQ  (R10)(CX*1), R12
	LEAQ  (R12)(CX*1), R13
	HSUM3(Y0, Y1, Y2, R10)
	HSUM3(Y3, Y4, Y5, R12)
	HSUM3(Y6, Y7, Y8, R13)
	ADDQ  CX, R13
	HSUM3(Y9, Y10, Y11, R13)
	ADDQ $96, AX
	CMPQ AX, $384
	JNE  ttriple

	NEXTGROUP(tgroup, tspan)

	VZEROUPPER
	RET

// perm512 puts the 12 sums that REDUCE512 leaves at 4*(w%4) + w/4 into
// query order w = 0..11.
DATA perm512<>+0(SB)/4, $0
DATA perm512<>+4(SB)/4, $4
DATA perm512<>+8(SB)/4, $8
DATA perm512<>+12(SB)/4, $12
DATA perm512<>+16(SB)/4, $1
DATA perm512<>+20(SB)/4, $5
DATA perm512<>+24(SB)/4, $9
DATA perm512<>+28(SB)/4, $13
DATA perm512<>+32(SB)/4, $2
DATA perm512<>+36(SB)/4, $6
DATA perm512<>+40(SB)/4, $10
DATA perm512<>+44(SB)/4, $14
DATA perm512<>+48(SB)/4, $0
DATA perm512<>+52(SB)/4, $0
DATA perm512<>+56(SB)/4, $0
DATA perm512<>+60(SB)/4, $0
GLOBL perm512<>(SB), RODATA|NOPTR, $64

// ROW512 multiplies the query pair in Z28 (queries 2j and 2j+1, 8
// elements each) with the four broadcast row chunks in Z24-Z27 and adds
// them to accumulators a, b, c, d (one per row).
#define ROW512(a, b, c, d) \
	VFMADD231PS Z28, Z24, a \
	VFMADD231PS Z28, Z25, b \
	VFMADD231PS Z28, Z26, c \
	VFMADD231PS Z28, Z27, d

// TILE512 adds one chunk of 8 elements of 4 rows (R12: row 0, R13: row 1,
// R11: the stride) times the 12 queries of a group (at R10) to Z0-Z23:
// row r's products with queries 2j, 2j+1 go to Z(6r+j), query 2j in the
// low 8 lanes. Each row chunk is broadcast to both halves of a register,
// and one 64-byte load brings two queries' chunks, so 10 loads feed 24
// FMAs of 16 lanes.
#define TILE512 \
	VBROADCASTF64X4 (R12), Z24 \
	VBROADCASTF64X4 (R12)(R11*1), Z25 \
	VBROADCASTF64X4 (R12)(R11*2), Z26 \
	VBROADCASTF64X4 (R13)(R11*2), Z27 \
	VMOVUPS         0(R10), Z28 \
	ROW512(Z0, Z6, Z12, Z18) \
	VMOVUPS         64(R10), Z28 \
	ROW512(Z1, Z7, Z13, Z19) \
	VMOVUPS         128(R10), Z28 \
	ROW512(Z2, Z8, Z14, Z20) \
	VMOVUPS         192(R10), Z28 \
	ROW512(Z3, Z9, Z15, Z21) \
	VMOVUPS         256(R10), Z28 \
	ROW512(Z4, Z10, Z16, Z22) \
	VMOVUPS         320(R10), Z28 \
	ROW512(Z5, Z11, Z17, Z23) \
	ADDQ            $32, R12 \
	ADDQ            $32, R13 \
	ADDQ            $384, R10

// REDUCE512 sums the 8 lanes of each query in one row's accumulators
// a..f (laid out as TILE512 leaves them) and adds the 12 sums to the 12
// float32 at (r), with Z24-Z30 as scratch, the permutation perm512 in Z31
// and the mask of 12 lanes in K1.
//   - Z24..Z26: 128-bit lane l of S_i holds 4 partial sums of query 4i+l
//     (the two 128-bit halves of each query's 8 lanes added).
//   - the 4x4 transposes within 128-bit lanes then leave, in lane l of
//     Z29, the sums of queries l, 4+l and 8+l in its first three floats.
#define REDUCE512(a, b, c, d, e, f, r) \
	VSHUFF32X4 $0x88, b, a, Z24 \
	VSHUFF32X4 $0xDD, b, a, Z27 \
	VADDPS     Z27, Z24, Z24 \
	VSHUFF32X4 $0x88, d, c, Z25 \
	VSHUFF32X4 $0xDD, d, c, Z27 \
	VADDPS     Z27, Z25, Z25 \
	VSHUFF32X4 $0x88, f, e, Z26 \
	VSHUFF32X4 $0xDD, f, e, Z27 \
	VADDPS     Z27, Z26, Z26 \
	VUNPCKLPS  Z25, Z24, Z27 \
	VUNPCKHPS  Z25, Z24, Z28 \
	VADDPS     Z28, Z27, Z27 \
	VUNPCKLPS  Z26, Z26, Z28 \
	VUNPCKHPS  Z26, Z26, Z29 \
	VADDPS     Z29, Z28, Z28 \
	VUNPCKLPD  Z28, Z27, Z29 \
	VUNPCKHPD  Z28, Z27, Z30 \
	VADDPS     Z30, Z29, Z29 \
	VPERMPS    Z29, Z31, Z29 \
	VMOVUPS.Z  (r), K1, Z30 \
	VADDPS     Z30, Z29, Z29 \
	VMOVUPS    Z29, K1, (r)

// func dots4x12fAVX512(v *float32, stride int, q *float32, dlen int, out *float32, groups, gstride, ostride, rstride int)
//
// dots4x12fAVX2 with AVX-512: the same arguments, query packing and
// result, with all 12 queries of a group in 24 accumulators at once
// (TILE512). The rows are walked in spans of TILESPAN elements, read from
// memory once and from the L1 cache by every other group; while the
// first group runs, the 4 rows that follow are fetched ahead, 128 bytes
// for every chunk (dots4x12fAVX2 fetches 32 in each of its 4 passes).
TEXT ·dots4x12fAVX512(SB), NOSPLIT, $0-72
	TILEARGS
	MOVQ  $0x0fff, AX
	KMOVW AX, K1

zspan:
	SPANSTART(TILESPAN)

zgroup:
	ZERO6(VPXORD, Z0, Z1, Z2, Z3, Z4, Z5)
	ZERO6(VPXORD, Z6, Z7, Z8, Z9, Z10, Z11)
	ZERO6(VPXORD, Z12, Z13, Z14, Z15, Z16, Z17)
	ZERO6(VPXORD, Z18, Z19, Z20, Z21, Z22, Z23)
	LEAQ (SI)(SI*2), R10
	SHLQ $4, R10
	ADDQ DI, R10
	LEAQ (R9)(SI*4), R12
	LEAQ (R12)(R11*1), R13
	MOVQ BX, CX
	CMPQ R8, groups+40(FP)
	JNE  zchunk

zchunkpf:
	PREFETCHT0 (R14)
	PREFETCHT0 64(R14)
	ADDQ       $128, R14
	TILE512
	SUBQ       $8, CX
	JNZ        zchunkpf
	JMP        zreduce

zchunk:
	TILE512
	SUBQ $8, CX
	JNZ  zchunk

zreduce:
	MOVQ    groups+40(FP), R10
	SUBQ    R8, R10
	IMULQ   ostride+56(FP), R10
	SHLQ    $2, R10
	ADDQ    out+32(FP), R10
	MOVQ    rstride+64(FP), CX
	SHLQ    $2, CX
	VMOVUPS perm512<>(SB), Z31
	REDUCE512(Z0, Z1, Z2, Z3, Z4, Z5, R10)
	ADDQ    CX, R10
	REDUCE512(Z6, Z7, Z8, Z9, Z10, Z11, R10)
	ADDQ    CX, R10
	REDUCE512(Z12, Z13, Z14, Z15, Z16, Z17, R10)
	ADDQ    CX, R10
	REDUCE512(Z18, Z19, Z20, Z21, Z22, Z23, R10)

	NEXTGROUP(zgroup, zspan)

	VZEROUPPER
	RET
