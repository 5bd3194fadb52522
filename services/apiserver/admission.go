package apiserver

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"

	"github.com/cairn-dev/cairn/schemas"
	"github.com/cairn-dev/cairn/services/apiserver/storage"
)

// AdmissionRequest is what an admission plugin sees: the object being
// written (which a mutating plugin may change), the old one on update, and
// who is writing.
type AdmissionRequest struct {
	Resource    *schemas.Resource
	Subresource string
	Operation   string // CREATE, UPDATE, DELETE
	Namespace   string
	Name        string
	Object      schemas.Object
	OldObject   schemas.Object
	User        User
	DryRun      bool
}

// AdmissionPlugin mutates or rejects a write. An error it returns is sent to
// the client; return an API error (k8s.io/apimachinery/pkg/api/errors) to
// pick the status code.
type AdmissionPlugin interface {
	Name() string
	Admit(ctx context.Context, a *AdmissionRequest) error
}

// mutate runs kube-apiserver's built-in mutating admission that cairn
// implements: DefaultTolerationSeconds (defaultTolerationSeconds), which
// makes pods tolerate the node.kubernetes.io/not-ready and
// node.kubernetes.io/unreachable NoExecute taints for
// Config.NotReadyTolerationSeconds and Config.UnreachableTolerationSeconds
// (300 s) unless they already tolerate them.
//
// As in kube, it runs on every create and update, dry runs included, after
// defaulting and before the resource's PrepareForCreate/PrepareForUpdate
// (so a pod update that only loses the defaults does not bump the
// generation), admit and validation: what it leaves is what is validated,
// stored, returned and published.
func (s *Server) mutate(a *AdmissionRequest) error {
	return s.defaultTolerationSeconds(a)
}

// admit runs kube's NamespaceLifecycle (namespaceLifecycle), then
// Config.Admission in order; the first error stops the write.
func (s *Server) admit(ctx context.Context, a *AdmissionRequest) error {
	if a.Resource.Namespaced && a.Operation == "CREATE" {
		if err := s.namespaceLifecycle(ctx, a); err != nil {
			return err
		}
	}
	for _, p := range s.cfg.Admission {
		if err := p.Admit(ctx, a); err != nil {
			var st apierrors.APIStatus
			if errors.As(err, &st) {
				return err
			}
			return apierrors.NewForbidden(a.Resource.GroupResource(), a.Name, fmt.Errorf("admission plugin %q: %w", p.Name(), err))
		}
	}
	return nil
}

// namespaceLifecycle is kube's NamespaceLifecycle plugin: no creates in a
// namespace that does not exist or is terminating.
func (s *Server) namespaceLifecycle(ctx context.Context, a *AdmissionRequest) error {
	phase, err := s.nsCache.phase(ctx, a.Namespace)
	if err != nil {
		return err
	}
	switch phase {
	case "":
		return apierrors.NewNotFound(schema.GroupResource{Resource: "namespaces"}, a.Namespace)
	case corev1.NamespaceTerminating:
		// kube lets events into terminating namespaces; missing still fails.
		if a.Resource.Plural == "events" {
			return nil
		}
		return apierrors.NewForbidden(a.Resource.GroupResource(), a.Name,
			fmt.Errorf("unable to create new content in namespace %s because it is being terminated", a.Namespace))
	}
	return nil
}

// DefaultTolerationSeconds is kube's default for how long a pod stays on a
// node that is not ready or unreachable before it is evicted.
const DefaultTolerationSeconds int64 = 300

// defaultTolerationSeconds is kube's DefaultTolerationSeconds plugin. On a
// create or update of a pod (not of its subresources), for each of the
// taints node.kubernetes.io/not-ready:NoExecute and
// node.kubernetes.io/unreachable:NoExecute that no toleration of the pod
// covers, it appends {key, operator: Exists, effect: NoExecute,
// tolerationSeconds}. A toleration covers the taint if its key is the
// taint's or empty and its effect is NoExecute or empty; like kube, it
// does not look at the operator or value. On update this puts back a
// default toleration the client left out, as kube does; update validation
// forbids removing tolerations anyway.
func (s *Server) defaultTolerationSeconds(a *AdmissionRequest) error {
	if a.Resource.GroupVersion.Group != "" || a.Resource.Plural != "pods" || a.Subresource != "" ||
		a.Operation != "CREATE" && a.Operation != "UPDATE" {
		return nil
	}
	pod, ok := a.Object.(*corev1.Pod)
	if !ok {
		return apierrors.NewBadRequest(fmt.Sprintf("expected *v1.Pod but got %T", a.Object))
	}
	for _, d := range []struct {
		key     string
		seconds int64
	}{
		{corev1.TaintNodeNotReady, *s.cfg.NotReadyTolerationSeconds},
		{corev1.TaintNodeUnreachable, *s.cfg.UnreachableTolerationSeconds},
	} {
		if !coversNoExecute(pod.Spec.Tolerations, d.key) {
			pod.Spec.Tolerations = append(pod.Spec.Tolerations, corev1.Toleration{Key: d.key,
				Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To(d.seconds)})
		}
	}
	return nil
}

// coversNoExecute is the DefaultTolerationSeconds plugin's test of whether
// a toleration already covers the NoExecute taint with this key.
func coversNoExecute(tols []corev1.Toleration, key string) bool {
	for _, t := range tols {
		if (t.Key == key || t.Key == "") && (t.Effect == corev1.TaintEffectNoExecute || t.Effect == "") {
			return true
		}
	}
	return false
}

// namespaceCache remembers namespace phases for a short time, so creates do
// not each read the namespace from etcd. A namespace that is missing is
// re-read every time (it may have just been created).
type namespaceCache struct {
	store *storage.Store
	ttl   time.Duration
	now   func() time.Time
	mu    sync.Mutex
	m     map[string]nsEntry
}

type nsEntry struct {
	phase corev1.NamespacePhase
	at    time.Time
}

func newNamespaceCache(st *storage.Store, ttl time.Duration, now func() time.Time) *namespaceCache {
	return &namespaceCache{store: st, ttl: ttl, now: now, m: map[string]nsEntry{}}
}

func (c *namespaceCache) phase(ctx context.Context, ns string) (corev1.NamespacePhase, error) {
	now := c.now()
	c.mu.Lock()
	e, ok := c.m[ns]
	c.mu.Unlock()
	if ok && now.Sub(e.at) < c.ttl {
		return e.phase, nil
	}
	kv, err := c.store.Get(ctx, storage.Key("", "namespaces", "", ns))
	if errors.Is(err, storage.ErrNotFound) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	var n corev1.Namespace
	if err := jsonUnmarshal(kv.Value, &n); err != nil {
		return "", err
	}
	p := n.Status.Phase
	if p == "" || n.DeletionTimestamp == nil && p != corev1.NamespaceTerminating {
		p = corev1.NamespaceActive
	}
	if n.DeletionTimestamp != nil {
		p = corev1.NamespaceTerminating
	}
	c.mu.Lock()
	c.m[ns] = nsEntry{phase: p, at: now}
	c.mu.Unlock()
	return p, nil
}

func (c *namespaceCache) forget(ns string) {
	c.mu.Lock()
	delete(c.m, ns)
	c.mu.Unlock()
}
