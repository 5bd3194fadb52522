package serviceaccount

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	sigsjson "sigs.k8s.io/json"

	"github.com/cairn-dev/cairn/events"
	"github.com/cairn-dev/cairn/schemas/codec"
	"github.com/cairn-dev/cairn/services/apiserver/storage"
	"github.com/cairn-dev/cairn/services/apiserver/watchhub"
)

// Caches hold what the token authenticator and the admission plugin look
// up on every request: the ServiceAccounts, and of Pods and Secrets only
// what a token's binding is checked against (UID, deletion, and for
// service-account-token Secrets the token). Each resource is a snapshot
// of etcd at one revision, then the log through the apiserver's watch hub,
// as an informer keeps its store; only the snapshot reads etcd.
//
// Like kube's informer-backed getters, a lookup that misses the cache
// reads etcd (the object may be newer than the cache, which lags the log
// by milliseconds): a hit never touches etcd. Safe for concurrent use.
type Caches struct {
	store *storage.Store
	hub   *watchhub.Hub
	log   *slog.Logger

	serviceAccounts *objects[*corev1.ServiceAccount]
	pods            *objects[Pod]
	secrets         *objects[Secret]
}

// Pod is what the caches keep of a pod.
type Pod struct {
	UID               types.UID
	DeletionTimestamp *metav1.Time
	NodeName          string
}

// Secret is what the caches keep of a secret: the token only for
// service-account-token Secrets.
type Secret struct {
	UID               types.UID
	DeletionTimestamp *metav1.Time
	Type              corev1.SecretType
	ServiceAccount    string // the kubernetes.io/service-account.name annotation
	Token             []byte
}

// NewCaches builds caches that snapshot from store and follow hub.
func NewCaches(store *storage.Store, hub *watchhub.Hub, log *slog.Logger) *Caches {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	c := &Caches{store: store, hub: hub, log: log,
		serviceAccounts: newObjects("serviceaccounts", func(raw []byte) ([2]string, *corev1.ServiceAccount, error) {
			sa := &corev1.ServiceAccount{}
			err := codec.Unmarshal(raw, sa)
			return [2]string{sa.Namespace, sa.Name}, sa, err
		}),
		pods:    newObjects("pods", decodePod),
		secrets: newObjects("secrets", decodeSecret),
	}
	c.pods.fromEvent = podFromEvent
	return c
}

// meta is the part of metadata the light decoders read.
type meta struct {
	Namespace         string            `json:"namespace"`
	Name              string            `json:"name"`
	UID               types.UID         `json:"uid"`
	DeletionTimestamp *metav1.Time      `json:"deletionTimestamp"`
	Annotations       map[string]string `json:"annotations"`
}

// podFromEvent reads a pod from the envelope (UID, node) unless the pod is
// being deleted: pod events are the busiest, and most are status updates
// of pods that are not.
func podFromEvent(ev *events.Event) (Pod, bool) {
	if ev.UID == "" || bytes.Contains(ev.Object, []byte(`"deletionTimestamp"`)) {
		return Pod{}, false
	}
	return Pod{UID: types.UID(ev.UID), NodeName: ev.NodeName}, true
}

func decodePod(raw []byte) ([2]string, Pod, error) {
	var p struct {
		Metadata meta `json:"metadata"`
		Spec     struct {
			NodeName string `json:"nodeName"`
		} `json:"spec"`
	}
	err := sigsjson.UnmarshalCaseSensitivePreserveInts(raw, &p)
	return [2]string{p.Metadata.Namespace, p.Metadata.Name}, Pod{UID: p.Metadata.UID, DeletionTimestamp: p.Metadata.DeletionTimestamp, NodeName: p.Spec.NodeName}, err
}

func decodeSecret(raw []byte) ([2]string, Secret, error) {
	var s struct {
		Metadata meta              `json:"metadata"`
		Type     corev1.SecretType `json:"type"`
		Data     map[string][]byte `json:"data"`
	}
	if err := sigsjson.UnmarshalCaseSensitivePreserveInts(raw, &s); err != nil {
		return [2]string{}, Secret{}, err
	}
	out := Secret{UID: s.Metadata.UID, DeletionTimestamp: s.Metadata.DeletionTimestamp, Type: s.Type}
	if s.Type == corev1.SecretTypeServiceAccountToken {
		out.ServiceAccount = s.Metadata.Annotations[corev1.ServiceAccountNameKey]
		out.Token = s.Data[corev1.ServiceAccountTokenKey]
	}
	return [2]string{s.Metadata.Namespace, s.Metadata.Name}, out, nil
}

// Run fills and follows the three resources until ctx ends.
func (c *Caches) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	for _, run := range []func(context.Context){
		func(ctx context.Context) { c.serviceAccounts.run(ctx, c) },
		func(ctx context.Context) { c.pods.run(ctx, c) },
		func(ctx context.Context) { c.secrets.run(ctx, c) },
	} {
		wg.Add(1)
		go func() { defer wg.Done(); run(ctx) }()
	}
	wg.Wait()
	return nil
}

// WaitForSync blocks until every resource has its first snapshot or ctx ends.
func (c *Caches) WaitForSync(ctx context.Context) error {
	for _, ch := range []chan struct{}{c.serviceAccounts.synced, c.pods.synced, c.secrets.synced} {
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("serviceaccount: wait for the caches: %w", ctx.Err())
		}
	}
	return nil
}

// ServiceAccount returns the ServiceAccount (shared: do not modify), or a
// NotFound API error.
func (c *Caches) ServiceAccount(ctx context.Context, namespace, name string) (*corev1.ServiceAccount, error) {
	return c.serviceAccounts.get(ctx, c.store, namespace, name)
}

// Pod returns what the caches know of a pod, or a NotFound API error.
func (c *Caches) Pod(ctx context.Context, namespace, name string) (Pod, error) {
	return c.pods.get(ctx, c.store, namespace, name)
}

// Secret returns what the caches know of a secret, or a NotFound API error.
func (c *Caches) Secret(ctx context.Context, namespace, name string) (Secret, error) {
	return c.secrets.get(ctx, c.store, namespace, name)
}

// objects is the cache of one core/v1 resource.
type objects[T any] struct {
	resource string
	decode   func([]byte) ([2]string, T, error)
	// fromEvent, if set, takes the value from the envelope when it can,
	// sparing the decode.
	fromEvent func(*events.Event) (T, bool)

	mu         sync.RWMutex
	m          map[[2]string]T
	synced     chan struct{}
	syncedOnce sync.Once
}

func newObjects[T any](resource string, decode func([]byte) ([2]string, T, error)) *objects[T] {
	return &objects[T]{resource: resource, decode: decode, m: map[[2]string]T{}, synced: make(chan struct{})}
}

func (o *objects[T]) run(ctx context.Context, c *Caches) {
	for ctx.Err() == nil {
		rev, err := o.snapshot(ctx, c.store)
		if err == nil {
			o.syncedOnce.Do(func() { close(o.synced) })
			err = o.follow(ctx, c, rev)
		}
		if ctx.Err() != nil {
			return
		}
		c.log.Warn("serviceaccount cache: resnapshot", "resource", o.resource, "err", err)
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (o *objects[T]) snapshot(ctx context.Context, st *storage.Store) (events.Revision, error) {
	fresh := map[[2]string]T{}
	opts := storage.ListOptions{Limit: 500}
	for {
		page, err := st.List(ctx, storage.Key("", o.resource, "", ""), opts)
		if err != nil {
			return 0, fmt.Errorf("serviceaccount: snapshot %s: %w", o.resource, err)
		}
		opts.Revision = page.Revision
		for _, kv := range page.Items {
			if k, v, err := o.decode(kv.Value); err == nil {
				fresh[k] = v
			}
		}
		if page.NextKey == "" {
			break
		}
		opts.StartKey = page.NextKey
	}
	o.mu.Lock()
	o.m = fresh
	o.mu.Unlock()
	return opts.Revision, nil
}

func (o *objects[T]) follow(ctx context.Context, c *Caches, rev events.Revision) error {
	w, err := c.hub.Watch(ctx, watchhub.Request{Group: "", Resource: o.resource, From: rev})
	if err != nil {
		return fmt.Errorf("serviceaccount: watch %s: %w", o.resource, err)
	}
	defer w.Stop()
	for ev := range w.Events() {
		k := [2]string{ev.Namespace, ev.Name}
		if ev.Type == events.Deleted {
			o.mu.Lock()
			delete(o.m, k)
			o.mu.Unlock()
			continue
		}
		if o.fromEvent != nil {
			if v, ok := o.fromEvent(ev); ok {
				o.mu.Lock()
				o.m[k] = v
				o.mu.Unlock()
				continue
			}
		}
		_, v, err := o.decode(ev.Object)
		if err != nil {
			c.log.Warn("serviceaccount cache: undecodable event", "resource", o.resource, "revision", ev.Revision, "err", err)
			continue
		}
		o.mu.Lock()
		o.m[k] = v
		o.mu.Unlock()
	}
	if err := w.Err(); err != nil {
		return fmt.Errorf("serviceaccount: watch %s: %w", o.resource, err)
	}
	return errors.New("serviceaccount: watch ended")
}

// get returns the cached object or, on a miss, reads etcd.
func (o *objects[T]) get(ctx context.Context, st *storage.Store, namespace, name string) (T, error) {
	o.mu.RLock()
	v, ok := o.m[[2]string{namespace, name}]
	o.mu.RUnlock()
	if ok {
		return v, nil
	}
	var zero T
	kv, err := st.Get(ctx, storage.Key("", o.resource, namespace, name))
	if errors.Is(err, storage.ErrNotFound) {
		return zero, apierrors.NewNotFound(schema.GroupResource{Resource: o.resource}, name)
	}
	if err != nil {
		return zero, err
	}
	_, v, err = o.decode(kv.Value)
	return v, err
}
