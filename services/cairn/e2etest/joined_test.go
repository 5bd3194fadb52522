package e2etest

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/cairn-dev/cairn/services/cairn/cairntest"
)

// TestServicesOnJoinedNode checks the proxy of a node added with `cairn
// kubelet` (README, Adding a node): next to a `cairn up --node=false`, the
// kubelet issues its proxy's credentials (system:kube-proxy) from the data
// directory, runs the proxy in process in the node's own network
// namespace, and a pod there reaches a Service by ClusterIP and the
// apiserver at https://10.96.0.1.
func TestServicesOnJoinedNode(t *testing.T) {
	kubectl := requireNode(t)
	bin := cairntest.Build(t)
	u := cairntest.StartUp(t, t, cairntest.UpConfig{Bin: bin, DataDir: t.TempDir(), Addr: cairntest.FreeAddr(t),
		Args: []string{"--node=false"}, StopTimeout: stopTimeout})
	c := &cluster{Up: u, Kubectl: &cairntest.Kubectl{Path: kubectl, Kubeconfig: u.Kubeconfig(), Home: t.TempDir(), Timeout: callTimeout}}
	c.WaitReady(t, readyTimeout, func() error {
		_, err := os.Stat(filepath.Join(c.DataDir, "endpoints.json"))
		return err
	})
	const name = "joined"
	k := cairntest.NewProc(t, "kubelet", bin, "kubelet", "--data-dir", c.DataDir, "--node-name", name, "--address", cairntest.FreeAddr(t))
	k.Start()
	poll(t, readyTimeout, "node "+name+" Ready", func() error {
		k.Alive()
		var n corev1.Node
		r := c.Run(t, "get", "node", name, "-o", "json")
		if r.Err != nil {
			return r.Err
		}
		if err := json.Unmarshal([]byte(r.Stdout), &n); err != nil || !nodeReady(&n) {
			return fmt.Errorf("not Ready: %v", err)
		}
		return nil
	})
	if out := k.Output(); !strings.Contains(out, "proxy credentials issued") {
		t.Errorf("kubelet output lacks the proxy's credentials:\n%s", out)
	}

	file := filepath.Join(t.TempDir(), "client.yaml")
	if err := os.WriteFile(file, []byte(clientPod), 0o644); err != nil {
		t.Fatal(err)
	}
	c.OK(t, "apply", "-f", file)
	c.OK(t, "apply", "-f", webYAML)
	c.OK(t, "patch", "deployment", "web", "--type=merge", "-p", `{"spec":{"template":{"spec":{"terminationGracePeriodSeconds":2}}}}`)
	web := c.waitWeb(t, 3)
	c.waitRunning(t, "client")
	for _, p := range web {
		c.OK(t, "exec", p.Name, "--", "sh", "-c", "hostname > /var/www/who")
	}
	c.OK(t, "expose", "deployment", "web", "--port", "80", "--target-port", "8080")
	ip := strings.TrimSpace(c.OK(t, "get", "svc", "web", "-o", "jsonpath={.spec.clusterIP}"))
	poll(t, podWait, "the ClusterIP answers from a pod of the joined node", func() error {
		who, err := c.fetch(t, "http://"+ip+"/who")
		if err == nil && !strings.HasPrefix(who, "web-") {
			err = fmt.Errorf("answered by %q", who)
		}
		return err
	})
	tool := buildTLSGet(t)
	c.OK(t, "cp", tool, "client:/tmp/tlsget")
	c.OK(t, "cp", filepath.Join(c.DataDir, "pki", "ca.crt"), "client:/tmp/ca.crt")
	poll(t, podWait, "https://10.96.0.1/version from a pod of the joined node", func() error {
		r := c.Run(t, "exec", "client", "--", "/tmp/tlsget", "-ca", "/tmp/ca.crt", "-server-name", "kubernetes.default.svc", "https://10.96.0.1/version")
		if r.Err != nil || !strings.HasPrefix(r.Stdout, "200\n") {
			return fmt.Errorf("%v: %s%s", r.Err, r.Stdout, r.Stderr)
		}
		return nil
	})
	c.OK(t, "delete", "deployment", "web")
	c.OK(t, "delete", "pod", "client", "--wait=false")
	k.Interrupt(stopTimeout)
}
