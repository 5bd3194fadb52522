package rbac

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

	"github.com/nats-io/nats.go/jetstream"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/client-go/rest"

	"github.com/cairn-dev/cairn/events"
	"github.com/cairn-dev/cairn/events/consumer"
)

// Caches is the Policy of a running apiserver: consumer caches of the four
// kinds (a snapshot through the apiserver, then the log), and the bindings
// indexed by namespace so a decision visits only the cluster-wide bindings
// and those of the request's namespace. Safe for concurrent use once
// synced; before, it holds nothing and denies everyone but system:masters.
type Caches struct {
	ClusterRoles        *consumer.Cache[*rbacv1.ClusterRole]
	Roles               *consumer.Cache[*rbacv1.Role]
	clusterRoleBindings *consumer.Cache[*rbacv1.ClusterRoleBinding]
	roleBindings        *consumer.Cache[*rbacv1.RoleBinding]
	bindings
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

var _ Policy = (*Caches)(nil)

// NewCaches builds the caches; rc reaches the apiserver for the snapshots
// (as a member of system:masters: the authorizer cannot decide before they
// are loaded), js reads the log.
func NewCaches(rc *rest.Config, js jetstream.JetStream, log *slog.Logger) (*Caches, error) {
	c := &Caches{bindings: newBindings()}
	var err error
	gv := rbacv1.SchemeGroupVersion
	if c.ClusterRoles, err = consumer.NewCache(consumer.CacheConfig[*rbacv1.ClusterRole]{
		Resource: gv.WithResource("clusterroles"), Config: rc, JS: js, Log: log}); err != nil {
		return nil, fmt.Errorf("rbac: %w", err)
	}
	if c.Roles, err = consumer.NewCache(consumer.CacheConfig[*rbacv1.Role]{
		Resource: gv.WithResource("roles"), Config: rc, JS: js, Log: log}); err != nil {
		return nil, fmt.Errorf("rbac: %w", err)
	}
	if c.clusterRoleBindings, err = consumer.NewCache(consumer.CacheConfig[*rbacv1.ClusterRoleBinding]{
		Resource: gv.WithResource("clusterrolebindings"), Config: rc, JS: js, Log: log}); err != nil {
		return nil, fmt.Errorf("rbac: %w", err)
	}
	if c.roleBindings, err = consumer.NewCache(consumer.CacheConfig[*rbacv1.RoleBinding]{
		Resource: gv.WithResource("rolebindings"), Config: rc, JS: js, Log: log}); err != nil {
		return nil, fmt.Errorf("rbac: %w", err)
	}
	c.clusterRoleBindings.AddHandler(consumer.Handler[*rbacv1.ClusterRoleBinding]{
		OnAdd:    func(b *rbacv1.ClusterRoleBinding, _ *events.Event) { c.putCRB(b) },
		OnUpdate: func(_, b *rbacv1.ClusterRoleBinding, _ *events.Event) { c.putCRB(b) },
		OnDelete: func(b *rbacv1.ClusterRoleBinding, _ *events.Event) { c.deleteCRB(b) },
	})
	c.roleBindings.AddHandler(consumer.Handler[*rbacv1.RoleBinding]{
		OnAdd:    func(b *rbacv1.RoleBinding, _ *events.Event) { c.putRB(b) },
		OnUpdate: func(_, b *rbacv1.RoleBinding, _ *events.Event) { c.putRB(b) },
		OnDelete: func(b *rbacv1.RoleBinding, _ *events.Event) { c.deleteRB(b) },
	})
	return c, nil
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

func (c *bindings) deleteRB(b *rbacv1.RoleBinding) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.rbs[b.Namespace], b.Name)
	if len(c.rbs[b.Namespace]) == 0 {
		delete(c.rbs, b.Namespace)
	}
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

// Run runs the four caches until ctx ends.
func (c *Caches) Run(ctx context.Context) error {
	return consumer.RunAll(ctx, c.ClusterRoles, c.Roles, c.clusterRoleBindings, c.roleBindings)
}

// WaitForSync blocks until every cache has its first snapshot.
func (c *Caches) WaitForSync(ctx context.Context) error {
	for _, w := range []interface{ WaitForSync(context.Context) error }{c.ClusterRoles, c.Roles, c.clusterRoleBindings, c.roleBindings} {
		if err := w.WaitForSync(ctx); err != nil {
			return fmt.Errorf("rbac: %w", err)
		}
	}
	return nil
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

// ClusterRole implements Policy.
func (c *Caches) ClusterRole(name string) (*rbacv1.ClusterRole, bool) {
	return c.ClusterRoles.Get("", name)
}

// Role implements Policy.
func (c *Caches) Role(namespace, name string) (*rbacv1.Role, bool) {
	return c.Roles.Get(namespace, name)
}
