package apitest

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cairn-dev/cairn/services/controlplane/controlplanetest"
)

// hookServer is a real HTTPS admission webhook on loopback: it decodes
// each AdmissionReview, keeps the requests, and answers what respond
// returns (nil: allowed, no patch).
type hookServer struct {
	*httptest.Server
	mu       sync.Mutex
	requests []*admissionv1.AdmissionRequest
	respond  func(*admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse
}

// startRawHook is a webhook server that answers with handler.
func startRawHook(t *testing.T, handler http.HandlerFunc) *hookServer {
	t.Helper()
	h := &hookServer{Server: httptest.NewTLSServer(handler)}
	t.Cleanup(h.Close)
	return h
}

func startHook(t *testing.T, respond func(*admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse) *hookServer {
	t.Helper()
	return startHookTB(t, respond)
}

func startHookTB(t testing.TB, respond func(*admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse) *hookServer {
	t.Helper()
	h := &hookServer{respond: respond}
	h.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var review admissionv1.AdmissionReview
		b, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(b, &review); err != nil || review.Request == nil {
			http.Error(w, "bad review", http.StatusBadRequest)
			return
		}
		h.mu.Lock()
		h.requests = append(h.requests, review.Request)
		h.mu.Unlock()
		resp := &admissionv1.AdmissionResponse{Allowed: true}
		if h.respond != nil {
			if r := h.respond(review.Request); r != nil {
				resp = r
			}
		}
		resp.UID = review.Request.UID
		review.Response, review.Request = resp, nil
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(&review)
	}))
	// HTTP/2, which the apiserver speaks to loopback webhooks as kube's
	// client manager does (only other hosts get HTTP/1.1).
	h.EnableHTTP2 = true
	h.StartTLS()
	t.Cleanup(h.Close)
	return h
}

func (h *hookServer) caBundle() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: h.Certificate().Raw})
}

func (h *hookServer) calls() []*admissionv1.AdmissionRequest {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]*admissionv1.AdmissionRequest(nil), h.requests...)
}

// podCreateRule matches creates of pods.
var podCreateRule = []admissionregistrationv1.RuleWithOperations{{
	Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
	Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}},
}}

func mutatingHook(name string, h *hookServer) admissionregistrationv1.MutatingWebhook {
	return admissionregistrationv1.MutatingWebhook{
		Name:                    name,
		ClientConfig:            admissionregistrationv1.WebhookClientConfig{URL: ptr(h.URL + "/mutate"), CABundle: h.caBundle()},
		Rules:                   podCreateRule,
		SideEffects:             ptr(admissionregistrationv1.SideEffectClassNone),
		AdmissionReviewVersions: []string{"v1"},
	}
}

func validatingHook(name string, h *hookServer) admissionregistrationv1.ValidatingWebhook {
	return admissionregistrationv1.ValidatingWebhook{
		Name:                    name,
		ClientConfig:            admissionregistrationv1.WebhookClientConfig{URL: ptr(h.URL + "/validate"), CABundle: h.caBundle()},
		Rules:                   podCreateRule,
		SideEffects:             ptr(admissionregistrationv1.SideEffectClassNone),
		AdmissionReviewVersions: []string{"v1"},
	}
}

// addMutating creates the configuration, waits until the apiserver's
// cache holds it, and deletes it (waiting until it is gone) at cleanup.
func addMutating(t *testing.T, env *controlplanetest.Env, name string, hooks ...admissionregistrationv1.MutatingWebhook) {
	t.Helper()
	api := env.Client.AdmissionregistrationV1().MutatingWebhookConfigurations()
	addConfig(t, env, true, name, func(ctx context.Context) (string, error) {
		c, err := api.Create(ctx, &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: name}, Webhooks: hooks},
			metav1.CreateOptions{})
		if err != nil {
			return "", err
		}
		return c.ResourceVersion, nil
	}, func(ctx context.Context) error { return api.Delete(ctx, name, metav1.DeleteOptions{}) })
}

func addValidating(t *testing.T, env *controlplanetest.Env, name string, hooks ...admissionregistrationv1.ValidatingWebhook) {
	t.Helper()
	api := env.Client.AdmissionregistrationV1().ValidatingWebhookConfigurations()
	addConfig(t, env, false, name, func(ctx context.Context) (string, error) {
		c, err := api.Create(ctx, &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: name}, Webhooks: hooks},
			metav1.CreateOptions{})
		if err != nil {
			return "", err
		}
		return c.ResourceVersion, nil
	}, func(ctx context.Context) error { return api.Delete(ctx, name, metav1.DeleteOptions{}) })
}

func addConfig(t *testing.T, env *controlplanetest.Env, mutating bool, name string, create func(context.Context) (string, error),
	del func(context.Context) error) {
	t.Helper()
	rv, err := create(ctxFor(t, 30*time.Second))
	if err != nil {
		t.Fatalf("create %s: %v", name, err)
	}
	controlplanetest.Eventually(t, 30*time.Second, "webhook configuration "+name+" loaded", func() bool {
		return env.Webhooks.Loaded(mutating, name, rv)
	})
	t.Cleanup(func() {
		if err := del(ctxFor(t, 30*time.Second)); err != nil {
			t.Errorf("delete %s: %v", name, err)
		}
		controlplanetest.Eventually(t, 30*time.Second, "webhook configuration "+name+" gone", func() bool {
			return !env.Webhooks.Loaded(mutating, name, "")
		})
	})
}

// patchResponse answers allowed with a JSONPatch.
func patchResponse(ops string) *admissionv1.AdmissionResponse {
	pt := admissionv1.PatchTypeJSONPatch
	return &admissionv1.AdmissionResponse{Allowed: true, Patch: []byte(ops), PatchType: &pt}
}

func createPod(t *testing.T, env *controlplanetest.Env, ns string, p *corev1.Pod, opts metav1.CreateOptions) (*corev1.Pod, error) {
	t.Helper()
	return env.Client.CoreV1().Pods(ns).Create(ctxFor(t, 60*time.Second), p, opts)
}

// wantStatus checks err is an API error with this code and message.
func wantStatus(t *testing.T, err error, code int32, msg string) {
	t.Helper()
	var se *apierrors.StatusError
	if !errors.As(err, &se) {
		t.Fatalf("got %v, want a Status %d", err, code)
	}
	if se.ErrStatus.Code != code || !strings.Contains(se.ErrStatus.Message, msg) {
		t.Fatalf("status %d %q, want %d containing %q", se.ErrStatus.Code, se.ErrStatus.Message, code, msg)
	}
}

func TestWebhooks(t *testing.T) {
	env := controlplanetest.Start(t)

	t.Run("mutation by JSONPatch, recorded in the log", func(t *testing.T) {
		h := startHook(t, func(r *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
			resp := patchResponse(`[{"op":"add","path":"/metadata/labels","value":{"injected":"yes"}}]`)
			resp.Warnings = []string{"injected a label"}
			resp.AuditAnnotations = map[string]string{"reason": "test"}
			return resp
		})
		addMutating(t, env, "inject", mutatingHook("inject.cairn.test", h))
		mark := settle(t, env)
		r := do(t, env, call{method: http.MethodPost, path: "/api/v1/namespaces/default/pods", body: mustJSON(t, testPod("mutated"))})
		if r.code != http.StatusCreated {
			t.Fatalf("create: %d %s", r.code, r.body)
		}
		if w := r.header.Values("Warning"); len(w) != 1 || w[0] != `299 - "injected a label"` {
			t.Errorf("Warning headers %q", w)
		}
		var out corev1.Pod
		if err := json.Unmarshal(r.body, &out); err != nil || out.Labels["injected"] != "yes" {
			t.Fatalf("returned pod labels %v (%v)", out.Labels, err)
		}
		// The default tolerations were added before the webhook saw the pod.
		calls := h.calls()
		if len(calls) != 1 {
			t.Fatalf("%d calls", len(calls))
		}
		req := calls[0]
		var seen corev1.Pod
		if err := json.Unmarshal(req.Object.Raw, &seen); err != nil {
			t.Fatal(err)
		}
		var opts metav1.CreateOptions
		_ = json.Unmarshal(req.Options.Raw, &opts)
		if req.UID == "" || req.Kind != (metav1.GroupVersionKind{Version: "v1", Kind: "Pod"}) ||
			req.Resource != (metav1.GroupVersionResource{Version: "v1", Resource: "pods"}) || req.RequestKind == nil || req.Name != "mutated" ||
			req.Namespace != "default" || req.Operation != admissionv1.Create || req.UserInfo.Username != "admin" ||
			req.DryRun == nil || *req.DryRun || seen.Kind != "Pod" || seen.Name != "mutated" || len(seen.Spec.Tolerations) != 2 ||
			opts.Kind != "CreateOptions" || req.OldObject.Raw != nil {
			t.Errorf("review request %+v object %+v options %+v", req, seen.TypeMeta, opts)
		}
		got := controlplanetest.GetPod(t, env, "default", "mutated")
		if got.Labels["injected"] != "yes" {
			t.Errorf("stored labels %v", got.Labels)
		}
		var found bool
		for _, ev := range eventsSince(t, env, mark) {
			if ev.Resource != "pods" || ev.Name != "mutated" {
				continue
			}
			found = true
			if ev.Admission == nil || len(ev.Admission.MutatedBy) != 1 || ev.Admission.MutatedBy[0] != "inject.cairn.test" ||
				ev.Admission.Annotations["inject.cairn.test/reason"] != "test" ||
				!strings.Contains(ev.Admission.Annotations["mutation.webhook.admission.k8s.io/round_0_index_0"], `"mutated":true`) {
				t.Errorf("event admission %+v", ev.Admission)
			}
		}
		if !found {
			t.Error("no event for the pod")
		}
	})

	t.Run("validation refuses with the webhook's message and code", func(t *testing.T) {
		h := startHook(t, func(r *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
			if strings.Contains(string(r.Object.Raw), `"deny":"true"`) {
				return &admissionv1.AdmissionResponse{Result: &metav1.Status{Code: http.StatusForbidden, Message: "pods labelled deny are refused"}}
			}
			return nil
		})
		addValidating(t, env, "deny", validatingHook("deny.cairn.test", h))
		mark := settle(t, env)
		_, err := createPod(t, env, "default", labeledPod("refused", map[string]string{"deny": "true"}), metav1.CreateOptions{})
		wantStatus(t, err, http.StatusForbidden, `admission webhook "deny.cairn.test" denied the request: pods labelled deny are refused`)
		requireNothingWritten(t, env, mark)
		if _, err := createPod(t, env, "default", labeledPod("allowed", nil), metav1.CreateOptions{}); err != nil {
			t.Fatalf("allowed pod: %v", err)
		}
		// Validating webhooks see the object as validated and about to be stored.
		last := h.calls()[len(h.calls())-1]
		var seen corev1.Pod
		_ = json.Unmarshal(last.Object.Raw, &seen)
		if seen.UID == "" || seen.CreationTimestamp.IsZero() {
			t.Errorf("validating webhook saw %+v", seen.ObjectMeta)
		}
	})

	t.Run("objectSelector", func(t *testing.T) {
		h := startHook(t, func(*admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
			return patchResponse(`[{"op":"add","path":"/metadata/annotations","value":{"selected":"yes"}}]`)
		})
		hook := mutatingHook("select.cairn.test", h)
		hook.ObjectSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"sidecar-inject": "true"}}
		addMutating(t, env, "select", hook)
		in, err := createPod(t, env, "default", labeledPod("sel-yes", map[string]string{"sidecar-inject": "true"}), metav1.CreateOptions{})
		if err != nil || in.Annotations["selected"] != "yes" {
			t.Fatalf("labelled pod: %v %v", err, in)
		}
		out, err := createPod(t, env, "default", labeledPod("sel-no", map[string]string{"sidecar-inject": "false"}), metav1.CreateOptions{})
		if err != nil || out.Annotations["selected"] != "" {
			t.Fatalf("unlabelled pod: %v %v", err, out)
		}
		if n := len(h.calls()); n != 1 {
			t.Errorf("%d calls, want 1", n)
		}
	})

	t.Run("namespaceSelector", func(t *testing.T) {
		ctx := ctxFor(t, 60*time.Second)
		for _, ns := range []*corev1.Namespace{
			{ObjectMeta: metav1.ObjectMeta{Name: "prod", Labels: map[string]string{"env": "prod"}}},
			{ObjectMeta: metav1.ObjectMeta{Name: "dev"}},
		} {
			if _, err := env.Client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		h := startHook(t, nil)
		hook := mutatingHook("ns.cairn.test", h)
		hook.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"env": "prod"}}
		addMutating(t, env, "ns", hook)
		for _, ns := range []string{"prod", "dev"} {
			if _, err := createPod(t, env, ns, testPod("nsel"), metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		calls := h.calls()
		if len(calls) != 1 || calls[0].Namespace != "prod" {
			t.Fatalf("calls %v", calls)
		}
	})

	t.Run("matchConditions", func(t *testing.T) {
		h := startHook(t, nil)
		hook := mutatingHook("cond.cairn.test", h)
		hook.MatchConditions = []admissionregistrationv1.MatchCondition{
			{Name: "prefix", Expression: "object.metadata.name.startsWith('match-')"},
			{Name: "admin", Expression: "request.userInfo.username == 'admin'"},
			{Name: "authorized", Expression: "authorizer.group('').resource('pods').namespace('default').check('create').allowed()"},
		}
		addMutating(t, env, "cond", hook)
		for _, name := range []string{"match-me", "skip-me"} {
			if _, err := createPod(t, env, "default", testPod(name), metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		calls := h.calls()
		if len(calls) != 1 || calls[0].Name != "match-me" {
			t.Fatalf("calls %v", calls)
		}
	})

	t.Run("dry run calls webhooks without side effects and writes nothing", func(t *testing.T) {
		h := startHook(t, func(*admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
			return patchResponse(`[{"op":"add","path":"/metadata/labels","value":{"dry":"run"}}]`)
		})
		addMutating(t, env, "dry", mutatingHook("dry.cairn.test", h))
		mark := settle(t, env)
		p, err := createPod(t, env, "default", testPod("dry"), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil || p.Labels["dry"] != "run" {
			t.Fatalf("dry run: %v %v", err, p)
		}
		if c := h.calls(); len(c) != 1 || c[0].DryRun == nil || !*c[0].DryRun {
			t.Fatalf("calls %v", c)
		}
		requireNothingWritten(t, env, mark)
	})

	t.Run("reinvocation IfNeeded", func(t *testing.T) {
		// first adds label a; second (a later configuration) adds label b;
		// first, IfNeeded, is called again because second changed the pod.
		first := startHook(t, func(r *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
			if strings.Contains(string(r.Object.Raw), `"a":"1"`) {
				return nil
			}
			return patchResponse(`[{"op":"add","path":"/metadata/labels/a","value":"1"}]`)
		})
		second := startHook(t, func(r *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
			return patchResponse(`[{"op":"add","path":"/metadata/labels/b","value":"1"}]`)
		})
		a := mutatingHook("a.cairn.test", first)
		a.ReinvocationPolicy = ptr(admissionregistrationv1.IfNeededReinvocationPolicy)
		addMutating(t, env, "reinvoke-1", a)
		addMutating(t, env, "reinvoke-2", mutatingHook("b.cairn.test", second))
		p, err := createPod(t, env, "default", labeledPod("reinvoked", map[string]string{"x": "y"}), metav1.CreateOptions{})
		if err != nil || p.Labels["a"] != "1" || p.Labels["b"] != "1" {
			t.Fatalf("pod: %v %v", err, p)
		}
		fc := first.calls()
		if len(fc) != 2 || !strings.Contains(string(fc[1].Object.Raw), `"b":"1"`) {
			t.Fatalf("first called %d times", len(fc))
		}
		if n := len(second.calls()); n != 1 {
			t.Errorf("second called %d times, want 1 (Never)", n)
		}
	})

	t.Run("timeout", func(t *testing.T) {
		release := make(chan struct{})
		h := startHook(t, func(*admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
			<-release
			return nil
		})
		t.Cleanup(func() { close(release) })
		fail := mutatingHook("slow.cairn.test", h)
		fail.TimeoutSeconds = ptr[int32](1)
		addMutating(t, env, "slow", fail)
		mark := settle(t, env)
		_, err := createPod(t, env, "default", testPod("slow"), metav1.CreateOptions{})
		wantStatus(t, err, http.StatusInternalServerError, `Internal error occurred: failed calling webhook "slow.cairn.test": failed to call webhook: Post "`+h.URL+`/mutate?timeout=1s"`)
		requireNothingWritten(t, env, mark)
	})

	t.Run("server down: Fail refuses, Ignore admits", func(t *testing.T) {
		h := startHook(t, nil)
		h.Close()
		fail := mutatingHook("down.cairn.test", h)
		addMutating(t, env, "down", fail)
		mark := settle(t, env)
		_, err := createPod(t, env, "default", testPod("down"), metav1.CreateOptions{})
		wantStatus(t, err, http.StatusInternalServerError, `Internal error occurred: failed calling webhook "down.cairn.test": failed to call webhook: Post "`+h.URL+`/mutate?timeout=10s": dial tcp `)
		requireNothingWritten(t, env, mark)

		v := validatingHook("down-ignore.cairn.test", h)
		v.FailurePolicy = ptr(admissionregistrationv1.Ignore)
		api := env.Client.AdmissionregistrationV1().MutatingWebhookConfigurations()
		cur, err := api.Get(ctxFor(t, 30*time.Second), "down", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cur.Webhooks[0].FailurePolicy = ptr(admissionregistrationv1.Ignore)
		up, err := api.Update(ctxFor(t, 30*time.Second), cur, metav1.UpdateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		controlplanetest.Eventually(t, 30*time.Second, "updated configuration", func() bool { return env.Webhooks.Loaded(true, "down", up.ResourceVersion) })
		addValidating(t, env, "down-ignore", v)
		if _, err := createPod(t, env, "default", testPod("down"), metav1.CreateOptions{}); err != nil {
			t.Fatalf("under Ignore: %v", err)
		}
	})

	t.Run("garbage response", func(t *testing.T) {
		h := startRawHook(t, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte("{not json"))
		})
		addMutating(t, env, "garbage", mutatingHook("garbage.cairn.test", h))
		mark := settle(t, env)
		_, err := createPod(t, env, "default", testPod("garbage"), metav1.CreateOptions{})
		wantStatus(t, err, http.StatusInternalServerError, `Internal error occurred: failed calling webhook "garbage.cairn.test": failed to call webhook: `)
		requireNothingWritten(t, env, mark)
	})

	t.Run("wrong uid in the response", func(t *testing.T) {
		h := startRawHook(t, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"uid":"other","allowed":true}}`))
		})
		addValidating(t, env, "uid", validatingHook("uid.cairn.test", h))
		mark := settle(t, env)
		_, err := createPod(t, env, "default", testPod("uid"), metav1.CreateOptions{})
		wantStatus(t, err, http.StatusInternalServerError, `failed calling webhook "uid.cairn.test": received invalid webhook response: expected response.uid=`)
		requireNothingWritten(t, env, mark)
	})

	t.Run("patch that does not apply", func(t *testing.T) {
		h := startHook(t, func(*admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
			return patchResponse(`[{"op":"replace","path":"/spec/nothing/here","value":1}]`)
		})
		addMutating(t, env, "badpatch", mutatingHook("badpatch.cairn.test", h))
		mark := settle(t, env)
		_, err := createPod(t, env, "default", testPod("badpatch"), metav1.CreateOptions{})
		wantStatus(t, err, http.StatusInternalServerError, "Internal error occurred: replace operation does not apply")
		requireNothingWritten(t, env, mark)
	})

	t.Run("patch that makes the object invalid", func(t *testing.T) {
		h := startHook(t, func(*admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
			return patchResponse(`[{"op":"replace","path":"/spec/containers/0/image","value":""}]`)
		})
		addMutating(t, env, "invalid", mutatingHook("invalid.cairn.test", h))
		mark := settle(t, env)
		_, err := createPod(t, env, "default", testPod("invalid"), metav1.CreateOptions{})
		if !apierrors.IsInvalid(err) {
			t.Fatalf("got %v, want 422", err)
		}
		requireNothingWritten(t, env, mark)
	})
}

func TestWebhookConfigurationAPI(t *testing.T) {
	env := controlplanetest.Start(t)
	h := startHook(t, nil)
	hook := mutatingHook("api.cairn.test", h)
	bad := hook
	bad.MatchConditions = []admissionregistrationv1.MatchCondition{{Name: "broken", Expression: "object.metadata.name +"}}
	bad.SideEffects = nil
	bad.ClientConfig.Service = &admissionregistrationv1.ServiceReference{Namespace: "default", Name: "svc"}
	wantInvalid(t, env, "admissionregistration.k8s.io", "MutatingWebhookConfiguration",
		[]string{"webhooks[0].clientConfig", "webhooks[0].matchConditions[0].expression", "webhooks[0].sideEffects"}, func() error {
			_, err := env.Client.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctxFor(t, 30*time.Second),
				&admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "bad"},
					Webhooks: []admissionregistrationv1.MutatingWebhook{bad}}, metav1.CreateOptions{})
			return err
		})
	c, err := env.Client.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctxFor(t, 30*time.Second),
		&admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "good"},
			Webhooks: []admissionregistrationv1.MutatingWebhook{hook, mutatingHook("two.cairn.test", h)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w := c.Webhooks[0]
	if *w.FailurePolicy != admissionregistrationv1.Fail || *w.TimeoutSeconds != 10 || *w.ReinvocationPolicy != admissionregistrationv1.NeverReinvocationPolicy ||
		*w.MatchPolicy != admissionregistrationv1.Equivalent || *w.Rules[0].Scope != admissionregistrationv1.AllScopes {
		t.Errorf("defaults %+v", w)
	}
	cols, rows := tableOf(t, env, "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations")
	if strings.Join(cols, " ") != "Name Webhooks Age" || len(rows) != 1 || rows[0][0] != "good" || rows[0][1] != float64(2) {
		t.Errorf("table %v %v", cols, rows)
	}
}
