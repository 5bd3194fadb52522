package apitest

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/cairn-dev/cairn/services/apiserver"
	"github.com/cairn-dev/cairn/services/controlplane/controlplanetest"
)

// TestBadInput sends requests the apiserver must refuse: each gets a
// Kubernetes Status with the right code and reason, and nothing reaches
// etcd or the log.
func TestBadInput(t *testing.T) {
	env := controlplanetest.Start(t)
	ctx := ctxFor(t, 60*time.Second)
	pods := env.Client.CoreV1().Pods("default")

	// existing is created once; cases that need an object use it.
	existing, err := pods.Create(ctx, testPod("existing"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	podJSON := func(name string) []byte { return mustJSON(t, testPod(name)) }

	tests := []struct {
		name string
		// setup runs before the etcd and log positions are taken.
		setup      func(t *testing.T) call
		wantCode   int
		wantReason metav1.StatusReason
		// wantCauses are fields that must appear in details.causes.
		wantCauses []string
	}{
		{
			name: "malformed JSON",
			setup: func(*testing.T) call {
				return call{method: "POST", path: podsPath, body: []byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"x"`)}
			},
			wantCode: http.StatusBadRequest, wantReason: metav1.StatusReasonBadRequest,
		},
		{
			name: "JSON that is not an object",
			setup: func(*testing.T) call {
				return call{method: "POST", path: podsPath, body: []byte(`["a"]`)}
			},
			wantCode: http.StatusBadRequest, wantReason: metav1.StatusReasonBadRequest,
		},
		{
			name: "wrong type for a field",
			setup: func(*testing.T) call {
				return call{method: "POST", path: podsPath, body: []byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":7}}`)}
			},
			wantCode: http.StatusBadRequest, wantReason: metav1.StatusReasonBadRequest,
		},
		{
			name: "malformed YAML",
			setup: func(*testing.T) call {
				return call{method: "POST", path: podsPath, contentType: "application/yaml",
					body: []byte("apiVersion: v1\nkind: Pod\nmetadata:\n  name: [x\n")}
			},
			wantCode: http.StatusBadRequest, wantReason: metav1.StatusReasonBadRequest,
		},
		{
			name: "YAML that is not a mapping",
			setup: func(*testing.T) call {
				return call{method: "POST", path: podsPath, contentType: "application/yaml", body: []byte("- a\n- b\n")}
			},
			wantCode: http.StatusBadRequest, wantReason: metav1.StatusReasonBadRequest,
		},
		{
			name: "unknown resource",
			setup: func(*testing.T) call {
				return call{method: "POST", path: "/api/v1/namespaces/default/widgets", body: []byte(`{"metadata":{"name":"w"}}`)}
			},
			wantCode: http.StatusNotFound, wantReason: metav1.StatusReasonNotFound,
		},
		{
			name: "unknown group",
			setup: func(*testing.T) call {
				return call{method: "POST", path: "/apis/example.com/v1/namespaces/default/widgets", body: []byte(`{"metadata":{"name":"w"}}`)}
			},
			wantCode: http.StatusNotFound, wantReason: metav1.StatusReasonNotFound,
		},
		{
			name: "body over 3 MiB",
			setup: func(*testing.T) call {
				pad := strings.Repeat("x", apiserver.MaxBodyBytes)
				body := []byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"big","annotations":{"a":"` + pad + `"}}}`)
				return call{method: "POST", path: podsPath, body: body}
			},
			wantCode: http.StatusRequestEntityTooLarge, wantReason: metav1.StatusReasonRequestEntityTooLarge,
		},
		{
			name: "stale resourceVersion on update",
			setup: func(t *testing.T) call {
				p, err := pods.Create(ctx, testPod("stale"), metav1.CreateOptions{})
				if err != nil {
					t.Fatal(err)
				}
				old := p.DeepCopy()
				p.Labels = map[string]string{"v": "2"}
				if _, err := pods.Update(ctx, p, metav1.UpdateOptions{}); err != nil {
					t.Fatal(err)
				}
				old.Labels = map[string]string{"v": "3"}
				return call{method: "PUT", path: podsPath + "/stale", body: mustJSON(t, old)}
			},
			wantCode: http.StatusConflict, wantReason: metav1.StatusReasonConflict,
		},
		{
			name: "invalid name",
			setup: func(*testing.T) call {
				return call{method: "POST", path: podsPath, body: podJSON("Bad_Name")}
			},
			wantCode: http.StatusUnprocessableEntity, wantReason: metav1.StatusReasonInvalid,
			wantCauses: []string{"metadata.name"},
		},
		{
			name: "invalid spec: pod without containers",
			setup: func(t *testing.T) call {
				p := testPod("nocontainers")
				p.Spec.Containers = nil
				return call{method: "POST", path: podsPath, body: mustJSON(t, p)}
			},
			wantCode: http.StatusUnprocessableEntity, wantReason: metav1.StatusReasonInvalid,
			wantCauses: []string{"spec.containers"},
		},
		{
			name: "invalid update: changing a container image to empty",
			setup: func(t *testing.T) call {
				p := existing.DeepCopy()
				p.ResourceVersion = ""
				p.Spec.Containers[0].Image = ""
				return call{method: "PUT", path: podsPath + "/existing", body: mustJSON(t, p)}
			},
			wantCode: http.StatusUnprocessableEntity, wantReason: metav1.StatusReasonInvalid,
			wantCauses: []string{"spec.containers[0].image"},
		},
		{
			name: "invalid service: port out of range",
			setup: func(t *testing.T) call {
				return call{method: "POST", path: servicesPath, body: mustJSON(t, testService("big", corev1.ServicePort{Port: 70000, TargetPort: intstr.FromInt32(80)}))}
			},
			wantCode: http.StatusUnprocessableEntity, wantReason: metav1.StatusReasonInvalid,
			wantCauses: []string{"spec.ports[0].port"},
		},
		{
			name: "invalid service: cluster IP outside the service range",
			setup: func(t *testing.T) call {
				return call{method: "POST", path: servicesPath, body: mustJSON(t, withClusterIP(testService("far"), "172.30.0.10"))}
			},
			wantCode: http.StatusUnprocessableEntity, wantReason: metav1.StatusReasonInvalid,
			wantCauses: []string{"spec.clusterIPs"},
		},
		{
			name: "invalid service: a changed cluster IP",
			setup: func(t *testing.T) call {
				svc, err := env.Client.CoreV1().Services("default").Create(ctx, testService("moved"), metav1.CreateOptions{})
				if err != nil {
					t.Fatal(err)
				}
				svc.Spec.ClusterIP, svc.Spec.ClusterIPs = "10.96.7.7", []string{"10.96.7.7"}
				return call{method: "PUT", path: servicesPath + "/moved", body: mustJSON(t, svc)}
			},
			wantCode: http.StatusUnprocessableEntity, wantReason: metav1.StatusReasonInvalid,
			wantCauses: []string{"spec.clusterIPs[0]"},
		},
		{
			name: "update with a name that differs from the URL",
			setup: func(t *testing.T) call {
				p := existing.DeepCopy()
				p.Name = "renamed"
				return call{method: "PUT", path: podsPath + "/existing", body: mustJSON(t, p)}
			},
			wantCode: http.StatusBadRequest, wantReason: metav1.StatusReasonBadRequest,
		},
		{
			name: "create of an object that exists",
			setup: func(*testing.T) call {
				return call{method: "POST", path: podsPath, body: podJSON("existing")}
			},
			wantCode: http.StatusConflict, wantReason: metav1.StatusReasonAlreadyExists,
		},
		{
			name: "delete of an object that does not exist",
			setup: func(*testing.T) call {
				return call{method: "DELETE", path: podsPath + "/missing"}
			},
			wantCode: http.StatusNotFound, wantReason: metav1.StatusReasonNotFound,
		},
		{
			name: "update of an object that does not exist",
			setup: func(*testing.T) call {
				return call{method: "PUT", path: podsPath + "/missing", body: podJSON("missing")}
			},
			wantCode: http.StatusNotFound, wantReason: metav1.StatusReasonNotFound,
		},
		{
			name: "patch of an object that does not exist",
			setup: func(*testing.T) call {
				return call{method: "PATCH", path: podsPath + "/missing", contentType: "application/merge-patch+json",
					body: []byte(`{"metadata":{"labels":{"a":"b"}}}`)}
			},
			wantCode: http.StatusNotFound, wantReason: metav1.StatusReasonNotFound,
		},
		{
			name: "unsupported patch content type",
			setup: func(*testing.T) call {
				return call{method: "PATCH", path: podsPath + "/existing", contentType: "application/json",
					body: []byte(`{"metadata":{"labels":{"a":"b"}}}`)}
			},
			wantCode: http.StatusUnsupportedMediaType, wantReason: metav1.StatusReasonUnsupportedMediaType,
		},
		{
			name: "unsupported create content type",
			setup: func(*testing.T) call {
				return call{method: "POST", path: podsPath, contentType: "text/plain", body: podJSON("plain")}
			},
			wantCode: http.StatusUnsupportedMediaType, wantReason: metav1.StatusReasonUnsupportedMediaType,
		},
		{
			name: "malformed JSON patch",
			setup: func(*testing.T) call {
				return call{method: "PATCH", path: podsPath + "/existing", contentType: "application/json-patch+json",
					body: []byte(`{"op":"add"}`)}
			},
			wantCode: http.StatusBadRequest, wantReason: metav1.StatusReasonBadRequest,
		},
		{
			name: "unauthenticated",
			setup: func(*testing.T) call {
				return call{method: "POST", path: podsPath, token: "-", body: podJSON("anon")}
			},
			wantCode: http.StatusUnauthorized, wantReason: metav1.StatusReasonUnauthorized,
		},
		{
			name: "wrong token",
			setup: func(*testing.T) call {
				return call{method: "POST", path: podsPath, token: "no-such-token", body: podJSON("wrong")}
			},
			wantCode: http.StatusUnauthorized, wantReason: metav1.StatusReasonUnauthorized,
		},
		{
			name: "unauthorized user",
			setup: func(*testing.T) call {
				return call{method: "POST", path: podsPath, token: controlplanetest.UserToken, body: podJSON("alice")}
			},
			wantCode: http.StatusForbidden, wantReason: metav1.StatusReasonForbidden,
		},
		{
			name: "unauthorized delete",
			setup: func(*testing.T) call {
				return call{method: "DELETE", path: podsPath + "/existing", token: controlplanetest.UserToken}
			},
			wantCode: http.StatusForbidden, wantReason: metav1.StatusReasonForbidden,
		},
		{
			name: "namespace in body differs from URL",
			setup: func(t *testing.T) call {
				p := testPod("otherns")
				p.Namespace = "kube-system"
				return call{method: "POST", path: podsPath, body: mustJSON(t, p)}
			},
			wantCode: http.StatusBadRequest, wantReason: metav1.StatusReasonBadRequest,
		},
		{
			name: "create in a namespace that does not exist",
			setup: func(*testing.T) call {
				return call{method: "POST", path: "/api/v1/namespaces/nowhere/pods", body: podJSON("lost")}
			},
			wantCode: http.StatusNotFound, wantReason: metav1.StatusReasonNotFound,
		},
		{
			name: "kind in body differs from URL",
			setup: func(*testing.T) call {
				return call{method: "POST", path: podsPath, body: []byte(`{"apiVersion":"v1","kind":"Service","metadata":{"name":"svc"}}`)}
			},
			wantCode: http.StatusBadRequest, wantReason: metav1.StatusReasonBadRequest,
		},
		{
			name: "strict field validation",
			setup: func(*testing.T) call {
				return call{method: "POST", path: podsPath + "?fieldValidation=Strict",
					body: []byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"strict"},"spec":{"containers":[{"name":"c","image":"i"}],"bogus":1}}`)}
			},
			wantCode: http.StatusBadRequest, wantReason: metav1.StatusReasonBadRequest,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := tt.setup(t)
			before := settle(t, env)
			r := do(t, env, c)
			st := status(t, r)
			if r.code != tt.wantCode || st.Reason != tt.wantReason {
				t.Errorf("got %d %q, want %d %q: %s", r.code, st.Reason, tt.wantCode, tt.wantReason, truncate(r.body))
			}
			if st.Status != metav1.StatusFailure {
				t.Errorf("status %q, want Failure", st.Status)
			}
			for _, f := range tt.wantCauses {
				if !hasCause(st, f) {
					t.Errorf("no cause for field %q in %s", f, truncate(r.body))
				}
			}
			requireNothingWritten(t, env, before)
		})
	}
}

// TestBadInputLeavesServerUsable checks the server still serves after the
// refusals (e.g. an oversized body did not wedge the connection).
func TestBadInputLeavesServerUsable(t *testing.T) {
	env := controlplanetest.Start(t)
	pad := bytes.Repeat([]byte("y"), 2*apiserver.MaxBodyBytes)
	r := do(t, env, call{method: "POST", path: podsPath, body: pad})
	if st := status(t, r); st.Reason != metav1.StatusReasonRequestEntityTooLarge {
		t.Fatalf("got %d %q", r.code, st.Reason)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := env.Client.CoreV1().Pods("default").Create(ctx, testPod("after"), metav1.CreateOptions{}); err != nil {
		t.Fatalf("create after refusals: %v", err)
	}
}

func hasCause(st metav1.Status, field string) bool {
	if st.Details == nil {
		return false
	}
	for _, c := range st.Details.Causes {
		if c.Field == field {
			return true
		}
	}
	return false
}

func truncate(b []byte) string {
	if len(b) > 400 {
		return string(b[:400]) + "..."
	}
	return string(b)
}
