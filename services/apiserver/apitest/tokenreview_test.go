package apitest

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cairn-dev/cairn/services/apiserver"
	"github.com/cairn-dev/cairn/services/pki"
	"github.com/cairn-dev/cairn/services/pki/satoken"
)

// TestTokenReview: a pod-bound token's user carries kube's extra (pod,
// node, credential id) and the ServiceAccount's UID, in whoami, in a
// TokenReview and in a ValidatingAdmissionPolicy's request.userInfo; a
// TokenReview answers for the apiserver's audiences or those it names,
// and says why a token is refused, writing nothing.
func TestTokenReview(t *testing.T) {
	e := newSAEnv(t)
	ctx := ctxFor(t, 120*time.Second)
	cs := e.Client
	node, err := cs.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pod, err := cs.CoreV1().Pods("team").Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "worker"},
		Spec: corev1.PodSpec{NodeName: "n1", ServiceAccountName: "bot", Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	bound := e.token(t, authenticationv1.TokenRequestSpec{BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: "worker"}})
	vault := e.token(t, authenticationv1.TokenRequestSpec{Audiences: []string{"vault"}})
	waitCode(t, e.Env, "/api/v1/namespaces/team/pods", bound.Status.Token, http.StatusOK)

	wantUser := func(extra map[string]authenticationv1.ExtraValue) authenticationv1.UserInfo {
		return authenticationv1.UserInfo{Username: "system:serviceaccount:team:bot", UID: string(e.bot.UID),
			Groups: []string{"system:serviceaccounts", "system:serviceaccounts:team", "system:authenticated"}, Extra: extra}
	}
	r := do(t, e.Env, call{method: "POST", path: "/apis/authentication.k8s.io/v1/selfsubjectreviews", token: bound.Status.Token,
		body: []byte(`{"apiVersion":"authentication.k8s.io/v1","kind":"SelfSubjectReview"}`)})
	var ssr authenticationv1.SelfSubjectReview
	if err := json.Unmarshal(r.body, &ssr); err != nil || r.code != http.StatusCreated {
		t.Fatalf("whoami %d: %s", r.code, r.body)
	}
	cred := ssr.Status.UserInfo.Extra["authentication.kubernetes.io/credential-id"]
	if len(cred) != 1 || !strings.HasPrefix(cred[0], "JTI=") {
		t.Errorf("credential id %q, want JTI=<jti>", cred)
	}
	extra := map[string]authenticationv1.ExtraValue{
		"authentication.kubernetes.io/pod-name":      {"worker"},
		"authentication.kubernetes.io/pod-uid":       {string(pod.UID)},
		"authentication.kubernetes.io/node-name":     {"n1"},
		"authentication.kubernetes.io/node-uid":      {string(node.UID)},
		"authentication.kubernetes.io/credential-id": cred,
	}
	if got := ssr.Status.UserInfo; !reflect.DeepEqual(got, wantUser(extra)) {
		t.Errorf("whoami of a pod-bound token:\n got %+v\nwant %+v", got, wantUser(extra))
	}

	otherKeys, err := pki.LoadServiceAccountKeys(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	other, err := satoken.NewTokens("", nil, otherKeys, nil)
	if err != nil {
		t.Fatal(err)
	}
	forged, err := other.IssueToken(apiserver.TokenBinding{ServiceAccount: e.bot}, time.Now(), 3600, 0, []string{satoken.DefaultIssuer})
	if err != nil {
		t.Fatal(err)
	}
	reviews := cs.AuthenticationV1().TokenReviews()
	m := settle(t, e.Env)
	for _, c := range []struct {
		name      string
		spec      authenticationv1.TokenReviewSpec
		user      *authenticationv1.UserInfo
		audiences []string
		err       string
	}{
		{name: "a bound token", spec: authenticationv1.TokenReviewSpec{Token: bound.Status.Token},
			user: ptr(wantUser(extra)), audiences: []string{satoken.DefaultIssuer}},
		{name: "a token for its audience", spec: authenticationv1.TokenReviewSpec{Token: vault.Status.Token, Audiences: []string{"vault", "other"}},
			user:      ptr(wantUser(map[string]authenticationv1.ExtraValue{"authentication.kubernetes.io/credential-id": {"JTI=" + jti(t, vault.Status.Token)}})),
			audiences: []string{"vault"}},
		{name: "a token for another audience", spec: authenticationv1.TokenReviewSpec{Token: vault.Status.Token},
			err: `token audiences ["vault"] is invalid for the target audiences ["https://kubernetes.default.svc.cluster.local"]`},
		{name: "the apiserver's token for another audience", spec: authenticationv1.TokenReviewSpec{Token: bound.Status.Token, Audiences: []string{"vault"}},
			err: `token audiences ["https://kubernetes.default.svc.cluster.local"] is invalid for the target audiences ["vault"]`},
		{name: "signed by another key", spec: authenticationv1.TokenReviewSpec{Token: forged}, err: "serviceaccount: no key verifies the token"},
		{name: "garbage", spec: authenticationv1.TokenReviewSpec{Token: "not-a-token"}, err: "invalid bearer token"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := reviews.Create(ctx, &authenticationv1.TokenReview{Spec: c.spec}, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			st := got.Status
			if st.Authenticated != (c.user != nil) || st.Error != c.err || !reflect.DeepEqual(st.Audiences, c.audiences) ||
				c.user != nil && !reflect.DeepEqual(st.User, *c.user) || got.Spec.Token != "" {
				t.Errorf("review: %+v (spec %+v), want user %+v audiences %v error %q", st, got.Spec, c.user, c.audiences, c.err)
			}
		})
	}
	if _, err := reviews.Create(ctx, &authenticationv1.TokenReview{}, metav1.CreateOptions{}); !apierrors.IsBadRequest(err) ||
		!strings.Contains(err.Error(), "token is required for TokenReview in authentication") {
		t.Errorf("a review without a token: %v, want 400", err)
	}
	r = do(t, e.Env, call{method: "POST", path: "/apis/authentication.k8s.io/v1/tokenreviews", token: bound.Status.Token,
		body: []byte(`{"apiVersion":"authentication.k8s.io/v1","kind":"TokenReview","spec":{"token":"x"}}`)})
	if st := status(t, r); r.code != http.StatusForbidden || st.Message !=
		`tokenreviews.authentication.k8s.io is forbidden: User "system:serviceaccount:team:bot" cannot create resource "tokenreviews" in API group "authentication.k8s.io" at the cluster scope` {
		t.Errorf("the bot reviewing tokens: %d %q, want 403", r.code, st.Message)
	}
	requireNothingWritten(t, e.Env, m)

	// A policy sees the extra in request.userInfo.
	if _, err := cs.RbacV1().Roles("team").Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "cm-writer"},
		Rules: []rbacv1.PolicyRule{{Verbs: []string{"create"}, APIGroups: []string{""}, Resources: []string{"configmaps"}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.RbacV1().RoleBindings("team").Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "bot-writes-cms"},
		RoleRef:  rbacv1.RoleRef{Kind: "Role", Name: "cm-writer"},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: "team", Name: "bot"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	fail := admissionregistrationv1.Fail
	if _, err := cs.AdmissionregistrationV1().ValidatingAdmissionPolicies().Create(ctx, &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "no-pod-writes"},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{FailurePolicy: &fail,
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{Operations: []admissionregistrationv1.OperationType{"CREATE"},
					Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}}}}}},
			Validations: []admissionregistrationv1.Validation{{
				Expression:        "!('authentication.kubernetes.io/pod-name' in request.userInfo.extra)",
				MessageExpression: "'pod ' + request.userInfo.extra['authentication.kubernetes.io/pod-name'][0] + ' of ' + request.userInfo.uid + ' may not write configmaps'"}}}},
		metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	bindPolicy(t, e.Env, "no-pod-writes", "", admissionregistrationv1.Deny)
	want := `configmaps "x" is forbidden: ValidatingAdmissionPolicy 'no-pod-writes' with binding 'no-pod-writes' denied request: pod worker of ` + string(e.bot.UID) + ` may not write configmaps`
	cm := []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x"}}`)
	deadline := time.Now().Add(60 * time.Second)
	for {
		m := settle(t, e.Env)
		r := do(t, e.Env, call{method: "POST", path: "/api/v1/namespaces/team/configmaps", token: bound.Status.Token, body: cm})
		if r.code != http.StatusCreated {
			if st := status(t, r); st.Message != want {
				t.Fatalf("%d %q, want %q", r.code, st.Message, want)
			}
			requireNothingWritten(t, e.Env, m)
			break
		}
		if err := cs.CoreV1().ConfigMaps("team").Delete(ctx, "x", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatal("the policy never took effect")
		}
		time.Sleep(200 * time.Millisecond)
	}
	// A token not bound to a pod has no pod in its extra: allowed.
	if r := do(t, e.Env, call{method: "POST", path: "/api/v1/namespaces/team/configmaps",
		token: e.token(t, authenticationv1.TokenRequestSpec{}).Status.Token, body: cm}); r.code != http.StatusCreated {
		t.Errorf("an unbound token's create: %d %s", r.code, r.body)
	}

	// Once the pod is gone, its token reviews as refused.
	if err := cs.CoreV1().Pods("team").Delete(ctx, "worker", metav1.DeleteOptions{GracePeriodSeconds: ptr[int64](0)}); err != nil {
		t.Fatal(err)
	}
	waitCode(t, e.Env, "/api/v1/namespaces/team/pods", bound.Status.Token, http.StatusUnauthorized)
	got, err := reviews.Create(ctx, &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: bound.Status.Token}}, metav1.CreateOptions{})
	if err != nil || got.Status.Authenticated || !strings.Contains(got.Status.Error, `"worker" not found`) {
		t.Errorf("review after the pod's deletion: %v %+v", err, got.Status)
	}
}

// jti is the jti claim of a token.
func jti(t *testing.T, token string) string {
	t.Helper()
	parts := strings.Split(token, ".")
	var c struct {
		ID string `json:"jti"`
	}
	b, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil || json.Unmarshal(b, &c) != nil {
		t.Fatalf("claims of %q: %v", token, err)
	}
	return c.ID
}
