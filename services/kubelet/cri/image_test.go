package cri_test

import (
	"context"
	"slices"
	"testing"
	"time"

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
	// ErrImagePull lasts until the next sync within the back-off, too
	// short to be sure to see by polling on a loaded machine: watch every
	// status the kubelet writes instead.
	reasons := r.watchWaitingReasons("always-missing", "c")
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
	deadline := time.After(wait)
	var seen []string
	for !slices.Contains(seen, "ImagePullBackOff") {
		select {
		case reason := <-reasons:
			if len(seen) == 0 || seen[len(seen)-1] != reason {
				seen = append(seen, reason)
			}
		case <-deadline:
			t.Fatalf("always-missing: waiting reasons %v, want ErrImagePull then ImagePullBackOff", seen)
		}
	}
	if i := slices.Index(seen, "ErrImagePull"); i < 0 || i > slices.Index(seen, "ImagePullBackOff") {
		t.Errorf("always-missing: waiting reasons %v, want ErrImagePull before ImagePullBackOff", seen)
	}
	if p := r.get("always-missing"); p.Status.Phase != corev1.PodPending {
		t.Errorf("always-missing: phase %s, want Pending", p.Status.Phase)
	}
}

// watchWaitingReasons watches the pod called name, from before it exists,
// and sends the waiting reason of its container cname in every version of
// it, until the test ends.
func (r *rig) watchWaitingReasons(name, cname string) <-chan string {
	r.t.Helper()
	pods := r.env.Client.CoreV1().Pods("default")
	list, err := pods.List(context.Background(), metav1.ListOptions{})
	if err != nil {
		r.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	w, err := pods.Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + name, ResourceVersion: list.ResourceVersion})
	if err != nil {
		cancel()
		r.t.Fatal(err)
	}
	out := make(chan string, 100)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			if ws := status(p, cname).State.Waiting; ws != nil {
				select {
				case out <- ws.Reason:
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	r.t.Cleanup(func() {
		cancel()
		w.Stop()
		<-done
	})
	return out
}
