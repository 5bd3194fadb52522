package volumebinding

import (
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"

	"github.com/cairn-dev/cairn/events"
	"github.com/cairn-dev/cairn/events/consumer"
)

var (
	claimsResource   = corev1.SchemeGroupVersion.WithResource("persistentvolumeclaims")
	volumesResource  = corev1.SchemeGroupVersion.WithResource("persistentvolumes")
	nodesResource    = corev1.SchemeGroupVersion.WithResource("nodes")
	classesResource  = storagev1.SchemeGroupVersion.WithResource("storageclasses")
	csiNodesResource = storagev1.SchemeGroupVersion.WithResource("csinodes")
)

// Caches is the Lister on a consumer.Manager's caches.
type Caches struct {
	claims   *consumer.Cache[*corev1.PersistentVolumeClaim]
	volumes  *consumer.Cache[*corev1.PersistentVolume]
	classes  *consumer.Cache[*storagev1.StorageClass]
	nodes    *consumer.Cache[*corev1.Node]
	csiNodes *consumer.Cache[*storagev1.CSINode]

	mu       sync.Mutex
	topology map[string]bool
}

var _ Lister = (*Caches)(nil)

// NewCaches asks m for the caches the plugin reads; onChange is called
// (from the caches' handlers) whenever a claim, volume, class or CSINode
// changes, so that the scheduler retries the pods those could unblock.
func NewCaches(m *consumer.Manager, onChange func()) (*Caches, error) {
	c := &Caches{topology: map[string]bool{}}
	var err error
	if c.claims, err = consumer.CacheFor[*corev1.PersistentVolumeClaim](m, claimsResource); err != nil {
		return nil, fmt.Errorf("volumebinding: %w", err)
	}
	if c.volumes, err = consumer.CacheFor[*corev1.PersistentVolume](m, volumesResource); err != nil {
		return nil, fmt.Errorf("volumebinding: %w", err)
	}
	if c.classes, err = consumer.CacheFor[*storagev1.StorageClass](m, classesResource); err != nil {
		return nil, fmt.Errorf("volumebinding: %w", err)
	}
	if c.nodes, err = consumer.CacheFor[*corev1.Node](m, nodesResource); err != nil {
		return nil, fmt.Errorf("volumebinding: %w", err)
	}
	if c.csiNodes, err = consumer.CacheFor[*storagev1.CSINode](m, csiNodesResource); err != nil {
		return nil, fmt.Errorf("volumebinding: %w", err)
	}
	addHandler(c.claims, onChange)
	addHandler(c.volumes, onChange)
	addHandler(c.classes, onChange)
	addHandler(c.csiNodes, func() {
		c.refreshTopology()
		onChange()
	})
	return c, nil
}

func addHandler[T consumer.Object](cache *consumer.Cache[T], f func()) {
	cache.AddHandler(consumer.Handler[T]{
		OnAdd:    func(T, *events.Event) { f() },
		OnUpdate: func(_, _ T, _ *events.Event) { f() },
		OnDelete: func(T, *events.Event) { f() },
	})
}

func (c *Caches) refreshTopology() {
	t := map[string]bool{}
	for _, cn := range c.csiNodes.List(nil) {
		for _, d := range cn.Spec.Drivers {
			if len(d.TopologyKeys) > 0 {
				t[d.Name] = true
			}
		}
	}
	c.mu.Lock()
	c.topology = t
	c.mu.Unlock()
}

// Syncers are the caches, for the scheduler's WaitForSync.
func (c *Caches) Syncers() []consumer.Syncer {
	return []consumer.Syncer{c.claims, c.volumes, c.classes, c.csiNodes}
}

// Claim implements Lister.
func (c *Caches) Claim(ns, name string) (*corev1.PersistentVolumeClaim, bool) {
	return c.claims.Get(ns, name)
}

// Volume implements Lister.
func (c *Caches) Volume(name string) (*corev1.PersistentVolume, bool) { return c.volumes.Get("", name) }

// Volumes implements Lister.
func (c *Caches) Volumes() []*corev1.PersistentVolume { return c.volumes.List(nil) }

// Class implements Lister.
func (c *Caches) Class(name string) (*storagev1.StorageClass, bool) {
	if name == "" {
		return nil, false
	}
	return c.classes.Get("", name)
}

// Node implements Lister.
func (c *Caches) Node(name string) (*corev1.Node, bool) { return c.nodes.Get("", name) }

// CSINode implements Lister.
func (c *Caches) CSINode(name string) (*storagev1.CSINode, bool) { return c.csiNodes.Get("", name) }

// DriverHasTopology implements Lister.
func (c *Caches) DriverHasTopology(driver string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.topology[driver]
}
