package cri_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"

	"github.com/cairn-dev/cairn/services/csi/mount"
)

// memoryPod has one volume of each kind the kubelet puts on a tmpfs of its
// own (secret, downwardAPI, projected, emptyDir of medium Memory) and a
// configMap, which stays on disk as in kube.
func memoryPod(name string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PodSpec{
		TerminationGracePeriodSeconds: ptr.To(int64(1)),
		Containers: []corev1.Container{{Name: "c", Command: []string{"sleep", "3600"},
			VolumeMounts: []corev1.VolumeMount{
				{Name: "sec", MountPath: "/v/sec"}, {Name: "down", MountPath: "/v/down"},
				{Name: "proj", MountPath: "/v/proj"}, {Name: "mem", MountPath: "/v/mem"},
				{Name: "cm", MountPath: "/v/cm"},
			}}},
		Volumes: []corev1.Volume{
			{Name: "sec", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "sec"}}},
			{Name: "down", VolumeSource: corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{Items: []corev1.DownwardAPIVolumeFile{
				{Path: "name", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}}}}},
			{Name: "proj", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
				{Secret: &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "sec"}}}}}}},
			{Name: "mem", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{
				Medium: corev1.StorageMediumMemory, SizeLimit: ptr.To(resource.MustParse("4Mi"))}}},
			{Name: "cm", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
				LocalObjectReference: corev1.LocalObjectReference{Name: "cm"}}}},
		},
	}}
}

// TestMemoryVolumes checks that secret, downwardAPI, projected and
// memory emptyDir volumes are each a tmpfs (seen from inside the
// container and on the host) with their files, and that their mounts go
// when the pod goes: deleted through the API, and deleted while the
// kubelet was down with its sandbox removed behind its back (the orphan
// clean-up of a restarted kubelet).
func TestMemoryVolumes(t *testing.T) {
	r := newRig(t, nil)
	ctx := context.Background()
	if _, err := r.env.Client.CoreV1().Secrets("default").Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "sec"}, Data: map[string][]byte{"password": []byte("hunter2")}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.env.Client.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "cm"}, Data: map[string]string{"color": "blue"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	r.create(memoryPod("deleted"))
	r.create(memoryPod("orphaned"))
	p := r.waitReady("deleted")
	orphan := r.waitReady("orphaned")

	checks := []struct{ name, cmd, want string }{
		{"secret", "stat -f -c %T /v/sec && cat /v/sec/password", "tmpfs\nhunter2"},
		{"downwardAPI", "stat -f -c %T /v/down && cat /v/down/name", "tmpfs\ndeleted"},
		{"projected", "stat -f -c %T /v/proj && cat /v/proj/password", "tmpfs\nhunter2"},
		{"emptyDir memory", "stat -f -c %T /v/mem && df -k /v/mem | tail -1 | awk '{print $2}'", "tmpfs\n4096"},
		{"configMap on disk", "[ \"$(stat -f -c %T /v/cm)\" != tmpfs ] && cat /v/cm/color", "blue"},
	}
	for _, c := range checks {
		t.Run(c.name, func(t *testing.T) {
			if got := r.exec(p, "c", "sh", "-c", c.cmd); got != c.want {
				t.Errorf("%s: got %q, want %q", c.cmd, got, c.want)
			}
		})
	}
	podDir := func(p *corev1.Pod) string { return filepath.Join(r.dir, "pods", string(p.UID)) }
	for _, p := range []*corev1.Pod{p, orphan} {
		if ms, err := mount.Under(podDir(p)); err != nil || len(ms) != 4 {
			t.Fatalf("mounts of pod %s: %v, %v; want the 4 tmpfs", p.Name, ms, err)
		}
	}
	// gone waits for the pod's directory, and so every mount in it, to go.
	gone := func(p *corev1.Pod) {
		t.Helper()
		deadline := time.Now().Add(wait)
		for {
			ms, err := mount.Under(podDir(p))
			_, serr := os.Stat(podDir(p))
			if err == nil && len(ms) == 0 && os.IsNotExist(serr) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("pod %s: mounts %v (%v), dir %v", p.Name, ms, err, serr)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}

	if err := r.env.Client.CoreV1().Pods("default").Delete(ctx, "deleted", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	gone(p)

	r.stop()
	if err := r.env.Client.CoreV1().Pods("default").Delete(ctx, "orphaned", metav1.DeleteOptions{GracePeriodSeconds: ptr.To(int64(0))}); err != nil {
		t.Fatal(err)
	}
	for _, sb := range r.criSandboxes(string(orphan.UID)) {
		if _, err := r.node.RuntimeService().StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: sb.Id}); err != nil {
			t.Fatal(err)
		}
		if _, err := r.node.RuntimeService().RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: sb.Id}); err != nil {
			t.Fatal(err)
		}
	}
	if ms, _ := mount.Under(podDir(orphan)); len(ms) != 4 {
		t.Fatalf("mounts of the orphaned pod before the restart: %v", ms)
	}
	r.start(nil)
	gone(orphan)
}
