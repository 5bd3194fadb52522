package cri_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestImagePullPolicy: IfNotPresent and Never run the imported image
// without pulling; Never with a missing image waits in ErrImageNeverPull;
// Always pulls, and a pull that fails (no registry answers for
// cairn.invalid) reports ErrImagePull, then ImagePullBackOff.
func TestImagePullPolicy(t *testing.T) {
	r := newRig(t, nil)
	mk := func(name, image string, policy corev1.PullPolicy) {
		r.create(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "c", Image: image, ImagePullPolicy: policy, Command: []string{"sleep", "3600"}}}}})
	}
	mk("present", busybox, corev1.PullIfNotPresent)
	mk("never", busybox, corev1.PullNever)
	mk("never-missing", "cairn.invalid/missing:1", corev1.PullNever)
	mk("always-missing", "cairn.invalid/missing:1", corev1.PullAlways)
	r.waitReady("present")
	r.waitReady("never")
	waiting := func(reason string) func(p *corev1.Pod) bool {
		return func(p *corev1.Pod) bool {
			w := status(p, "c").State.Waiting
			return w != nil && w.Reason == reason && p.Status.Phase == corev1.PodPending
		}
	}
	r.waitPod("never-missing", "ErrImageNeverPull", waiting("ErrImageNeverPull"))
	r.waitPod("always-missing", "ErrImagePull", waiting("ErrImagePull"))
	r.waitPod("always-missing", "ImagePullBackOff", waiting("ImagePullBackOff"))
}
