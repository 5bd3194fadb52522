package apitest

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cairn-dev/cairn/services/controlplane/controlplanetest"
)

// timeoutMessage is kube-apiserver's answer to a request that missed its
// deadline.
const timeoutMessage = "Timeout: request did not complete within requested timeout - context deadline exceeded"

// slowHook is a validating webhook for pod creates that answers only when
// the test ends, with a timeout of its own (30 s) longer than any request
// timeout of the test.
func slowHook(t *testing.T, env *controlplanetest.Env, name string, policy admissionregistrationv1.FailurePolicyType) *hookServer {
	t.Helper()
	release := make(chan struct{})
	h := startHook(t, func(*admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
		<-release
		return nil
	})
	t.Cleanup(func() { close(release) })
	v := validatingHook(name+".cairn.test", h)
	v.TimeoutSeconds = ptr[int32](30)
	v.FailurePolicy = ptr(policy)
	addValidating(t, env, name, v)
	return h
}

func podBody(t *testing.T, name string) []byte {
	t.Helper()
	p := testPod(name)
	p.Namespace = "default"
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func wantTimeoutStatus(t *testing.T, r reply) {
	t.Helper()
	st := status(t, r)
	if r.code != http.StatusGatewayTimeout || st.Reason != metav1.StatusReasonTimeout || st.Message != timeoutMessage {
		t.Fatalf("got %d %s: %s, want 504 Timeout %q", r.code, st.Reason, st.Message, timeoutMessage)
	}
}

// TestRequestTimeout: kube-apiserver's --request-timeout and timeout
// query parameter, on a server whose maximum is 5 s.
func TestRequestTimeout(t *testing.T) {
	env := controlplanetest.Start(t, controlplanetest.Options{RequestTimeout: 5 * time.Second})
	const pods = "/api/v1/namespaces/default/pods"

	t.Run("a request stuck in a webhook is answered 504 at its timeout", func(t *testing.T) {
		h := slowHook(t, env, "slow", admissionregistrationv1.Fail)
		mark := settle(t, env)
		r := do(t, env, call{method: http.MethodPost, path: pods + "?timeout=1s", body: podBody(t, "stuck")})
		wantTimeoutStatus(t, r)
		if n := len(h.calls()); n != 1 {
			t.Errorf("webhook called %d times, want 1", n)
		}
		requireNothingWritten(t, env, mark)
		// The server goes on serving.
		if r := do(t, env, call{method: http.MethodGet, path: pods + "?timeout=1s"}); r.code != http.StatusOK {
			t.Fatalf("list after the timeout: %d %s", r.code, r.body)
		}
	})

	t.Run("the maximum bounds requests without a timeout or with a longer one", func(t *testing.T) {
		slowHook(t, env, "slow-max", admissionregistrationv1.Fail)
		mark := settle(t, env)
		// Without the 5 s maximum these would wait for the webhook's 30 s.
		wantTimeoutStatus(t, do(t, env, call{method: http.MethodPost, path: pods, body: podBody(t, "stuck-default")}))
		wantTimeoutStatus(t, do(t, env, call{method: http.MethodPost, path: pods + "?timeout=1h", body: podBody(t, "stuck-long")}))
		requireNothingWritten(t, env, mark)
	})

	t.Run("an etcd write given up at the deadline is a 504 and writes nothing", func(t *testing.T) {
		// failurePolicy Ignore: the webhook's failure at the deadline is
		// ignored and the handler goes on to etcd with its context done.
		// The loopback serves without the timeout filter, so what comes
		// back is the handler's own answer, not the filter's.
		h := slowHook(t, env, "slow-ignore", admissionregistrationv1.Ignore)
		mark := settle(t, env)
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://loopback"+pods, bytes.NewReader(podBody(t, "given-up")))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := env.Server.Loopback().RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var b bytes.Buffer
		_, _ = b.ReadFrom(resp.Body)
		wantTimeoutStatus(t, reply{code: resp.StatusCode, body: b.Bytes(), header: resp.Header})
		if n := len(h.calls()); n != 1 {
			t.Errorf("webhook called %d times, want 1", n)
		}
		requireNothingWritten(t, env, mark)
		// Through the server, the same.
		wantTimeoutStatus(t, do(t, env, call{method: http.MethodPost, path: pods + "?timeout=1s", body: podBody(t, "given-up")}))
		requireNothingWritten(t, env, mark)
	})

	t.Run("a timeout that is not a duration is a 400", func(t *testing.T) {
		const msg = `invalid timeout specified in the request URL - time: invalid duration "soon"`
		// Before authentication, as in kube: anonymous gets it too.
		for _, token := range []string{"", "-"} {
			r := do(t, env, call{method: http.MethodGet, path: "/api/v1/namespaces/default/configmaps?timeout=soon", token: token})
			st := status(t, r)
			if r.code != http.StatusBadRequest || st.Reason != metav1.StatusReasonBadRequest || st.Message != msg {
				t.Errorf("token %q: %d %s: %s, want 400 BadRequest %q", token, r.code, st.Reason, st.Message, msg)
			}
		}
	})

	t.Run("a watch outlives the timeout", func(t *testing.T) {
		slowHook(t, env, "slow-watch", admissionregistrationv1.Fail)
		req, err := http.NewRequest(http.MethodGet, env.URL+"/api/v1/namespaces/default/configmaps?watch=true&timeout=1s", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+controlplanetest.AdminToken)
		resp, err := httpClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("watch: %d", resp.StatusCode)
		}
		// A request with the same timeout, sent after the watch, is
		// answered 504: the watch's own second has passed too.
		wantTimeoutStatus(t, do(t, env, call{method: http.MethodPost, path: pods + "?timeout=1s", body: podBody(t, "stuck-watch")}))
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "after-the-timeout"}}
		if _, err := env.Client.CoreV1().ConfigMaps("default").Create(ctxFor(t, 30*time.Second), cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		dec := json.NewDecoder(resp.Body)
		for {
			var ev struct {
				Type   string           `json:"type"`
				Object corev1.ConfigMap `json:"object"`
			}
			if err := dec.Decode(&ev); err != nil {
				t.Fatalf("watch ended before the ConfigMap created after its timeout: %v", err)
			}
			if ev.Type == "ADDED" && ev.Object.Name == cm.Name {
				return
			}
		}
	})
}
