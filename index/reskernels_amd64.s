//go:build !purego

#include "textflag.h"

// neginf is eight float32 -Inf: the accumulators' start.
DATA neginf<>+0(SB)/8, $0xff800000ff800000
DATA neginf<>+8(SB)/8, $0xff800000ff800000
DATA neginf<>+16(SB)/8, $0xff800000ff800000
DATA neginf<>+24(SB)/8, $0xff800000ff800000
GLOBL neginf<>(SB), RODATA|NOPTR, $32

// func interactAVX2(rows *int32, n int, offsets *int, cellOf *uint16, alphas *int8, t *float32, stride, nq int, alpha *float32, best *float32, out *float32)
//
// For each k < n, with i = rows[k] and its vectors x in
// [offsets[i], offsets[i+1]): out[k] = the sum, for query vector j from 0
// to nq-1 in order, of the max over x of alpha[128+alphas[x]] *
// t[cellOf[x]*stride+j] (0 for an item without vectors). stride is a
// positive multiple of 8, at least nq, and t's rows are stride apart;
// best has stride floats of scratch. The maxima are those of Go's
// "if v > best" (the first of equals kept), and the sums add in order
// from 0, so the result equals interactGo's bit for bit.
//
// Each item's offsets are fetched 8 items ahead, its cell ids and cosines
// 4 ahead: an item's vectors lie anywhere in a segment of gigabytes.
TEXT ·interactAVX2(SB), NOSPLIT, $0-88
	MOVQ rows+0(FP), SI
	MOVQ offsets+16(FP), DX
	MOVQ cellOf+24(FP), R8
	MOVQ alphas+32(FP), R9
	MOVQ t+40(FP), R10
	MOVQ stride+48(FP), R11
	SHLQ $2, R11               // a row of t in bytes
	MOVQ alpha+64(FP), R13
	MOVQ best+72(FP), R14
	XORQ BX, BX                // k

item:
	CMPQ BX, n+8(FP)
	JGE  done
	LEAQ 8(BX), AX
	CMPQ AX, n+8(FP)
	JGE  near
	MOVLQSX    (SI)(AX*4), AX
	PREFETCHT0 (DX)(AX*8)

near:
	LEAQ 4(BX), AX
	CMPQ AX, n+8(FP)
	JGE  this
	MOVLQSX    (SI)(AX*4), AX
	MOVQ       (DX)(AX*8), AX
	PREFETCHT0 (R8)(AX*2)
	PREFETCHT0 64(R8)(AX*2)
	PREFETCHT0 (R9)(AX*1)
	PREFETCHT0 48(R9)(AX*1)

this:
	MOVLQSX (SI)(BX*4), AX
	MOVQ    (DX)(AX*8), CX
	CMPQ    CX, 8(DX)(AX*8)
	JNE     chunks
	MOVQ    out+80(FP), AX
	MOVL    $0, (AX)(BX*4)
	INCQ    BX
	JMP     item

chunks:
	XORQ R12, R12              // the chunk's byte offset in a row

chunk:
	MOVLQSX (SI)(BX*4), AX
	MOVQ    (DX)(AX*8), R15    // x
	MOVQ    8(DX)(AX*8), DI    // the item's end
	VMOVUPS neginf<>(SB), Y2

vector:
	MOVWQZX      (R8)(R15*2), AX
	IMULQ        R11, AX
	ADDQ         R10, AX
	MOVBQSX      (R9)(R15*1), CX
	VBROADCASTSS 512(R13)(CX*4), Y0
	VMULPS       (AX)(R12*1), Y0, Y1
	VMAXPS       Y2, Y1, Y2    // Y1 > Y2 ? Y1 : Y2, per lane
	INCQ         R15
	CMPQ         R15, DI
	JLT          vector
	VMOVUPS      Y2, (R14)(R12*1)
	ADDQ         $32, R12
	CMPQ         R12, R11
	JLT          chunk

	MOVQ   nq+56(FP), CX
	VXORPS X0, X0, X0
	XORQ   AX, AX

sum:
	VADDSS (R14)(AX*4), X0, X0
	INCQ   AX
	CMPQ   AX, CX
	JLT    sum
	MOVQ   out+80(FP), AX
	VMOVSS X0, (AX)(BX*4)
	INCQ   BX
	JMP    item

done:
	VZEROUPPER
	RET

// func prefetchLines(p unsafe.Pointer, n int)
//
// Asks for the n bytes at p (n > 0) to be brought into the caches, a
// cache line at a time; it reads nothing itself and cannot fault.
TEXT ·prefetchLines(SB), NOSPLIT, $0-16
	MOVQ p+0(FP), SI
	MOVQ n+8(FP), CX
	LEAQ -1(SI)(CX*1), CX      // the last byte
	ANDQ $-64, SI

line:
	PREFETCHT0 (SI)
	ADDQ       $64, SI
	CMPQ       SI, CX
	JLE        line
	RET

// func exactAddAVX2(codes *byte, m int, tab *float32, stride int, acc *float32)
//
// For s from 0 to m-1 in order, adds row 16s+codes[s] of tab (rows of
// stride floats, stride a positive multiple of 8) to acc (stride floats):
// the sums of resScratch.exact, lane by lane in the same order as
// exactAddGo's, so equal to them bit for bit. Two 8-float chunks at a
// time, each its own chain of additions.
TEXT ·exactAddAVX2(SB), NOSPLIT, $0-40
	MOVQ codes+0(FP), SI
	MOVQ m+8(FP), CX
	MOVQ tab+16(FP), DX
	MOVQ stride+24(FP), R8
	MOVQ acc+32(FP), DI
	SHLQ $2, R8                // a row in bytes
	MOVQ R8, R9
	SHLQ $4, R9                // a subspace's 16 rows in bytes
	XORQ R10, R10              // the chunk's byte offset

pair:
	LEAQ 64(R10), AX
	CMPQ AX, R8
	JGT  single
	VMOVUPS (DI)(R10*1), Y0
	VMOVUPS 32(DI)(R10*1), Y1
	MOVQ    DX, R11
	XORQ    BX, BX

pairsub:
	MOVBQZX (SI)(BX*1), AX
	IMULQ   R8, AX
	ADDQ    R11, AX
	VADDPS  (AX)(R10*1), Y0, Y0
	VADDPS  32(AX)(R10*1), Y1, Y1
	ADDQ    R9, R11
	INCQ    BX
	CMPQ    BX, CX
	JLT     pairsub
	VMOVUPS Y0, (DI)(R10*1)
	VMOVUPS Y1, 32(DI)(R10*1)
	ADDQ    $64, R10
	JMP     pair

single:
	CMPQ    R10, R8
	JGE     finished
	VMOVUPS (DI)(R10*1), Y0
	MOVQ    DX, R11
	XORQ    BX, BX

singlesub:
	MOVBQZX (SI)(BX*1), AX
	IMULQ   R8, AX
	ADDQ    R11, AX
	VADDPS  (AX)(R10*1), Y0, Y0
	ADDQ    R9, R11
	INCQ    BX
	CMPQ    BX, CX
	JLT     singlesub
	VMOVUPS Y0, (DI)(R10*1)

finished:
	VZEROUPPER
	RET

// func scoreTextAVX2(sims *float32, nq int, sums *uint16, pairStride, base int, offsets *int, n, v0 int, scale, bias, out *float32)
//
// The text-query MrSw scores of n items from fast-scan sums (see
// resScratch.score): item k's vectors are rows r in [offsets[k]-v0,
// offsets[k+1]-v0) of sims (rows of nq floats), vector r being number
// x = r+base of the blocks whose sums for query vectors 2p and 2p+1 start
// pairStride bytes apart (the first's at +0, the second's at +64 bytes
// of each block's 128). out[k] = the sum over query vectors j in order of
// (the max over r of sims[r*nq+j] + scale[j]*sum(j, x)) + bias[j]; 0 for
// an item without vectors. The operations, and their order, are
// scoreTextGo's, so the result equals it bit for bit.
TEXT ·scoreTextAVX2(SB), NOSPLIT, $0-88
	MOVQ sims+0(FP), R8
	MOVQ nq+8(FP), R9
	MOVQ sums+16(FP), R10
	MOVQ pairStride+24(FP), R11
	MOVQ base+32(FP), R12
	MOVQ offsets+40(FP), R13
	XORQ CX, CX                // k

titem:
	CMPQ CX, n+48(FP)
	JGE  tdone
	MOVQ 8(R13)(CX*8), DI
	SUBQ v0+56(FP), DI         // r1
	MOVQ (R13)(CX*8), AX
	SUBQ v0+56(FP), AX         // r0
	VXORPS X0, X0, X0          // the item's total
	CMPQ AX, DI
	JEQ  tstore
	XORQ BX, BX                // j

tword:
	MOVQ  BX, SI
	SHRQ  $1, SI
	IMULQ R11, SI
	ADDQ  R10, SI
	MOVQ  BX, AX
	ANDQ  $1, AX
	SHLQ  $6, AX
	ADDQ  AX, SI               // query vector j's sums
	MOVQ  scale+64(FP), AX
	VMOVSS (AX)(BX*4), X2
	VMOVSS neginf<>(SB), X1    // best
	MOVQ  (R13)(CX*8), R14
	SUBQ  v0+56(FP), R14       // r

tvec:
	LEAQ      (R14)(R12*1), R15  // x
	MOVQ      R15, AX
	SHRQ      $5, AX
	SHLQ      $7, AX             // the block's 128 bytes
	ANDQ      $31, R15
	LEAQ      (AX)(R15*2), AX
	MOVWLZX   (SI)(AX*1), AX
	VCVTSI2SSL AX, X3, X3
	VMULSS    X2, X3, X3         // scale * sum
	MOVQ      R14, AX
	IMULQ     R9, AX
	ADDQ      BX, AX
	VADDSS    (R8)(AX*4), X3, X3 // + sims
	VMAXSS    X1, X3, X1         // X3 > X1 ? X3 : X1
	INCQ      R14
	CMPQ      R14, DI
	JLT       tvec
	MOVQ      bias+72(FP), AX
	VADDSS    (AX)(BX*4), X1, X1
	VADDSS    X1, X0, X0
	INCQ      BX
	CMPQ      BX, R9
	JLT       tword

tstore:
	MOVQ   out+80(FP), AX
	VMOVSS X0, (AX)(CX*4)
	INCQ   CX
	JMP    titem

tdone:
	RET
