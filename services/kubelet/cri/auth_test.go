package cri_test

import (
	"context"
	"crypto/tls"
	"io"
	"net/http"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/cairn-dev/cairn/services/kubelet"
	"github.com/cairn-dev/cairn/services/pki"
)

// TestServerAuth: the kubelet's API authenticates its clients by a TLS
// client certificate from Config.ClientCAs and authorizes them as kube's
// kubelet with --authorization-mode=Webhook: a SubjectAccessReview to the
// apiserver for the node's subresource the path maps to (proxy for logs
// and exec, log for /logs/, stats for /stats/), answering 401
// "Unauthorized" without a verified certificate and 403 "Forbidden
// (user=..., verb=..., resource=nodes, subresource=...)" when RBAC (and
// the Node authorizer) deny. A user bound to nodes/proxy gets in, the
// apiserver's kubelet client does through system:kubelet-api-admin even
// outside system:masters, a node does not. /healthz stays open. Without
// ClientCAs nobody gets in.
func TestServerAuth(t *testing.T) {
	r := newRig(t, nil)
	r.create(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "hi"}, Spec: corev1.PodSpec{Containers: []corev1.Container{{
		Name: "c", Command: sh("echo hello; exec sleep 3600")}}}})
	r.waitReady("hi")
	deadline := time.Now().Add(wait)
	for r.logsString("hi", "c", nil) != "hello\n" {
		if time.Now().After(deadline) {
			t.Fatalf("logs: %q", r.logsString("hi", "c", nil))
		}
		time.Sleep(100 * time.Millisecond)
	}

	keyPair := func(certPEM, keyPEM []byte, err error) *tls.Certificate {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		kp, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			t.Fatal(err)
		}
		return &kp
	}
	otherCA, err := pki.Load(t.TempDir(), nil) // another cluster
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := r.env.Client.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "node-logs-reader"},
		Rules:      []rbacv1.PolicyRule{{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"nodes/proxy", "nodes/log"}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.env.Client.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "bob-node-logs"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "node-logs-reader"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "bob"}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// RBAC decides from caches fed by the log: wait until bob may.
	waitAllowed(t, r.env.Client, "bob", "get", "proxy")

	var (
		bob          = keyPair(r.pki.IssueClient("bob", nil))
		kubeletAdmin = keyPair(r.pki.IssueClient(pki.KubeletClientUser, nil)) // outside system:masters
		admin        = keyPair(r.pki.AdminCertPEM, r.pki.AdminKeyPEM, nil)
		apiserver    = &r.pki.KubeletClient
		node         = keyPair(r.pki.IssueClient("system:node:n1", []string{"system:nodes"}))
		alice        = keyPair(r.pki.IssueClient("alice", nil))
		stranger     = keyPair(otherCA.AdminCertPEM, otherCA.AdminKeyPEM, nil) // system:masters, of another CA
	)
	const (
		logs = "/containerLogs/default/hi/c"
		exec = "/exec/default/hi/c?command=true&stdout=1"
	)
	tests := []struct {
		name         string
		cert         *tls.Certificate
		method, path string
		wantCode     int
		wantBody     string
		// mayFailTLS: the server may refuse the certificate in the
		// handshake instead of answering 401.
		mayFailTLS bool
	}{
		{"no certificate: logs", nil, http.MethodGet, logs, 401, "Unauthorized", false},
		{"no certificate: exec", nil, http.MethodPost, exec, 401, "Unauthorized", false},
		{"no certificate: healthz", nil, http.MethodGet, "/healthz", 200, "ok", false},
		{"another CA's admin: logs", stranger, http.MethodGet, logs, 401, "Unauthorized", true},
		{"node: logs", node, http.MethodGet, logs, 403, "Forbidden (user=system:node:n1, verb=get, resource=nodes, subresource=proxy)", false},
		{"node: exec", node, http.MethodPost, exec, 403, "Forbidden (user=system:node:n1, verb=create, resource=nodes, subresource=proxy)", false},
		{"alice: exec by GET", alice, http.MethodGet, exec, 403, "Forbidden (user=alice, verb=get, resource=nodes, subresource=proxy)", false},
		{"alice: node logs", alice, http.MethodGet, "/logs/", 403, "Forbidden (user=alice, verb=get, resource=nodes, subresource=log)", false},
		{"alice: stats", alice, http.MethodGet, "/stats/summary", 403, "Forbidden (user=alice, verb=get, resource=nodes, subresource=stats)", false},
		{"bob: logs", bob, http.MethodGet, logs, 200, "hello\n", false},
		{"bob: exec", bob, http.MethodPost, exec, 403, "Forbidden (user=bob, verb=create, resource=nodes, subresource=proxy)", false},
		{"bob: node logs (allowed, not served)", bob, http.MethodGet, "/logs/", 404, "404 page not found\n", false},
		{"bob: metrics", bob, http.MethodGet, "/metrics", 403, "Forbidden (user=bob, verb=get, resource=nodes, subresource=metrics)", false},
		{"kubelet-api-admin: logs", kubeletAdmin, http.MethodGet, logs, 200, "hello\n", false},
		{"admin: logs", admin, http.MethodGet, logs, 200, "hello\n", false},
		{"apiserver's kubelet client: logs", apiserver, http.MethodGet, logs, 200, "hello\n", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, body, err := r.request(tt.cert, tt.method, tt.path)
			if err != nil {
				if tt.mayFailTLS {
					t.Logf("refused in the TLS handshake: %v", err)
					return
				}
				t.Fatal(err)
			}
			if code != tt.wantCode || body != tt.wantBody {
				t.Errorf("%s %s: %d %q, want %d %q", tt.method, tt.path, code, body, tt.wantCode, tt.wantBody)
			}
		})
	}

	// A kubelet without ClientCAs authenticates nobody, admin included.
	r.stop()
	r.start(func(c *kubelet.Config) { c.ClientCAs = nil })
	for _, path := range []string{logs, "/healthz"} {
		code, body, err := r.request(admin, http.MethodGet, path)
		want := map[string]int{logs: 401, "/healthz": 200}[path]
		if err != nil || code != want {
			t.Errorf("without ClientCAs, admin GET %s: %d %q %v, want %d", path, code, body, err, want)
		}
	}
}

// waitAllowed waits until a SubjectAccessReview allows user verb on
// nodes/subresource.
func waitAllowed(t *testing.T, cs kubernetes.Interface, user, verb, subresource string) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for {
		res, err := cs.AuthorizationV1().SubjectAccessReviews().Create(context.Background(), &authorizationv1.SubjectAccessReview{
			Spec: authorizationv1.SubjectAccessReviewSpec{User: user, ResourceAttributes: &authorizationv1.ResourceAttributes{
				Verb: verb, Resource: "nodes", Subresource: subresource, Name: "n1"}}}, metav1.CreateOptions{})
		if err == nil && res.Status.Allowed {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s may not %s nodes/%s: %v %+v", user, verb, subresource, err, res)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// request makes one request of the kubelet's API with cert (nil: none) and
// returns the status code and the body.
func (r *rig) request(cert *tls.Certificate, method, path string) (int, string, error) {
	cfg := &tls.Config{InsecureSkipVerify: true} //nolint:gosec // the kubelet's certificate is self-signed
	if cert != nil {
		cfg.Certificates = []tls.Certificate{*cert}
	}
	tr := &http.Transport{TLSClientConfig: cfg}
	defer tr.CloseIdleConnections()
	u := r.serverURL("", nil)
	req, err := http.NewRequest(method, u.String()+path, nil)
	if err != nil {
		return 0, "", err
	}
	resp, err := (&http.Client{Transport: tr, Timeout: wait}).Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}
