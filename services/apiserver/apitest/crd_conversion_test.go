package apitest

import (
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apiextensions-apiserver/pkg/apihelpers"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"

	"github.com/cairn-dev/cairn/services/controlplane/controlplanetest"
	"github.com/cairn-dev/cairn/services/netns"
)

// kilnConverter is a conversion webhook between pottery.example.com/v1
// (spec.fuel) and v2 (spec.heatSource), as an operator serves one.
type kilnConverter struct{ calls atomic.Int64 }

func (k *kilnConverter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	k.calls.Add(1)
	var review apiextensionsv1.ConversionReview
	if err := json.NewDecoder(r.Body).Decode(&review); err != nil || review.Request == nil {
		http.Error(w, "bad review", http.StatusBadRequest)
		return
	}
	resp := &apiextensionsv1.ConversionResponse{UID: review.Request.UID, Result: metav1.Status{Status: metav1.StatusSuccess}}
	for _, raw := range review.Request.Objects {
		var obj map[string]any
		if err := json.Unmarshal(raw.Raw, &obj); err != nil {
			http.Error(w, "bad object", http.StatusBadRequest)
			return
		}
		spec, _ := obj["spec"].(map[string]any)
		from, to := "fuel", "heatSource"
		if review.Request.DesiredAPIVersion == "pottery.example.com/v1" {
			from, to = to, from
		}
		if v, ok := spec[from]; ok {
			spec[to] = v
			delete(spec, from)
		}
		obj["apiVersion"] = review.Request.DesiredAPIVersion
		b, _ := json.Marshal(obj)
		resp.ConvertedObjects = append(resp.ConvertedObjects, runtime.RawExtension{Raw: b})
	}
	review.Response, review.Request = resp, nil
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(&review)
}

// convertedKilnCRD defines kilns in v1 (spec.fuel, stored) and v2
// (spec.heatSource), converted by the webhook cc names.
func convertedKilnCRD(cc apiextensionsv1.WebhookClientConfig) *apiextensionsv1.CustomResourceDefinition {
	schemaWith := func(field string) *apiextensionsv1.CustomResourceValidation {
		return &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
			Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
				"spec": {Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{field: {Type: "string"}}},
			}}}
	}
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "kilns.pottery.example.com"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "pottery.example.com", Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "kilns", Singular: "kiln", Kind: "Kiln"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{
				{Name: "v1", Served: true, Storage: true, Schema: schemaWith("fuel")},
				{Name: "v2", Served: true, Schema: schemaWith("heatSource")},
			},
			Conversion: &apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.WebhookConverter,
				Webhook: &apiextensionsv1.WebhookConversion{ConversionReviewVersions: []string{"v1"}, ClientConfig: &cc}},
		},
	}
}

var kilnV2GVR = schema.GroupVersionResource{Group: "pottery.example.com", Version: "v2", Resource: "kilns"}

// TestCRDConversionWebhook: with conversion Webhook, objects are stored in
// the storage version and every read, write and watch in another version
// goes through a ConversionReview to the webhook over HTTPS, trusted by
// the definition's caBundle.
func TestCRDConversionWebhook(t *testing.T) {
	conv := &kilnConverter{}
	hook := httptest.NewTLSServer(conv)
	t.Cleanup(hook.Close)
	caBundle := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: hook.Certificate().Raw})

	env := controlplanetest.Start(t)
	ctx := ctxFor(t, time.Minute)
	url := hook.URL + "/convert"
	establish(t, env, convertedKilnCRD(apiextensionsv1.WebhookClientConfig{URL: &url, CABundle: caBundle}))
	v1 := dynamic.NewForConfigOrDie(env.Config).Resource(kilnGVR).Namespace("default")
	v2 := dynamic.NewForConfigOrDie(env.Config).Resource(kilnV2GVR).Namespace("default")

	w, err := v2.Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	in := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "pottery.example.com/v2", "kind": "Kiln",
		"metadata": map[string]any{"name": "k1"}, "spec": map[string]any{"heatSource": "gas"}}}
	created, err := v2.Create(ctx, in, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create in v2: %v", err)
	}
	if created.GetAPIVersion() != "pottery.example.com/v2" || created.Object["spec"].(map[string]any)["heatSource"] != "gas" {
		t.Errorf("created = %v", created.Object)
	}
	kv, err := env.Store.Get(ctx, "/registry/pottery.example.com/kilns/default/k1")
	if err != nil {
		t.Fatal(err)
	}
	if s := string(kv.Value); !strings.Contains(s, `"apiVersion":"pottery.example.com/v1"`) || !strings.Contains(s, `"fuel":"gas"`) {
		t.Errorf("stored = %s, want v1 with spec.fuel", s)
	}
	got, err := v1.Get(ctx, "k1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Object["spec"].(map[string]any)["fuel"] != "gas" {
		t.Errorf("v1 get = %v", got.Object)
	}
	_ = unstructured.SetNestedField(got.Object, "wood", "spec", "fuel")
	if _, err := v1.Update(ctx, got, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	l, err := v2.List(ctx, metav1.ListOptions{})
	if err != nil || len(l.Items) != 1 || l.Items[0].Object["spec"].(map[string]any)["heatSource"] != "wood" {
		t.Fatalf("v2 list = %v %v", l, err)
	}
	for _, want := range []watch.EventType{watch.Added, watch.Modified} {
		select {
		case ev := <-w.ResultChan():
			u, ok := ev.Object.(*unstructured.Unstructured)
			if ev.Type != want || !ok || u.GetAPIVersion() != "pottery.example.com/v2" || u.Object["spec"].(map[string]any)["heatSource"] == nil {
				t.Errorf("watch event %s %v, want %s in v2", ev.Type, ev.Object, want)
			}
		case <-ctx.Done():
			t.Fatal("no watch event")
		}
	}
	if conv.calls.Load() == 0 {
		t.Error("the webhook was never called")
	}
}

// TestCRDConversionWebhookService: a conversion webhook given as a
// service reference (namespace, name, path, port) is reached as the
// admission webhooks reach one: at a ready endpoint's pod address, dialed
// from inside its node's network namespace (one the test creates: the
// host has no such address), with the serving name
// <service>.<namespace>.svc checked against caBundle. When the only
// endpoint is on a node whose namespace the apiserver does not know, the
// conversion fails as kube's does, 500 with the webhook's error, and
// nothing is written.
func TestCRDConversionWebhookService(t *testing.T) {
	env, nsPath, ca, cert := startNetNSWebhookEnv(t, "converter.pottery.svc")
	conv := &kilnConverter{}
	mux := http.NewServeMux()
	mux.Handle("/convert", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// No kept-alive connection: each conversion dials, and so
		// resolves the endpoint again.
		w.Header().Set("Connection", "close")
		conv.ServeHTTP(w, r)
	}))
	ln, err := netns.Listen(nsPath, "tcp", podAddr+":0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	serveTLS(t, ln, cert, mux)

	ctx := ctxFor(t, 2*time.Minute)
	if _, err := env.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "pottery"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Client.CoreV1().Services("pottery").Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "converter"},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "https", Port: 8443, TargetPort: intstr.FromInt32(int32(port))}}}},
		metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	slice := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: "converter-x", Labels: map[string]string{discoveryv1.LabelServiceName: "converter"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr("https"), Port: ptr(int32(port))}},
		Endpoints: []discoveryv1.Endpoint{{Addresses: []string{podAddr}, NodeName: ptr("node-a"),
			Conditions: discoveryv1.EndpointConditions{Ready: ptr(true)}}}}
	slice, err = env.Client.DiscoveryV1().EndpointSlices("pottery").Create(ctx, slice, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	establish(t, env, convertedKilnCRD(apiextensionsv1.WebhookClientConfig{CABundle: ca.CAPEM,
		Service: &apiextensionsv1.ServiceReference{Namespace: "pottery", Name: "converter", Path: ptr("/convert"), Port: ptr(int32(8443))}}))
	v1 := dynamic.NewForConfigOrDie(env.Config).Resource(kilnGVR).Namespace("default")
	v2 := dynamic.NewForConfigOrDie(env.Config).Resource(kilnV2GVR).Namespace("default")
	in := func(name string) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "pottery.example.com/v2", "kind": "Kiln",
			"metadata": map[string]any{"name": name}, "spec": map[string]any{"heatSource": "wood"}}}
	}

	// The webhook caches learn of the Service and its slice from the log.
	controlplanetest.Eventually(t, time.Minute, "a create in v2 converted by the service webhook", func() bool {
		_, err = v2.Create(ctx, in("k1"), metav1.CreateOptions{})
		return err == nil
	})
	got, err := v1.Get(ctx, "k1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if f, _, _ := unstructured.NestedString(got.Object, "spec", "fuel"); f != "wood" {
		t.Errorf("v1 get = %v, want spec.fuel converted from heatSource", got.Object["spec"])
	}
	if conv.calls.Load() == 0 {
		t.Error("the webhook was never called")
	}

	// Its only endpoint moves to a node whose namespace is not known.
	slice.Endpoints[0].NodeName = ptr("node-b")
	if _, err := env.Client.DiscoveryV1().EndpointSlices("pottery").Update(ctx, slice, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	const want = `conversion webhook for pottery.example.com/v2, Kind=Kiln failed: Post "https://converter.pottery.svc:8443/convert": webhook: no network namespace is known for node "node-b"`
	var se *apierrors.StatusError
	name := ""
	controlplanetest.Eventually(t, time.Minute, "the conversion to fail on node-b", func() bool {
		name = fmt.Sprintf("k2-%d", conv.calls.Load())
		_, err = v2.Create(ctx, in(name), metav1.CreateOptions{})
		return errors.As(err, &se) && strings.Contains(se.ErrStatus.Message, "node-b")
	})
	if se.ErrStatus.Code != http.StatusInternalServerError || !strings.Contains(se.ErrStatus.Message, want) {
		t.Errorf("create through an unreachable webhook: %d %q, want 500 with %q", se.ErrStatus.Code, se.ErrStatus.Message, want)
	}
	if _, err := v1.Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("%s was written: %v", name, err)
	}
}

// TestCRDInvalidCABundle is kube's handling of a conversion webhook
// caBundle that is not PEM: a new definition may have one, but it is not
// established (Established False, reason InvalidCABundle, the
// EstablishingController's message), not in discovery, and its resources
// answer kube's 500 "error resolving resource" (its converter cannot be
// made); once a valid caBundle establishes it, a definition cannot be
// given an invalid one again (422 on
// spec.conversion.webhookClientConfig.caBundle, nothing written).
func TestCRDInvalidCABundle(t *testing.T) {
	env := controlplanetest.Start(t)
	ctx := ctxFor(t, time.Minute)
	cs := apiextensionsclient.NewForConfigOrDie(env.Config).ApiextensionsV1().CustomResourceDefinitions()
	url := "https://127.0.0.1:1/convert"
	crd := convertedKilnCRD(apiextensionsv1.WebhookClientConfig{URL: &url, CABundle: []byte("not a certificate")})
	if _, err := cs.Create(ctx, crd, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create with an invalid caBundle: %v", err)
	}
	var got *apiextensionsv1.CustomResourceDefinition
	controlplanetest.Eventually(t, time.Minute, "the Established condition", func() bool {
		var err error
		got, err = cs.Get(ctx, crd.Name, metav1.GetOptions{})
		return err == nil && apihelpers.FindCRDCondition(got, apiextensionsv1.Established) != nil
	})
	if c := apihelpers.FindCRDCondition(got, apiextensionsv1.Established); c.Status != apiextensionsv1.ConditionFalse ||
		c.Reason != "InvalidCABundle" || c.Message != "The conversion webhook CABundle is invalid" {
		t.Errorf("Established = %+v", c)
	}
	if !apihelpers.IsCRDConditionTrue(got, apiextensionsv1.NamesAccepted) {
		t.Errorf("NamesAccepted = %+v", apihelpers.FindCRDCondition(got, apiextensionsv1.NamesAccepted))
	}
	r := do(t, env, call{method: http.MethodGet, path: "/apis/pottery.example.com/v1/namespaces/default/kilns"})
	if st := status(t, r); r.code != http.StatusInternalServerError || st.Message != "Internal error occurred: error resolving resource" {
		t.Errorf("list kilns: %d %q, want kube's 500", r.code, st.Message)
	}
	if _, err := env.Client.Discovery().ServerResourcesForGroupVersion("pottery.example.com/v1"); !apierrors.IsNotFound(err) {
		t.Errorf("discovery of an unestablished definition: %v, want 404", err)
	}

	// A valid caBundle establishes it.
	hook := httptest.NewTLSServer(&kilnConverter{})
	t.Cleanup(hook.Close)
	caBundle := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: hook.Certificate().Raw})
	got.Spec.Conversion.Webhook.ClientConfig.CABundle = caBundle
	if _, err := cs.Update(ctx, got, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("update to a valid caBundle: %v", err)
	}
	controlplanetest.Eventually(t, time.Minute, "the definition to be established", func() bool {
		var err error
		got, err = cs.Get(ctx, crd.Name, metav1.GetOptions{})
		return err == nil && apihelpers.IsCRDConditionTrue(got, apiextensionsv1.Established)
	})
	if c := apihelpers.FindCRDCondition(got, apiextensionsv1.Established); c.Reason != "InitialNamesAccepted" {
		t.Errorf("Established = %+v", c)
	}
	controlplanetest.Eventually(t, time.Minute, "kilns served", func() bool {
		return do(t, env, call{method: http.MethodGet, path: "/apis/pottery.example.com/v1/namespaces/default/kilns"}).code == http.StatusOK
	})

	// Established, it cannot take an invalid one.
	m := settle(t, env)
	bad := got.DeepCopy()
	bad.Spec.Conversion.Webhook.ClientConfig.CABundle = []byte("not a certificate")
	_, err := cs.Update(ctx, bad, metav1.UpdateOptions{})
	assertCause(t, err, "spec.conversion.webhookClientConfig.caBundle", "unable to load root certificates")
	requireNothingWritten(t, env, m)
}
