package cri_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// TestRestartAdopts stops the kubelet abruptly (nothing is cleaned up, as
// after SIGKILL), changes the world behind its back, and starts a new one
// on the same node and directories: running containers are adopted as
// they are (same container, same start time, no restart, never a second
// copy); a pod force-deleted meanwhile is removed; a pod bound meanwhile
// starts.
func TestRestartAdopts(t *testing.T) {
	r := newRig(t, nil)
	ctx := context.Background()
	for _, name := range []string{"keep", "gone"} {
		r.create(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: ptr.To(int64(1)),
			Containers:                    []corev1.Container{{Name: "c", Command: []string{"sleep", "3600"}}}}})
	}
	keep, gone := r.waitReady("keep"), r.waitReady("gone")
	before := status(keep, "c")

	r.stop()
	if err := r.env.Client.CoreV1().Pods("default").Delete(ctx, "gone", metav1.DeleteOptions{GracePeriodSeconds: ptr.To(int64(0))}); err != nil {
		t.Fatal(err)
	}
	r.create(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "new"}, Spec: corev1.PodSpec{
		Containers: []corev1.Container{{Name: "c", Command: []string{"sleep", "3600"}}}}})
	time.Sleep(time.Second)
	r.start(nil)

	r.waitReady("new")
	deadline := time.Now().Add(wait)
	for len(r.criContainers(string(gone.UID)))+len(r.criSandboxes(string(gone.UID))) > 0 {
		if time.Now().After(deadline) {
			t.Fatal("containers of the force-deleted pod not removed")
		}
		time.Sleep(100 * time.Millisecond)
	}
	// Give the new kubelet a few sync rounds to do anything wrong.
	time.Sleep(3 * time.Second)
	keep = r.get("keep")
	after := status(keep, "c")
	if after.ContainerID != before.ContainerID || after.RestartCount != 0 || after.State.Running == nil ||
		!after.State.Running.StartedAt.Equal(&before.State.Running.StartedAt) || !after.Ready {
		t.Errorf("adopted container changed: before %+v after %+v", before, after)
	}
	cs := r.criContainers(string(keep.UID))
	if len(cs) != 1 || cs[0].State.String() != "CONTAINER_RUNNING" {
		t.Errorf("CRI containers of the adopted pod: %v", cs)
	}
	if sbs := r.criSandboxes(string(keep.UID)); len(sbs) != 1 {
		t.Errorf("sandboxes of the adopted pod: %d", len(sbs))
	}
}
