//go:build !purego

#include "textflag.h"

// Constants of the sigmoid: 2^f on [-0.5, 0.5] by Cephes's exp2f
// polynomial, and the clamp that keeps 2^n a normal float.
DATA sigc<>+0(SB)/4, $0xbfb8aa3b  // -log2(e)
DATA sigc<>+4(SB)/4, $0x42fa0000  // 125
DATA sigc<>+8(SB)/4, $0xc2fa0000  // -125
DATA sigc<>+12(SB)/4, $0x3920fdde // 1.535336188319500e-4
DATA sigc<>+16(SB)/4, $0x3aaf9f29 // 1.339887440266574e-3
DATA sigc<>+20(SB)/4, $0x3c1d96a6 // 9.618437357674640e-3
DATA sigc<>+24(SB)/4, $0x3d635774 // 5.550332471162809e-2
DATA sigc<>+28(SB)/4, $0x3e75fdee // 2.402264791363012e-1
DATA sigc<>+32(SB)/4, $0x3f317218 // 6.931472028550421e-1
DATA sigc<>+36(SB)/4, $0x3f800000 // 1
GLOBL sigc<>(SB), RODATA|NOPTR, $40

// func biasActAVX2(dst, src, bias *float32, rows, C, mode int, add, mul float32)
// For r < rows, j < C&^7: v = src[r*C+j] + bias[j]; dst[r*C+j] = act(v), with
// act by mode: 0 none, 1 relu, 2 relu6, 3 hard-swish (mul*v)*min(max(v+add,0),6),
// 4 sigmoid; mode 5 multiplies instead: dst[r*C+j] = src[r*C+j] * bias[j].
// dst may equal src.
TEXT ·biasActAVX2(SB), NOSPLIT, $0-56
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ bias+16(FP), DX
	MOVQ rows+24(FP), R8
	MOVQ C+32(FP), R9
	MOVQ mode+40(FP), R10
	VBROADCASTSS add+48(FP), Y12
	VBROADCASTSS mul+52(FP), Y13
	VXORPS Y14, Y14, Y14
	MOVL $0x40c00000, AX         // 6
	MOVL AX, X15
	VBROADCASTSS X15, Y15
	MOVQ R9, R11
	ANDQ $-8, R11                // columns done here
	MOVQ R9, BX
	SHLQ $2, BX                  // row stride in bytes
	CMPQ R10, $1
	JEQ relurow
	CMPQ R10, $2
	JEQ relu6row
	CMPQ R10, $3
	JEQ hswrow
	CMPQ R10, $4
	JEQ sigrow
	CMPQ R10, $5
	JEQ mulrow

// ROWS runs BODY over the first C&^7 columns of every row, 8 at a time:
// BODY finds src's 8 values in Y0 (the bias or factor at (DX)(CX*4)) and
// leaves in Y0 what is stored to dst. Each mode's copy has its own labels.
#define ROWS(row, col, next, BODY) \
row: \
	TESTQ R8, R8; \
	JZ done; \
	XORQ CX, CX; \
col: \
	CMPQ CX, R11; \
	JGE next; \
	VMOVUPS (SI)(CX*4), Y0; \
	BODY; \
	VMOVUPS Y0, (DI)(CX*4); \
	ADDQ $8, CX; \
	JMP col; \
next: \
	ADDQ BX, SI; \
	ADDQ BX, DI; \
	DECQ R8; \
	JMP row

#define ADDB VADDPS (DX)(CX*4), Y0, Y0
#define NONE ADDB
#define MUL VMULPS (DX)(CX*4), Y0, Y0
#define RELU ADDB; VMAXPS Y14, Y0, Y0
#define RELU6 ADDB; VMAXPS Y14, Y0, Y0; VMINPS Y15, Y0, Y0
// hard-swish: (mul*v) * min(max(v+add, 0), 6)
#define HSWISH ADDB; VADDPS Y12, Y0, Y1; VMAXPS Y14, Y1, Y1; VMINPS Y15, Y1, Y1; VMULPS Y13, Y0, Y0; VMULPS Y1, Y0, Y0
// sigmoid: t = -v log2 e clamped to [-125, 125]; 2^t = 2^f 2^n with
// n = round(t), f = t - n and 2^f by the polynomial; 1 / (1 + 2^t).
#define SIGMOID ADDB; VMULPS Y4, Y0, Y0; VMINPS Y5, Y0, Y0; VMAXPS Y6, Y0, Y0; \
	VROUNDPS $0, Y0, Y1; VSUBPS Y1, Y0, Y0; \
	VBROADCASTSS sigc<>+12(SB), Y2; VBROADCASTSS sigc<>+16(SB), Y3; VFMADD213PS Y3, Y0, Y2; \
	VBROADCASTSS sigc<>+20(SB), Y3; VFMADD213PS Y3, Y0, Y2; \
	VBROADCASTSS sigc<>+24(SB), Y3; VFMADD213PS Y3, Y0, Y2; \
	VBROADCASTSS sigc<>+28(SB), Y3; VFMADD213PS Y3, Y0, Y2; \
	VBROADCASTSS sigc<>+32(SB), Y3; VFMADD213PS Y3, Y0, Y2; \
	VFMADD213PS Y7, Y0, Y2; \
	VCVTPS2DQ Y1, Y1; VPSLLD $23, Y1, Y1; VPADDD Y1, Y2, Y2; \
	VADDPS Y7, Y2, Y2; VDIVPS Y2, Y7, Y0

	ROWS(nonerow, nonecol, nonenext, NONE)
	ROWS(mulrow, mulcol, mulnext, MUL)
	ROWS(relurow, relucol, relunext, RELU)
	ROWS(relu6row, relu6col, relu6next, RELU6)
	ROWS(hswrow, hswcol, hswnext, HSWISH)

sigrow:
	VBROADCASTSS sigc<>+0(SB), Y4   // -log2 e
	VBROADCASTSS sigc<>+4(SB), Y5   // 125
	VBROADCASTSS sigc<>+8(SB), Y6   // -125
	VBROADCASTSS sigc<>+36(SB), Y7  // 1
	ROWS(sigrowloop, sigcol, signext, SIGMOID)

done:
	VZEROUPPER
	RET
