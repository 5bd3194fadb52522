package namespace

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/cairn-dev/cairn/events/consumer"
)

// Options configure the namespace controller.
type Options struct {
	// Workers is the number of namespaces handled at once; 0 means 2.
	Workers int
	// Clock stamps condition transitions; nil is time.Now.
	Clock func() time.Time
}

// Controller is the namespace controller.
type Controller struct {
	cfg     Options
	log     *slog.Logger
	client  kubernetes.Interface
	dynamic dynamic.Interface
	disco   discovery.DiscoveryInterface
	cache   *consumer.Cache[*corev1.Namespace]
	ctrl    *consumer.Controller

	mu      sync.Mutex
	retries map[string]int // rounds with content remaining, by namespace
}

// Back-off while content remains: first recheck after minRecheck, doubling
// up to maxRecheck.
const (
	minRecheck = 250 * time.Millisecond
	maxRecheck = 8 * time.Second
)

// New builds the controller on m's namespace cache and clients.
func New(m *consumer.Manager, opts Options) (*Controller, error) {
	if opts.Workers <= 0 {
		opts.Workers = 2
	}
	if opts.Clock == nil {
		opts.Clock = time.Now
	}
	c := &Controller{cfg: opts, log: m.Log().With("controller", "namespace"), client: m.Client(), dynamic: m.Dynamic(),
		disco: m.Discovery(), retries: map[string]int{}}
	var err error
	if c.cache, err = consumer.CacheFor[*corev1.Namespace](m, corev1.SchemeGroupVersion.WithResource("namespaces")); err != nil {
		return nil, fmt.Errorf("namespace: new: %w", err)
	}
	c.ctrl, err = m.NewController(consumer.ControllerConfig{
		Name: "namespace", Reconciler: c, Workers: opts.Workers,
		WaitFor: []consumer.Syncer{c.cache}, Log: c.log,
	})
	if err != nil {
		return nil, fmt.Errorf("namespace: new: %w", err)
	}
	consumer.For(c.cache, c.ctrl, nil)
	return c, nil
}

// Reconcile empties a namespace being deleted and finalizes it.
func (c *Controller) Reconcile(ctx context.Context, req consumer.Request) (consumer.Result, error) {
	name := req.Key
	if ns, ok := c.cache.Get("", name); !ok || ns.DeletionTimestamp == nil {
		c.forget(name)
		return consumer.Result{}, nil
	}
	ns, err := c.client.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		c.forget(name)
		return consumer.Result{}, nil
	}
	if err != nil {
		return consumer.Result{}, fmt.Errorf("namespace: get %s: %w", name, err)
	}
	if ns.DeletionTimestamp == nil || !slices.Contains(ns.Spec.Finalizers, corev1.FinalizerKubernetes) {
		c.forget(name)
		return consumer.Result{}, nil
	}
	left, err := c.deleteContent(ctx, name)
	if serr := c.setConditions(ctx, ns, left); serr != nil && !apierrors.IsNotFound(serr) {
		err = errors.Join(err, serr)
	}
	if err != nil {
		return consumer.Result{}, fmt.Errorf("namespace: delete content of %s: %w", name, err)
	}
	if !left.empty() {
		d := c.backoff(name)
		c.log.Debug("content remaining", "namespace", name, "remaining", left.remainingMessage(), "recheck", d)
		return consumer.Result{RequeueAfter: d}, nil
	}
	if err := c.finalize(ctx, name); err != nil {
		return consumer.Result{}, fmt.Errorf("namespace: finalize %s: %w", name, err)
	}
	c.forget(name)
	c.log.Info("namespace emptied and finalized", "namespace", name)
	return consumer.Result{}, nil
}

// finalize removes "kubernetes" from spec.finalizers through the finalize
// subresource, with the namespace's resourceVersion; a conflict reads it
// again.
func (c *Controller) finalize(ctx context.Context, name string) error {
	var err error
	for range maxFinalizeAttempts {
		var ns *corev1.Namespace
		ns, err = c.client.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		if !slices.Contains(ns.Spec.Finalizers, corev1.FinalizerKubernetes) {
			return nil
		}
		ns.Spec.Finalizers = slices.DeleteFunc(slices.Clone(ns.Spec.Finalizers), func(f corev1.FinalizerName) bool {
			return f == corev1.FinalizerKubernetes
		})
		_, err = c.client.CoreV1().Namespaces().Finalize(ctx, ns, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) {
			continue
		}
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	}
	return err
}

const maxFinalizeAttempts = 5

func (c *Controller) backoff(name string) time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.retries[name]
	c.retries[name] = n + 1
	d := minRecheck << min(n, 10)
	return min(d, maxRecheck)
}

func (c *Controller) forget(name string) {
	c.mu.Lock()
	delete(c.retries, name)
	c.mu.Unlock()
}

// gvr is a shorthand used by content.go.
type gvr = schema.GroupVersionResource
