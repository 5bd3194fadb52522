package images

import (
	"bytes"
	"debug/elf"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/services/procstat"
)

// buildPauseForTest writes the built-in pause program of this machine's
// architecture to a file and returns its path.
func buildPauseForTest(t *testing.T) string {
	t.Helper()
	prog, err := PauseProgram(runtime.GOARCH)
	if errors.Is(err, ErrNoPause) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "pause")
	if err := os.WriteFile(bin, prog, 0o755); err != nil {
		t.Fatal(err)
	}
	return bin
}

func TestPauseProgramELF(t *testing.T) {
	tests := []struct {
		arch    string
		machine elf.Machine
	}{
		{arch: "amd64", machine: elf.EM_X86_64},
		{arch: "arm64", machine: elf.EM_AARCH64},
	}
	for _, tt := range tests {
		t.Run(tt.arch, func(t *testing.T) {
			prog, err := PauseProgram(tt.arch)
			if err != nil {
				t.Fatal(err)
			}
			again, _ := PauseProgram(tt.arch)
			if !bytes.Equal(prog, again) {
				t.Error("two calls return different bytes")
			}
			f, err := elf.NewFile(bytes.NewReader(prog))
			if err != nil {
				t.Fatalf("not an ELF file: %v", err)
			}
			if f.Class != elf.ELFCLASS64 || f.Data != elf.ELFDATA2LSB || f.Type != elf.ET_EXEC || f.Machine != tt.machine {
				t.Errorf("header %+v, want a little-endian ELF64 executable for %v", f.FileHeader, tt.machine)
			}
			var load, stack *elf.Prog
			for _, p := range f.Progs {
				switch p.Type {
				case elf.PT_LOAD:
					load = p
				case elf.PT_GNU_STACK:
					stack = p
				case elf.PT_INTERP, elf.PT_DYNAMIC:
					t.Errorf("program header %v: want a static executable", p.Type)
				}
			}
			if load == nil || load.Off != 0 || load.Filesz != uint64(len(prog)) || load.Flags != elf.PF_R|elf.PF_X {
				t.Fatalf("PT_LOAD %+v, want one read+execute segment mapping all %d bytes", load, len(prog))
			}
			if f.Entry < load.Vaddr || f.Entry >= load.Vaddr+load.Filesz {
				t.Errorf("entry %#x outside the segment at %#x", f.Entry, load.Vaddr)
			}
			if stack == nil || stack.Flags&elf.PF_X != 0 {
				t.Errorf("PT_GNU_STACK %+v, want a non-executable stack", stack)
			}
		})
	}
	if _, err := PauseProgram("riscv64"); !errors.Is(err, ErrNoPause) {
		t.Errorf("PauseProgram(riscv64) = %v, want ErrNoPause", err)
	}
}

// TestPauseProgramAssembles assembles testdata/pause_<arch>.s with llvm-mc
// and checks that the code in the program is those bytes: the listing in
// the comments of pause.go is what runs, also for the architecture this
// machine cannot execute.
func TestPauseProgramAssembles(t *testing.T) {
	mc, err := exec.LookPath("llvm-mc")
	if err != nil {
		t.Skip("needs llvm-mc")
	}
	for arch, triple := range map[string]string{"amd64": "x86_64-linux-gnu", "arm64": "aarch64-linux-gnu"} {
		t.Run(arch, func(t *testing.T) {
			obj := filepath.Join(t.TempDir(), "pause.o")
			out, err := exec.Command(mc, "--triple="+triple, "-filetype=obj", "-o", obj, filepath.Join("testdata", "pause_"+arch+".s")).CombinedOutput()
			if err != nil {
				t.Fatalf("llvm-mc: %v\n%s", err, out)
			}
			f, err := elf.Open(obj)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			text, err := f.Section(".text").Data()
			if err != nil {
				t.Fatal(err)
			}
			prog, err := PauseProgram(arch)
			if err != nil {
				t.Fatal(err)
			}
			ef, err := elf.NewFile(bytes.NewReader(prog))
			if err != nil {
				t.Fatal(err)
			}
			code := prog[ef.Entry-pauseBase:]
			if !bytes.Equal(code, text) {
				t.Errorf("code differs from the assembled listing:\n got %x\nwant %x", code, text)
			}
		})
	}
}

func TestPauseExitsOnSignal(t *testing.T) {
	bin := buildPauseForTest(t)
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			cmd := exec.Command(bin)
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			select {
			case err := <-done:
				t.Fatalf("pause exited before any signal: %v", err)
			case <-time.After(300 * time.Millisecond):
			}
			waitBlocked(t, cmd.Process.Pid)
			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("pause after %v: %v, want exit 0", sig, err)
				}
			case <-time.After(10 * time.Second):
				_ = cmd.Process.Kill()
				t.Fatalf("pause still running 10s after %v", sig)
			}
		})
	}
}

// pid1 is pause running as PID 1 of a new PID namespace.
type pid1 struct {
	cmd  *exec.Cmd
	done chan struct{} // closed once cmd.Wait returned
	err  error         // what it returned
}

// startPID1 starts pause as PID 1 of a new PID namespace; t's cleanup
// kills it. It skips t without root or nsenter.
func startPID1(t *testing.T) *pid1 {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root for a PID namespace")
	}
	if _, err := exec.LookPath("nsenter"); err != nil {
		t.Skip("needs nsenter")
	}
	p := &pid1{cmd: exec.Command(buildPauseForTest(t)), done: make(chan struct{})}
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWPID}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		<-p.done
	})
	return p
}

// TestPauseReapsZombies runs pause as PID 1 of a new PID namespace, leaves
// orphans in that namespace (nsenter's shell exits before its children,
// whose output goes to /dev/null so that nsenter returns at once) and checks
// that they are re-parented to pause and, once exited, do not stay zombies.
func TestPauseReapsZombies(t *testing.T) {
	pid := startPID1(t).cmd.Process.Pid
	out, err := exec.Command("nsenter", "-t", strconv.Itoa(pid), "-p",
		"/bin/busybox", "sh", "-c", "/bin/busybox sleep 1 >/dev/null 2>&1 & /bin/busybox sleep 1 >/dev/null 2>&1 & exit 0").CombinedOutput()
	if err != nil {
		t.Fatalf("nsenter: %v: %s", err, out)
	}
	adopted := false
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		kids := children(t, pid)
		if len(kids) > 0 {
			adopted = true
		}
		if adopted && len(kids) == 0 {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("children of pause after 10s: %v (adopted orphans seen: %v)", children(t, pid), adopted)
}

// TestPauseAsPID1ExitsOnSignal runs pause as PID 1 of a new PID namespace
// and sends SIGTERM from inside it (kill 1), as a container sharing the
// pod's PID namespace could: the kernel drops such a signal for an init
// without a handler unless it is blocked and waited for, as pause does.
func TestPauseAsPID1ExitsOnSignal(t *testing.T) {
	p := startPID1(t)
	waitBlocked(t, p.cmd.Process.Pid)
	// kill may itself die of SIGKILL: when PID 1 exits, the kernel kills
	// what is left in its namespace, and nsenter passes that on.
	out, err := exec.Command("nsenter", "-t", strconv.Itoa(p.cmd.Process.Pid), "-p", "/bin/busybox", "kill", "-TERM", "1").CombinedOutput()
	var exit *exec.ExitError
	if err != nil && !(errors.As(err, &exit) && exit.Sys().(syscall.WaitStatus).Signal() == syscall.SIGKILL) {
		t.Fatalf("nsenter kill 1: %v: %s", err, out)
	}
	select {
	case <-p.done:
		if p.err != nil {
			t.Fatalf("pause after SIGTERM from its namespace: %v, want exit 0", p.err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("pause (PID 1) still running 10s after SIGTERM from inside its namespace")
	}
}

// waitBlocked waits until process pid sits in rt_sigtimedwait (the first
// field of /proc/<pid>/syscall), so that a signal sent next is one pause
// takes, not a default action on a process still starting.
func waitBlocked(t *testing.T, pid int) {
	t.Helper()
	nr := map[string]string{"amd64": "128", "arm64": "137"}[runtime.GOARCH]
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/syscall", pid))
		if err != nil {
			t.Fatal(err)
		}
		if f := strings.Fields(string(b)); len(f) > 0 && f[0] == nr {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("pause %d not in rt_sigtimedwait after 10s: syscall %q", pid, b)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// children lists "pid:state" of the processes whose parent is ppid.
func children(t *testing.T, ppid int) []string {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		pid, _ := strconv.Atoi(e.Name())
		st, err := procstat.Read(pid)
		if err == nil && st.PPID == ppid {
			out = append(out, e.Name()+":"+string(st.State))
		}
	}
	return out
}
