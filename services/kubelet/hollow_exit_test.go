package kubelet

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cairn-dev/cairn/services/controlplane/controlplanetest"
	"github.com/cairn-dev/cairn/services/kubelet/hollow"
)

// TestHollowContainersExitOnTheirOwn runs pods that ask their hollow
// containers to exit (hollow.AnnotationExitAfter): with restartPolicy
// Never, exit code 0 makes the pod Succeeded and 3 makes it Failed with
// the code in its container status. The relist is an hour apart, so only
// the runtime's notification can tell the kubelet.
func TestHollowContainersExitOnTheirOwn(t *testing.T) {
	env := controlplanetest.Start(t)
	startHollow(t, env, "n1", func(c *Config) { c.RelistPeriod = time.Hour })
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		code  string
		phase corev1.PodPhase
	}{
		{"ok", "0", corev1.PodSucceeded},
		{"bad", "3", corev1.PodFailed},
	} {
		p := newPod("default", tc.name, "n1")
		p.Spec.RestartPolicy = corev1.RestartPolicyNever
		p.Annotations = map[string]string{hollow.AnnotationExitAfter: "200ms", hollow.AnnotationExitCode: tc.code}
		if _, err := env.Client.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		var got *corev1.Pod
		eventually(t, wait, "pod "+tc.name+" "+string(tc.phase), func() bool {
			var err error
			got, err = env.Client.CoreV1().Pods("default").Get(ctx, tc.name, metav1.GetOptions{})
			return err == nil && got.Status.Phase == tc.phase
		})
		cs := got.Status.ContainerStatuses
		if len(cs) != 1 || cs[0].State.Terminated == nil {
			t.Fatalf("pod %s: container statuses %+v, want one terminated", tc.name, cs)
		}
		if want := map[string]int32{"0": 0, "3": 3}[tc.code]; cs[0].State.Terminated.ExitCode != want {
			t.Errorf("pod %s: exit code %d, want %d", tc.name, cs[0].State.Terminated.ExitCode, want)
		}
	}
}
