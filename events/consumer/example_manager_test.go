package consumer_test

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cairn-dev/cairn/events/consumer"
)

// labeler is a controller on a Manager: New asks the manager for its
// cache, client and controller; the manager runs them.
type labeler struct {
	cms    *consumer.Cache[*corev1.ConfigMap]
	m      *consumer.Manager
	labels chan string
}

func newLabeler(m *consumer.Manager) (*labeler, error) {
	cms, err := consumer.CacheFor[*corev1.ConfigMap](m, corev1.SchemeGroupVersion.WithResource("configmaps"))
	if err != nil {
		return nil, err
	}
	l := &labeler{cms: cms, m: m, labels: make(chan string, 1)}
	ctrl, err := m.NewController(consumer.ControllerConfig{Name: "labeler", Reconciler: l, WaitFor: []consumer.Syncer{cms}})
	if err != nil {
		return nil, err
	}
	consumer.For(cms, ctrl, nil) // a change queues the object's key; a takeover every key
	return l, nil
}

func (l *labeler) Reconcile(ctx context.Context, req consumer.Request) (consumer.Result, error) {
	ns, name := req.NamespaceName()
	cm, ok := l.cms.Get(ns, name)
	if !ok || cm.Labels["seen"] == "yes" || ns != "default" {
		return consumer.Result{}, nil
	}
	cm = cm.DeepCopy()
	cm.Labels = map[string]string{"seen": "yes"}
	if _, err := l.m.Client().CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		return consumer.Result{}, err
	}
	l.labels <- req.Key
	return consumer.Result{}, nil
}

// Two controllers on one Manager share its configmap cache; the manager
// runs them, and reports ready once their cache has synced.
func ExampleManager() {
	ctx := context.Background()
	cp, cfg, cleanup := startControlPlane(ctx)
	defer cleanup()

	m, err := consumer.NewManager(consumer.ManagerOptions{RestConfig: cfg, JS: cp.JS, UserAgent: "example"})
	if err != nil {
		panic(err)
	}
	a, err := newLabeler(m)
	if err != nil {
		panic(err)
	}
	b, err := newLabeler(m)
	if err != nil {
		panic(err)
	}
	fmt.Println("one cache:", a.cms == b.cms)
	fmt.Println("ready before Run:", m.Ready() == nil)

	runCtx, stop := context.WithCancel(ctx)
	stopped := make(chan error, 1)
	go func() { stopped <- m.Run(runCtx) }()
	if err := m.WaitForSync(ctx); err != nil {
		panic(err)
	}
	fmt.Println("ready:", m.Ready() == nil)

	if _, err := m.Client().CoreV1().ConfigMaps("default").Create(ctx,
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "hello"}}, metav1.CreateOptions{}); err != nil {
		panic(err)
	}
	select {
	case key := <-a.labels:
		fmt.Println("labelled", key)
	case key := <-b.labels:
		fmt.Println("labelled", key)
	}
	stop()
	fmt.Println("stopped:", <-stopped)
	// Output:
	// one cache: true
	// ready before Run: false
	// ready: true
	// labelled default/hello
	// stopped: <nil>
}
