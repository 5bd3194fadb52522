package gc

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/ptr"

	"github.com/cairn-dev/cairn/services/controlplane/controlplanetest"
)

// TestCustomResources: a CRD established after the collector started is
// followed: a ConfigMap owned by a custom object goes when the object
// goes, and a custom object owned by a ConfigMap goes when it goes. When
// the CRD is removed the collector stops following its resource.
func TestCustomResources(t *testing.T) {
	env := controlplanetest.Start(t)
	c := runCollector(t, newManager(t, env), Options{})
	ctx := context.Background()
	gvr := schema.GroupVersionResource{Group: "gc.example.com", Version: "v1", Resource: "urns"}
	crds := apiextensionsclient.NewForConfigOrDie(env.Config).ApiextensionsV1().CustomResourceDefinitions()
	_, err := crds.Create(ctx, &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "urns.gc.example.com"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: gvr.Group, Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "urns", Singular: "urn", Kind: "Urn", ListKind: "UrnList"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object", XPreserveUnknownFields: ptr.To(true)}}}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	followed := func() bool { _, ok := c.kind(schema.GroupKind{Group: gvr.Group, Kind: "Urn"}); return ok }
	eventually(t, timeout, "the collector to follow urns", followed)

	urns := dynamic.NewForConfigOrDie(env.Config).Resource(gvr).Namespace("default")
	urn, err := urns.Create(ctx, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "gc.example.com/v1", "kind": "Urn", "metadata": map[string]any{"name": "owner"}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cms := env.Client.CoreV1().ConfigMaps("default")
	_, err = cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "dep", OwnerReferences: []metav1.OwnerReference{{
		APIVersion: "gc.example.com/v1", Kind: "Urn", Name: "owner", UID: urn.GetUID(), Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}}},
		metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "owner"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = urns.Create(ctx, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "gc.example.com/v1", "kind": "Urn", "metadata": map[string]any{"name": "dep", "ownerReferences": []any{map[string]any{
			"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": string(cm.GetUID())}}}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	if err := urns.Delete(ctx, "owner", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, timeout, "the ConfigMap owned by the custom object to go", func() bool {
		_, err := cms.Get(ctx, "dep", metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
	if err := cms.Delete(ctx, "owner", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, timeout, "the custom object owned by the ConfigMap to go", func() bool {
		_, err := urns.Get(ctx, "dep", metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})

	if err := crds.Delete(ctx, "urns.gc.example.com", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, timeout, "the collector to stop following urns", func() bool { return !followed() })
}
