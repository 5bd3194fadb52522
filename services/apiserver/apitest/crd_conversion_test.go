package apitest

import (
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"

	"github.com/cairn-dev/cairn/services/controlplane/controlplanetest"
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
	schemaWith := func(field string) *apiextensionsv1.CustomResourceValidation {
		return &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
			Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
				"spec": {Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{field: {Type: "string"}}},
			}}}
	}
	url := hook.URL + "/convert"
	establish(t, env, &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "kilns.pottery.example.com"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "pottery.example.com", Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "kilns", Singular: "kiln", Kind: "Kiln"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{
				{Name: "v1", Served: true, Storage: true, Schema: schemaWith("fuel")},
				{Name: "v2", Served: true, Schema: schemaWith("heatSource")},
			},
			Conversion: &apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.WebhookConverter,
				Webhook: &apiextensionsv1.WebhookConversion{ConversionReviewVersions: []string{"v1"},
					ClientConfig: &apiextensionsv1.WebhookClientConfig{URL: &url, CABundle: caBundle}}},
		},
	})
	v1 := dynamic.NewForConfigOrDie(env.Config).Resource(kilnGVR).Namespace("default")
	v2 := dynamic.NewForConfigOrDie(env.Config).Resource(schema.GroupVersionResource{Group: "pottery.example.com", Version: "v2", Resource: "kilns"}).Namespace("default")

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
