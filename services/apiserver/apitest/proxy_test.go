package apitest

import (
	"bufio"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cairn-dev/cairn/services/controlplane/controlplanetest"
	"github.com/cairn-dev/cairn/services/pki"
)

// TestKubeletProxy: pods/log, pods/exec, pods/attach and pods/portforward
// reach the kubelet of the pod's node (here an HTTPS endpoint standing in for the
// kubelet's server, which the kubelet tests exercise for real) with the
// path and query the kubelet API expects, and the connection upgrade of an
// exec or a port forward passes through.
// The apiserver authenticates to the kubelet with its kubelet client
// certificate (pki.KubeletClientTLSConfig), which the stand-in verifies
// against the cluster CA as a kubelet with --client-ca-file does; without
// one it answers 401 like the kubelet.
func TestKubeletProxy(t *testing.T) {
	p, err := pki.Load(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	env := controlplanetest.Start(t, controlplanetest.Options{KubeletClientTLS: p.KubeletClientTLSConfig()})
	ctx := ctxFor(t, 60*time.Second)
	kubelet := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if len(r.TLS.VerifiedChains) == 0 {
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		if c := r.TLS.VerifiedChains[0][0]; c.Subject.CommonName != pki.KubeletClientUser || !slices.Equal(c.Subject.Organization, []string{pki.MastersGroup}) {
			http.Error(w, "Forbidden (user="+c.Subject.CommonName+")", http.StatusForbidden)
			return
		}
		if r.Header.Get("Upgrade") == "" {
			io.WriteString(w, r.Method+" "+r.URL.Path+"?"+r.URL.RawQuery)
			return
		}
		conn, rw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Errorf("hijack: %v", err)
			return
		}
		defer conn.Close()
		rw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: " + r.Header.Get("Upgrade") + "\r\n\r\n")
		rw.Flush()
		line, _ := rw.ReadString('\n')
		rw.WriteString("echo " + r.URL.Path + "?" + r.URL.RawQuery + " " + line)
		rw.Flush()
	}))
	kubelet.TLS = &tls.Config{ClientCAs: p.CAPool, ClientAuth: tls.VerifyClientCertIfGiven}
	kubelet.StartTLS()
	defer kubelet.Close()
	u, _ := url.Parse(kubelet.URL)
	host, portStr, _ := net.SplitHostPort(u.Host)
	port, _ := strconv.Atoi(portStr)
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "k1"}}
	// A node takes only as many pods as its allocatable says (none if it
	// does not say), as in kube.
	node.Status.Allocatable = corev1.ResourceList{corev1.ResourcePods: resource.MustParse("110")}
	node.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: host}}
	node.Status.DaemonEndpoints.KubeletEndpoint.Port = int32(port)
	if _, err := env.Client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pods := env.Client.CoreV1().Pods("default")
	two := testPod("two")
	two.Spec.Containers = append(two.Spec.Containers, corev1.Container{Name: "side", Image: "busybox"})
	for _, p := range []*corev1.Pod{testPod("web"), two, testPod("unbound")} {
		if _, err := pods.Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []string{"web", "two"} {
		if err := pods.Bind(ctx, &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: p}, Target: corev1.ObjectReference{Name: "k1"}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	c := testPod("x").Spec.Containers[0].Name

	body, err := pods.GetLogs("web", &corev1.PodLogOptions{Follow: true, TailLines: ptr(int64(5))}).DoRaw(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(body), "GET /containerLogs/default/web/"+c+"?"; !strings.HasPrefix(got, want) || !strings.Contains(got, "follow=true") || !strings.Contains(got, "tailLines=5") {
		t.Errorf("log proxied as %q, want %q with follow and tailLines", got, want)
	}
	// client-go's DoRaw does not decode a Status for a logs request; the
	// body is the Status.
	for _, tc := range []struct{ pod, container, want string }{
		{"two", "", "a container name must be specified for pod two, choose one of: [c side]"},
		{"two", "nope", "container nope is not valid for pod two"},
		{"unbound", "", "pod unbound does not have a host assigned"},
	} {
		b, err := pods.GetLogs(tc.pod, &corev1.PodLogOptions{Container: tc.container}).DoRaw(ctx)
		if err == nil || !strings.Contains(string(b), `"code":400`) || !strings.Contains(string(b), tc.want) {
			t.Errorf("logs of %s -c %q: %v %s, want 400 %q", tc.pod, tc.container, err, b, tc.want)
		}
	}
	if _, err := pods.GetLogs("missing", &corev1.PodLogOptions{}).DoRaw(ctx); !apierrors.IsNotFound(err) {
		t.Errorf("logs of a missing pod: %v", err)
	}

	// An exec, an attach and a port forward upgrade, by hand over the apiserver's
	// plain-HTTP test port. A port forward's ports= reaches the kubelet as
	// port=, as kube-apiserver passes it.
	api, _ := url.Parse(env.Config.Host)
	for path, want := range map[string]string{
		"two/exec?container=side&command=cat&stdout=true": "echo /exec/default/two/side?command=cat&stdout=true hello\n",
		"two/attach?container=side&stdout=true":           "echo /attach/default/two/side?stdout=true hello\n",
		"web/portforward?ports=8080&ports=9090":           "echo /portForward/default/web?port=8080&port=9090 hello\n",
		"web/portforward":                                 "echo /portForward/default/web? hello\n",
	} {
		if got := upgrade(t, api.Host, path); got != want {
			t.Errorf("through the upgraded connection of %s: %q, want %q", path, got, want)
		}
	}
	for _, tc := range []struct{ pod, port, want string }{
		{"web", "0", `invalid port \"0\"`},
		{"web", "http", `invalid port \"http\"`},
		{"unbound", "80", "pod unbound does not have a host assigned"},
	} {
		b, err := env.Client.CoreV1().RESTClient().Post().Namespace("default").Resource("pods").Name(tc.pod).
			SubResource("portforward").Param("ports", tc.port).DoRaw(ctx)
		if err == nil || !strings.Contains(string(b), `"code":400`) || !strings.Contains(string(b), tc.want) {
			t.Errorf("port forward to %s port %s: %v %s, want 400 %q", tc.pod, tc.port, err, b, tc.want)
		}
	}
	_, err = env.Client.CoreV1().RESTClient().Post().Namespace("default").Resource("pods").Name("missing").SubResource("portforward").DoRaw(ctx)
	if !apierrors.IsNotFound(err) {
		t.Errorf("port forward to a missing pod: %v", err)
	}
}

// upgrade posts an upgrade request for the pod subresource path (with its
// query) as the admin, writes a line through the upgraded connection and
// returns the line read back.
func upgrade(t *testing.T, host, path string) string {
	t.Helper()
	conn, err := net.Dial("tcp", host)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	io.WriteString(conn, "POST /api/v1/namespaces/default/pods/"+path+" HTTP/1.1\r\n"+
		"Host: "+host+"\r\nAuthorization: Bearer "+controlplanetest.AdminToken+"\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\nContent-Length: 0\r\n\r\n")
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("%s: %s", path, resp.Status)
	}
	io.WriteString(conn, "hello\n")
	line, _ := br.ReadString('\n')
	return line
}
