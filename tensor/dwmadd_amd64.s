//go:build !purego

#include "textflag.h"

// func madd4FMA(dst, a0, b0, a1, b1, a2, b2, a3, b3 *float32, n int)
// for i < n: dst[i] += a0[i]*b0[i] + a1[i]*b1[i] + a2[i]*b2[i] + a3[i]*b3[i]
// as four fused multiply-adds in that order; 16 elements a pass in two
// independent chains, then 8, then one at a time.
TEXT ·madd4FMA(SB), NOSPLIT, $0-80
	MOVQ dst+0(FP), DI
	MOVQ a0+8(FP), SI
	MOVQ b0+16(FP), R8
	MOVQ a1+24(FP), R9
	MOVQ b1+32(FP), R10
	MOVQ a2+40(FP), R11
	MOVQ b2+48(FP), R12
	MOVQ a3+56(FP), R13
	MOVQ b3+64(FP), BX
	MOVQ n+72(FP), CX
	XORQ AX, AX             // byte offset

loop16:
	CMPQ CX, $16
	JL   loop8
	VMOVUPS (DI)(AX*1), Y0
	VMOVUPS 32(DI)(AX*1), Y5
	VMOVUPS (SI)(AX*1), Y1
	VMOVUPS 32(SI)(AX*1), Y6
	VFMADD231PS (R8)(AX*1), Y1, Y0
	VFMADD231PS 32(R8)(AX*1), Y6, Y5
	VMOVUPS (R9)(AX*1), Y2
	VMOVUPS 32(R9)(AX*1), Y7
	VFMADD231PS (R10)(AX*1), Y2, Y0
	VFMADD231PS 32(R10)(AX*1), Y7, Y5
	VMOVUPS (R11)(AX*1), Y3
	VMOVUPS 32(R11)(AX*1), Y8
	VFMADD231PS (R12)(AX*1), Y3, Y0
	VFMADD231PS 32(R12)(AX*1), Y8, Y5
	VMOVUPS (R13)(AX*1), Y4
	VMOVUPS 32(R13)(AX*1), Y9
	VFMADD231PS (BX)(AX*1), Y4, Y0
	VFMADD231PS 32(BX)(AX*1), Y9, Y5
	VMOVUPS Y0, (DI)(AX*1)
	VMOVUPS Y5, 32(DI)(AX*1)
	ADDQ $64, AX
	SUBQ $16, CX
	JMP  loop16

loop8:
	CMPQ CX, $8
	JL   tail
	VMOVUPS (DI)(AX*1), Y0
	VMOVUPS (SI)(AX*1), Y1
	VFMADD231PS (R8)(AX*1), Y1, Y0
	VMOVUPS (R9)(AX*1), Y2
	VFMADD231PS (R10)(AX*1), Y2, Y0
	VMOVUPS (R11)(AX*1), Y3
	VFMADD231PS (R12)(AX*1), Y3, Y0
	VMOVUPS (R13)(AX*1), Y4
	VFMADD231PS (BX)(AX*1), Y4, Y0
	VMOVUPS Y0, (DI)(AX*1)
	ADDQ $32, AX
	SUBQ $8, CX

tail:
	TESTQ CX, CX
	JZ    done
	VMOVSS (DI)(AX*1), X0
	VMOVSS (SI)(AX*1), X1
	VFMADD231SS (R8)(AX*1), X1, X0
	VMOVSS (R9)(AX*1), X2
	VFMADD231SS (R10)(AX*1), X2, X0
	VMOVSS (R11)(AX*1), X3
	VFMADD231SS (R12)(AX*1), X3, X0
	VMOVSS (R13)(AX*1), X4
	VFMADD231SS (BX)(AX*1), X4, X0
	VMOVSS X0, (DI)(AX*1)
	ADDQ $4, AX
	DECQ CX
	JMP  tail

done:
	VZEROUPPER
	RET

// func madd1FMA(dst, a, b *float32, n int)
// for i < n: dst[i] += a[i]*b[i], fused.
TEXT ·madd1FMA(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ a+8(FP), SI
	MOVQ b+16(FP), R8
	MOVQ n+24(FP), CX
	XORQ AX, AX

loop32:
	CMPQ CX, $32
	JL   loop8b
	VMOVUPS (DI)(AX*1), Y0
	VMOVUPS 32(DI)(AX*1), Y1
	VMOVUPS 64(DI)(AX*1), Y2
	VMOVUPS 96(DI)(AX*1), Y3
	VMOVUPS (SI)(AX*1), Y4
	VMOVUPS 32(SI)(AX*1), Y5
	VMOVUPS 64(SI)(AX*1), Y6
	VMOVUPS 96(SI)(AX*1), Y7
	VFMADD231PS (R8)(AX*1), Y4, Y0
	VFMADD231PS 32(R8)(AX*1), Y5, Y1
	VFMADD231PS 64(R8)(AX*1), Y6, Y2
	VFMADD231PS 96(R8)(AX*1), Y7, Y3
	VMOVUPS Y0, (DI)(AX*1)
	VMOVUPS Y1, 32(DI)(AX*1)
	VMOVUPS Y2, 64(DI)(AX*1)
	VMOVUPS Y3, 96(DI)(AX*1)
	ADDQ $128, AX
	SUBQ $32, CX
	JMP  loop32

loop8b:
	CMPQ CX, $8
	JL   tailb
	VMOVUPS (DI)(AX*1), Y0
	VMOVUPS (SI)(AX*1), Y4
	VFMADD231PS (R8)(AX*1), Y4, Y0
	VMOVUPS Y0, (DI)(AX*1)
	ADDQ $32, AX
	SUBQ $8, CX
	JMP  loop8b

tailb:
	TESTQ CX, CX
	JZ    doneb
	VMOVSS (DI)(AX*1), X0
	VMOVSS (SI)(AX*1), X4
	VFMADD231SS (R8)(AX*1), X4, X0
	VMOVSS X0, (DI)(AX*1)
	ADDQ $4, AX
	DECQ CX
	JMP  tailb

doneb:
	VZEROUPPER
	RET
