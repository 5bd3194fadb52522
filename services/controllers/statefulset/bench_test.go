package statefulset

import (
	"context"
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cairn-dev/cairn/events/consumer/consumertest"
	"github.com/cairn-dev/cairn/services/controllers/replicaset"
	"github.com/cairn-dev/cairn/services/controlplane/controlplanetest"
)

// BenchmarkCreate measures how fast the controller creates the pods of a
// Parallel StatefulSet on a real control plane (until status.replicas
// counts them all; nothing runs them, so the stand-in kubelet does not
// weigh on it), and, as the baseline of the same run, a ReplicaSet of as
// many pods through the ReplicaSet controller: sts-pods/s, rs-pods/s and
// their ratio.
func BenchmarkCreate(b *testing.B) {
	const pods = 200
	w := newWorld(b)
	w.admit(func(*corev1.Pod) bool { return false })
	m := consumertest.Manager(b, w.env, controlplanetest.ControllerToken, nil, nil)
	if _, err := New(m, Options{}); err != nil {
		b.Fatal(err)
	}
	if _, err := replicaset.New(m, replicaset.Options{}); err != nil {
		b.Fatal(err)
	}
	controlplanetest.RunSynced(b, m)
	var stsTime, rsTime time.Duration
	for i := 0; b.Loop(); i++ {
		ns := fmt.Sprintf("bench%d", i)
		w.namespace(b, ns)

		start := time.Now()
		s := newSet(ns, "db", pods)
		s.Spec.PodManagementPolicy = appsv1.ParallelPodManagement
		w.create(b, s)
		w.waitSet(b, ns, "db", "all created", func(s *appsv1.StatefulSet) bool { return s.Status.Replicas == pods })
		stsTime += time.Since(start)

		start = time.Now()
		rs := &appsv1.ReplicaSet{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
			Spec: appsv1.ReplicaSetSpec{Replicas: ptr[int32](pods),
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
					Spec: *s.Spec.Template.Spec.DeepCopy()}},
		}
		if _, err := w.env.Client.AppsV1().ReplicaSets(ns).Create(context.Background(), rs, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
		controlplanetest.Eventually(b, wait, "the ReplicaSet's pods", func() bool {
			got, err := w.env.Client.AppsV1().ReplicaSets(ns).Get(context.Background(), "web", metav1.GetOptions{})
			return err == nil && got.Status.Replicas == pods
		})
		rsTime += time.Since(start)
	}
	n := float64(b.N * pods)
	sts, rsr := n/stsTime.Seconds(), n/rsTime.Seconds()
	b.ReportMetric(sts, "sts-pods/s")
	b.ReportMetric(rsr, "rs-pods/s")
	b.ReportMetric(sts/rsr, "sts/rs")
}
