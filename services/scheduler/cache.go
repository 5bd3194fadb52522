package scheduler

import (
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"

	fw "github.com/cairn-dev/cairn/services/scheduler/framework"
)

// cache is the scheduler's view of the cluster: the framework Snapshot,
// fed by the log (bound pods, nodes) and by the scheduler itself (assumed
// pods: decided and being bound, counted at once so the next cycles see
// them without waiting for the log). A scheduling cycle holds the read
// lock; changes take the write lock.
type cache struct {
	mu   sync.RWMutex
	snap *fw.Snapshot
	// where maps every counted pod to its node.
	where map[string]string
	// assumed are pods counted before the log shows them bound.
	assumed map[string]string
}

func newCache() *cache {
	return &cache{snap: fw.NewSnapshot(nil, nil), where: map[string]string{}, assumed: map[string]string{}}
}

// counts reports whether a pod is counted on its node: bound and not
// finished. Terminating pods still count until they are gone, as in
// kube-scheduler.
func counts(pod *corev1.Pod) bool {
	return pod.Spec.NodeName != "" && pod.Status.Phase != corev1.PodSucceeded && pod.Status.Phase != corev1.PodFailed
}

// setPod records the latest state of a bound pod seen on the log (or
// removes it when it no longer counts). It replaces an assumed copy. It
// reports whether room was freed (the pod stopped counting); whether the
// pod was assumed by this replica (its binding, or another replica's, is
// now on the log); and then a pod it conflicts with under required pod
// anti-affinity, if any (see antiAffinityConflict).
func (c *cache) setPod(pi *fw.PodInfo) (freed, ours bool, conflict *fw.PodInfo) {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ours = c.assumed[pi.Key]
	delete(c.assumed, pi.Key)
	if old, ok := c.where[pi.Key]; ok {
		c.snap.RemovePod(pi.Key, old)
		delete(c.where, pi.Key)
		freed = !counts(pi.Pod)
	}
	if counts(pi.Pod) {
		c.snap.AddPod(pi, pi.Pod.Spec.NodeName)
		c.where[pi.Key] = pi.Pod.Spec.NodeName
		if ours {
			conflict = antiAffinityConflict(c.snap, pi)
		}
	}
	c.snap.SetNominated(pi, "")
	return freed, ours, conflict
}

// removePod forgets a deleted pod; it reports whether it was counted.
func (c *cache) removePod(key string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.assumed, key)
	node, ok := c.where[key]
	if ok {
		c.snap.RemovePod(key, node)
		delete(c.where, key)
	}
	c.snap.SetNominated(&fw.PodInfo{Key: key}, "")
	return ok
}

// assume counts pi on node before its binding is confirmed.
func (c *cache) assume(pi *fw.PodInfo, node string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.where[pi.Key]; ok {
		return
	}
	c.snap.AddPod(pi, node)
	c.where[pi.Key] = node
	c.assumed[pi.Key] = node
	c.snap.SetNominated(pi, "")
}

// forget drops an assumed pod whose binding failed; a pod the log has
// shown bound meanwhile stays.
func (c *cache) forget(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	node, ok := c.assumed[key]
	if !ok {
		return
	}
	delete(c.assumed, key)
	c.snap.RemovePod(key, node)
	delete(c.where, key)
}

// isAssumed reports whether the pod is assumed (bound by us, not yet seen).
func (c *cache) isAssumed(key string) bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	_, ok := c.assumed[key]
	return ok
}

// nominate keeps room on node for pi ("" clears).
func (c *cache) nominate(pi *fw.PodInfo, node string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.snap.SetNominated(pi, node)
}

// setNode adds or updates a node; it reports whether the change could let
// pending pods fit (new node, or allocatable, labels, taints or
// schedulability changed).
func (c *cache) setNode(node *corev1.Node) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	var old *corev1.Node
	if ni := c.snap.NodeInfo(node.Name); ni != nil {
		old = ni.Node
	}
	c.snap.AddNode(node)
	return nodeChangeMatters(old, node)
}

func nodeChangeMatters(old, node *corev1.Node) bool {
	if old == nil {
		return true
	}
	return old.Spec.Unschedulable != node.Spec.Unschedulable ||
		!equality.Semantic.DeepEqual(old.Status.Allocatable, node.Status.Allocatable) ||
		!equality.Semantic.DeepEqual(old.Labels, node.Labels) ||
		!equality.Semantic.DeepEqual(old.Spec.Taints, node.Spec.Taints)
}

func (c *cache) removeNode(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.snap.RemoveNode(name)
}

// read runs fn with the snapshot under the read lock.
func (c *cache) read(fn func(*fw.Snapshot)) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	fn(c.snap)
}
