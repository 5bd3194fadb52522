package rbac

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/cairn-dev/cairn/events"
	"github.com/cairn-dev/cairn/schemas/codec"
	"github.com/cairn-dev/cairn/services/apiserver/storage"
	"github.com/cairn-dev/cairn/services/apiserver/watchhub"
)

// Caches is the Policy of a running apiserver: the four kinds in memory, a
// snapshot from etcd at one revision, then kept current by the log through
// the apiserver's watch hub (one watch of the rbac.authorization.k8s.io
// group), as an informer would keep them; the bindings are indexed by
// namespace so a decision visits only the cluster-wide bindings and those
// of the request's namespace. Only the snapshot (at start, and again if the
// watch ends) reads etcd. Safe for concurrent use; before the first
// snapshot it holds nothing, and the authorizer denies everyone but
// system:masters.
//
// It does not use the events/consumer caches: those take their snapshot
// through a client of the apiserver and are tested against a control plane
// that links this package.
type Caches struct {
	store *storage.Store
	hub   *watchhub.Hub
	log   *slog.Logger

	bindings
	rmu          sync.RWMutex
	clusterRoles map[string]*rbacv1.ClusterRole
	roles        map[[2]string]*rbacv1.Role // namespace, name

	synced     chan struct{}
	syncedOnce sync.Once
	smu        sync.Mutex
	subs       []chan struct{}
}

var _ Policy = (*Caches)(nil)

// NewCaches builds caches that snapshot from store and follow hub.
func NewCaches(store *storage.Store, hub *watchhub.Hub, log *slog.Logger) *Caches {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Caches{store: store, hub: hub, log: log, bindings: newBindings(),
		clusterRoles: map[string]*rbacv1.ClusterRole{}, roles: map[[2]string]*rbacv1.Role{}, synced: make(chan struct{})}
}

// Run fills and follows until ctx ends. A failed snapshot or an ended
// watch (the log moved past it) is retried with a new snapshot.
func (c *Caches) Run(ctx context.Context) error {
	for ctx.Err() == nil {
		rev, err := c.snapshot(ctx)
		if err == nil {
			c.syncedOnce.Do(func() { close(c.synced) })
			c.notify()
			err = c.follow(ctx, rev)
		}
		if ctx.Err() != nil {
			break
		}
		c.log.Warn("rbac cache: resnapshot", "err", err)
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
	return nil
}

// WaitForSync blocks until the first snapshot is loaded or ctx ends.
func (c *Caches) WaitForSync(ctx context.Context) error {
	select {
	case <-c.synced:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("rbac: wait for the caches: %w", ctx.Err())
	}
}

// Changed returns a channel that receives (at most one pending value)
// after each change of a ClusterRole and each snapshot.
func (c *Caches) Changed() <-chan struct{} {
	ch := make(chan struct{}, 1)
	c.smu.Lock()
	c.subs = append(c.subs, ch)
	c.smu.Unlock()
	return ch
}

func (c *Caches) notify() {
	c.smu.Lock()
	defer c.smu.Unlock()
	for _, ch := range c.subs {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

var kinds = []string{"clusterroles", "roles", "clusterrolebindings", "rolebindings"}

// snapshot replaces the contents with the four kinds read at one etcd
// revision, which it returns.
func (c *Caches) snapshot(ctx context.Context) (events.Revision, error) {
	prefixes := make([]string, len(kinds))
	for i, kind := range kinds {
		prefixes[i] = storage.Key(rbacv1.GroupName, kind, "", "")
	}
	objs, rev, err := c.store.Snapshot(ctx, prefixes...)
	if err != nil {
		return 0, fmt.Errorf("rbac: %w", err)
	}
	fresh := &Caches{bindings: newBindings(), clusterRoles: map[string]*rbacv1.ClusterRole{}, roles: map[[2]string]*rbacv1.Role{}}
	for i, kvs := range objs {
		kind := kinds[i]
		for _, kv := range kvs {
			if err := fresh.apply(kind, events.Added, kv.Value); err != nil {
				c.log.Warn("rbac cache: undecodable object", "resource", kind, "err", err)
			}
		}
	}
	c.mu.Lock()
	c.crbs, c.rbs = fresh.crbs, fresh.rbs
	c.mu.Unlock()
	c.rmu.Lock()
	c.clusterRoles, c.roles = fresh.clusterRoles, fresh.roles
	c.rmu.Unlock()
	return rev, nil
}

// follow applies the log's changes after rev until the watch ends.
func (c *Caches) follow(ctx context.Context, rev events.Revision) error {
	w, err := c.hub.Watch(ctx, watchhub.Request{Group: rbacv1.GroupName, From: rev})
	if err != nil {
		return fmt.Errorf("rbac: watch: %w", err)
	}
	defer w.Stop()
	for ev := range w.Events() {
		if err := c.apply(ev.Resource, ev.Type, ev.Object); err != nil {
			c.log.Warn("rbac cache: undecodable event", "resource", ev.Resource, "revision", ev.Revision, "err", err)
			continue
		}
		if ev.Resource == "clusterroles" {
			c.notify()
		}
	}
	if err := w.Err(); err != nil {
		return fmt.Errorf("rbac: watch: %w", err)
	}
	return errors.New("rbac: watch ended")
}

// apply puts or removes one object.
func (c *Caches) apply(resource string, typ events.Type, raw []byte) error {
	del := typ == events.Deleted
	switch resource {
	case "clusterroles":
		r := &rbacv1.ClusterRole{}
		if err := codec.Unmarshal(raw, r); err != nil {
			return err
		}
		c.rmu.Lock()
		if del {
			delete(c.clusterRoles, r.Name)
		} else {
			c.clusterRoles[r.Name] = r
		}
		c.rmu.Unlock()
	case "roles":
		r := &rbacv1.Role{}
		if err := codec.Unmarshal(raw, r); err != nil {
			return err
		}
		c.rmu.Lock()
		if del {
			delete(c.roles, [2]string{r.Namespace, r.Name})
		} else {
			c.roles[[2]string{r.Namespace, r.Name}] = r
		}
		c.rmu.Unlock()
	case "clusterrolebindings":
		b := &rbacv1.ClusterRoleBinding{}
		if err := codec.Unmarshal(raw, b); err != nil {
			return err
		}
		if del {
			c.deleteCRB(b)
		} else {
			c.putCRB(b)
		}
	case "rolebindings":
		b := &rbacv1.RoleBinding{}
		if err := codec.Unmarshal(raw, b); err != nil {
			return err
		}
		if del {
			c.deleteRB(b)
		} else {
			c.putRB(b)
		}
	}
	return nil
}

// ClusterRole implements Policy.
func (c *Caches) ClusterRole(name string) (*rbacv1.ClusterRole, bool) {
	c.rmu.RLock()
	defer c.rmu.RUnlock()
	r, ok := c.clusterRoles[name]
	return r, ok
}

// Role implements Policy.
func (c *Caches) Role(namespace, name string) (*rbacv1.Role, bool) {
	c.rmu.RLock()
	defer c.rmu.RUnlock()
	r, ok := c.roles[[2]string{namespace, name}]
	return r, ok
}

// ClusterRoleList returns every ClusterRole (shared: do not modify).
func (c *Caches) ClusterRoleList() []*rbacv1.ClusterRole {
	c.rmu.RLock()
	defer c.rmu.RUnlock()
	out := make([]*rbacv1.ClusterRole, 0, len(c.clusterRoles))
	for _, r := range c.clusterRoles {
		out = append(out, r)
	}
	return out
}

// bindings indexes bindings by namespace. Safe for concurrent use.
type bindings struct {
	mu   sync.RWMutex
	crbs map[string]*rbacv1.ClusterRoleBinding
	rbs  map[string]map[string]*rbacv1.RoleBinding // namespace, name
}

func newBindings() bindings {
	return bindings{crbs: map[string]*rbacv1.ClusterRoleBinding{}, rbs: map[string]map[string]*rbacv1.RoleBinding{}}
}

func (c *bindings) putCRB(b *rbacv1.ClusterRoleBinding) {
	c.mu.Lock()
	c.crbs[b.Name] = b
	c.mu.Unlock()
}

func (c *bindings) deleteCRB(b *rbacv1.ClusterRoleBinding) {
	c.mu.Lock()
	delete(c.crbs, b.Name)
	c.mu.Unlock()
}

func (c *bindings) putRB(b *rbacv1.RoleBinding) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ns := c.rbs[b.Namespace]
	if ns == nil {
		ns = map[string]*rbacv1.RoleBinding{}
		c.rbs[b.Namespace] = ns
	}
	ns[b.Name] = b
}

func (c *bindings) deleteRB(b *rbacv1.RoleBinding) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.rbs[b.Namespace], b.Name)
	if len(c.rbs[b.Namespace]) == 0 {
		delete(c.rbs, b.Namespace)
	}
}

// VisitClusterRoleBindings implements Policy.
func (c *bindings) VisitClusterRoleBindings(fn func(*rbacv1.ClusterRoleBinding) bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	for _, b := range c.crbs {
		if !fn(b) {
			return
		}
	}
}

// VisitRoleBindings implements Policy.
func (c *bindings) VisitRoleBindings(namespace string, fn func(*rbacv1.RoleBinding) bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	for _, b := range c.rbs[namespace] {
		if !fn(b) {
			return
		}
	}
}
