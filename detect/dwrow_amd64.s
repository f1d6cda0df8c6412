//go:build !purego

#include "textflag.h"

// func dwRowFMA(o, x, w *float32, n, C, xstep int)
// for i < n: for j < C: o[i*C+j] += x[i*xstep+j] * w[j]
TEXT ·dwRowFMA(SB), NOSPLIT, $0-48
	MOVQ o+0(FP), DI
	MOVQ x+8(FP), SI
	MOVQ w+16(FP), DX
	MOVQ n+24(FP), R8
	MOVQ C+32(FP), R9
	MOVQ xstep+40(FP), R10
	SHLQ $2, R10            // x stride in bytes
	MOVQ R9, R11
	SHLQ $2, R11            // o stride in bytes

pixel:
	TESTQ R8, R8
	JZ done
	MOVQ DI, AX             // o cursor
	MOVQ SI, BX             // x cursor
	MOVQ DX, R12            // w cursor
	MOVQ R9, CX             // channels left

loop16:
	CMPQ CX, $16
	JL loop8
	VMOVUPS (AX), Y0
	VMOVUPS 32(AX), Y1
	VMOVUPS (BX), Y2
	VMOVUPS 32(BX), Y3
	VFMADD231PS (R12), Y2, Y0
	VFMADD231PS 32(R12), Y3, Y1
	VMOVUPS Y0, (AX)
	VMOVUPS Y1, 32(AX)
	ADDQ $64, AX
	ADDQ $64, BX
	ADDQ $64, R12
	SUBQ $16, CX
	JMP loop16

loop8:
	CMPQ CX, $8
	JL tail
	VMOVUPS (AX), Y0
	VMOVUPS (BX), Y2
	VFMADD231PS (R12), Y2, Y0
	VMOVUPS Y0, (AX)
	ADDQ $32, AX
	ADDQ $32, BX
	ADDQ $32, R12
	SUBQ $8, CX

tail:
	TESTQ CX, CX
	JZ next
	VMOVSS (AX), X0
	VMOVSS (BX), X2
	VFMADD231SS (R12), X2, X0
	VMOVSS X0, (AX)
	ADDQ $4, AX
	ADDQ $4, BX
	ADDQ $4, R12
	DECQ CX
	JMP tail

next:
	ADDQ R11, DI
	ADDQ R10, SI
	DECQ R8
	JMP pixel

done:
	VZEROUPPER
	RET
