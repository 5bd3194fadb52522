package images

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func buildPauseForTest(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "pause")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := (Options{}).buildPause(ctx, bin); err != nil {
		t.Fatal(err)
	}
	return bin
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

// TestPauseReapsZombies runs pause as PID 1 of a new PID namespace, leaves
// orphans in that namespace (nsenter's shell exits before its children,
// whose output goes to /dev/null so that nsenter returns at once) and checks
// that they are re-parented to pause and, once exited, do not stay zombies.
func TestPauseReapsZombies(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root for a PID namespace")
	}
	if _, err := exec.LookPath("nsenter"); err != nil {
		t.Skip("needs nsenter")
	}
	bin := buildPauseForTest(t)
	cmd := exec.Command(bin)
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWPID}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	pid := cmd.Process.Pid
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
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) > 1 && f[1] == strconv.Itoa(ppid) {
			out = append(out, e.Name()+":"+f[0])
		}
	}
	return out
}
