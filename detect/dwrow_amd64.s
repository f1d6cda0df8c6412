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

// func dwInt4FMA(o, x, w *float32, groups, c8, k, xstep, rowstride, C int)
// The depthwise convolution of interior pixels (every tap inside the
// image), 4 output pixels at a time: for each group g < groups, pixel
// p < 4 and channel j < c8 (a multiple of 8),
//   o[(4g+p)*C+j] = sum over ky, kx < k of x[(4g+p)*xstep + ky*rowstride + kx*C + j] * w[(ky*k+kx)*C+j].
TEXT ·dwInt4FMA(SB), NOSPLIT, $0-72
	MOVQ o+0(FP), DI
	MOVQ x+8(FP), SI
	MOVQ w+16(FP), DX
	MOVQ groups+24(FP), R8
	MOVQ xstep+48(FP), R11
	SHLQ $2, R11                 // pixel step of x, bytes
	MOVQ C+64(FP), R13
	SHLQ $2, R13                 // C in bytes: tap step of w and of x
	MOVQ k+40(FP), AX
	IMULQ R13, AX                // k*C bytes
	MOVQ rowstride+56(FP), R12
	SHLQ $2, R12
	SUBQ AX, R12                 // from the end of one row of taps to the next

grp:
	TESTQ R8, R8
	JZ dwdone
	XORQ CX, CX                  // channel j

blk16:
	LEAQ 16(CX), AX
	CMPQ AX, c8+32(FP)
	JGT blk8
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	LEAQ (SI)(CX*4), BX          // pixel 0
	LEAQ (BX)(R11*2), R15
	ADDQ R11, R15                // pixel 3
	LEAQ (DX)(CX*4), R14         // tap 0 of w
	MOVQ k+40(FP), R9
ky16:
	MOVQ k+40(FP), R10
kx16:
	VMOVUPS (R14), Y8
	VMOVUPS 32(R14), Y9
	VFMADD231PS (BX), Y8, Y0
	VFMADD231PS 32(BX), Y9, Y1
	VFMADD231PS (BX)(R11*1), Y8, Y2
	VFMADD231PS 32(BX)(R11*1), Y9, Y3
	VFMADD231PS (BX)(R11*2), Y8, Y4
	VFMADD231PS 32(BX)(R11*2), Y9, Y5
	VFMADD231PS (R15), Y8, Y6
	VFMADD231PS 32(R15), Y9, Y7
	ADDQ R13, BX
	ADDQ R13, R15
	ADDQ R13, R14
	DECQ R10
	JNZ kx16
	ADDQ R12, BX
	ADDQ R12, R15
	DECQ R9
	JNZ ky16
	LEAQ (DI)(CX*4), AX
	VMOVUPS Y0, (AX)
	VMOVUPS Y1, 32(AX)
	VMOVUPS Y2, (AX)(R13*1)
	VMOVUPS Y3, 32(AX)(R13*1)
	VMOVUPS Y4, (AX)(R13*2)
	VMOVUPS Y5, 32(AX)(R13*2)
	LEAQ (AX)(R13*2), AX
	ADDQ R13, AX
	VMOVUPS Y6, (AX)
	VMOVUPS Y7, 32(AX)
	ADDQ $16, CX
	JMP blk16

blk8:
	LEAQ 8(CX), AX
	CMPQ AX, c8+32(FP)
	JGT grpnext
	VXORPS Y0, Y0, Y0
	VXORPS Y2, Y2, Y2
	VXORPS Y4, Y4, Y4
	VXORPS Y6, Y6, Y6
	LEAQ (SI)(CX*4), BX
	LEAQ (BX)(R11*2), R15
	ADDQ R11, R15
	LEAQ (DX)(CX*4), R14
	MOVQ k+40(FP), R9
ky8:
	MOVQ k+40(FP), R10
kx8:
	VMOVUPS (R14), Y8
	VFMADD231PS (BX), Y8, Y0
	VFMADD231PS (BX)(R11*1), Y8, Y2
	VFMADD231PS (BX)(R11*2), Y8, Y4
	VFMADD231PS (R15), Y8, Y6
	ADDQ R13, BX
	ADDQ R13, R15
	ADDQ R13, R14
	DECQ R10
	JNZ kx8
	ADDQ R12, BX
	ADDQ R12, R15
	DECQ R9
	JNZ ky8
	LEAQ (DI)(CX*4), AX
	VMOVUPS Y0, (AX)
	VMOVUPS Y2, (AX)(R13*1)
	VMOVUPS Y4, (AX)(R13*2)
	LEAQ (AX)(R13*2), AX
	ADDQ R13, AX
	VMOVUPS Y6, (AX)
	ADDQ $8, CX
	JMP blk8

grpnext:
	LEAQ (DI)(R13*4), DI
	LEAQ (SI)(R11*4), SI
	DECQ R8
	JMP grp

dwdone:
	VZEROUPPER
	RET
