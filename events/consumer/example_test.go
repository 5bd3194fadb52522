package consumer_test

import (
	"context"
	"fmt"
	"net"
	"os"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/cairn-dev/cairn/events"
	"github.com/cairn-dev/cairn/events/consumer"
	"github.com/cairn-dev/cairn/services/apiserver"
	"github.com/cairn-dev/cairn/services/controlplane"
)

// A controller that labels every configmap it sees: a cache of configmaps,
// a controller watching it, and writes that carry their cause.
func Example() {
	ctx := context.Background()
	cp, cfg, cleanup := startControlPlane(ctx)
	defer cleanup()

	cache, err := consumer.NewCache(consumer.CacheConfig[*corev1.ConfigMap]{
		Resource:  corev1.SchemeGroupVersion.WithResource("configmaps"),
		Namespace: "default",
		Config:    cfg,
		JS:        cp.JS,
	})
	if err != nil {
		panic(err)
	}
	// Requests made with a reconcile's ctx carry the triggering event's ids.
	client := kubernetes.NewForConfigOrDie(consumer.WrapConfig(cfg))
	done := make(chan *corev1.ConfigMap, 1)
	labeler := consumer.ReconcilerFunc(func(ctx context.Context, req consumer.Request) (consumer.Result, error) {
		ns, name := req.NamespaceName()
		cm, ok := cache.Get(ns, name)
		if !ok || cm.Labels["seen"] == "yes" {
			return consumer.Result{}, nil
		}
		cm = cm.DeepCopy() // cached objects are shared
		cm.Labels = map[string]string{"seen": "yes"}
		updated, err := client.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{})
		if err != nil {
			return consumer.Result{}, err // retried with back-off
		}
		done <- updated
		return consumer.Result{}, nil
	})
	ctrl, err := consumer.NewController(consumer.ControllerConfig{
		Name: "labeler", Reconciler: labeler, Workers: 2, WaitFor: []consumer.Syncer{cache},
	})
	if err != nil {
		panic(err)
	}
	consumer.Watch(cache, ctrl, nil) // every change queues the object's key

	runCtx, stop := context.WithCancel(ctx)
	stopped := make(chan error, 1)
	go func() { stopped <- consumer.RunAll(runCtx, cache, ctrl) }()
	if err := cache.WaitForSync(ctx); err != nil { // snapshot taken; the log follows from it
		panic(err)
	}

	created, err := client.CoreV1().ConfigMaps("default").Create(ctx,
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "hello"}}, metav1.CreateOptions{})
	if err != nil {
		panic(err)
	}
	labelled := <-done
	fmt.Println("labelled", labelled.Namespace+"/"+labelled.Name)
	stop()
	if err := <-stopped; err != nil {
		panic(err)
	}

	// The log is written just after the commit: wait for the label's event.
	rev, err := events.ParseRevision(labelled.ResourceVersion)
	if err != nil {
		panic(err)
	}
	if err := events.WaitPublished(ctx, cp.JS, rev); err != nil {
		panic(err)
	}

	// The log links the label to the create that caused it.
	var create, label *events.Event
	err = events.Tail(ctx, cp.JS, events.TailOptions{Resource: "configmaps", Name: "hello"}, func(ev *events.Event) error {
		if ev.Revision.String() == created.ResourceVersion {
			create = ev
		} else {
			label = ev
		}
		return nil
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(label.Verb, "caused by", create.Verb+":", label.CausationID == create.ID)
	// Output:
	// labelled default/hello
	// update caused by create: true
}

// startControlPlane starts what `cairn up` runs, on loopback.
func startControlPlane(ctx context.Context) (*controlplane.ControlPlane, *rest.Config, func()) {
	dir, err := os.MkdirTemp("", "consumer-example")
	if err != nil {
		panic(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	cp, err := controlplane.Start(ctx, controlplane.Config{
		DataDir: dir, Listener: ln, NoFsync: true,
		Authenticator: apiserver.TokenAuthenticator{"token": {User: "admin", Groups: []string{apiserver.GroupMasters}}},
	})
	if err != nil {
		panic(err)
	}
	return cp, &rest.Config{Host: "http://" + cp.Addr, BearerToken: "token"}, func() {
		cp.Close()
		os.RemoveAll(dir)
	}
}
