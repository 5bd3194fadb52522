package cairntest

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// fakeUp is a stand-in for the cairn binary: `fakeUp up --data-dir D
// --listen A [flags] mode` writes D/kubeconfig, prints "ready", and then,
// by mode (the last argument), waits for a signal and exits 0 (trap), or
// exits 3 at once (die).
const fakeUp = `#!/bin/sh
dir=$3
for mode; do :; done
case "$mode" in
die) echo "dying" >&2; exit 3 ;;
esac
trap 'echo bye; exit 0' INT TERM
echo x > "$dir/kubeconfig"
echo ready
while :; do sleep 0.05; done
`

func writeScript(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "fake")
	if err := os.WriteFile(p, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestUpStop(t *testing.T) {
	bin := writeScript(t, fakeUp)
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGKILL} {
		t.Run(sig.String(), func(t *testing.T) {
			u := StartUp(t, t, UpConfig{Bin: bin, DataDir: t.TempDir(), Addr: "127.0.0.1:1", Args: []string{"trap"}, StopTimeout: 10 * time.Second})
			u.WaitReady(t, 10*time.Second, func() error {
				if !strings.Contains(u.Stdout(), "ready") {
					return os.ErrNotExist
				}
				return nil
			})
			u.Stop(t, sig)
			if got := u.c.killedBy(syscall.SIGKILL); got != (sig == syscall.SIGKILL) {
				t.Errorf("after %v: killed by SIGKILL = %v (%v)", sig, got, u.c.cmd.ProcessState)
			}
			u.Stop(t, sig) // a second Stop does nothing
		})
	}
}

func TestUpExitBeforeReady(t *testing.T) {
	u := StartUp(t, t, UpConfig{Bin: writeScript(t, fakeUp), DataDir: t.TempDir(), Addr: "127.0.0.1:1", Args: []string{"die"}, StopTimeout: 10 * time.Second})
	<-u.c.done
	if u.c.err == nil || u.c.killedBy(syscall.SIGKILL) {
		t.Errorf("exit 3: err %v, killed by SIGKILL %v", u.c.err, u.c.killedBy(syscall.SIGKILL))
	}
	if out := u.Output(); !strings.Contains(out, "dying") {
		t.Errorf("Output lacks the child's stderr:\n%s", out)
	}
}

func TestKubectlEnv(t *testing.T) {
	// A "kubectl" that prints its environment and fails on request.
	k := &Kubectl{Path: writeScript(t, "#!/bin/sh\necho \"$KUBECONFIG $HOME $*\"\n[ \"$1\" = fail ] && { echo no >&2; exit 1; }\nexit 0\n"),
		Kubeconfig: "/k/config", Home: "/k/home", Timeout: 10 * time.Second}
	if got := k.OK(t, "get", "pods"); got != "/k/config /k/home get pods\n" {
		t.Errorf("OK = %q", got)
	}
	if got := k.Fails(t, "fail"); got != "no\n" {
		t.Errorf("Fails = %q", got)
	}
	r := k.Run(t, "fail")
	if r.Err == nil || !strings.HasPrefix(r.String(), "kubectl fail: err=exit status 1") {
		t.Errorf("Run = %s", r)
	}
}
