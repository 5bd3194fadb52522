package chaostest

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/cairn-dev/cairn/services/kubelet"
)

const (
	namespace   = "chaos"
	deployments = 51 // roll-00..roll-49 on the hollow nodes, roll-50 on the real node
	realNode    = "chaos-r1"
	replicas    = 2
	surge       = 1
	revKey      = "chaos.cairn.dev/rev"
	cronName    = "tick"
)

// ack is one write the apiserver acknowledged.
type ack struct {
	kind, name string
	uid        types.UID
	rv         string
	rev        int // the Deployment's revKey annotation the write set
}

// acks collects acknowledged writes from the writer and the faults.
type acks struct {
	mu   sync.Mutex
	all  []ack
	last map[string]ack // the last acked write of each Deployment
}

func (a *acks) add(w ack) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.all = append(a.all, w)
	if w.kind == "Deployment" {
		a.last[w.name] = w
	}
}

func deploymentName(i int) string { return fmt.Sprintf("roll-%02d", i) }

// onRealNode: the last Deployment's pods run on the real node, the
// others' on the hollow nodes.
func onRealNode(i int) bool { return i == deployments-1 }

func deployment(i int) *appsv1.Deployment {
	labels := map[string]string{"app": deploymentName(i)}
	nodeSelector := map[string]string{kubelet.HollowLabel: "true"}
	if onRealNode(i) {
		nodeSelector = map[string]string{corev1.LabelHostname: realNode}
	}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: deploymentName(i), Namespace: namespace},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](replicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType, RollingUpdate: &appsv1.RollingUpdateDeployment{
				MaxSurge: ptr.To(intstr.FromInt32(surge)), MaxUnavailable: ptr.To(intstr.FromInt32(0))}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: map[string]string{revKey: "0"}},
				Spec: corev1.PodSpec{TerminationGracePeriodSeconds: ptr.To[int64](1), NodeSelector: nodeSelector,
					Containers: []corev1.Container{{Name: "c", Image: "cairn.local/busybox:1.36", Command: []string{"sleep", "3600"}}}},
			},
		},
	}
}

// cronJob fires every minute; Forbid keeps a second Job from starting
// while one runs, and activeDeadlineSeconds ends each Job (hollow
// containers run until stopped), so that it fires again.
func cronJob() *batchv1.CronJob {
	return &batchv1.CronJob{
		ObjectMeta: metav1.ObjectMeta{Name: cronName, Namespace: namespace},
		Spec: batchv1.CronJobSpec{Schedule: "* * * * *", ConcurrencyPolicy: batchv1.ForbidConcurrent,
			JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{ActiveDeadlineSeconds: ptr.To[int64](20), BackoffLimit: ptr.To[int32](0),
				Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, TerminationGracePeriodSeconds: ptr.To[int64](1),
					NodeSelector: map[string]string{kubelet.HollowLabel: "true"},
					Containers:   []corev1.Container{{Name: "c", Image: "cairn.local/busybox:1.36", Command: []string{"sleep", "3600"}}}}}}}},
	}
}

// clients are one clientset per server; a writer moves to the next one
// when a write fails, as a client with all servers' addresses does.
type clients []kubernetes.Interface

// createWorkload creates the namespace, the Deployments and the CronJob
// through the first server, recording each acked create.
func createWorkload(t testing.TB, ctx context.Context, cs clients, a *acks) {
	t.Helper()
	c := cs[0]
	if _, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for i := range deployments {
		d, err := c.AppsV1().Deployments(namespace).Create(ctx, deployment(i), metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("create %s: %v", deploymentName(i), err)
		}
		a.add(ack{kind: "Deployment", name: d.Name, uid: d.UID, rv: d.ResourceVersion})
	}
	cj, err := c.BatchV1().CronJobs(namespace).Create(ctx, cronJob(), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	a.add(ack{kind: "CronJob", name: cj.Name, uid: cj.UID, rv: cj.ResourceVersion})
}

// writerStats counts the rolling writer's patches.
type writerStats struct {
	mu            sync.Mutex
	acked, failed int
}

// roll patches the Deployments' pod template one after another (each
// patch a new rollout) every interval until ctx ends, moving to the next
// server after a failed patch.
func roll(ctx context.Context, cs clients, a *acks, st *writerStats, interval time.Duration) {
	revs := make([]int, deployments)
	cur := 0
	for i := 0; ctx.Err() == nil; i++ {
		d := i % deployments
		revs[d]++
		patch := fmt.Sprintf(`{"spec":{"template":{"metadata":{"annotations":{%q:%q}}}}}`, revKey, strconv.Itoa(revs[d]))
		pctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		got, err := cs[cur].AppsV1().Deployments(namespace).Patch(pctx, deploymentName(d), types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{})
		cancel()
		st.mu.Lock()
		if err == nil {
			st.acked++
		} else {
			st.failed++
		}
		st.mu.Unlock()
		if err != nil {
			cur = (cur + 1) % len(cs)
		} else {
			a.add(ack{kind: "Deployment", name: got.Name, uid: got.UID, rv: got.ResourceVersion, rev: revs[d]})
		}
		select {
		case <-ctx.Done():
		case <-time.After(interval):
		}
	}
}

// converged: every Deployment has rolled out its last template.
func converged(ctx context.Context, c kubernetes.Interface) error {
	l, err := c.AppsV1().Deployments(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	if len(l.Items) != deployments {
		return fmt.Errorf("%d Deployments", len(l.Items))
	}
	for _, d := range l.Items {
		s := d.Status
		if s.ObservedGeneration != d.Generation || s.UpdatedReplicas != replicas || s.AvailableReplicas != replicas || s.Replicas != replicas {
			return fmt.Errorf("%s: generation %d observed %d, replicas %d updated %d available %d", d.Name, d.Generation,
				s.ObservedGeneration, s.Replicas, s.UpdatedReplicas, s.AvailableReplicas)
		}
	}
	return nil
}

// marker creates a ConfigMap through c; a write that is acked is
// recorded.
func marker(ctx context.Context, c kubernetes.Interface, a *acks, name string) error {
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	cm, err := c.CoreV1().ConfigMaps(namespace).Create(cctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace}}, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	a.add(ack{kind: "ConfigMap", name: cm.Name, uid: cm.UID, rv: cm.ResourceVersion})
	return nil
}
