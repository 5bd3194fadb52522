package apiserver

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/cairn-dev/cairn/schemas"
)

func TestDefaultTolerationSeconds(t *testing.T) {
	reg := schemas.NewRegistry()
	pods, _ := reg.Lookup("", "v1", "pods")
	cms, _ := reg.Lookup("", "v1", "configmaps")
	s := &Server{cfg: Config{NotReadyTolerationSeconds: ptr.To[int64](0), UnreachableTolerationSeconds: ptr.To[int64](60)}}
	defaults := []corev1.Toleration{
		{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](0)},
		{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](60)},
	}
	tests := []struct {
		name       string
		res        *schemas.Resource
		op, subres string
		obj        schemas.Object
		want       []corev1.Toleration
		wantErr    bool
	}{
		{name: "create", res: pods, op: "CREATE", obj: &corev1.Pod{}, want: defaults},
		{name: "update", res: pods, op: "UPDATE", obj: &corev1.Pod{}, want: defaults},
		{name: "subresource", res: pods, op: "UPDATE", subres: "status", obj: &corev1.Pod{}},
		{name: "delete", res: pods, op: "DELETE", obj: &corev1.Pod{}},
		{name: "not pods", res: cms, op: "CREATE", obj: &corev1.ConfigMap{}},
		{name: "not a pod", res: pods, op: "CREATE", obj: &corev1.ConfigMap{}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := s.defaultTolerationSeconds(&AdmissionRequest{Resource: tt.res, Operation: tt.op, Subresource: tt.subres, Object: tt.obj})
			if (err != nil) != tt.wantErr {
				t.Fatalf("got error %v, want one: %t", err, tt.wantErr)
			}
			if pod, ok := tt.obj.(*corev1.Pod); ok && !reflect.DeepEqual(pod.Spec.Tolerations, tt.want) {
				t.Errorf("got %v, want %v", pod.Spec.Tolerations, tt.want)
			}
		})
	}
}
