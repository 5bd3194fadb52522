package images

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"runtime"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// ErrNoPause means there is no built-in pause program for the architecture
// (there is one for amd64 and arm64); set Options.PauseBinary.
var ErrNoPause = errors.New("images: no built-in pause program for this architecture")

func (o Options) pause() (v1.Image, error) {
	var data []byte
	if o.PauseBinary != "" {
		b, err := os.ReadFile(o.PauseBinary)
		if err != nil {
			return nil, fmt.Errorf("images: read pause: %w", err)
		}
		data = b
	} else {
		b, err := PauseProgram(runtime.GOARCH)
		if err != nil {
			return nil, err
		}
		data = b
	}
	// The mount points every OCI runtime mounts over (proc, sysfs, a tmpfs
	// at /dev) are in the image, as in any normal root filesystem: without
	// them the runtime makes them in each sandbox's writable layer, on disk,
	// for every pod.
	return newImage([]entry{
		fileEntry("pause", 0o755, data),
		dirEntry("dev", 0o755),
		dirEntry("proc", 0o555),
		dirEntry("sys", 0o555),
	}, v1.Config{
		Entrypoint: []string{"/pause"},
		User:       "65535:65535",
		WorkingDir: "/",
	}, "cairn ops/images: pause")
}

// PauseProgram returns the sandbox process of every cairn pod as a static
// Linux ELF executable for goarch ("amd64" or "arm64"), a few hundred
// bytes written here rather than compiled, so that a cairn binary builds
// its pause image anywhere, with no toolchain and no source tree. It does
// what Kubernetes' pause.c does:
//
//   - it blocks SIGTERM, SIGINT and SIGCHLD and takes them one at a time
//     with rt_sigtimedwait (blocked signals reach it even as PID 1 of a PID
//     namespace, where signals without a handler are dropped);
//   - it marks itself a child subreaper (PR_SET_CHILD_SUBREAPER), so that
//     orphans are re-parented to it also when it is not PID 1;
//   - on SIGCHLD it reaps every exited child (wait4(-1, WNOHANG) until none
//     is left), so a pod sharing its PID namespace collects no zombies;
//   - on SIGTERM or SIGINT it exits 0.
//
// The bytes are the same on every call and every machine.
func PauseProgram(goarch string) ([]byte, error) {
	switch goarch {
	case "amd64":
		return elfExecutable(elf.EM_X86_64, pauseAMD64), nil
	case "arm64":
		return elfExecutable(elf.EM_AARCH64, pauseARM64), nil
	}
	return nil, fmt.Errorf("%w: %s", ErrNoPause, goarch)
}

// The signal set both programs block and wait for: bit n-1 is signal n.
const (
	sigINT  = 2
	sigTERM = 15
	sigCHLD = 17
	// pauseSigset is the 8-byte little-endian kernel sigset_t at the end of
	// each program.
	pauseSigset = 1<<(sigINT-1) | 1<<(sigTERM-1) | 1<<(sigCHLD-1)
)

// pauseAMD64 is the x86-64 program, position independent (the sigset is
// addressed relative to rip). Syscall numbers are x86-64's.
var pauseAMD64 = concat(
	// _start: rt_sigprocmask(SIG_BLOCK, &set, NULL, 8)
	[]byte{0xb8, 0x0e, 0x00, 0x00, 0x00},             // 00 movl   $14, %eax
	[]byte{0x31, 0xff},                               // 05 xorl   %edi, %edi
	[]byte{0x48, 0x8d, 0x35, 0x6a, 0x00, 0x00, 0x00}, // 07 leaq   set(%rip), %rsi
	[]byte{0x31, 0xd2},                               // 0e xorl   %edx, %edx
	[]byte{0x41, 0xba, 0x08, 0x00, 0x00, 0x00},       // 10 movl   $8, %r10d
	[]byte{0x0f, 0x05},                               // 16 syscall
	// prctl(PR_SET_CHILD_SUBREAPER, 1)
	[]byte{0xb8, 0x9d, 0x00, 0x00, 0x00}, // 18 movl   $157, %eax
	[]byte{0xbf, 0x24, 0x00, 0x00, 0x00}, // 1d movl   $36, %edi
	[]byte{0xbe, 0x01, 0x00, 0x00, 0x00}, // 22 movl   $1, %esi
	[]byte{0x0f, 0x05},                   // 27 syscall
	// wait: eax = rt_sigtimedwait(&set, NULL, NULL, 8)
	[]byte{0xb8, 0x80, 0x00, 0x00, 0x00},             // 29 movl   $128, %eax
	[]byte{0x48, 0x8d, 0x3d, 0x43, 0x00, 0x00, 0x00}, // 2e leaq   set(%rip), %rdi
	[]byte{0x31, 0xf6},                               // 35 xorl   %esi, %esi
	[]byte{0x31, 0xd2},                               // 37 xorl   %edx, %edx
	[]byte{0x41, 0xba, 0x08, 0x00, 0x00, 0x00},       // 39 movl   $8, %r10d
	[]byte{0x0f, 0x05},                               // 3f syscall
	[]byte{0x83, 0xf8, 0x11},                         // 41 cmpl   $17, %eax   SIGCHLD
	[]byte{0x74, 0x0d},                               // 44 je     reap
	[]byte{0x85, 0xc0},                               // 46 testl  %eax, %eax
	[]byte{0x78, 0xdf},                               // 48 js     wait        -EINTR: wait again
	// SIGTERM or SIGINT: exit_group(0)
	[]byte{0xb8, 0xe7, 0x00, 0x00, 0x00}, // 4a movl   $231, %eax
	[]byte{0x31, 0xff},                   // 4f xorl   %edi, %edi
	[]byte{0x0f, 0x05},                   // 51 syscall
	// reap: while wait4(-1, NULL, WNOHANG, NULL) > 0 {}; goto wait
	[]byte{0xb8, 0x3d, 0x00, 0x00, 0x00},             // 53 movl   $61, %eax
	[]byte{0x48, 0xc7, 0xc7, 0xff, 0xff, 0xff, 0xff}, // 58 movq   $-1, %rdi
	[]byte{0x31, 0xf6},                               // 5f xorl   %esi, %esi
	[]byte{0xba, 0x01, 0x00, 0x00, 0x00},             // 61 movl   $1, %edx
	[]byte{0x45, 0x31, 0xd2},                         // 66 xorl   %r10d, %r10d
	[]byte{0x0f, 0x05},                               // 69 syscall
	[]byte{0x85, 0xc0},                               // 6b testl  %eax, %eax
	[]byte{0x7f, 0xe4},                               // 6d jg     reap
	[]byte{0xeb, 0xb8},                               // 6f jmp    wait
	[]byte{0x0f, 0x1f, 0x80, 0x00, 0x00, 0x00, 0x00}, // 71 nopl   (%rax)    align set to 8
	// 78 set:
	binary.LittleEndian.AppendUint64(nil, pauseSigset),
)

// pauseARM64 is the AArch64 program, position independent (the sigset is
// addressed with adr). Syscall numbers are the generic table's.
var pauseARM64 = concat(
	// _start: rt_sigprocmask(SIG_BLOCK, &set, NULL, 8)
	arm64(0xd28010e8), // 00 mov  x8, #135
	arm64(0xd2800000), // 04 mov  x0, #0
	arm64(0x100003c1), // 08 adr  x1, set
	arm64(0xd2800002), // 0c mov  x2, #0
	arm64(0xd2800103), // 10 mov  x3, #8
	arm64(0xd4000001), // 14 svc  #0
	// prctl(PR_SET_CHILD_SUBREAPER, 1)
	arm64(0xd28014e8), // 18 mov  x8, #167
	arm64(0xd2800480), // 1c mov  x0, #36
	arm64(0xd2800021), // 20 mov  x1, #1
	arm64(0xd4000001), // 24 svc  #0
	// wait: x0 = rt_sigtimedwait(&set, NULL, NULL, 8)
	arm64(0xd2801128), // 28 mov  x8, #137
	arm64(0x100002a0), // 2c adr  x0, set
	arm64(0xd2800001), // 30 mov  x1, #0
	arm64(0xd2800002), // 34 mov  x2, #0
	arm64(0xd2800103), // 38 mov  x3, #8
	arm64(0xd4000001), // 3c svc  #0
	arm64(0xf100441f), // 40 cmp  x0, #17       SIGCHLD
	arm64(0x540000a0), // 44 b.eq reap
	arm64(0xb7ffff00), // 48 tbnz x0, #63, wait  -EINTR: wait again
	// SIGTERM or SIGINT: exit_group(0)
	arm64(0xd2800bc8), // 4c mov  x8, #94
	arm64(0xd2800000), // 50 mov  x0, #0
	arm64(0xd4000001), // 54 svc  #0
	// reap: while wait4(-1, NULL, WNOHANG, NULL) > 0 {}; goto wait
	arm64(0xd2802088), // 58 mov  x8, #260
	arm64(0x92800000), // 5c mov  x0, #-1
	arm64(0xd2800001), // 60 mov  x1, #0
	arm64(0xd2800022), // 64 mov  x2, #1
	arm64(0xd2800003), // 68 mov  x3, #0
	arm64(0xd4000001), // 6c svc  #0
	arm64(0xf100001f), // 70 cmp  x0, #0
	arm64(0x54ffff2c), // 74 b.gt reap
	arm64(0x17ffffec), // 78 b    wait
	arm64(0xd503201f), // 7c nop                align set to 8
	// 80 set:
	binary.LittleEndian.AppendUint64(nil, pauseSigset),
)

func arm64(insn uint32) []byte { return binary.LittleEndian.AppendUint32(nil, insn) }

func concat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

// pauseBase is where the one segment is loaded: the traditional base of a
// static executable, aligned for 64 KiB pages.
const pauseBase = 0x400000

// elfExecutable wraps position-independent code in a static ELF64
// executable: the ELF header, two program headers (one read+execute
// PT_LOAD segment mapping the whole file, and PT_GNU_STACK asking for a
// non-executable stack), then the code, which is the entry point. The
// headers are 176 bytes, so code that aligns its data to 8 within itself
// keeps it aligned in the file.
func elfExecutable(machine elf.Machine, code []byte) []byte {
	const ehsize, phentsize, phnum = 64, 56, 2
	const codeOff = ehsize + phnum*phentsize
	size := uint64(codeOff + len(code))
	h := elf.Header64{
		Type:      uint16(elf.ET_EXEC),
		Machine:   uint16(machine),
		Version:   uint32(elf.EV_CURRENT),
		Entry:     pauseBase + codeOff,
		Phoff:     ehsize,
		Ehsize:    ehsize,
		Phentsize: phentsize,
		Phnum:     phnum,
	}
	copy(h.Ident[:], elf.ELFMAG)
	h.Ident[elf.EI_CLASS] = byte(elf.ELFCLASS64)
	h.Ident[elf.EI_DATA] = byte(elf.ELFDATA2LSB)
	h.Ident[elf.EI_VERSION] = byte(elf.EV_CURRENT)
	h.Ident[elf.EI_OSABI] = byte(elf.ELFOSABI_NONE)
	progs := [phnum]elf.Prog64{
		{Type: uint32(elf.PT_LOAD), Flags: uint32(elf.PF_R | elf.PF_X), Off: 0,
			Vaddr: pauseBase, Paddr: pauseBase, Filesz: size, Memsz: size, Align: 0x10000},
		{Type: uint32(elf.PT_GNU_STACK), Flags: uint32(elf.PF_R | elf.PF_W), Align: 16},
	}
	var buf bytes.Buffer
	// Writes to a bytes.Buffer of fixed-size structs cannot fail.
	_ = binary.Write(&buf, binary.LittleEndian, h)
	_ = binary.Write(&buf, binary.LittleEndian, progs)
	buf.Write(code)
	return buf.Bytes()
}
