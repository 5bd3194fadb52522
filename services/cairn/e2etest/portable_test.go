package e2etest

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/services/cairn/cairntest"
)

// TestPortableBinary is issue 14's "a binary that runs anywhere": the cairn
// binary, copied to a directory outside the checkout, runs `cairn up` in
// an empty working directory with a PATH that holds no Go toolchain and a
// HOME of its own (so nothing can come from the source tree or the module
// cache), serves ops/examples/web.yaml to Ready pods on its real node, and
// after SIGTERM exits 0 leaving no process behind: not itself, not its
// containerd, not a shim or a container process.
func TestPortableBinary(t *testing.T) {
	kubectl := requireNode(t)
	if _, err := os.Stat("/bin/busybox"); err != nil {
		t.Skip("e2etest: /bin/busybox missing: run ops/node-deps.sh")
	}
	root := t.TempDir()
	checkout, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	if rel, err := filepath.Rel(checkout, root); err == nil && !strings.HasPrefix(rel, "..") {
		t.Fatalf("temporary directory %s is inside the checkout %s", root, checkout)
	}
	bin := filepath.Join(root, "bin", "cairn")
	copyFile(t, cairntest.Build(t), bin)
	work, home := filepath.Join(root, "work"), filepath.Join(root, "home")
	for _, d := range []string{work, home} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	env := []string{"PATH=" + pathWithoutGo(t), "HOME=" + home}

	c := startClusterWith(t, kubectl, cairntest.UpConfig{Bin: bin, Dir: work, Addr: cairntest.FreeAddr(t), Env: env, StopTimeout: stopTimeout})
	if want := filepath.Join(work, ".cairn"); c.DataDir != want {
		t.Fatalf("data dir %s, want the default %s", c.DataDir, want)
	}
	c.OK(t, "apply", "-f", webYAML)
	poll(t, podWait, "3 web pods Ready", func() error {
		pods := c.pods(t, "app=web")
		ready := 0
		for i := range pods {
			if pods[i].DeletionTimestamp == nil && podReady(&pods[i]) && pods[i].Status.PodIP != "" {
				ready++
			}
		}
		if len(pods) != 3 || ready != 3 {
			return fmt.Errorf("%d web pods, %d Ready with an IP", len(pods), ready)
		}
		return nil
	})
	stdout := c.Stdout()
	for _, line := range []string{"node ready (", "\nexport KUBECONFIG=" + c.Up.Kubeconfig() + "\n"} {
		if !strings.Contains(stdout, line) {
			t.Errorf("stdout lacks %q:\n%s", line, stdout)
		}
	}
	// stderr gets warnings and errors only: no info records, none of klog's
	// own lines (I1203 12:00:00.000000 ...) from the Kubernetes libraries,
	// and no warning for a controller's update conflict, which is retried.
	if s := c.Stderr(); strings.Contains(s, "level=INFO") || klogLine.MatchString(s) || strings.Contains(s, "Operation cannot be fulfilled") {
		t.Errorf("info records on stderr:\n%s", cairntest.Tail(s, 20))
	}

	// Everything cairn up runs: itself, its containerd, the shims of its
	// socket, and what runs under those (pause and httpd).
	procs := processes(t)
	tracked := []int{c.Pid(), c.containerdPid(t)}
	for pid, p := range procs {
		if strings.Contains(p.cmdline, "containerd-shim") && strings.Contains(p.cmdline, "-address "+c.socket()+" ") {
			tracked = append(tracked, pid)
		}
	}
	tracked = descendants(procs, tracked)
	if len(tracked) < 2+3*3 { // cairn, containerd, and a shim, pause and httpd per pod
		t.Fatalf("only %d processes of cairn up found: %v", len(tracked), tracked)
	}
	netns := c.netnsPath()

	c.Stop(t, syscall.SIGTERM)
	poll(t, 10*time.Second, "no process of cairn up left", func() error {
		now := processes(t)
		var left []string
		for _, pid := range tracked {
			if p, ok := now[pid]; ok && p.start == procs[pid].start && p.state != "Z" {
				left = append(left, fmt.Sprintf("%d %q", pid, p.cmdline))
			}
		}
		for pid, p := range now {
			if strings.Contains(p.cmdline, root) && p.state != "Z" {
				left = append(left, fmt.Sprintf("%d %q", pid, p.cmdline))
			}
		}
		if len(left) > 0 {
			return fmt.Errorf("still running: %v", left)
		}
		return nil
	})
	if _, err := os.Stat(netns); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("node network namespace %s still there (stat: %v)", netns, err)
	}
	t.Logf("%d processes of cairn up (%s) all gone after SIGTERM", len(tracked), bin)
}

// copyFile copies the executable src to dst, creating dst's directory.
func copyFile(t *testing.T, src, dst string) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, 0o755); err != nil {
		t.Fatal(err)
	}
}

// pathWithoutGo is the system's PATH (the directories Debian's packages
// install into) without any directory that holds a go command.
func pathWithoutGo(t *testing.T) string {
	t.Helper()
	var dirs []string
	for _, d := range []string{"/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin"} {
		if _, err := os.Stat(filepath.Join(d, "go")); err == nil {
			continue
		}
		dirs = append(dirs, d)
	}
	return strings.Join(dirs, ":")
}

// proc is one process as /proc shows it.
type proc struct {
	ppid    int
	start   string // start time in clock ticks since boot: tells a reused pid apart
	state   string
	cmdline string // arguments joined by spaces
}

// processes reads every process of the machine from /proc.
func processes(t *testing.T) map[int]proc {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	out := map[int]proc{}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue // exited meanwhile
		}
		s := string(stat)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		// After the command: state, ppid, ...; starttime is field 22 of
		// the line, the 20th after the command.
		f := strings.Fields(s[i+1:])
		if len(f) < 20 {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		cmdline, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		out[pid] = proc{ppid: ppid, start: f[19], state: f[0], cmdline: strings.ReplaceAll(string(cmdline), "\x00", " ")}
	}
	return out
}

// descendants returns roots and every process below them in procs.
func descendants(procs map[int]proc, roots []int) []int {
	seen := map[int]bool{}
	out := []int{}
	for len(roots) > 0 {
		pid := roots[0]
		roots = roots[1:]
		if seen[pid] {
			continue
		}
		seen[pid] = true
		out = append(out, pid)
		for child, p := range procs {
			if p.ppid == pid {
				roots = append(roots, child)
			}
		}
	}
	return out
}

// klogLine matches a line klog writes itself: severity, date, time.
var klogLine = regexp.MustCompile(`(?m)^[IWEF]\d{4} \d\d:\d\d:\d\d\.\d+ `)
