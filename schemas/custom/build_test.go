package custom

import (
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func testCRD() *apiextensionsv1.CustomResourceDefinition {
	one := apiextensionsv1.JSON{Raw: []byte(`1`)}
	schema := &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
		Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
			"spec": {Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
				"size": {Type: "integer", Default: &one, Minimum: ptr(0.0)},
			}},
		}}}
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "cups.example.com"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "example.com", Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "cups", Singular: "cup", Kind: "Cup", ListKind: "CupList"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{
				{Name: "v1", Served: true, Storage: true, Schema: schema},
				{Name: "v1beta1", Served: true, Deprecated: true, Schema: schema},
				{Name: "v1alpha1", Served: false, Schema: schema},
			},
			Conversion: &apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.NoneConverter},
		},
	}
}

func ptr[T any](v T) *T { return &v }

func TestBuild(t *testing.T) {
	conv, err := NewConverters(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	crd := testCRD()
	if rs, err := Build(crd, conv); err != nil || len(rs) != 0 {
		t.Fatalf("before its names are accepted: %d resources, %v", len(rs), err)
	}
	crd.Status.AcceptedNames = crd.Spec.Names
	rs, err := Build(crd, conv)
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 2 || rs[0].GroupVersion.Version != "v1" || rs[1].GroupVersion.Version != "v1beta1" {
		t.Fatalf("resources = %v", rs)
	}
	if w := rs[1].Custom.Warning; w != "example.com/v1beta1 Cup is deprecated; use example.com/v1 Cup" {
		t.Errorf("warning = %q", w)
	}
	if rs[0].Custom.Warning != "" || rs[1].Custom.StorageVersion != "v1" {
		t.Errorf("custom = %+v", rs[0].Custom)
	}

	// Defaulting and pruning on the way in, then validation.
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "example.com/v1", "kind": "Cup",
		"metadata": map[string]any{"name": "c", "namespace": "default"},
		"spec":     map[string]any{"handle": true}, "extra": "x"}}
	rs[0].Default(u)
	if got := u.Object["spec"]; got.(map[string]any)["size"] != int64(1) || len(got.(map[string]any)) != 1 {
		t.Errorf("spec = %v, want size defaulted and handle pruned", got)
	}
	if _, ok := u.Object["extra"]; ok {
		t.Error("unknown top-level field kept")
	}
	if errs := rs[0].ValidateCreate(u); len(errs) != 0 {
		t.Errorf("valid object: %v", errs)
	}
	_ = unstructured.SetNestedField(u.Object, int64(-1), "spec", "size")
	errs := rs[0].ValidateCreate(u)
	if len(errs) != 1 || errs[0].Field != "spec.size" {
		t.Errorf("errors = %v, want one on spec.size", errs)
	}
	if set := rs[0].Fields(u); set["metadata.name"] != "c" || set["metadata.namespace"] != "default" {
		t.Errorf("fields = %v", set)
	}
}

// TestBuildInvalidCABundle: a conversion webhook whose caBundle is not PEM
// has no client, so the definition cannot be served (kube's handler
// fails the same way, in NewConverter).
func TestBuildInvalidCABundle(t *testing.T) {
	conv, err := NewConverters(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	crd := testCRD()
	crd.Status.AcceptedNames = crd.Spec.Names
	url := "https://127.0.0.1:1/convert"
	crd.Spec.Conversion = &apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.WebhookConverter,
		Webhook: &apiextensionsv1.WebhookConversion{ConversionReviewVersions: []string{"v1"},
			ClientConfig: &apiextensionsv1.WebhookClientConfig{URL: &url, CABundle: []byte("not a certificate")}}}
	if rs, err := Build(crd, conv); err == nil {
		t.Fatalf("built %d resources with a bad caBundle", len(rs))
	}
	crd.Spec.Conversion.Webhook.ClientConfig.CABundle = nil
	if rs, err := Build(crd, conv); err != nil || len(rs) != 2 {
		t.Fatalf("without a caBundle: %d resources, %v", len(rs), err)
	}
}
