package serviceaccount

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// TestMountToken: every container gets the volume, except one with
// something mounted at the token path already; a pod with a
// kube-api-access-* volume keeps it.
func TestMountToken(t *testing.T) {
	pod := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{
		{Name: "a"},
		{Name: "own", VolumeMounts: []corev1.VolumeMount{{Name: "mine", MountPath: TokenMountPath}}},
	}}}
	mountToken(pod)
	if len(pod.Spec.Volumes) != 1 || len(pod.Spec.Containers[0].VolumeMounts) != 1 || len(pod.Spec.Containers[1].VolumeMounts) != 1 ||
		pod.Spec.Containers[1].VolumeMounts[0].Name != "mine" {
		t.Fatalf("pod %+v", pod.Spec)
	}
	name := pod.Spec.Volumes[0].Name
	pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{Name: "late"})
	mountToken(pod)
	if len(pod.Spec.Volumes) != 1 || pod.Spec.Containers[2].VolumeMounts[0].Name != name {
		t.Errorf("second mount: %+v", pod.Spec)
	}
}
