package e2etest

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/cairn-dev/cairn/services/cairn/cairntest"
	"github.com/cairn-dev/cairn/services/cairn/up"
)

// talkPod has two containers with different logs. a fails its first
// attempt and runs from its second on (counted in an emptyDir, which
// outlives containers), so it has a previous instance; b writes one more
// line once /tmp/go exists in it.
const talkPod = `apiVersion: v1
kind: Pod
metadata:
  name: talk
spec:
  terminationGracePeriodSeconds: 1
  volumes:
  - name: count
    emptyDir: {}
  containers:
  - name: a
    image: cairn.local/busybox:1.36
    imagePullPolicy: IfNotPresent
    volumeMounts:
    - name: count
      mountPath: /count
    command: ["sh", "-c", "echo run >> /count/n; n=$(wc -l < /count/n); echo attempt $n; [ $n -ge 2 ] || exit 1; exec sleep 3600"]
  - name: b
    image: cairn.local/busybox:1.36
    imagePullPolicy: IfNotPresent
    command: ["sh", "-c", "echo from b; while sleep 0.2; do if [ -e /tmp/go ]; then echo b goes on; exec sleep 3600; fi; done"]
`

// checkLogsOptions: through the apiserver and the kubelet's authenticated
// API, `kubectl logs -c` picks the container, `kubectl logs --previous`
// shows the instance before a restart (and fails for a container that
// never restarted), and `kubectl logs -f` streams a line written after it
// started.
func (c *cluster) checkLogsOptions(t *testing.T) {
	poll(t, podWait, "pod talk Ready with a restarted once", func() error {
		var p corev1.Pod
		if err := json.Unmarshal([]byte(c.OK(t, "get", "pod", "talk", "-o", "json")), &p); err != nil {
			return err
		}
		for _, cs := range p.Status.ContainerStatuses {
			if cs.Name == "a" && (cs.RestartCount != 1 || cs.State.Running == nil) {
				return fmt.Errorf("container a: restartCount %d, state %+v", cs.RestartCount, cs.State)
			}
		}
		if !podReady(&p) {
			return fmt.Errorf("talk: phase %s, conditions %+v", p.Status.Phase, p.Status.Conditions)
		}
		return nil
	})
	for _, tt := range []struct{ args, want string }{
		{"-c a", "attempt 2\n"},
		{"-c a --previous", "attempt 1\n"},
		{"-c b", "from b\n"},
	} {
		poll(t, 10*time.Second, "kubectl logs talk "+tt.args, func() error {
			if got := c.OK(t, append([]string{"logs", "talk"}, strings.Fields(tt.args)...)...); got != tt.want {
				return fmt.Errorf("got %q, want %q", got, tt.want)
			}
			return nil
		})
	}
	if r := c.Run(t, "logs", "talk", "-c", "b", "--previous"); r.Err == nil {
		t.Errorf("kubectl logs talk -c b --previous succeeded, but b never restarted: %s", r)
	}

	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	cmd := c.Command(ctx, "logs", "-f", "talk", "-c", "b")
	stderr := &cairntest.Buffer{}
	cmd.Stderr = stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}()
	br := bufio.NewReader(out)
	if l, err := br.ReadString('\n'); l != "from b\n" {
		t.Fatalf("kubectl logs -f talk -c b: first line %q (%v), stderr %s", l, err, stderr.String())
	}
	// The next line is written only now: it must arrive on the open stream.
	c.OK(t, "exec", "talk", "-c", "b", "--", "touch", "/tmp/go")
	if l, err := br.ReadString('\n'); l != "b goes on\n" {
		t.Fatalf("kubectl logs -f talk -c b: streamed line %q (%v), stderr %s", l, err, stderr.String())
	}
}

// checkKubeletAuth calls the node's kubelet API directly: without a client
// certificate it answers 401, as the node (system:node:<name>, not in
// system:masters) 403 with the kubelet's message, as the admin 200.
func (c *cluster) checkKubeletAuth(t *testing.T) {
	var nodes corev1.NodeList
	if err := json.Unmarshal([]byte(c.OK(t, "get", "nodes", "-o", "json")), &nodes); err != nil || len(nodes.Items) != 1 {
		t.Fatalf("nodes: %v %d", err, len(nodes.Items))
	}
	n := nodes.Items[0]
	host := ""
	for _, a := range n.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			host = a.Address
		}
	}
	port := n.Status.DaemonEndpoints.KubeletEndpoint.Port
	if host == "" || port == 0 {
		t.Fatalf("node %s: addresses %v, kubelet port %d", n.Name, n.Status.Addresses, port)
	}
	url := "https://" + net.JoinHostPort(host, strconv.Itoa(int(port))) + "/containerLogs/default/talk/a"
	certOf := func(kubeconfig string) *tls.Certificate {
		rc, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
		if err != nil {
			t.Fatal(err)
		}
		kp, err := tls.X509KeyPair(rc.CertData, rc.KeyData)
		if err != nil {
			t.Fatalf("%s: %v", kubeconfig, err)
		}
		return &kp
	}
	tests := []struct {
		name     string
		cert     *tls.Certificate
		wantCode int
		wantBody string
	}{
		{"no client certificate", nil, 401, "Unauthorized"},
		{"the node's certificate", certOf(filepath.Join(c.DataDir, up.KubeletKubeconfig)), 403,
			"Forbidden (user=system:node:" + n.Name + ", verb=get, resource=nodes, subresource=proxy)"},
		{"the admin's certificate", certOf(c.Up.Kubeconfig()), 200, "attempt 2\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := &tls.Config{InsecureSkipVerify: true} //nolint:gosec // the kubelet's serving certificate is self-signed
			if tt.cert != nil {
				cfg.Certificates = []tls.Certificate{*tt.cert}
			}
			tr := &http.Transport{TLSClientConfig: cfg}
			defer tr.CloseIdleConnections()
			resp, err := (&http.Client{Transport: tr, Timeout: callTimeout}).Get(url)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tt.wantCode || string(b) != tt.wantBody {
				t.Errorf("GET %s: %d %q, want %d %q", url, resp.StatusCode, b, tt.wantCode, tt.wantBody)
			}
		})
	}
}
