package nodeauthz

import (
	"encoding/json"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestPodRefs: the graph finds every Secret and ConfigMap a pod uses, as
// kube's VisitPodSecretNames and VisitPodConfigmapNames do.
func TestPodRefs(t *testing.T) {
	pod := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: "u"}, Spec: corev1.PodSpec{
		NodeName: "n1", ServiceAccountName: "bot",
		ImagePullSecrets: []corev1.LocalObjectReference{{Name: "pull"}},
		Volumes: []corev1.Volume{
			{Name: "a", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "vol-secret"}}},
			{Name: "b", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "vol-cm"}}}},
			{Name: "c", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "claim"}}},
			{Name: "d", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
				{Secret: &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "proj-secret"}}},
				{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"}}},
			}}}},
		},
		InitContainers: []corev1.Container{{Name: "i", EnvFrom: []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "init-env"}}}}}},
		Containers: []corev1.Container{{Name: "c", Env: []corev1.EnvVar{
			{Name: "X", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "env-secret"}, Key: "k"}}},
			{Name: "Y", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "env-cm"}, Key: "k"}}},
		}}},
	}}
	raw, err := json.Marshal(pod)
	if err != nil {
		t.Fatal(err)
	}
	k, r, err := decodePodRefs(raw)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		what      string
		got, want []string
	}{
		{"key", k[:], []string{"ns", "p"}},
		{"node, sa", []string{r.node, r.serviceAccount, r.uid}, []string{"n1", "bot", "u"}},
		{"secrets", r.secrets, []string{"pull", "vol-secret", "proj-secret", "init-env", "env-secret"}},
		{"configmaps", r.configMaps, []string{"vol-cm", "kube-root-ca.crt", "env-cm"}},
		{"pvcs", r.pvcs, []string{"claim"}},
	} {
		// The graph keeps sets; the order is the visitors'.
		got, want := slices.Sorted(slices.Values(c.got)), slices.Sorted(slices.Values(c.want))
		if c.what == "key" {
			got, want = c.got, c.want
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s = %q, want %q", c.what, c.got, c.want)
		}
	}
}
