// Macros the amd64 dot-product kernels share (dots_amd64.s, int8_amd64.s).
// They walk the rows in spans of elements (the span's first element in
// SI, its length in BX, dlen in DX) and, within each span, the groups of
// 12 query vectors (the group's queries at DI, the groups left in R8).

// SPANSTART sets BX to the length of the span that starts at element SI
// (span, or what is left of dlen), DI to the first group of queries and
// R8 to the number of groups.
#define SPANSTART(span) \
	MOVQ DX, BX \
	SUBQ SI, BX \
	CMPQ BX, $span \
	JLE  2(PC) \
	MOVQ $span, BX \
	MOVQ q+16(FP), DI \
	MOVQ groups+40(FP), R8

// LOOPGROUPS jumps to group while groups are left (DI moved on to the
// next group by the caller); then moves SI on to the next span and jumps
// to span while elements are left.
#define LOOPGROUPS(group, span) \
	DECQ R8 \
	JNZ  group \
	ADDQ BX, SI \
	CMPQ SI, DX \
	JNE  span

// ZERO6 clears six registers with the exclusive-or x (VPXOR for Y
// registers, VPXORD for Z registers).
#define ZERO6(x, a, b, c, d, e, f) \
	x a, a, a \
	x b, b, b \
	x c, c, c \
	x d, d, d \
	x e, e, e \
	x f, f, f
