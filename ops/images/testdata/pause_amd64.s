# The pause program of package images (PauseProgram("amd64")) as
# assembler source: TestPauseProgramAssembles assembles it with llvm-mc and
# compares the bytes with pause.go's.
	.text
	.globl _start
_start:
	mov $14, %eax
	xor %edi, %edi
	lea set(%rip), %rsi
	xor %edx, %edx
	mov $8, %r10d
	syscall
	mov $157, %eax
	mov $36, %edi
	mov $1, %esi
	syscall
wait:
	mov $128, %eax
	lea set(%rip), %rdi
	xor %esi, %esi
	xor %edx, %edx
	mov $8, %r10d
	syscall
	cmp $17, %eax
	je reap
	test %eax, %eax
	js wait
	mov $231, %eax
	xor %edi, %edi
	syscall
reap:
	mov $61, %eax
	mov $-1, %rdi
	xor %esi, %esi
	mov $1, %edx
	xor %r10d, %r10d
	syscall
	test %eax, %eax
	jg reap
	jmp wait
	.p2align 3
set:
	.quad (1<<(2-1)) | (1<<(15-1)) | (1<<(17-1))
