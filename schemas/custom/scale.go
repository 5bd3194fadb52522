package custom

import (
	"fmt"
	"strings"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/cairn-dev/cairn/schemas"
)

// scaleFor is the scale subresource of a version, as kube's ScaleREST
// reads it (scaleFromCustomResource) and writes it.
func scaleFor(sc *apiextensionsv1.CustomResourceSubresourceScale) *schemas.CustomScale {
	specPath := splitPath(sc.SpecReplicasPath)
	statusPath := splitPath(sc.StatusReplicasPath)
	var selPath []string
	if sc.LabelSelectorPath != nil {
		selPath = splitPath(*sc.LabelSelectorPath)
	}
	return &schemas.CustomScale{
		Of: func(obj schemas.Object) (*autoscalingv1.Scale, error) {
			u, ok := obj.(*unstructured.Unstructured)
			if !ok {
				return nil, fmt.Errorf("custom: scale of a %T", obj)
			}
			spec, _, err := unstructured.NestedInt64(u.Object, specPath...)
			if err != nil {
				return nil, err
			}
			status, _, err := unstructured.NestedInt64(u.Object, statusPath...)
			if err != nil {
				return nil, err
			}
			var sel string
			if len(selPath) > 0 {
				if sel, _, err = unstructured.NestedString(u.Object, selPath...); err != nil {
					return nil, err
				}
			}
			return &autoscalingv1.Scale{
				TypeMeta: metav1.TypeMeta{APIVersion: "autoscaling/v1", Kind: "Scale"},
				ObjectMeta: metav1.ObjectMeta{Name: u.GetName(), Namespace: u.GetNamespace(), UID: u.GetUID(),
					ResourceVersion: u.GetResourceVersion(), CreationTimestamp: u.GetCreationTimestamp()},
				Spec:   autoscalingv1.ScaleSpec{Replicas: int32(spec)},
				Status: autoscalingv1.ScaleStatus{Replicas: int32(status), Selector: sel},
			}, nil
		},
		SetReplicas: func(obj schemas.Object, n int32) error {
			u, ok := obj.(*unstructured.Unstructured)
			if !ok {
				return fmt.Errorf("custom: scale of a %T", obj)
			}
			return unstructured.SetNestedField(u.Object, int64(n), specPath...)
		},
	}
}

func splitPath(p string) []string { return strings.Split(strings.TrimPrefix(p, "."), ".") }
