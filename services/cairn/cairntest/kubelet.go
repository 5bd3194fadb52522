package cairntest

import (
	"context"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
)

// KubeletConfig says which pods a stand-in kubelet acts on.
type KubeletConfig struct {
	// Node limits the kubelet to the pods bound to that node; empty, it
	// acts on every pod, bound or not.
	Node string
	// Admit reports whether the kubelet may start p, a pod that is not
	// Running yet and not being deleted; nil admits every pod. It may be
	// called again for a pod whose status write failed.
	Admit func(p *corev1.Pod) bool
	// FinishDeletes has the kubelet delete the pods being deleted
	// gracefully with grace period 0, as a kubelet does once their
	// containers are gone.
	FinishDeletes bool
	// Exit, if set, ends a Running pod when it returns ok: its containers
	// terminate with code, and the pod is Succeeded (code 0) or Failed, as
	// a Job's pods end. Nil keeps pods running.
	Exit func(p *corev1.Pod) (code int32, ok bool)
}

// StartKubelet stands in, through the API with the admin kubeconfig, for
// the kubelet that a `cairn up --node=false` does not have: it reports
// every pod it admits Running and Ready through pods/status. An informer
// with a one-second resync retries what failed (a conflict, a restart of
// cairn). It runs until stop is called or t ends; stop waits for it.
func StartKubelet(t testing.TB, kubeconfig string, cfg KubeletConfig) (stop func()) {
	t.Helper()
	rc, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatalf("kubelet: load kubeconfig: %v", err)
	}
	client, err := kubernetes.NewForConfig(rc)
	if err != nil {
		t.Fatalf("kubelet: client: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	handle := func(p *corev1.Pod) { syncPod(ctx, t, client, cfg, p) }
	f := informers.NewSharedInformerFactory(client, time.Second)
	if _, err := f.Core().V1().Pods().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { handle(o.(*corev1.Pod)) },
		UpdateFunc: func(_, o any) { handle(o.(*corev1.Pod)) },
	}); err != nil {
		cancel()
		t.Fatalf("kubelet: %v", err)
	}
	f.Start(ctx.Done())
	stop = sync.OnceFunc(func() {
		cancel()
		f.Shutdown()
	})
	t.Cleanup(stop)
	return stop
}

// syncPod acts on one pod as cfg says; a write that fails is logged and
// left to the next resync.
func syncPod(ctx context.Context, t testing.TB, client kubernetes.Interface, cfg KubeletConfig, p *corev1.Pod) {
	if cfg.Node != "" && p.Spec.NodeName != cfg.Node {
		return
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	pods := client.CoreV1().Pods(p.Namespace)
	var err error
	switch {
	case p.DeletionTimestamp != nil:
		if !cfg.FinishDeletes {
			return
		}
		zero := int64(0)
		err = pods.Delete(wctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero,
			Preconditions: &metav1.Preconditions{UID: &p.UID}})
	case p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed:
		return
	case p.Status.Phase == corev1.PodRunning:
		var code int32
		ok := false
		if cfg.Exit != nil {
			code, ok = cfg.Exit(p)
		}
		if !ok {
			return
		}
		p = p.DeepCopy()
		SetExited(p, code)
		_, err = pods.UpdateStatus(wctx, p, metav1.UpdateOptions{})
	case cfg.Admit != nil && !cfg.Admit(p):
		return
	default:
		p = p.DeepCopy()
		SetRunning(p)
		_, err = pods.UpdateStatus(wctx, p, metav1.UpdateOptions{})
	}
	if err != nil && ctx.Err() == nil {
		t.Logf("kubelet: pod %s/%s: %v", p.Namespace, p.Name, err)
	}
}

// SetRunning sets p's status to what a kubelet reports once every
// container has started: Running, with each condition and container
// ready.
func SetRunning(p *corev1.Pod) {
	now := metav1.Now()
	p.Status.Phase = corev1.PodRunning
	p.Status.StartTime = &now
	p.Status.Conditions = nil
	for _, typ := range []corev1.PodConditionType{corev1.PodScheduled, corev1.PodInitialized, corev1.ContainersReady, corev1.PodReady} {
		p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: typ, Status: corev1.ConditionTrue, LastTransitionTime: now})
	}
	p.Status.ContainerStatuses = nil
	for _, c := range p.Spec.Containers {
		started := true
		p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, corev1.ContainerStatus{
			Name: c.Name, Image: c.Image, Ready: true, Started: &started,
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}},
		})
	}
}

// SetExited sets p's status to what a kubelet reports once every
// container exited with code (restartPolicy Never): Succeeded for 0,
// Failed otherwise, no longer ready.
func SetExited(p *corev1.Pod, code int32) {
	now := metav1.Now()
	p.Status.Phase = corev1.PodSucceeded
	if code != 0 {
		p.Status.Phase = corev1.PodFailed
	}
	for i := range p.Status.Conditions {
		if c := &p.Status.Conditions[i]; c.Type == corev1.ContainersReady || c.Type == corev1.PodReady {
			c.Status, c.LastTransitionTime = corev1.ConditionFalse, now
		}
	}
	for i := range p.Status.ContainerStatuses {
		cs := &p.Status.ContainerStatuses[i]
		started := cs.State.Running
		cs.Ready = false
		cs.State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code, FinishedAt: now}}
		if started != nil {
			cs.State.Terminated.StartedAt = started.StartedAt
		}
	}
}
