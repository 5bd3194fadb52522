package apitest

import (
	"encoding/json"
	"net/http"
	"reflect"
	"slices"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/cairn-dev/cairn/services/apiserver"
	"github.com/cairn-dev/cairn/services/controlplane/controlplanetest"
)

// TestSelfReviews: SelfSubjectAccessReview, SelfSubjectRulesReview and
// SelfSubjectReview, what `kubectl auth can-i [--list]` and `kubectl auth
// whoami` ask, answered by the authorizer for the requesting user through
// client-go, listed in discovery, create-only, and never stored.
func TestSelfReviews(t *testing.T) {
	env := controlplanetest.Start(t)
	ctx := ctxFor(t, 30*time.Second)
	client := func(token string) kubernetes.Interface {
		cs, err := kubernetes.NewForConfig(env.ConfigFor(token))
		if err != nil {
			t.Fatal(err)
		}
		return cs
	}
	canI := func(token string, spec authorizationv1.SelfSubjectAccessReviewSpec) bool {
		t.Helper()
		r, err := client(token).AuthorizationV1().SelfSubjectAccessReviews().Create(ctx,
			&authorizationv1.SelfSubjectAccessReview{Spec: spec}, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("self access review as %s: %v", token, err)
		}
		if r.Status.Denied || !reflect.DeepEqual(r.Spec, spec) {
			t.Errorf("review as %s: %+v", token, r)
		}
		return r.Status.Allowed
	}
	res := func(verb, group, resource, sub string) authorizationv1.SelfSubjectAccessReviewSpec {
		return authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
			Namespace: "default", Verb: verb, Group: group, Resource: resource, Subresource: sub}}
	}

	before := settle(t, env)
	cases := []struct {
		token string
		spec  authorizationv1.SelfSubjectAccessReviewSpec
		want  bool
	}{
		{controlplanetest.AdminToken, res("delete", "apps", "deployments", ""), true},
		{controlplanetest.UserToken, res("get", "", "pods", ""), false},
		{controlplanetest.SchedulerToken, res("create", "", "pods", "binding"), true},
		{controlplanetest.UserToken, authorizationv1.SelfSubjectAccessReviewSpec{
			NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: "/version", Verb: "get"}}, true},
	}
	for _, c := range cases {
		if got := canI(c.token, c.spec); got != c.want {
			t.Errorf("as %s, may %+v %+v: %v, want %v", c.token, c.spec.ResourceAttributes, c.spec.NonResourceAttributes, got, c.want)
		}
	}

	who, err := client(controlplanetest.UserToken).AuthenticationV1().SelfSubjectReviews().Create(ctx,
		&authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("self review: %v", err)
	}
	if u := who.Status.UserInfo; u.Username != "alice" || !slices.Contains(u.Groups, apiserver.GroupAuthenticated) {
		t.Errorf("self review of alice: %+v", u)
	}
	rules, err := client(controlplanetest.SchedulerToken).AuthorizationV1().SelfSubjectRulesReviews().Create(ctx,
		&authorizationv1.SelfSubjectRulesReview{Spec: authorizationv1.SelfSubjectRulesReviewSpec{Namespace: "default"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("self rules review: %v", err)
	}
	st := rules.Status
	// kube's system:kube-scheduler (binding pods, not everything) and
	// system:discovery.
	if st.Incomplete || !slices.ContainsFunc(st.ResourceRules, func(r authorizationv1.ResourceRule) bool {
		return slices.Equal(r.Verbs, []string{"create"}) && slices.Contains(r.Resources, "pods/binding")
	}) || slices.ContainsFunc(st.ResourceRules, func(r authorizationv1.ResourceRule) bool {
		return slices.Contains(r.Resources, "*")
	}) || !slices.ContainsFunc(st.NonResourceRules, func(r authorizationv1.NonResourceRule) bool {
		return slices.Contains(r.NonResourceURLs, "/apis/*")
	}) {
		t.Errorf("rules of the scheduler: %+v", st)
	}
	requireNothingWritten(t, env, before)

	t.Run("bad input", func(t *testing.T) {
		for _, c := range []struct {
			name   string
			call   call
			code   int
			reason metav1.StatusReason
		}{
			{"no attributes", call{method: http.MethodPost, path: "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
				body: []byte(`{"apiVersion":"authorization.k8s.io/v1","kind":"SelfSubjectAccessReview","spec":{}}`)},
				http.StatusUnprocessableEntity, metav1.StatusReasonInvalid},
			{"both attributes", call{method: http.MethodPost, path: "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
				body: []byte(`{"spec":{"resourceAttributes":{"verb":"get","resource":"pods"},"nonResourceAttributes":{"path":"/","verb":"get"}}}`)},
				http.StatusUnprocessableEntity, metav1.StatusReasonInvalid},
			{"malformed", call{method: http.MethodPost, path: "/apis/authentication.k8s.io/v1/selfsubjectreviews", body: []byte(`{"spec":`)},
				http.StatusBadRequest, metav1.StatusReasonBadRequest},
			{"list", call{method: http.MethodGet, path: "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"},
				http.StatusMethodNotAllowed, metav1.StatusReasonMethodNotAllowed},
			{"anonymous", call{method: http.MethodPost, path: "/apis/authentication.k8s.io/v1/selfsubjectreviews", token: "-", body: []byte(`{}`)},
				http.StatusUnauthorized, metav1.StatusReasonUnauthorized},
		} {
			r := do(t, env, c.call)
			var st metav1.Status
			if err := json.Unmarshal(r.body, &st); err != nil || r.code != c.code || st.Reason != c.reason {
				t.Errorf("%s: %d %s, want %d %s", c.name, r.code, r.body, c.code, c.reason)
			}
		}
		requireNothingWritten(t, env, before)
	})

	t.Run("discovery", func(t *testing.T) {
		for gv, name := range map[string]string{
			"authorization.k8s.io/v1":  "selfsubjectrulesreviews",
			"authentication.k8s.io/v1": "selfsubjectreviews",
		} {
			l, err := env.Client.Discovery().ServerResourcesForGroupVersion(gv)
			if err != nil {
				t.Fatalf("discovery of %s: %v", gv, err)
			}
			i := slices.IndexFunc(l.APIResources, func(r metav1.APIResource) bool { return r.Name == name })
			if i < 0 || !slices.Equal(l.APIResources[i].Verbs, []string{"create"}) || l.APIResources[i].Namespaced {
				t.Errorf("discovery of %s: %+v", gv, l.APIResources)
			}
		}
	})
}
