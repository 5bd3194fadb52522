package e2etest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/cairn-dev/cairn/services/cairn/cairntest"
	"github.com/cairn-dev/cairn/services/netns"
)

// clientPod is where the fetches come from: another pod on the node.
const clientPod = `apiVersion: v1
kind: Pod
metadata:
  name: client
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: c
    image: cairn.local/busybox:1.36
    imagePullPolicy: IfNotPresent
    command: ["sleep", "3600"]
`

// TestServices is issue 15's path on the real node: the README's web
// Deployment exposed with kubectl expose, fetched by ClusterIP from another
// pod through the node's proxy (nftables in the node's network namespace),
// balanced over the pods, following scale and readiness, by NodePort on the
// node's address, gone with the Service; and the apiserver reached from a
// pod at https://10.96.0.1 (the kubernetes Service, through the proxy's
// relay in the node's namespace).
func TestServices(t *testing.T) {
	kubectl := requireNode(t)
	if _, err := exec.LookPath("nft"); err != nil {
		t.Skip("e2etest: nft not found: run ops/node-deps.sh")
	}
	c := startCluster(t, cairntest.Build(t), kubectl, t.TempDir(), cairntest.FreeAddr(t))
	ns := c.netnsPath()
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
	var svc corev1.Service
	if err := json.Unmarshal([]byte(c.OK(t, "get", "svc", "web", "-o", "json")), &svc); err != nil {
		t.Fatal(err)
	}
	url := "http://" + svc.Spec.ClusterIP + "/who"

	t.Run("by ClusterIP from another pod, balanced over the 3", func(t *testing.T) {
		names := podNames(web)
		seen := map[string]int{}
		poll(t, podWait, "the ClusterIP answers", func() error { _, err := c.fetch(t, url); return err })
		for range 30 {
			who, err := c.fetch(t, url)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Contains(names, who) {
				t.Fatalf("%s answered by %q, not one of %v", url, who, names)
			}
			seen[who]++
		}
		if len(seen) < 2 {
			t.Errorf("30 fetches all answered by %v: not balanced over %v", seen, names)
		}
		t.Logf("answers: %v", seen)
	})

	t.Run("kubectl port-forward svc/web", func(t *testing.T) { c.checkPortForwardService(t, "web", 80, 8080, podNames(web)) })

	t.Run("a pod reaches the apiserver at https://10.96.0.1", func(t *testing.T) {
		// A TLS client that checks the serving certificate for the name
		// kubernetes.default.svc against the cluster CA; /version is open
		// to anyone (system:public-info-viewer), /api without a token is refused (401 or 403).
		tool := buildTLSGet(t)
		c.OK(t, "cp", tool, "client:/tmp/tlsget")
		c.OK(t, "cp", filepath.Join(c.DataDir, "pki", "ca.crt"), "client:/tmp/ca.crt")
		get := func(url string) (string, error) {
			r := c.Run(t, "exec", "client", "--", "/tmp/tlsget", "-ca", "/tmp/ca.crt", "-server-name", "kubernetes.default.svc", url)
			if r.Err != nil {
				return "", fmt.Errorf("%v: %s", r.Err, r.Stderr)
			}
			return r.Stdout, nil
		}
		var body string
		poll(t, podWait, "https://10.96.0.1/version from the client pod", func() error {
			var err error
			body, err = get("https://10.96.0.1/version")
			return err
		})
		if !strings.HasPrefix(body, "200\n") || !strings.Contains(body, `"gitVersion"`) {
			t.Errorf("https://10.96.0.1/version = %q, want 200 and the apiserver's version", body)
		}
		if body, err := get("https://10.96.0.1/api/v1/namespaces/default/pods"); err != nil || !strings.HasPrefix(body, "403\n") && !strings.HasPrefix(body, "401\n") {
			t.Errorf("pods without a token = %q, %v; want 401 or 403 from the apiserver", body, err)
		}
		// What client-go's in-cluster config uses: the pod's service-account
		// token and CA, and the kubernetes Service's address from the
		// environment. The apiserver knows the pod's service account (which
		// may not list pods): 200 or 403 naming it, never 401.
		const sa = "/var/run/secrets/kubernetes.io/serviceaccount"
		host := strings.TrimSpace(c.OK(t, "exec", "client", "--", "sh", "-c", "echo $KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT"))
		if host != "10.96.0.1:443" {
			t.Errorf("KUBERNETES_SERVICE_HOST:PORT in the pod = %q, want 10.96.0.1:443", host)
		}
		r := c.Run(t, "exec", "client", "--", "/tmp/tlsget", "-ca", sa+"/ca.crt", "-token-file", sa+"/token",
			"-server-name", "kubernetes.default.svc", "https://"+host+"/api/v1/namespaces/default/pods")
		if r.Err != nil || !strings.HasPrefix(r.Stdout, "200\n") && !(strings.HasPrefix(r.Stdout, "403\n") && strings.Contains(r.Stdout, "system:serviceaccount:default:default")) {
			t.Errorf("pods with the pod's service-account token: %s", r)
		}
	})

	var one corev1.Pod
	t.Run("scaled to 1, only that pod answers", func(t *testing.T) {
		c.OK(t, "scale", "deployment", "web", "--replicas=1")
		one = c.waitWeb(t, 1)[0]
		poll(t, podWait, "10 fetches in a row answered by "+one.Name, func() error {
			for range 10 {
				who, err := c.fetch(t, url)
				if err != nil || who != one.Name {
					return fmt.Errorf("answered by %q, %v", who, err)
				}
			}
			return nil
		})
	})
	if one.Name == "" {
		t.FailNow()
	}

	t.Run("a failing readiness probe leaves no endpoint: refused", func(t *testing.T) {
		c.OK(t, "exec", one.Name, "--", "mv", "/var/www/index.html", "/var/www/index.off")
		restored := false
		restore := func() {
			if !restored {
				restored = true
				c.OK(t, "exec", one.Name, "--", "mv", "/var/www/index.off", "/var/www/index.html")
			}
		}
		defer restore() // also when a check below fails: the NodePort needs the pod Ready
		poll(t, podWait, "the fetch refused", func() error {
			who, err := c.fetch(t, url)
			if err == nil || !strings.Contains(err.Error(), "refused") {
				return fmt.Errorf("answered by %q, %v", who, err)
			}
			return nil
		})
		eps := c.OK(t, "get", "endpoints", "web", "-o", "jsonpath={.subsets[*].addresses[*].ip}")
		if strings.TrimSpace(eps) != "" {
			t.Errorf("endpoints web still list ready addresses %q", eps)
		}
		restore()
		poll(t, podWait, "answers again once Ready", func() error {
			who, err := c.fetch(t, url)
			if err != nil || who != one.Name {
				return fmt.Errorf("answered by %q, %v", who, err)
			}
			return nil
		})
	})

	t.Run("NodePort on the node's address", func(t *testing.T) {
		c.OK(t, "patch", "svc", "web", "-p", `{"spec":{"type":"NodePort"}}`)
		if err := json.Unmarshal([]byte(c.OK(t, "get", "svc", "web", "-o", "json")), &svc); err != nil {
			t.Fatal(err)
		}
		port := strconv.Itoa(int(svc.Spec.Ports[0].NodePort))
		gw := c.bridgeAddress(t)
		nodeURL := "http://" + net.JoinHostPort(gw, port) + "/who"
		poll(t, podWait, nodeURL+" from the client pod", func() error {
			who, err := c.fetch(t, nodeURL)
			if err != nil || who != one.Name {
				return fmt.Errorf("answered by %q, %v", who, err)
			}
			return nil
		})
		// And from the node itself: a connection made in its namespace.
		who, err := nsFetch(ns, net.JoinHostPort(gw, port))
		if err != nil || who != one.Name {
			t.Errorf("%s from inside the node's namespace: %q, %v", nodeURL, who, err)
		}
	})

	t.Run("deleted, its rules and slices are gone", func(t *testing.T) {
		c.OK(t, "delete", "svc", "web")
		poll(t, podWait, "no rule of "+svc.Spec.ClusterIP+" in the node's table", func() error {
			out, err := exec.Command("ip", "netns", "exec", filepath.Base(ns), "nft", "list", "table", "ip", "cairn-proxy").CombinedOutput()
			if err != nil {
				return fmt.Errorf("nft list table: %v: %s", err, out)
			}
			if strings.Contains(string(out), svc.Spec.ClusterIP) || strings.Contains(string(out), "default/web/") {
				return fmt.Errorf("still there:\n%s", cairntest.Tail(string(out), 20))
			}
			return nil
		})
		poll(t, podWait, "web's EndpointSlices gone", func() error {
			if out := c.OK(t, "get", "endpointslices", "-l", "kubernetes.io/service-name=web", "-o", "name"); strings.TrimSpace(out) != "" {
				return fmt.Errorf("left: %s", out)
			}
			return nil
		})
		if _, err := c.fetch(t, url); err == nil {
			t.Errorf("%s still answers after the Service is deleted", url)
		}
	})
}

// buildTLSGet builds testdata/tlsget as a static binary for the pod.
func buildTLSGet(t *testing.T) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "tlsget")
	cmd := exec.Command("go", "build", "-o", out, "./testdata/tlsget")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build tlsget: %v: %s", err, b)
	}
	return out
}

// fetch gets url from the client pod with busybox wget, bounded by the
// pod's own timeout (wget -T crashes Debian's busybox), and returns the
// body trimmed, or an error with wget's message.
func (c *cluster) fetch(t *testing.T, url string) (string, error) {
	t.Helper()
	r := c.Run(t, "exec", "client", "--", "timeout", "10", "wget", "-qO-", url)
	if r.Err != nil {
		return "", fmt.Errorf("wget %s: %v: %s", url, r.Err, strings.TrimSpace(r.Stderr))
	}
	return strings.TrimSpace(r.Stdout), nil
}

// bridgeAddress is the node's address on its pod bridge: the first of its
// pod CIDR, the pods' gateway.
func (c *cluster) bridgeAddress(t *testing.T) string {
	t.Helper()
	cidr := strings.TrimSpace(c.OK(t, "get", "nodes", "-o", "jsonpath={.items[0].spec.podCIDR}"))
	p, err := netip.ParsePrefix(cidr)
	if err != nil {
		t.Fatalf("node podCIDR %q: %v", cidr, err)
	}
	return p.Masked().Addr().Next().String()
}

// nsFetch GETs /who from addr with a connection made inside the node's
// network namespace.
func nsFetch(ns, addr string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := netns.DialContext(ctx, ns, "tcp", addr)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(conn, "GET /who HTTP/1.0\r\nHost: node\r\n\r\n"); err != nil {
		return "", err
	}
	b, err := io.ReadAll(conn)
	if err != nil {
		return "", err
	}
	_, body, ok := strings.Cut(string(b), "\r\n\r\n")
	if !ok {
		return "", fmt.Errorf("no HTTP response: %q", b)
	}
	return strings.TrimSpace(body), nil
}
