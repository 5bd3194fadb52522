package nodeauthz

import (
	"bytes"
	"context"
	"log/slog"
	"slices"
	"sync"

	corev1 "k8s.io/api/core/v1"

	"github.com/cairn-dev/cairn/events"
	"github.com/cairn-dev/cairn/schemas"
	"github.com/cairn-dev/cairn/schemas/codec"
	"github.com/cairn-dev/cairn/services/apiserver/objcache"
	"github.com/cairn-dev/cairn/services/apiserver/storage"
	"github.com/cairn-dev/cairn/services/apiserver/watchhub"
)

// podRefs is what the graph keeps of a pod: its node and what it uses.
type podRefs struct {
	uid            string
	node           string
	serviceAccount string
	secrets        []string
	configMaps     []string
	pvcs           []string
}

// Graph is kube's node authorizer graph reduced to what cairn serves:
// pods, the node each is bound to, and the Secrets, ConfigMaps,
// PersistentVolumeClaims and ServiceAccount each uses. It is a cache of
// the pods (objcache: etcd once, then the log) indexed by node, so a
// decision visits the pods of one node. Safe for concurrent use.
type Graph struct {
	pods *objcache.Cache[podRefs]

	mu     sync.RWMutex
	byNode map[string]map[objcache.Key]struct{}
}

// NewGraph builds a graph that snapshots from store and follows hub.
func NewGraph(store *storage.Store, hub *watchhub.Hub, log *slog.Logger) *Graph {
	g := &Graph{byNode: map[string]map[objcache.Key]struct{}{}}
	g.pods = objcache.New(objcache.Config[podRefs]{Resource: "pods", Store: store, Hub: hub, Log: log,
		Decode: decodePodRefs, FromEvent: podRefsFromEvent, OnChange: g.index})
	return g
}

// Run fills and follows until ctx ends.
func (g *Graph) Run(ctx context.Context) error { return g.pods.Run(ctx) }

// Synced is closed once the first snapshot is in.
func (g *Graph) Synced() <-chan struct{} { return g.pods.Synced() }

// podRefsFromEvent: a pod's spec does not change but for its binding, so
// an update of a pod the graph has (same UID) only moves it to the node
// in the envelope.
func podRefsFromEvent(ev *events.Event, old *podRefs) (podRefs, bool) {
	if old == nil || old.uid != ev.UID || bytes.Contains(ev.Object, []byte(`"ephemeralContainers"`)) {
		return podRefs{}, false
	}
	v := *old
	v.node = ev.NodeName
	return v, true
}

func decodePodRefs(raw []byte) (objcache.Key, podRefs, error) {
	var pod corev1.Pod
	if err := codec.Unmarshal(raw, &pod); err != nil {
		return objcache.Key{}, podRefs{}, err
	}
	r := podRefs{uid: string(pod.UID), node: pod.Spec.NodeName, serviceAccount: pod.Spec.ServiceAccountName}
	add := func(l *[]string, name string) {
		if name != "" && !slices.Contains(*l, name) {
			*l = append(*l, name)
		}
	}
	visitSecrets(&pod, func(name string) { add(&r.secrets, name) })
	visitConfigMaps(&pod, func(name string) { add(&r.configMaps, name) })
	for _, v := range pod.Spec.Volumes {
		switch {
		case v.PersistentVolumeClaim != nil:
			add(&r.pvcs, v.PersistentVolumeClaim.ClaimName)
		case v.Ephemeral != nil:
			add(&r.pvcs, schemas.EphemeralClaimName(&pod, &v))
		}
	}
	return objcache.Key{pod.Namespace, pod.Name}, r, nil
}

// index keeps byNode; objcache calls it under its lock.
func (g *Graph) index(k objcache.Key, old, cur *podRefs) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if old == nil && cur == nil {
		g.byNode = map[string]map[objcache.Key]struct{}{}
		return
	}
	if old != nil && old.node != "" {
		delete(g.byNode[old.node], k)
		if len(g.byNode[old.node]) == 0 {
			delete(g.byNode, old.node)
		}
	}
	if cur != nil && cur.node != "" {
		m := g.byNode[cur.node]
		if m == nil {
			m = map[objcache.Key]struct{}{}
			g.byNode[cur.node] = m
		}
		m[k] = struct{}{}
	}
}

// kind is what a node may reach through its pods.
type kind int

const (
	kindSecret kind = iota
	kindConfigMap
	kindPVC
	kindServiceAccount
)

// reaches reports whether a pod bound to node uses the object.
func (g *Graph) reaches(node string, k kind, namespace, name string) bool {
	g.mu.RLock()
	keys := make([]objcache.Key, 0, len(g.byNode[node]))
	for key := range g.byNode[node] {
		if key[0] == namespace {
			keys = append(keys, key)
		}
	}
	g.mu.RUnlock()
	for _, key := range keys {
		p, ok := g.pods.Peek(key[0], key[1])
		if !ok || p.node != node {
			continue
		}
		switch k {
		case kindSecret:
			if slices.Contains(p.secrets, name) {
				return true
			}
		case kindConfigMap:
			if slices.Contains(p.configMaps, name) {
				return true
			}
		case kindPVC:
			if slices.Contains(p.pvcs, name) {
				return true
			}
		case kindServiceAccount:
			if p.serviceAccount == name {
				return true
			}
		}
	}
	return false
}

// podOn reports whether the pod namespace/name is bound to node, and its UID.
func (g *Graph) podOn(node, namespace, name string) (uid string, ok bool) {
	p, found := g.pods.Peek(namespace, name)
	if !found || p.node != node {
		return "", false
	}
	return p.uid, true
}
