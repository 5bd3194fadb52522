package topologies

import (
	_ "embed"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
)

//go:embed hosts.sh
var script string

// Run runs hosts.sh with args (create NAME HOST..., cut NAME HOST, ...) and
// returns its output, trimmed.
func Run(args ...string) (string, error) {
	cmd := exec.Command("bash", append([]string{"-c", script, "hosts.sh"}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("topologies: hosts.sh %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return strings.TrimSpace(string(out)), nil
}

// Topology is a set of hosts made by New.
type Topology struct {
	t     testing.TB
	Name  string
	Hosts map[string]*Host
}

// Host is one host of a Topology.
type Host struct {
	Name string
	// Addr is its address on the bridge, e.g. 10.77.0.1.
	Addr string
	// NS is the path of its network namespace, /run/netns/<topology>-<host>.
	NS   string
	topo *Topology
}

var seq atomic.Int64

// New creates hosts named by hosts (addresses 10.77.0.1, .2, ... in that
// order) under a name unique to this process, and destroys them, with
// everything still running inside, at t's cleanup. It skips the test
// without root or iproute2.
func New(t testing.TB, hosts ...string) *Topology {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to create network namespaces")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skipf("ip not installed (ops/node-deps.sh installs iproute2): %v", err)
	}
	// Short: interface and namespace names stay readable in ip netns list.
	name := fmt.Sprintf("ct%d-%d", os.Getpid()%100000, seq.Add(1))
	if _, err := Run(append([]string{"create", name}, hosts...)...); err != nil {
		t.Fatal(err)
	}
	tp := &Topology{t: t, Name: name, Hosts: map[string]*Host{}}
	t.Cleanup(func() {
		if _, err := Run("destroy", name); err != nil {
			t.Error(err)
		}
	})
	for _, h := range hosts {
		addr, err := Run("addr", name, h)
		if err != nil {
			t.Fatal(err)
		}
		tp.Hosts[h] = &Host{Name: h, Addr: addr, NS: "/run/netns/" + name + "-" + h, topo: tp}
	}
	return tp
}

// Host returns the host named name; it fails the test if there is none.
func (tp *Topology) Host(name string) *Host {
	h, ok := tp.Hosts[name]
	if !ok {
		tp.t.Fatalf("topologies: no host %s in %s", name, tp.Name)
	}
	return h
}

// Command is an exec.Cmd that runs name with args inside h's namespace
// (ip netns exec, which execs it: the process's pid is the command's own).
func (h *Host) Command(name string, args ...string) *exec.Cmd {
	return exec.Command("ip", append([]string{"netns", "exec", h.topo.Name + "-" + h.Name, name}, args...)...)
}

// Cut cuts h off from every other host: its port on the bridge goes down.
func (h *Host) Cut() {
	h.topo.t.Helper()
	if _, err := Run("cut", h.topo.Name, h.Name); err != nil {
		h.topo.t.Fatal(err)
	}
}

// Heal brings h's port back up.
func (h *Host) Heal() {
	h.topo.t.Helper()
	if _, err := Run("heal", h.topo.Name, h.Name); err != nil {
		h.topo.t.Fatal(err)
	}
}
