package clustertest

import (
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"path/filepath"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/cairn-dev/cairn/events"
	"github.com/cairn-dev/cairn/events/consumer"
	"github.com/cairn-dev/cairn/projections/history/store"
	"github.com/cairn-dev/cairn/services/apiserver"
	"github.com/cairn-dev/cairn/services/cairn/cairntest"
	"github.com/cairn-dev/cairn/services/controllers/manager"
	"github.com/cairn-dev/cairn/services/controlplane"
	"github.com/cairn-dev/cairn/services/controlplane/controlplanetest"
)

// Users of a test cluster. Alice is the human: she is in system:masters
// so she can write workloads.
const (
	AliceToken      = "alice-token"
	ControllerToken = "controller-token"
	SchedulerToken  = "scheduler-token"
	KubeletToken    = "kubelet-token"

	Alice   = "alice"
	Kubelet = "system:node:node-1"
)

// Cluster is a control plane with the real controllers, a stand-in
// scheduler and kubelet, and a running history projection.
type Cluster struct {
	CP      *controlplane.ControlPlane
	DataDir string
	URL     string
	Alice   *kubernetes.Clientset
	Store   *store.Store
}

// Config returns a rest.Config for token.
func (c *Cluster) Config(token string) *rest.Config {
	return &rest.Config{Host: c.URL, BearerToken: token, QPS: -1, Burst: -1}
}

// StartCluster starts everything for one test and stops it at cleanup.
func StartCluster(t testing.TB, obs ...store.Observer) *Cluster {
	t.Helper()
	dir := t.TempDir()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cp, err := controlplane.Start(ctx, controlplane.Config{
		DataDir: filepath.Join(dir, "data"), Listener: ln, NoFsync: true,
		Authenticator: apiserver.TokenAuthenticator{
			AliceToken:      {User: Alice, Groups: []string{apiserver.GroupMasters}},
			ControllerToken: {User: apiserver.UserControllers},
			SchedulerToken:  {User: apiserver.UserScheduler},
			KubeletToken:    {User: Kubelet, Groups: []string{apiserver.GroupNodes}},
		},
	})
	if err != nil {
		t.Fatalf("start control plane: %v", err)
	}
	t.Cleanup(cp.Close)
	c := &Cluster{CP: cp, DataDir: filepath.Join(dir, "data"), URL: "http://" + cp.Addr}
	if c.Alice, err = kubernetes.NewForConfig(c.Config(AliceToken)); err != nil {
		t.Fatal(err)
	}
	if c.Store, err = store.Open(filepath.Join(dir, "history.db"), store.Options{NoSync: true}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Store.Close() })
	log := slog.New(slog.DiscardHandler)
	mgr, err := manager.New(manager.Config{RestConfig: c.Config(ControllerToken), JS: cp.JS, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	controlplanetest.Run(t, mgr)
	// Objects the test creates must reach the controllers as events (with
	// their causes), not in the caches' first snapshots.
	if err := mgr.WaitForSync(ctx); err != nil {
		t.Fatalf("controller-manager sync: %v", err)
	}
	controlplanetest.Run(t, store.NewIngester(c.Store, cp.JS, store.IngestConfig{Observers: obs}))
	sched := kubernetes.NewForConfigOrDie(consumer.WrapConfig(c.Config(SchedulerToken)))
	kubelet := kubernetes.NewForConfigOrDie(consumer.WrapConfig(c.Config(KubeletToken)))
	controlplanetest.Run(t, runFunc(func(ctx context.Context) error { return standIns(ctx, cp, sched, kubelet) }))
	return c
}

// runFunc runs a function as a controlplanetest.Runner.
type runFunc func(context.Context) error

func (f runFunc) Run(ctx context.Context) error { return f(ctx) }

// standIns are the scheduler and kubelet `cairn up` does not have yet:
// they follow the pods on the log, bind every unbound pod to node-1 as the
// scheduler, report every bound pod Running and Ready as node-1's
// kubelet, and finish the graceful deletes of bound pods. Both write with the causation and correlation ids of the event
// they react to, as real consumers do.
func standIns(ctx context.Context, cp *controlplane.ControlPlane, sched, kubelet kubernetes.Interface) error {
	return events.Tail(ctx, cp.JS, events.TailOptions{Group: "core", Resource: "pods", Follow: true}, func(e *events.Event) error {
		if e.Type == events.Deleted {
			return nil
		}
		var p corev1.Pod
		if json.Unmarshal(e.Object, &p) != nil {
			return nil
		}
		cctx := consumer.WithCause(ctx, consumer.CauseOf(e))
		switch {
		case p.DeletionTimestamp != nil:
			if p.Spec.NodeName != "" {
				// The kubelet finishes a graceful delete once the
				// containers are stopped: at once, here.
				zero := int64(0)
				_ = kubelet.CoreV1().Pods(p.Namespace).Delete(cctx, p.Name, metav1.DeleteOptions{
					GracePeriodSeconds: &zero, Preconditions: &metav1.Preconditions{UID: &p.UID}})
			}
		case p.Spec.NodeName == "":
			b := &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace, UID: p.UID},
				Target: corev1.ObjectReference{Kind: "Node", Name: "node-1"}}
			// A failed bind (already bound, gone) is retried on the pod's
			// next event, if any.
			_ = sched.CoreV1().Pods(p.Namespace).Bind(cctx, b, metav1.CreateOptions{})
		case p.Status.Phase != corev1.PodRunning:
			cairntest.SetRunning(&p)
			_, _ = kubelet.CoreV1().Pods(p.Namespace).UpdateStatus(cctx, &p, metav1.UpdateOptions{})
		}
		return nil
	})
}

// Deployment is a Deployment in default of replicas pods labelled
// app=<name>, each with one container "app" running image.
func Deployment(name string, replicas int32, image string) *appsv1.Deployment {
	return controlplanetest.Deployment("default", name, replicas, corev1.Container{Name: "app", Image: image})
}
