package consumer

import (
	"sort"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/cairn-dev/cairn/events"
)

// Object is what a Cache holds: a Kubernetes API object (a pointer to a
// k8s.io/api type such as *corev1.Pod, or *unstructured.Unstructured).
type Object interface {
	metav1.Object
	runtime.Object
}

// KeyOf is an object's key: "namespace/name", or "name" when it is
// cluster-scoped (client-go's MetaNamespaceKeyFunc).
func KeyOf(obj metav1.Object) string { return Key(obj.GetNamespace(), obj.GetName()) }

// Key builds a key from a namespace (empty when cluster-scoped) and a name.
func Key(namespace, name string) string {
	if namespace == "" {
		return name
	}
	return namespace + "/" + name
}

// SplitKey splits a key into namespace and name.
func SplitKey(key string) (namespace, name string) {
	if ns, n, ok := strings.Cut(key, "/"); ok {
		return ns, n
	}
	return "", key
}

// IndexFunc returns the values an object is indexed under.
type IndexFunc[T Object] func(obj T) []string

// Built-in index names; every Cache has both.
const (
	// IndexNamespace indexes objects by metadata.namespace.
	IndexNamespace = "namespace"
	// IndexOwner indexes objects by the UID of their controller
	// ownerReference (controller: true): "pods owned by ReplicaSet X" is
	// ByIndex(IndexOwner, string(rs.UID)).
	IndexOwner = "owner"
)

func indexNamespace[T Object](obj T) []string { return []string{obj.GetNamespace()} }

func indexOwner[T Object](obj T) []string {
	if ref := metav1.GetControllerOfNoCopy(obj); ref != nil {
		return []string{string(ref.UID)}
	}
	return nil
}

// entry is one stored object and the revision it was last changed at.
type entry[T Object] struct {
	obj T
	rev events.Revision
}

// store is the projection: objects by key, their indexes and the tombstones
// of recent deletes. It is not safe for concurrent use; Cache locks it.
type store[T Object] struct {
	items    map[string]entry[T]
	indexers map[string]IndexFunc[T]
	// indexes[index][value] is the set of keys indexed under value.
	indexes map[string]map[string]map[string]struct{}
	// tombstones hold the revision of recent deletes, so a late event older
	// than the delete does not bring the object back.
	tombstones map[string]tombstone
}

type tombstone struct {
	rev events.Revision
	at  time.Time
}

func newStore[T Object](indexers map[string]IndexFunc[T]) *store[T] {
	s := &store[T]{indexers: indexers}
	s.reset()
	return s
}

func (s *store[T]) reset() {
	s.items = map[string]entry[T]{}
	s.indexes = map[string]map[string]map[string]struct{}{}
	s.tombstones = map[string]tombstone{}
	for name := range s.indexers {
		s.indexes[name] = map[string]map[string]struct{}{}
	}
}

// revision is the revision a key was last seen at: stored, deleted, or 0.
func (s *store[T]) revision(key string) events.Revision {
	if e, ok := s.items[key]; ok {
		return e.rev
	}
	return s.tombstones[key].rev
}

func (s *store[T]) put(key string, obj T, rev events.Revision) (old T, existed bool) {
	prev, existed := s.items[key]
	if existed {
		s.unindex(key, prev.obj)
	}
	delete(s.tombstones, key)
	s.items[key] = entry[T]{obj: obj, rev: rev}
	s.index(key, obj)
	return prev.obj, existed
}

func (s *store[T]) remove(key string, rev events.Revision, now time.Time) (old T, existed bool) {
	prev, existed := s.items[key]
	if existed {
		s.unindex(key, prev.obj)
		delete(s.items, key)
	}
	s.tombstones[key] = tombstone{rev: rev, at: now}
	return prev.obj, existed
}

// prune forgets tombstones older than horizon.
func (s *store[T]) prune(horizon time.Time) {
	for k, t := range s.tombstones {
		if t.at.Before(horizon) {
			delete(s.tombstones, k)
		}
	}
}

// addIndex adds an index and indexes every object under it.
func (s *store[T]) addIndex(name string, fn IndexFunc[T]) {
	s.indexers[name] = fn
	s.indexes[name] = map[string]map[string]struct{}{}
	for key, e := range s.items {
		for _, v := range fn(e.obj) {
			set := s.indexes[name][v]
			if set == nil {
				set = map[string]struct{}{}
				s.indexes[name][v] = set
			}
			set[key] = struct{}{}
		}
	}
}

func (s *store[T]) index(key string, obj T) {
	for name, fn := range s.indexers {
		for _, v := range fn(obj) {
			set := s.indexes[name][v]
			if set == nil {
				set = map[string]struct{}{}
				s.indexes[name][v] = set
			}
			set[key] = struct{}{}
		}
	}
}

func (s *store[T]) unindex(key string, obj T) {
	for name, fn := range s.indexers {
		for _, v := range fn(obj) {
			set := s.indexes[name][v]
			delete(set, key)
			if len(set) == 0 {
				delete(s.indexes[name], v)
			}
		}
	}
}

// byIndex returns the objects under value in index, sorted by key.
func (s *store[T]) byIndex(index, value string) []T {
	set := s.indexes[index][value]
	keys := make([]string, 0, len(set))
	for k := range set {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]T, 0, len(keys))
	for _, k := range keys {
		out = append(out, s.items[k].obj)
	}
	return out
}
