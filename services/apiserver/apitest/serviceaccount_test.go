package apitest

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cairn-dev/cairn/services/apiserver"
	"github.com/cairn-dev/cairn/services/controlplane/controlplanetest"
	"github.com/cairn-dev/cairn/services/pki"
	"github.com/cairn-dev/cairn/services/pki/satoken"
)

// saEnv is a control plane running the ServiceAccount admission plugin,
// with namespace team, ServiceAccount team/bot and a Role letting bot read
// pods in team.
type saEnv struct {
	*controlplanetest.Env
	bot *corev1.ServiceAccount
}

func newSAEnv(t *testing.T, maxTokenExpiration ...time.Duration) *saEnv {
	o := controlplanetest.Options{ServiceAccountAdmission: true}
	if len(maxTokenExpiration) > 0 {
		o.MaxTokenExpiration = maxTokenExpiration[0]
	}
	env := controlplanetest.Start(t, o)
	ctx := ctxFor(t, 30*time.Second)
	cs := env.Client
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	bot, err := cs.CoreV1().ServiceAccounts("team").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "bot"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.RbacV1().Roles("team").Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "pod-reader"},
		Rules: []rbacv1.PolicyRule{{Verbs: []string{"get", "list"}, APIGroups: []string{""}, Resources: []string{"pods"}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.RbacV1().RoleBindings("team").Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "bot-reads-pods"},
		RoleRef:  rbacv1.RoleRef{Kind: "Role", Name: "pod-reader"},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: "team", Name: "bot"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return &saEnv{Env: env, bot: bot}
}

// token asks the TokenRequest API for a token of bot.
func (e *saEnv) token(t *testing.T, spec authenticationv1.TokenRequestSpec) *authenticationv1.TokenRequest {
	t.Helper()
	tr, err := e.Client.CoreV1().ServiceAccounts("team").CreateToken(ctxFor(t, 10*time.Second), "bot",
		&authenticationv1.TokenRequest{Spec: spec}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create token: %v", err)
	}
	return tr
}

// waitCode polls GET path with token until it answers want.
func waitCode(t *testing.T, env *controlplanetest.Env, path, token string, want int) reply {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		r := do(t, env, call{method: "GET", path: path, token: token})
		if r.code == want {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET %s answers %d, want %d: %s", path, r.code, want, r.body)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestServiceAccountTokenAuthenticates(t *testing.T) {
	e := newSAEnv(t)
	tr := e.token(t, authenticationv1.TokenRequestSpec{})
	if tr.Status.Token == "" || tr.Name != "bot" || tr.Namespace != "team" {
		t.Fatalf("TokenRequest answer: %+v", tr)
	}
	if d := time.Until(tr.Status.ExpirationTimestamp.Time); d < 59*time.Minute || d > 61*time.Minute {
		t.Errorf("default expiry in %v, want an hour", d)
	}
	if got := tr.Spec.Audiences; len(got) != 1 || got[0] != satoken.DefaultIssuer {
		t.Errorf("audiences %v, want the apiserver's", got)
	}
	tok := tr.Status.Token
	// The claims are kube's.
	parsed, err := jwt.ParseSigned(tok, []jose.SignatureAlgorithm{jose.ES256})
	if err != nil {
		t.Fatal(err)
	}
	var claims map[string]any
	if err := parsed.UnsafeClaimsWithoutVerification(&claims); err != nil {
		t.Fatal(err)
	}
	k8s, _ := claims["kubernetes.io"].(map[string]any)
	sa, _ := k8s["serviceaccount"].(map[string]any)
	if claims["iss"] != satoken.DefaultIssuer || claims["sub"] != "system:serviceaccount:team:bot" ||
		k8s["namespace"] != "team" || sa["name"] != "bot" || sa["uid"] != string(e.bot.UID) || claims["jti"] == nil {
		t.Errorf("claims %v", claims)
	}

	// Allowed what the Role grants.
	waitCode(t, e.Env, "/api/v1/namespaces/team/pods", tok, http.StatusOK)
	// whoami
	r := do(t, e.Env, call{method: "POST", path: "/apis/authentication.k8s.io/v1/selfsubjectreviews", token: tok,
		body: []byte(`{"apiVersion":"authentication.k8s.io/v1","kind":"SelfSubjectReview"}`)})
	var ssr authenticationv1.SelfSubjectReview
	if err := json.Unmarshal(r.body, &ssr); err != nil || r.code != http.StatusCreated {
		t.Fatalf("whoami %d: %s", r.code, r.body)
	}
	u := ssr.Status.UserInfo
	if u.Username != "system:serviceaccount:team:bot" || strings.Join(u.Groups, ",") != "system:serviceaccounts,system:serviceaccounts:team,system:authenticated" {
		t.Errorf("whoami: %+v", u)
	}
	// Refused the rest, with kube's message, nothing written.
	m := settle(t, e.Env)
	for _, c := range []struct {
		call call
		msg  string
	}{
		{call{method: "GET", path: "/api/v1/namespaces/team/secrets"},
			`secrets is forbidden: User "system:serviceaccount:team:bot" cannot list resource "secrets" in API group "" in the namespace "team"`},
		{call{method: "POST", path: "/api/v1/namespaces/team/configmaps", body: []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x"}}`)},
			`configmaps is forbidden: User "system:serviceaccount:team:bot" cannot create resource "configmaps" in API group "" in the namespace "team"`},
		{call{method: "GET", path: "/api/v1/namespaces/default/pods"},
			`pods is forbidden: User "system:serviceaccount:team:bot" cannot list resource "pods" in API group "" in the namespace "default"`},
	} {
		c.call.token = tok
		r := do(t, e.Env, c.call)
		st := status(t, r)
		if r.code != http.StatusForbidden || st.Message != c.msg {
			t.Errorf("%s %s: %d %q, want 403 %q", c.call.method, c.call.path, r.code, st.Message, c.msg)
		}
	}
	requireNothingWritten(t, e.Env, m)

	// Deleting the ServiceAccount kills its tokens; a new one of the same
	// name has another UID and does not revive them.
	ctx := ctxFor(t, 30*time.Second)
	if err := e.Client.CoreV1().ServiceAccounts("team").Delete(ctx, "bot", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Client.CoreV1().ServiceAccounts("team").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "bot"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitCode(t, e.Env, "/api/v1/namespaces/team/pods", tok, http.StatusUnauthorized)
}

func TestServiceAccountPodBoundToken(t *testing.T) {
	e := newSAEnv(t)
	ctx := ctxFor(t, 30*time.Second)
	pod, err := e.Client.CoreV1().Pods("team").Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "worker"},
		Spec: corev1.PodSpec{ServiceAccountName: "bot", Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tr := e.token(t, authenticationv1.TokenRequestSpec{BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: "worker"}})
	var claims struct {
		K8s struct {
			Pod struct {
				Name string `json:"name"`
				UID  string `json:"uid"`
			} `json:"pod"`
		} `json:"kubernetes.io"`
	}
	parsed, err := jwt.ParseSigned(tr.Status.Token, []jose.SignatureAlgorithm{jose.ES256})
	if err != nil {
		t.Fatal(err)
	}
	if err := parsed.UnsafeClaimsWithoutVerification(&claims); err != nil || claims.K8s.Pod.Name != "worker" || claims.K8s.Pod.UID != string(pod.UID) {
		t.Fatalf("pod claim %+v (%v)", claims.K8s.Pod, err)
	}
	waitCode(t, e.Env, "/api/v1/namespaces/team/pods", tr.Status.Token, http.StatusOK)
	if err := e.Client.CoreV1().Pods("team").Delete(ctx, "worker", metav1.DeleteOptions{GracePeriodSeconds: ptr[int64](0)}); err != nil {
		t.Fatal(err)
	}
	r := waitCode(t, e.Env, "/api/v1/namespaces/team/pods", tr.Status.Token, http.StatusUnauthorized)
	if st := status(t, r); st.Reason != metav1.StatusReasonUnauthorized {
		t.Errorf("after the pod's deletion: %+v", st)
	}
}

func TestServiceAccountBadTokens(t *testing.T) {
	e := newSAEnv(t)
	sa, err := e.Client.CoreV1().ServiceAccounts("team").Get(ctxFor(t, 10*time.Second), "bot", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	expired, err := e.ServiceAccountTokens.IssueToken(apiserver.TokenBinding{ServiceAccount: sa}, now.Add(-2*time.Hour), 3600, 0,
		[]string{satoken.DefaultIssuer})
	if err != nil {
		t.Fatal(err)
	}
	otherKeys, err := pki.LoadServiceAccountKeys(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	other, err := satoken.NewTokens("", nil, otherKeys, nil)
	if err != nil {
		t.Fatal(err)
	}
	forged, err := other.IssueToken(apiserver.TokenBinding{ServiceAccount: sa}, now, 3600, 0, []string{satoken.DefaultIssuer})
	if err != nil {
		t.Fatal(err)
	}
	wrongAud, err := e.ServiceAccountTokens.IssueToken(apiserver.TokenBinding{ServiceAccount: sa}, now, 3600, 0, []string{"vault"})
	if err != nil {
		t.Fatal(err)
	}
	good := e.token(t, authenticationv1.TokenRequestSpec{}).Status.Token
	parts := strings.Split(good, ".")
	tampered := parts[0] + "." + strings.TrimRight(parts[1], "=") + "x." + parts[2]
	// The payload of another valid token under this token's signature.
	otherPayload := strings.Split(e.token(t, authenticationv1.TokenRequestSpec{Audiences: []string{satoken.DefaultIssuer, "x"}}).Status.Token, ".")[1]
	waitCode(t, e.Env, "/api/v1/namespaces/team/pods", good, http.StatusOK)

	m := settle(t, e.Env)
	for _, c := range []struct {
		name, token string
		// reason is what the authenticator says (the client only sees
		// "Unauthorized", as from kube).
		reason string
	}{
		{"malformed", "not.a.jwt", "serviceaccount: not a service-account token"},
		{"garbage", "eyJhbGciOi" + strings.Repeat("A", 40), "serviceaccount: not a service-account token"},
		{"expired", expired, "service account token has expired"},
		{"another key", forged, "serviceaccount: no key verifies the token"},
		{"another audience", wrongAud, `token audiences ["vault"] is invalid for the target audiences ["https://kubernetes.default.svc.cluster.local"]`},
		{"tampered payload", tampered, "serviceaccount: not a service-account token"},
		{"another payload", parts[0] + "." + otherPayload + "." + parts[2], "go-jose/go-jose: error in cryptographic primitive"},
		{"signature removed", parts[0] + "." + parts[1] + ".", "go-jose/go-jose: error in cryptographic primitive"},
	} {
		name, tok := c.name, c.token
		// Tokens that are not ours are the next authenticator's to refuse.
		ours := c.reason != satoken.ErrNotServiceAccountToken.Error()
		t.Run(name, func(t *testing.T) {
			_, err := e.ServiceAccountAuthenticator.AuthenticateToken(ctxFor(t, 10*time.Second), tok)
			if err == nil || err.Error() != c.reason {
				t.Errorf("refused for %v, want %q", err, c.reason)
			}
			for _, c := range []call{
				{method: "GET", path: "/api/v1/namespaces/team/pods"},
				{method: "POST", path: "/api/v1/namespaces/team/pods", body: mustJSON(t, labeledPod("p", nil))},
			} {
				c.token = tok
				r := do(t, e.Env, c)
				if st := status(t, r); r.code != http.StatusUnauthorized || st.Reason != metav1.StatusReasonUnauthorized ||
					ours && st.Message != "Unauthorized" {
					t.Errorf("%s %s: %d %s, want 401", c.method, c.path, r.code, r.body)
				}
			}
		})
	}
	requireNothingWritten(t, e.Env, m)
}

// TestMaxTokenExpiration: with kube-apiserver's
// --service-account-max-token-expiration (cairn's flag of the same name), a
// longer request gets the cap, as kube shortens it, and a shorter one what
// it asked for.
func TestMaxTokenExpiration(t *testing.T) {
	e := newSAEnv(t, time.Hour)
	for _, tc := range []struct{ ask, want int64 }{{7200, 3600}, {1800, 1800}} {
		tr := e.token(t, authenticationv1.TokenRequestSpec{ExpirationSeconds: &tc.ask})
		if got := *tr.Spec.ExpirationSeconds; got != tc.want {
			t.Errorf("asked %d s: spec says %d s, want %d", tc.ask, got, tc.want)
		}
		payload, err := base64.RawURLEncoding.DecodeString(strings.Split(tr.Status.Token, ".")[1])
		if err != nil {
			t.Fatal(err)
		}
		var claims struct{ Iat, Exp int64 }
		if err := json.Unmarshal(payload, &claims); err != nil {
			t.Fatal(err)
		}
		if claims.Exp-claims.Iat != tc.want {
			t.Errorf("asked %d s: token lives %d s, want %d", tc.ask, claims.Exp-claims.Iat, tc.want)
		}
	}
}

func TestTokenRequestBadInput(t *testing.T) {
	e := newSAEnv(t)
	ctx := ctxFor(t, 30*time.Second)
	if _, err := e.Client.CoreV1().ServiceAccounts("team").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "other"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod, err := e.Client.CoreV1().Pods("team").Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "others"},
		Spec: corev1.PodSpec{ServiceAccountName: "other", Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_ = pod
	m := settle(t, e.Env)
	for _, c := range []struct {
		name, sa string
		spec     authenticationv1.TokenRequestSpec
		code     int32
		msg      string
	}{
		{"too short", "bot", authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr[int64](60)}, 422,
			`TokenRequest.authentication.k8s.io "" is invalid: spec.expirationSeconds: Invalid value: 60: may not specify a duration less than 10 minutes`},
		{"too long", "bot", authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr[int64](1 << 33)}, 422,
			`TokenRequest.authentication.k8s.io "" is invalid: spec.expirationSeconds: Invalid value: 8589934592: may not specify a duration larger than 2^32 seconds`},
		{"no such service account", "ghost", authenticationv1.TokenRequestSpec{}, 404, `serviceaccounts "ghost" not found`},
		{"pod of another service account", "bot", authenticationv1.TokenRequestSpec{BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: "others"}}, 400,
			`cannot bind token for serviceaccount "bot" to pod running with different serviceaccount name.`},
		{"no such pod", "bot", authenticationv1.TokenRequestSpec{BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: "nope"}}, 404,
			`pods "nope" not found`},
		{"unknown kind", "bot", authenticationv1.TokenRequestSpec{BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "Deployment", APIVersion: "apps/v1", Name: "d"}}, 400,
			`object reference of unknown type: apps/v1, Kind=Deployment`},
		{"uid mismatch", "other", authenticationv1.TokenRequestSpec{BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: "others", UID: types.UID("nope")}}, 409,
			`Operation cannot be fulfilled on Pod "others": the UID in the bound object reference (nope) does not match the UID in record. The object might have been deleted and then recreated`},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := e.Client.CoreV1().ServiceAccounts("team").CreateToken(ctx, c.sa, &authenticationv1.TokenRequest{Spec: c.spec}, metav1.CreateOptions{})
			st, ok := err.(apierrors.APIStatus)
			if !ok || st.Status().Code != c.code || st.Status().Message != c.msg {
				t.Errorf("got %v, want %d %q", err, c.code, c.msg)
			}
		})
	}
	requireNothingWritten(t, e.Env, m)
}

func TestServiceAccountAdmission(t *testing.T) {
	e := newSAEnv(t)
	ctx := ctxFor(t, 60*time.Second)
	pods := e.Client.CoreV1().Pods("team")
	pod := func(name, sa string, automount *bool) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PodSpec{ServiceAccountName: sa, AutomountServiceAccountToken: automount,
			InitContainers: []corev1.Container{{Name: "init", Image: "busybox"}},
			Containers:     []corev1.Container{{Name: "a", Image: "busybox"}, {Name: "b", Image: "busybox"}}}}
	}

	// No default ServiceAccount (no controller runs here): refused.
	m := settle(t, e.Env)
	_, err := pods.Create(ctx, pod("nodefault", "", nil), metav1.CreateOptions{})
	if want := `pods "nodefault" is forbidden: error looking up service account team/default: serviceaccount "default" not found`; !apierrors.IsForbidden(err) || err.Error() != want {
		t.Errorf("pod without a default ServiceAccount: %v, want %q", err, want)
	}
	_, err = pods.Create(ctx, pod("ghost", "ghost", nil), metav1.CreateOptions{})
	if want := `pods "ghost" is forbidden: error looking up service account team/ghost: serviceaccount "ghost" not found`; !apierrors.IsForbidden(err) || err.Error() != want {
		t.Errorf("pod of a missing ServiceAccount: %v, want %q", err, want)
	}
	requireNothingWritten(t, e.Env, m)

	got, err := pods.Create(ctx, pod("mounted", "bot", nil), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var vol *corev1.Volume
	for i := range got.Spec.Volumes {
		if strings.HasPrefix(got.Spec.Volumes[i].Name, "kube-api-access-") {
			vol = &got.Spec.Volumes[i]
		}
	}
	if vol == nil || len(vol.Name) != len("kube-api-access-")+5 || vol.Projected == nil || len(vol.Projected.Sources) != 3 {
		t.Fatalf("volumes %+v", got.Spec.Volumes)
	}
	src := vol.Projected.Sources
	if *vol.Projected.DefaultMode != 0o644 || src[0].ServiceAccountToken == nil || *src[0].ServiceAccountToken.ExpirationSeconds != 3607 || src[0].ServiceAccountToken.Path != "token" ||
		src[1].ConfigMap == nil || src[1].ConfigMap.Name != "kube-root-ca.crt" || src[1].ConfigMap.Items[0].Key != "ca.crt" ||
		src[2].DownwardAPI == nil || src[2].DownwardAPI.Items[0].FieldRef.FieldPath != "metadata.namespace" {
		t.Errorf("token volume %+v", vol.Projected)
	}
	for _, c := range append(got.Spec.InitContainers, got.Spec.Containers...) {
		if len(c.VolumeMounts) != 1 || !reflect.DeepEqual(c.VolumeMounts[0], corev1.VolumeMount{Name: vol.Name, ReadOnly: true, MountPath: "/var/run/secrets/kubernetes.io/serviceaccount"}) {
			t.Errorf("container %s mounts %+v", c.Name, c.VolumeMounts)
		}
	}

	// automountServiceAccountToken: false on the pod, or on the
	// ServiceAccount with the pod silent, mounts nothing.
	got, err = pods.Create(ctx, pod("optout", "bot", ptr(false)), metav1.CreateOptions{})
	if err != nil || len(got.Spec.Volumes) != 0 {
		t.Errorf("automount false: %v, volumes %+v", err, got.Spec.Volumes)
	}
	if _, err := e.Client.CoreV1().ServiceAccounts("team").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "quiet"},
		AutomountServiceAccountToken: ptr(false)}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	got, err = pods.Create(ctx, pod("quiet", "quiet", nil), metav1.CreateOptions{})
	if err != nil || len(got.Spec.Volumes) != 0 {
		t.Errorf("ServiceAccount automount false: %v, volumes %+v", err, got.Spec.Volumes)
	}
	got, err = pods.Create(ctx, pod("loud", "quiet", ptr(true)), metav1.CreateOptions{})
	if err != nil || len(got.Spec.Volumes) != 1 {
		t.Errorf("pod automount true wins: %v, volumes %+v", err, got.Spec.Volumes)
	}
}

func TestServiceAccountIssuerDiscovery(t *testing.T) {
	e := newSAEnv(t)
	r := do(t, e.Env, call{method: "GET", path: "/.well-known/openid-configuration"})
	var cfg struct {
		Issuer  string   `json:"issuer"`
		JWKSURI string   `json:"jwks_uri"`
		Algs    []string `json:"id_token_signing_alg_values_supported"`
		Resp    []string `json:"response_types_supported"`
		Subj    []string `json:"subject_types_supported"`
	}
	if err := json.Unmarshal(r.body, &cfg); err != nil || r.code != 200 {
		t.Fatalf("openid-configuration %d: %s", r.code, r.body)
	}
	if cfg.Issuer != satoken.DefaultIssuer || cfg.JWKSURI != satoken.DefaultIssuer+"/openid/v1/jwks" ||
		strings.Join(cfg.Algs, ",") != "ES256" || strings.Join(cfg.Resp, ",") != "id_token" || strings.Join(cfg.Subj, ",") != "public" {
		t.Errorf("openid-configuration %+v", cfg)
	}
	// A service account may read them (system:service-account-issuer-discovery)
	// and the keys verify its token.
	tok := e.token(t, authenticationv1.TokenRequestSpec{}).Status.Token
	r = waitCode(t, e.Env, "/openid/v1/jwks", tok, http.StatusOK)
	if ct := r.header.Get("Content-Type"); ct != "application/jwk-set+json" {
		t.Errorf("jwks content type %q", ct)
	}
	var set jose.JSONWebKeySet
	if err := json.Unmarshal(r.body, &set); err != nil || len(set.Keys) != 1 {
		t.Fatalf("jwks: %v %s", err, r.body)
	}
	parsed, err := jwt.ParseSigned(tok, []jose.SignatureAlgorithm{jose.ES256})
	if err != nil {
		t.Fatal(err)
	}
	var c jwt.Claims
	if parsed.Headers[0].KeyID != set.Keys[0].KeyID {
		t.Errorf("kid %q, jwks has %q", parsed.Headers[0].KeyID, set.Keys[0].KeyID)
	}
	if err := parsed.Claims(set.Keys[0].Key, &c); err != nil || c.Subject != "system:serviceaccount:team:bot" {
		t.Errorf("the published key does not verify the token: %v %+v", err, c)
	}
	// A user without the role may not.
	if r := do(t, e.Env, call{method: "GET", path: "/openid/v1/jwks", token: controlplanetest.UserToken}); r.code != http.StatusForbidden {
		t.Errorf("alice reads the jwks: %d", r.code)
	}
}
