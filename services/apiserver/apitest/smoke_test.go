package apitest

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/cairn-dev/cairn/services/controlplane/controlplanetest"
)

func testPod(name string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": "web"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox:1.36"}}},
	}
}

func TestCreateGetListWatch(t *testing.T) {
	env := controlplanetest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pods := env.Client.CoreV1().Pods("default")
	created, err := pods.Create(ctx, testPod("p1"), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	if created.UID == "" || created.ResourceVersion == "" || created.Spec.RestartPolicy != corev1.RestartPolicyAlways {
		t.Fatalf("create did not fill system fields and defaults: %+v", created.ObjectMeta)
	}
	got, err := pods.Get(ctx, "p1", metav1.GetOptions{})
	if err != nil || got.ResourceVersion != created.ResourceVersion {
		t.Fatalf("get: %v %v", err, got)
	}
	list, err := pods.List(ctx, metav1.ListOptions{})
	if err != nil || len(list.Items) != 1 {
		t.Fatalf("list: %v %d", err, len(list.Items))
	}
	w, err := pods.Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	if err != nil {
		t.Fatalf("watch: %v", err)
	}
	defer w.Stop()
	if _, err := pods.Create(ctx, testPod("p2"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case ev := <-w.ResultChan():
		if ev.Type != watch.Added || ev.Object.(*corev1.Pod).Name != "p2" {
			t.Fatalf("got %v %v", ev.Type, ev.Object)
		}
	case <-ctx.Done():
		t.Fatal("no watch event")
	}
}
