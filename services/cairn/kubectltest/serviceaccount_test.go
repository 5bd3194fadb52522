package kubectltest

import (
	"strings"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/services/cairn/cairntest"
)

// until polls f until it returns true or 30 s pass.
func until(t *testing.T, what string, f func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !f() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: never", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// testServiceAccounts: kubectl create serviceaccount, the default
// ServiceAccount and kube-root-ca.crt of a new namespace, auth can-i --as
// the ServiceAccount, and kubectl create token: accepted for what the
// Role grants, 403 with kube's message for the rest (nothing written),
// --duration, --audience, a pod-bound token dying with its pod, and
// garbage tokens refused.
func testServiceAccounts(t *testing.T, c *cluster) {
	const ns = "sa-team"
	c.OK(t, "create", "namespace", ns)
	if got := strings.TrimSpace(c.OK(t, "create", "serviceaccount", "bot", "-n", ns)); got != "serviceaccount/bot created" {
		t.Errorf("create serviceaccount = %q", got)
	}
	until(t, "the namespace's default ServiceAccount", func() bool { return c.Run(t, "get", "sa", "default", "-n", ns).Err == nil })
	rows := wantHeader(t, c.OK(t, "get", "serviceaccounts", "-n", ns), "NAME", "SECRETS", "AGE")
	wantRow(t, rows, "bot", "0")
	wantRow(t, rows, "default", "0")
	until(t, "the namespace's kube-root-ca.crt", func() bool {
		r := c.Run(t, "get", "configmap", "kube-root-ca.crt", "-n", ns, "-o", "jsonpath={.data.ca\\.crt}")
		return r.Err == nil && strings.Contains(r.Stdout, "BEGIN CERTIFICATE")
	})

	c.OK(t, "create", "role", "pod-reader", "--verb=get,list", "--resource=pods", "-n", ns)
	c.OK(t, "create", "rolebinding", "bot-reads-pods", "--role=pod-reader", "--serviceaccount="+ns+":bot", "-n", ns)
	as := "--as=system:serviceaccount:" + ns + ":bot"
	canI := func(args ...string) string {
		return strings.TrimSpace(c.RunWith(t, "", 0, append([]string{"auth", "can-i"}, args...)...).Stdout)
	}
	until(t, "auth can-i list pods as the ServiceAccount", func() bool { return canI("list", "pods", "-n", ns, as) == "yes" })
	for _, args := range [][]string{{"list", "secrets", "-n", ns, as}, {"create", "configmaps", "-n", ns, as}, {"list", "pods", "-n", "default", as}} {
		if got := canI(args...); got != "no" {
			t.Errorf("auth can-i %q = %q, want no", args, got)
		}
	}

	token := strings.TrimSpace(c.OK(t, "create", "token", "bot", "-n", ns))
	cl := cairntest.JWTClaims(t, token)
	if cl["sub"] != "system:serviceaccount:"+ns+":bot" || cl["exp"].(float64)-cl["iat"].(float64) != 3600 {
		t.Errorf("token claims %v", cl)
	}
	bot := c.WithToken(t, token)
	if r := bot.Run(t, "get", "pods", "-n", ns); r.Err != nil || strings.TrimSpace(r.Stderr) != "No resources found in sa-team namespace." {
		t.Errorf("get pods with the token: %s", r)
	}
	if got := strings.TrimSpace(bot.OK(t, "auth", "whoami", "-o", "jsonpath={.status.userInfo.username}")); got != "system:serviceaccount:"+ns+":bot" {
		t.Errorf("auth whoami with the token = %q", got)
	}
	if got := bot.Fails(t, "get", "secrets", "-n", ns); !strings.Contains(got,
		`Error from server (Forbidden): secrets is forbidden: User "system:serviceaccount:sa-team:bot" cannot list resource "secrets" in API group "" in the namespace "sa-team"`) {
		t.Errorf("get secrets with the token: %q", got)
	}
	if got := bot.Fails(t, "create", "configmap", "nope", "-n", ns); !strings.Contains(got,
		`error: failed to create configmap: configmaps is forbidden: User "system:serviceaccount:sa-team:bot" cannot create resource "configmaps" in API group "" in the namespace "sa-team"`) {
		t.Errorf("create configmap with the token: %q", got)
	}
	if got := c.Fails(t, "get", "configmap", "nope", "-n", ns); !strings.Contains(got, `"nope" not found`) {
		t.Errorf("the refused configmap exists: %q", got)
	}

	short := strings.TrimSpace(c.OK(t, "create", "token", "bot", "-n", ns, "--duration=20m"))
	if cl := cairntest.JWTClaims(t, short); cl["exp"].(float64)-cl["iat"].(float64) != 1200 {
		t.Errorf("--duration=20m: claims %v", cl)
	}
	if got := c.Fails(t, "create", "token", "bot", "-n", ns, "--duration=1m"); !strings.Contains(got, "may not specify a duration less than 10 minutes") {
		t.Errorf("--duration=1m: %q", got)
	}
	vault := strings.TrimSpace(c.OK(t, "create", "token", "bot", "-n", ns, "--audience=vault"))
	if cl := cairntest.JWTClaims(t, vault); cl["aud"] != "vault" && !strings.Contains(strings.Join(anyStrings(cl["aud"]), ","), "vault") {
		t.Errorf("--audience=vault: claims %v", cl)
	}
	for name, tok := range map[string]string{"a token for another audience": vault, "garbage": "garbage", "a forged JWT": "eyJhbGciOiJFUzI1NiJ9.eyJpc3MiOiJodHRwczovL2t1YmVybmV0ZXMuZGVmYXVsdC5zdmMuY2x1c3Rlci5sb2NhbCJ9.AAAA"} {
		if got := c.WithToken(t, tok).Fails(t, "get", "pods", "-n", ns); !strings.Contains(got, "Unauthorized") {
			t.Errorf("%s: %q, want Unauthorized", name, got)
		}
	}

	// A token bound to a pod dies with it.
	c.OK(t, "run", "holder", "-n", ns, "--image=cairn.local/busybox:1.36", "--restart=Never", "--overrides", `{"spec":{"serviceAccountName":"bot"}}`)
	bound := strings.TrimSpace(c.OK(t, "create", "token", "bot", "-n", ns, "--bound-object-kind=Pod", "--bound-object-name=holder"))
	pod, _ := cairntest.JWTClaims(t, bound)["kubernetes.io"].(map[string]any)["pod"].(map[string]any)
	if pod["name"] != "holder" {
		t.Errorf("pod-bound token claims %v", cairntest.JWTClaims(t, bound))
	}
	holder := c.WithToken(t, bound)
	if r := holder.Run(t, "get", "pods", "-n", ns); r.Err != nil {
		t.Errorf("pod-bound token while the pod exists: %s", r)
	}
	c.OK(t, "delete", "pod", "holder", "-n", ns, "--force", "--grace-period=0")
	until(t, "the pod-bound token is refused after the pod's deletion", func() bool {
		r := holder.Run(t, "get", "pods", "-n", ns)
		return r.Err != nil && strings.Contains(r.Stderr, "Unauthorized")
	})
	if r := bot.Run(t, "get", "pods", "-n", ns); r.Err != nil {
		t.Errorf("the unbound token after the pod's deletion: %s", r)
	}

	// OIDC discovery.
	if got := c.OK(t, "get", "--raw", "/.well-known/openid-configuration"); !strings.Contains(got, `"issuer":"https://kubernetes.default.svc.cluster.local"`) {
		t.Errorf("openid-configuration: %s", got)
	}
	if got := bot.OK(t, "get", "--raw", "/openid/v1/jwks"); !strings.Contains(got, `"kty":"EC"`) {
		t.Errorf("jwks read by a service account: %s", got)
	}
}

func anyStrings(v any) []string {
	var out []string
	if l, ok := v.([]any); ok {
		for _, s := range l {
			out = append(out, s.(string))
		}
	}
	return out
}
