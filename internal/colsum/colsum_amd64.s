//go:build !purego

#include "textflag.h"

// func addAVX2(acc *float64, x *float32, rows, n, stride int)
// Columns in blocks of 16 (four accumulators of 4 doubles), then of 4;
// each block reads its columns of every row, rows in order.
TEXT ·addAVX2(SB), NOSPLIT, $0-40
	MOVQ acc+0(FP), DI
	MOVQ x+8(FP), SI
	MOVQ rows+16(FP), R8
	MOVQ n+24(FP), R9
	MOVQ stride+32(FP), R10
	SHLQ $2, R10                 // row stride in bytes
	XORQ R11, R11                // column j

block16:
	MOVQ R9, AX
	SUBQ R11, AX
	CMPQ AX, $16
	JLT  block4
	VMOVUPD (DI)(R11*8), Y0
	VMOVUPD 32(DI)(R11*8), Y1
	VMOVUPD 64(DI)(R11*8), Y2
	VMOVUPD 96(DI)(R11*8), Y3
	LEAQ (SI)(R11*4), BX
	MOVQ R8, CX

loop16:
	VCVTPS2PD (BX), Y4
	VCVTPS2PD 16(BX), Y5
	VCVTPS2PD 32(BX), Y6
	VCVTPS2PD 48(BX), Y7
	VADDPD Y4, Y0, Y0
	VADDPD Y5, Y1, Y1
	VADDPD Y6, Y2, Y2
	VADDPD Y7, Y3, Y3
	ADDQ R10, BX
	DECQ CX
	JNZ  loop16
	VMOVUPD Y0, (DI)(R11*8)
	VMOVUPD Y1, 32(DI)(R11*8)
	VMOVUPD Y2, 64(DI)(R11*8)
	VMOVUPD Y3, 96(DI)(R11*8)
	ADDQ $16, R11
	JMP  block16

block4:
	CMPQ AX, $4
	JLT  done
	VMOVUPD (DI)(R11*8), Y0
	LEAQ (SI)(R11*4), BX
	MOVQ R8, CX

loop4:
	VCVTPS2PD (BX), Y4
	VADDPD Y4, Y0, Y0
	ADDQ R10, BX
	DECQ CX
	JNZ  loop4
	VMOVUPD Y0, (DI)(R11*8)
	ADDQ $4, R11
	MOVQ R9, AX
	SUBQ R11, AX
	JMP  block4

done:
	VZEROUPPER
	RET
