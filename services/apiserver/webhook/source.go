package webhook

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kwebhook "k8s.io/apiserver/pkg/admission/plugin/webhook"

	"github.com/cairn-dev/cairn/events"
	"github.com/cairn-dev/cairn/schemas/codec"
	"github.com/cairn-dev/cairn/services/apiserver/storage"
)

// hookSet is the webhooks of every configuration, in the order kube calls
// them: configurations sorted by name, webhooks in their order within a
// configuration. It is rebuilt on every change and never modified.
type hookSet struct {
	mutating, validating []kwebhook.WebhookAccessor
}

// configurations holds the webhook configurations and the hookSet built
// from them. The accessors of a configuration that did not change are
// kept, so their compiled matchConditions and parsed selectors are too.
type configurations struct {
	mu         sync.Mutex
	mutating   map[string]*configEntry
	validating map[string]*configEntry
	set        atomic.Pointer[hookSet]
}

type configEntry struct {
	rv    string
	hooks []kwebhook.WebhookAccessor
}

func newConfigurations() *configurations {
	c := &configurations{mutating: map[string]*configEntry{}, validating: map[string]*configEntry{}}
	c.set.Store(&hookSet{})
	return c
}

func (c *configurations) hooks() *hookSet { return c.set.Load() }

func (c *configurations) load(objs map[string][][]byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.mutating, c.validating = map[string]*configEntry{}, map[string]*configEntry{}
	for res, values := range objs {
		for _, v := range values {
			_ = c.putLocked(res, events.Added, v)
		}
	}
	c.rebuildLocked()
}

func (c *configurations) apply(res string, typ events.Type, raw []byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.putLocked(res, typ, raw); err != nil {
		return err
	}
	c.rebuildLocked()
	return nil
}

func (c *configurations) putLocked(res string, typ events.Type, raw []byte) error {
	switch res {
	case "mutatingwebhookconfigurations":
		cfg := &admissionregistrationv1.MutatingWebhookConfiguration{}
		if err := codec.Unmarshal(raw, cfg); err != nil {
			return err
		}
		if typ == events.Deleted {
			delete(c.mutating, cfg.Name)
			return nil
		}
		if e := c.mutating[cfg.Name]; e != nil && e.rv == cfg.ResourceVersion {
			return nil
		}
		e := &configEntry{rv: cfg.ResourceVersion}
		names := map[string]int{}
		for i := range cfg.Webhooks {
			h := &cfg.Webhooks[i]
			e.hooks = append(e.hooks, kwebhook.NewMutatingWebhookAccessor(hookUID(cfg.Name, h.Name, names), cfg.Name, h))
		}
		c.mutating[cfg.Name] = e
	case "validatingwebhookconfigurations":
		cfg := &admissionregistrationv1.ValidatingWebhookConfiguration{}
		if err := codec.Unmarshal(raw, cfg); err != nil {
			return err
		}
		if typ == events.Deleted {
			delete(c.validating, cfg.Name)
			return nil
		}
		if e := c.validating[cfg.Name]; e != nil && e.rv == cfg.ResourceVersion {
			return nil
		}
		e := &configEntry{rv: cfg.ResourceVersion}
		names := map[string]int{}
		for i := range cfg.Webhooks {
			h := &cfg.Webhooks[i]
			e.hooks = append(e.hooks, kwebhook.NewValidatingWebhookAccessor(hookUID(cfg.Name, h.Name, names), cfg.Name, h))
		}
		c.validating[cfg.Name] = e
	}
	return nil
}

// hookUID is kube's unique id of a webhook: configuration, name and the
// count of earlier webhooks of that name in the configuration.
func hookUID(config, name string, seen map[string]int) string {
	n := seen[name]
	seen[name]++
	return fmt.Sprintf("%s/%s/%d", config, name, n)
}

func (c *configurations) rebuildLocked() {
	c.set.Store(&hookSet{mutating: flatten(c.mutating), validating: flatten(c.validating)})
}

func flatten(m map[string]*configEntry) []kwebhook.WebhookAccessor {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	slices.Sort(names)
	var out []kwebhook.WebhookAccessor
	for _, n := range names {
		out = append(out, m[n].hooks...)
	}
	return out
}

// objects holds decoded objects of one kind by namespace/name.
type objects[T any] struct {
	mu sync.RWMutex
	m  map[string]*T
}

func newObjects[T any]() *objects[T] { return &objects[T]{m: map[string]*T{}} }

func objKey(ns, name string) string { return ns + "/" + name }

func (o *objects[T]) load(values [][]byte, key func(*T) string) {
	m := map[string]*T{}
	for _, v := range values {
		obj := new(T)
		if codec.Unmarshal(v, obj) == nil {
			m[key(obj)] = obj
		}
	}
	o.mu.Lock()
	o.m = m
	o.mu.Unlock()
}

func (o *objects[T]) apply(typ events.Type, raw []byte, key func(*T) string) error {
	obj := new(T)
	if err := codec.Unmarshal(raw, obj); err != nil {
		return err
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if typ == events.Deleted {
		delete(o.m, key(obj))
	} else {
		o.m[key(obj)] = obj
	}
	return nil
}

func (o *objects[T]) get(k string) (*T, bool) {
	o.mu.RLock()
	defer o.mu.RUnlock()
	v, ok := o.m[k]
	return v, ok
}

// each calls f for every object whose key has the prefix.
func (o *objects[T]) each(prefix string, f func(*T)) {
	o.mu.RLock()
	defer o.mu.RUnlock()
	for k, v := range o.m {
		if strings.HasPrefix(k, prefix) {
			f(v)
		}
	}
}

func nsKey(n *corev1.Namespace) string             { return n.Name }
func svcKey(s *corev1.Service) string              { return objKey(s.Namespace, s.Name) }
func sliceKey(s *discoveryv1.EndpointSlice) string { return objKey(s.Namespace, s.Name) }
func loadOne(f func([][]byte)) func(map[string][][]byte) {
	return func(m map[string][][]byte) { f(flat(m)) }
}

func flat(m map[string][][]byte) [][]byte {
	var out [][]byte
	for _, v := range m {
		out = append(out, v...)
	}
	return out
}

// namespaceLabels is kube's namespace.Matcher.GetNamespaceLabels on the
// namespace cache: the labels of the object itself for a create or update
// of a namespace, else of its namespace; a namespace the cache does not
// hold yet (just created) is read from etcd, as kube reads it live.
func (d *Dispatcher) namespaceLabels(ctx context.Context, res schema.GroupVersionResource, sub, op, ns string, obj map[string]string) (map[string]string, error) {
	if res.Group == "" && res.Resource == "namespaces" && sub == "" && (op == "CREATE" || op == "UPDATE") {
		return obj, nil
	}
	if n, ok := d.namespaces.get(ns); ok {
		return n.Labels, nil
	}
	kv, err := d.cfg.Store.Get(ctx, storage.Key("", "namespaces", "", ns))
	if errors.Is(err, storage.ErrNotFound) {
		return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "namespaces"}, ns)
	}
	if err != nil {
		return nil, err
	}
	n := &corev1.Namespace{}
	if err := codec.Unmarshal(kv.Value, n); err != nil {
		return nil, err
	}
	return n.Labels, nil
}

// Loaded reports whether the cache holds the mutating (or validating)
// webhook configuration name at resourceVersion rv, or at any version if
// rv is empty: what a client that just wrote a configuration waits for
// before it relies on it.
func (d *Dispatcher) Loaded(mutating bool, name, rv string) bool {
	c := d.configs
	c.mu.Lock()
	defer c.mu.Unlock()
	m := c.validating
	if mutating {
		m = c.mutating
	}
	e, ok := m[name]
	return ok && (rv == "" || e.rv == rv)
}
