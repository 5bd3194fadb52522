package schemas

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestValidateServiceAccount(t *testing.T) {
	for _, tc := range []struct {
		name string
		sa   corev1.ServiceAccount
		want []string // field paths of the errors
	}{
		{"valid", corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "build-bot", Namespace: "ns"}}, nil},
		{"dotted name", corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "a.b", Namespace: "ns"}}, nil},
		{"bad name", corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "Build_Bot", Namespace: "ns"}}, []string{"metadata.name"}},
		{"no namespace", corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "a"}}, []string{"metadata.namespace"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, e := range validateServiceAccount(&tc.sa) {
				got = append(got, e.Field)
			}
			if len(got) != len(tc.want) || len(got) > 0 && got[0] != tc.want[0] {
				t.Errorf("errors on %v, want %v", got, tc.want)
			}
		})
	}
}
