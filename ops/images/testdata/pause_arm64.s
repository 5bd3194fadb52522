// The pause program of package images (PauseProgram("arm64")) as
// assembler source: TestPauseProgramAssembles assembles it with llvm-mc and
// compares the bytes with pause.go's.
	.text
	.globl _start
_start:
	mov x8, #135
	mov x0, #0
	adr x1, set
	mov x2, #0
	mov x3, #8
	svc #0
	mov x8, #167
	mov x0, #36
	mov x1, #1
	svc #0
wait:
	mov x8, #137
	adr x0, set
	mov x1, #0
	mov x2, #0
	mov x3, #8
	svc #0
	cmp x0, #17
	b.eq reap
	tbnz x0, #63, wait
	mov x8, #94
	mov x0, #0
	svc #0
reap:
	mov x8, #260
	mov x0, #-1
	mov x1, #0
	mov x2, #1
	mov x3, #0
	svc #0
	cmp x0, #0
	b.gt reap
	b wait
	.p2align 3
set:
	.quad (1<<(2-1)) | (1<<(15-1)) | (1<<(17-1))
