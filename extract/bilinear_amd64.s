//go:build !purego

#include "textflag.h"

// func bilinearAVX2(acc, p00, p01, p10, p11 *float32, w *[4]float32, n int)
// Eight channels at a time: VMULPS and VADDPS, no fused multiply-add, so
// each value rounds as the scalar loop's.
TEXT ·bilinearAVX2(SB), NOSPLIT, $0-56
	MOVQ acc+0(FP), DI
	MOVQ p00+8(FP), SI
	MOVQ p01+16(FP), R8
	MOVQ p10+24(FP), R9
	MOVQ p11+32(FP), R10
	MOVQ w+40(FP), AX
	MOVQ n+48(FP), CX
	VBROADCASTSS 0(AX), Y8
	VBROADCASTSS 4(AX), Y9
	VBROADCASTSS 8(AX), Y10
	VBROADCASTSS 12(AX), Y11
	XORQ BX, BX

loop:
	CMPQ BX, CX
	JGE  done
	VMULPS (SI)(BX*4), Y8, Y0
	VMULPS (R8)(BX*4), Y9, Y1
	VMULPS (R9)(BX*4), Y10, Y2
	VMULPS (R10)(BX*4), Y11, Y3
	VADDPS Y1, Y0, Y0
	VADDPS Y2, Y0, Y0
	VADDPS Y3, Y0, Y0
	VADDPS (DI)(BX*4), Y0, Y0
	VMOVUPS Y0, (DI)(BX*4)
	ADDQ $8, BX
	JMP  loop

done:
	VZEROUPPER
	RET
