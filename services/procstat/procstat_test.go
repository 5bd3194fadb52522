package procstat

import (
	"errors"
	"os"
	"os/exec"
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	// A command with spaces and parentheses of its own, as a process may
	// name itself (prctl PR_SET_NAME).
	line := "4242 (a) b (c)) S 17 4242 4242 0 -1 4194560 100 0 0 0 250 75 5 1 20 0 1 0 98765 1000 10 18446744073709551615\n"
	st, err := Parse(line)
	if err != nil {
		t.Fatal(err)
	}
	want := Stat{State: 'S', PPID: 17, UTime: 250, STime: 75, CUTime: 5, CSTime: 1, StartTime: 98765}
	if st != want {
		t.Errorf("Parse = %+v, want %+v", st, want)
	}
	if got := st.CPU(); got != 3250*time.Millisecond {
		t.Errorf("CPU = %v, want 3.25s", got)
	}
	if got := st.TreeCPU(); got != 3310*time.Millisecond {
		t.Errorf("TreeCPU = %v, want 3.31s", got)
	}
	for _, bad := range []string{"", "1 (x S 1", "1 (x) S 1 2 3", "1 (x) S p 1 1 0 -1 0 0 0 0 0 1 1 0 0 20 0 1 0 5 1 1",
		"1 (x) SS 1 1 1 0 -1 0 0 0 0 0 1 1 0 0 20 0 1 0 5 1 1"} {
		if _, err := Parse(bad); !errors.Is(err, ErrFormat) {
			t.Errorf("Parse(%q) = %v, want ErrFormat", bad, err)
		}
	}
}

// TestRead reads this process and a child: a running child is alive, and
// once it has exited but is not yet reaped it is a zombie.
func TestRead(t *testing.T) {
	self, err := Read(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if self.PPID != os.Getppid() || self.StartTime == 0 || self.Zombie() {
		t.Errorf("Read(self) = %+v, want ppid %d, a start time, not a zombie", self, os.Getppid())
	}
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	if !Alive(pid) {
		t.Errorf("child %d not alive", pid)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		st, err := Read(pid)
		if err != nil {
			t.Fatal(err)
		}
		if st.Zombie() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("killed child %d is %c after 10s, want Z before it is reaped", pid, st.State)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if Alive(pid) {
		t.Error("zombie child reported alive")
	}
	_ = cmd.Wait()
	if _, err := Read(pid); err == nil {
		t.Error("reaped child still has a stat")
	}
}

func FuzzParse(f *testing.F) {
	f.Add("4242 (a) b (c)) S 17 4242 4242 0 -1 4194560 100 0 0 0 250 75 0 0 20 0 1 0 98765 1000 10")
	f.Fuzz(func(t *testing.T, line string) {
		_, _ = Parse(line) // must not panic
	})
}
