package nodelifecycle_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/cairn-dev/cairn/services/controllers/manager"
	"github.com/cairn-dev/cairn/services/controlplane/controlplanetest"
	"github.com/cairn-dev/cairn/services/kubelet"
	"github.com/cairn-dev/cairn/services/kubelet/hollow"
	"github.com/cairn-dev/cairn/services/scheduler"
)

// TestDeadNodeReplaced is the whole chain a Kubernetes user counts on: a
// Deployment's node dies (its kubelet stops), the node lifecycle
// controller marks it unreachable and evicts its pods once their
// toleration runs out, the ReplicaSet makes new ones, the scheduler puts
// them on the live node (not on the tainted one), and the Deployment is
// whole again.
func TestDeadNodeReplaced(t *testing.T) {
	env := controlplanetest.Start(t)
	ctx := context.Background()
	m, err := manager.New(manager.Config{RestConfig: env.ConfigFor(controlplanetest.ControllerToken), JS: env.JS,
		NodeMonitorGracePeriod: grace, Log: controlplanetest.Logger("NODELIFECYCLE_TEST_LOG")})
	if err != nil {
		t.Fatal(err)
	}
	controlplanetest.RunSynced(t, m)
	s, err := scheduler.New(scheduler.Config{RestConfig: env.ConfigFor(controlplanetest.SchedulerToken), JS: env.JS,
		Log: controlplanetest.Logger("NODELIFECYCLE_TEST_LOG")})
	if err != nil {
		t.Fatal(err)
	}
	controlplanetest.Run(t, s)
	stop := map[string]func(){}
	for _, name := range []string{"n1", "n2"} {
		stop[name] = startHollow(t, env, name)
	}

	d := controlplanetest.Deployment("default", "web", 2, corev1.Container{Name: "c", Image: "busybox"})
	one := int64(1)
	d.Spec.Template.Spec.Tolerations = []corev1.Toleration{{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists,
		Effect: corev1.TaintEffectNoExecute, TolerationSeconds: &one}}
	if _, err := env.Client.AppsV1().Deployments("default").Create(ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	running := func() []corev1.Pod {
		l, err := env.Client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: labels.SelectorFromSet(d.Spec.Selector.MatchLabels).String()})
		if err != nil {
			t.Fatal(err)
		}
		var out []corev1.Pod
		for _, p := range l.Items {
			if p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning {
				out = append(out, p)
			}
		}
		return out
	}
	available := func() bool {
		got, err := env.Client.AppsV1().Deployments("default").Get(ctx, "web", metav1.GetOptions{})
		return err == nil && got.Status.AvailableReplicas == 2 && len(running()) == 2
	}
	controlplanetest.Eventually(t, 30*time.Second, "2 available replicas", available)
	pods := running()
	dead := pods[0].Spec.NodeName
	live := map[string]string{"n1": "n2", "n2": "n1"}[dead]
	stop[dead]()
	died := time.Now()

	controlplanetest.Eventually(t, 30*time.Second, "the pod of the dead node "+dead+" deleted", func() bool {
		p := controlplanetest.GetPod(t, env, "default", pods[0].Name)
		return p.DeletionTimestamp != nil
	})
	controlplanetest.Eventually(t, 30*time.Second, "2 available replicas again", available)
	took := time.Since(died)
	t.Logf("node %s died; its pod was replaced on %s %v later", dead, live, took.Round(time.Millisecond))
	// The last heartbeat came at most 200 ms before the kubelet stopped.
	if least := grace + time.Second - 250*time.Millisecond; took < least {
		t.Errorf("replaced %v after the node died: sooner than the grace period and the 1 s toleration (%v)", took, least)
	}
	for _, p := range running() {
		if p.Spec.NodeName != live {
			t.Errorf("pod %s runs on %s; only %s is alive", p.Name, p.Spec.NodeName, live)
		}
	}
}

// startHollow runs a hollow kubelet for node name, renewing its Lease
// every 200 ms, and returns what stops it (as a kubelet dying would).
func startHollow(t *testing.T, env *controlplanetest.Env, name string) func() {
	t.Helper()
	rt, err := hollow.New(hollow.Config{StartDelay: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	k, err := kubelet.New(kubelet.Config{RestConfig: env.Config, JS: env.JS, NodeName: name, Runtime: rt, NodeIP: "10.1.0.1",
		LeaseRenewInterval: 200 * time.Millisecond, NodeStatusInterval: 200 * time.Millisecond, RelistPeriod: 100 * time.Millisecond,
		Log: controlplanetest.Logger("NODELIFECYCLE_TEST_LOG")})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := k.Run(ctx); err != nil {
			t.Errorf("kubelet %s: %v", name, err)
		}
	}()
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			cancel()
			<-done
		}
	}
	t.Cleanup(stop)
	return stop
}
