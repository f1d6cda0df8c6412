//go:build !purego

#include "textflag.h"

// func adamAVX2(p, grad, m, v *float32, n int, c *adamConsts, mode int, zero bool)
// The Adam update of adamKernelGo, 8 elements at a time, for n a multiple
// of 8, with the same float32 operations in the same order (no fused
// multiply-add), so that the results are bit for bit those of the Go loop.
// mode: 0 plain, 1 Adam's L2 term (g += l2*x), 2 AdamW's decay (x *= decayMul).
TEXT ·adamAVX2(SB), NOSPLIT, $0-57
	MOVQ p+0(FP), DI
	MOVQ grad+8(FP), SI
	MOVQ m+16(FP), R8
	MOVQ v+24(FP), R9
	MOVQ n+32(FP), CX
	MOVQ c+40(FP), AX
	MOVQ mode+48(FP), R10
	MOVBLZX zero+56(FP), R11
	VBROADCASTSS 0(AX), Y8    // scale
	VBROADCASTSS 4(AX), Y9    // beta1
	VBROADCASTSS 8(AX), Y10   // beta2
	VBROADCASTSS 12(AX), Y11  // 1-beta1
	VBROADCASTSS 16(AX), Y12  // 1-beta2
	VBROADCASTSS 20(AX), Y13  // eps
	VBROADCASTSS 24(AX), Y14  // stepSize
	VBROADCASTSS 28(AX), Y15  // bc2Sqrt
	VBROADCASTSS 32(AX), Y7   // l2 or decayMul
	VXORPS Y6, Y6, Y6
	XORQ BX, BX

loop:
	CMPQ BX, CX
	JGE done
	VMOVUPS (SI)(BX*4), Y0      // g
	VMULPS Y8, Y0, Y0           // g *= scale
	TESTQ R11, R11
	JZ nozero
	VMOVUPS Y6, (SI)(BX*4)
nozero:
	VMOVUPS (DI)(BX*4), Y1      // x
	CMPQ R10, $1
	JNE notl2
	VMULPS Y1, Y7, Y2           // l2*x
	VADDPS Y2, Y0, Y0           // g += l2*x
	JMP moments
notl2:
	CMPQ R10, $2
	JNE moments
	VMULPS Y7, Y1, Y1           // x *= decayMul
moments:
	VMULPS (R8)(BX*4), Y9, Y2   // m*beta1
	VMULPS Y0, Y11, Y3          // (1-beta1)*g
	VADDPS Y3, Y2, Y2           // mi
	VMULPS (R9)(BX*4), Y10, Y3  // v*beta2
	VMULPS Y0, Y12, Y4          // (1-beta2)*g
	VMULPS Y0, Y4, Y4           // *g
	VADDPS Y4, Y3, Y3           // vi
	VMOVUPS Y2, (R8)(BX*4)
	VMOVUPS Y3, (R9)(BX*4)
	VSQRTPS Y3, Y4
	VDIVPS Y15, Y4, Y4          // sqrt(vi)/bc2Sqrt
	VADDPS Y13, Y4, Y4          // + eps
	VDIVPS Y4, Y2, Y2           // mi/denom
	VMULPS Y2, Y14, Y2          // stepSize*(mi/denom)
	VSUBPS Y2, Y1, Y1           // x - ...
	VMOVUPS Y1, (DI)(BX*4)
	ADDQ $8, BX
	JMP loop

done:
	VZEROUPPER
	RET
