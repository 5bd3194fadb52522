package openapi_test

import (
	"testing"

	"github.com/cairn-dev/cairn/schemas"
	"github.com/cairn-dev/cairn/schemas/openapi"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// testResources are pods and deployments, described by hand.
func testResources() []*schemas.Resource {
	return []*schemas.Resource{
		{
			GroupVersion: corev1.SchemeGroupVersion,
			Kind:         "Pod", Plural: "pods", Singular: "pod",
			ShortNames: []string{"po"}, Categories: []string{"all"},
			Namespaced: true, Subresources: []string{"status", "binding"},
			New:     func() schemas.Object { return &corev1.Pod{} },
			NewList: func() runtime.Object { return &corev1.PodList{} },
		},
		{
			GroupVersion: appsv1.SchemeGroupVersion,
			Kind:         "Deployment", Plural: "deployments", Singular: "deployment",
			ShortNames: []string{"deploy"}, Categories: []string{"all"},
			Namespaced: true, Subresources: []string{"status", "scale"},
			New:     func() schemas.Object { return &appsv1.Deployment{} },
			NewList: func() runtime.Object { return &appsv1.DeploymentList{} },
		},
		{
			GroupVersion: corev1.SchemeGroupVersion,
			Kind:         "Namespace", Plural: "namespaces", Singular: "namespace",
			ShortNames: []string{"ns"}, Subresources: []string{"status"},
			New:     func() schemas.Object { return &corev1.Namespace{} },
			NewList: func() runtime.Object { return &corev1.NamespaceList{} },
		},
	}
}

func TestBuildSmoke(t *testing.T) {
	s, err := openapi.Build(testResources())
	if err != nil {
		t.Fatal(err)
	}
	b, _ := s.V3("api/v1")
	t.Logf("v3 api/v1: %d bytes, v2: %d bytes", len(b), len(s.V2()))
}
