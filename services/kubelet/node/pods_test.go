package node_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/cairn-dev/cairn/services/kubelet/node/nodetest"
)

const page = "served by busybox httpd in cairn.local/busybox"

// TestPodsOnOneNode runs two pods through the CRI on a real containerd,
// runc and CNI bridge, then removes them: each step depends on the one
// before, so the steps are subtests of one node.
func TestPodsOnOneNode(t *testing.T) {
	rt := nodetest.Start(t, nodetest.WithPodCIDR("10.77.3.0/24"))
	ctx := ctxT(t, 3*time.Minute)
	rs := rt.RuntimeService()

	web := runPod(ctx, t, rt, podSpec{name: "web", command: []string{"httpd", "-f", "-p", "8080", "-h", "/var/www"}, memory: 48 << 20, cpuMilli: 250})
	client := runPod(ctx, t, rt, podSpec{name: "client", command: []string{"sh", "-c", "echo hello from client; echo to stderr >&2; exec sleep 3600"}})

	t.Run("IPsFromPodCIDR", func(t *testing.T) {
		_, cidr, _ := net.ParseCIDR(rt.PodCIDR())
		for _, p := range []*pod{web, client} {
			ip := net.ParseIP(p.ip)
			if ip == nil || !cidr.Contains(ip) || ip.Equal(rt.Gateway()) {
				t.Errorf("pod %s has IP %q, want a pod address in %s", p.name, p.ip, cidr)
			}
		}
		if web.ip == client.ip {
			t.Errorf("both pods have IP %s", web.ip)
		}
	})

	t.Run("PodFetchesPodByIP", func(t *testing.T) {
		url := fmt.Sprintf("http://%s:8080/", web.ip)
		var out string
		eventually(ctx, t, "wget from client pod", func() error {
			r, err := rs.ExecSync(ctx, &runtimeapi.ExecSyncRequest{ContainerId: client.containerID, Cmd: []string{"wget", "-q", "-O", "-", url}, Timeout: 10})
			if err != nil {
				return err
			}
			if r.ExitCode != 0 {
				return fmt.Errorf("exit %d: %s", r.ExitCode, r.Stderr)
			}
			out = string(r.Stdout)
			return nil
		})
		if !strings.Contains(out, page) {
			t.Errorf("client pod got %q from %s, want the busybox page", out, url)
		}
	})

	t.Run("DialContextReachesPod", func(t *testing.T) {
		hc := &http.Client{Transport: &http.Transport{DialContext: rt.DialContext}, Timeout: 5 * time.Second}
		defer hc.CloseIdleConnections()
		resp, err := hc.Get(fmt.Sprintf("http://%s:8080/", web.ip))
		if err != nil {
			t.Fatalf("GET through the node namespace: %v", err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), page) {
			t.Errorf("GET: %s %q", resp.Status, body)
		}
		// The pod network exists only in the node's namespace: the bridge
		// is there and not here. (A TCP connect from the host proves
		// nothing: some sandboxes accept every outgoing connection.)
		if _, err := net.InterfaceByName("cairn0"); err == nil {
			t.Errorf("bridge cairn0 exists in the host network namespace")
		}
		err = rt.Do(func() error {
			ifc, err := net.InterfaceByName("cairn0")
			if err != nil {
				return err
			}
			addrs, err := ifc.Addrs()
			if err != nil {
				return err
			}
			for _, a := range addrs {
				if ipn, ok := a.(*net.IPNet); ok && ipn.IP.Equal(rt.Gateway()) {
					return nil
				}
			}
			return fmt.Errorf("cairn0 has %v, want %s", addrs, rt.Gateway())
		})
		if err != nil {
			t.Errorf("bridge in the node namespace: %v", err)
		}
		host := &http.Client{Transport: &http.Transport{}, Timeout: 2 * time.Second}
		defer host.CloseIdleConnections()
		if resp, err := host.Get(fmt.Sprintf("http://%s:8080/", web.ip)); err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if strings.Contains(string(body), page) {
				t.Errorf("pod %s serves its page to the host network namespace", web.ip)
			}
		}
	})

	t.Run("ExecHostname", func(t *testing.T) {
		if got := strings.TrimSpace(exec(ctx, t, rt, client, "cat", "/etc/hostname")); got != "client" {
			t.Errorf("/etc/hostname = %q, want client", got)
		}
	})

	t.Run("ContainerLogIsCRIFormat", func(t *testing.T) {
		path := filepath.Join(client.logDir, "main", "0.log")
		line := regexp.MustCompile(`^(\S+) (stdout|stderr) ([FP]) (.*)$`)
		want := map[string]string{"stdout": "hello from client", "stderr": "to stderr"}
		eventually(ctx, t, "log lines in "+path, func() error {
			f, err := os.Open(path)
			if err != nil {
				return err
			}
			defer f.Close()
			got := map[string]string{}
			sc := bufio.NewScanner(f)
			for sc.Scan() {
				m := line.FindStringSubmatch(sc.Text())
				if m == nil {
					return fmt.Errorf("line %q is not in CRI log format", sc.Text())
				}
				if _, err := time.Parse(time.RFC3339Nano, m[1]); err != nil {
					return fmt.Errorf("line %q: timestamp: %v", sc.Text(), err)
				}
				got[m[2]] = m[4]
			}
			for stream, text := range want {
				if got[stream] != text {
					return fmt.Errorf("%s lines %v, want %q", stream, got, text)
				}
			}
			return nil
		})
	})

	t.Run("ResourceLimitsInCgroups", func(t *testing.T) {
		pid := containerPid(ctx, t, rt, web.containerID)
		mem := cgroupPath(t, pid, "memory")
		if !strings.Contains(mem, rt.CgroupParent()+"/pod"+web.uid) {
			t.Errorf("memory cgroup %s is not under the pod's cgroup parent", mem)
		}
		b, err := os.ReadFile(filepath.Join(mem, "memory.limit_in_bytes"))
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); got != 48<<20 {
			t.Errorf("memory.limit_in_bytes = %d, want %d", got, 48<<20)
		}
		b, err = os.ReadFile(filepath.Join(cgroupPath(t, pid, "cpu"), "cpu.cfs_quota_us"))
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.TrimSpace(string(b)); got != "25000" {
			t.Errorf("cpu.cfs_quota_us = %s, want 25000", got)
		}
	})

	t.Run("RemoveLeavesNothing", func(t *testing.T) {
		netnsPaths := map[string]string{}
		for _, p := range []*pod{web, client} {
			netnsPaths[p.name] = sandboxNetNS(ctx, t, rt, p.sandboxID)
		}
		for _, p := range []*pod{web, client} {
			if _, err := rs.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: p.sandboxID}); err != nil {
				t.Fatalf("StopPodSandbox %s: %v", p.name, err)
			}
			if _, err := rs.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: p.sandboxID}); err != nil {
				t.Fatalf("RemovePodSandbox %s: %v", p.name, err)
			}
		}
		cs, err := rs.ListContainers(ctx, &runtimeapi.ListContainersRequest{})
		if err != nil || len(cs.Containers) != 0 {
			t.Errorf("containers after removal: %v (%v)", cs.GetContainers(), err)
		}
		ss, err := rs.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
		if err != nil || len(ss.Items) != 0 {
			t.Errorf("sandboxes after removal: %v (%v)", ss.GetItems(), err)
		}
		for name, path := range netnsPaths {
			if _, err := os.Stat(path); !os.IsNotExist(err) {
				t.Errorf("pod %s network namespace %s still exists (%v)", name, path, err)
			}
		}
		// The node's own tmpfs (state/ and runc/, see Config.StateOnDisk)
		// stay until Stop; nothing of a pod may.
		var left []string
		for _, m := range mountsUnder(t, rt.Dir()) {
			if m != filepath.Join(rt.Dir(), "state") && m != filepath.Join(rt.Dir(), "runc") {
				left = append(left, m)
			}
		}
		if len(left) != 0 {
			t.Errorf("mounts left under the node directory: %v", left)
		}
		for _, p := range []*pod{web, client} {
			if _, err := os.Stat(filepath.Join("/sys/fs/cgroup/memory", rt.CgroupParent(), "pod"+p.uid, p.containerID)); !os.IsNotExist(err) {
				t.Errorf("container cgroup of %s still exists (%v)", p.name, err)
			}
		}
	})
}

// TestStopRemovesRunningPods stops a node with a pod still running: Stop
// must leave no process, mount, cgroup or namespace of that node.
func TestStopRemovesRunningPods(t *testing.T) {
	rt := nodetest.Start(t)
	ctx := ctxT(t, 2*time.Minute)
	p := runPod(ctx, t, rt, podSpec{name: "sleeper", command: []string{"sleep", "3600"}})
	pid := containerPid(ctx, t, rt, p.containerID)
	containerdPid := rt.Pid()
	podNS := sandboxNetNS(ctx, t, rt, p.sandboxID)

	if err := rt.Stop(ctx); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	for what, pid := range map[string]int{"container": pid, "containerd": containerdPid} {
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err == nil {
			t.Errorf("%s process %d still exists after Stop", what, pid)
		}
	}
	if m := mountsUnder(t, rt.Dir()); len(m) != 0 {
		t.Errorf("mounts left under the node directory: %v", m)
	}
	if _, err := os.Stat(podNS); !os.IsNotExist(err) {
		t.Errorf("pod network namespace %s still exists (%v)", podNS, err)
	}
	if _, err := os.Stat(rt.NetNSPath()); !os.IsNotExist(err) {
		t.Errorf("node network namespace %s still exists (%v)", rt.NetNSPath(), err)
	}
	if _, err := os.Stat(filepath.Join("/sys/fs/cgroup/memory", rt.CgroupParent())); !os.IsNotExist(err) {
		t.Errorf("node cgroup %s still exists (%v)", rt.CgroupParent(), err)
	}
	_ = context.Background
}
