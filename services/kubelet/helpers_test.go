package kubelet

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cairn-dev/cairn/services/controlplane/controlplanetest"
	"github.com/cairn-dev/cairn/services/kubelet/hollow"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const wait = 30 * time.Second

// eventually polls cond until it holds or d passes.
func eventually(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// startHollow runs one kubelet with a hollow runtime on node name until
// the test ends.
func startHollow(t testing.TB, env *controlplanetest.Env, name string, tweak func(*Config)) (*Kubelet, *hollow.Runtime) {
	t.Helper()
	rt, err := hollow.New(hollow.Config{StartDelay: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{
		RestConfig: env.Config, JS: env.JS, NodeName: name, Runtime: rt, NodeIP: "10.1.0.1",
		LeaseRenewInterval: 200 * time.Millisecond, NodeStatusInterval: 200 * time.Millisecond,
		RelistPeriod: 100 * time.Millisecond, Log: controlplanetest.Logger("KUBELET_TEST_LOG"),
	}
	if tweak != nil {
		tweak(&cfg)
	}
	k, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := controlplanetest.Run(t, k)
	sctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	if err := k.Pods().WaitForSync(sctx); err != nil {
		t.Fatal(err)
	}
	return k, rt
}

func newPod(ns, name, node string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.PodSpec{
			NodeName:   node,
			Containers: []corev1.Container{{Name: "c", Image: "busybox"}},
		},
	}
}

func condition(p *corev1.Pod, t corev1.PodConditionType) corev1.ConditionStatus {
	for _, c := range p.Status.Conditions {
		if c.Type == t {
			return c.Status
		}
	}
	return ""
}

func describe(p *corev1.Pod) string {
	s := fmt.Sprintf("phase=%s", p.Status.Phase)
	for _, c := range p.Status.Conditions {
		s += fmt.Sprintf(" %s=%s", c.Type, c.Status)
	}
	for _, cs := range append(p.Status.InitContainerStatuses, p.Status.ContainerStatuses...) {
		s += fmt.Sprintf(" [%s restarts=%d ready=%v state=%+v last=%+v]", cs.Name, cs.RestartCount, cs.Ready, cs.State, cs.LastTerminationState)
	}
	return s
}

func itoa(i int) string { return fmt.Sprint(i) }

func resourceMust(s string) resource.Quantity { return resource.MustParse(s) }

func envInt(name string, def int) int {
	if v := os.Getenv(name); v != "" {
		var n int
		if _, err := fmt.Sscan(v, &n); err == nil {
			return n
		}
	}
	return def
}
