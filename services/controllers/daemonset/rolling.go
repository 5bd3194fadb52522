package daemonset

import (
	"context"
	"fmt"
	"maps"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// surgeCount is maxSurge scaled to desired pods, rounded up; 0 unless the
// strategy is RollingUpdate with maxSurge (kube's SurgeCount).
func surgeCount(ds *appsv1.DaemonSet, desired int) (int, error) {
	ru := ds.Spec.UpdateStrategy.RollingUpdate
	if ds.Spec.UpdateStrategy.Type != appsv1.RollingUpdateDaemonSetStrategyType || ru == nil || ru.MaxSurge == nil {
		return 0, nil
	}
	return intstr.GetScaledValueFromIntOrPercent(ru.MaxSurge, desired, true)
}

// unavailableCount is maxUnavailable scaled the same way (kube's
// UnavailableCount).
func unavailableCount(ds *appsv1.DaemonSet, desired int) (int, error) {
	ru := ds.Spec.UpdateStrategy.RollingUpdate
	if ds.Spec.UpdateStrategy.Type != appsv1.RollingUpdateDaemonSetStrategyType || ru == nil || ru.MaxUnavailable == nil {
		return 0, nil
	}
	return intstr.GetScaledValueFromIntOrPercent(ru.MaxUnavailable, desired, true)
}

func allowsSurge(ds *appsv1.DaemonSet) bool {
	n, err := surgeCount(ds, 1)
	return err == nil && n > 0
}

// updatedOnNode is the one new and the one old live pod of a node; ok is
// false if it has more of either, left to manage (kube's
// findUpdatedPodsOnNode).
func updatedOnNode(r *round, pods []*corev1.Pod) (newPod, oldPod *corev1.Pod, ok bool) {
	for _, p := range pods {
		if p.DeletionTimestamp != nil {
			continue
		}
		if isPodUpdated(p, r.hash, r.gen) {
			if newPod != nil {
				return nil, nil, false
			}
			newPod = p
		} else {
			if oldPod != nil {
				return nil, nil, false
			}
			oldPod = p
		}
	}
	return newPod, oldPod, true
}

// rollingUpdate replaces old pods within the strategy's limits (kube's
// rollingUpdate). Without surge it deletes old pods while fewer than
// maxUnavailable nodes lack an available pod, and manage creates their
// replacements in a later round; with surge it creates new pods next to
// old available ones, at most maxSurge at a time, and deletes each old pod
// once the new one on its node is available.
func (c *Controller) rollingUpdate(ctx context.Context, r *round) error {
	ds := r.ds
	desired := 0
	for _, n := range r.nodes {
		if run, _ := r.place.shouldRun(n); run {
			desired++
		}
	}
	maxSurge, err := surgeCount(ds, desired)
	if err != nil {
		return fmt.Errorf("daemonset: %s: invalid maxSurge: %w", r.key, err)
	}
	maxUnavailable, err := unavailableCount(ds, desired)
	if err != nil {
		return fmt.Errorf("daemonset: %s: invalid maxUnavailable: %w", r.key, err)
	}
	if desired > 0 && maxUnavailable == 0 && maxSurge == 0 {
		// An impossible strategy: kube falls back to one unavailable.
		maxUnavailable = 1
	}
	minReady := ds.Spec.MinReadySeconds
	if maxSurge == 0 {
		return c.syncNodes(ctx, r, c.toReplace(r, maxUnavailable), nil)
	}

	var (
		toDelete, shouldNotRun []*corev1.Pod
		allowed, candidates    []string
		numSurge, numAvailable int
	)
	nodes := make(map[string]*corev1.Node, len(r.nodes))
	for _, n := range r.nodes {
		nodes[n.Name] = n
	}
	for _, nodeName := range sortedKeys(r.byNode) {
		newPod, oldPod, ok := updatedOnNode(r, r.byNode[nodeName])
		if !ok {
			numSurge++
			continue
		}
		switch {
		case oldPod != nil && available(oldPod, minReady, r.now), oldPod == nil && newPod != nil && available(newPod, minReady, r.now):
			numAvailable++
		}
		run := false
		if n := nodes[nodeName]; n != nil {
			run, _ = r.place.shouldRun(n)
		}
		switch {
		case oldPod == nil:
			// manage handles it.
		case newPod == nil && !available(oldPod, minReady, r.now):
			if !run {
				toDelete = append(toDelete, oldPod)
				continue
			}
			allowed = append(allowed, nodeName)
		case newPod == nil:
			if !run {
				shouldNotRun = append(shouldNotRun, oldPod)
				continue
			}
			if numSurge < maxSurge {
				candidates = append(candidates, nodeName)
			}
		case !available(newPod, minReady, r.now):
			numSurge++
		default:
			toDelete = append(toDelete, oldPod)
		}
	}
	// With surge the owner expects full availability: a pod on a node
	// that should not run it goes only once others are available.
	if n := min(numAvailable-desired, len(shouldNotRun)); n > 0 {
		toDelete = append(toDelete, shouldNotRun[:n]...)
	}
	remaining := min(max(maxSurge-numSurge, 0), len(candidates))
	return c.syncNodes(ctx, r, toDelete, append(allowed, candidates[:remaining]...))
}

// toReplace is, without surge, the old pods to delete: every unavailable
// one, and available ones while fewer than maxUnavailable nodes are down.
func (c *Controller) toReplace(r *round, maxUnavailable int) []*corev1.Pod {
	minReady := r.ds.Spec.MinReadySeconds
	var numUnavailable int
	var replace, candidates []*corev1.Pod
	for _, node := range sortedKeys(r.byNode) {
		newPod, oldPod, ok := updatedOnNode(r, r.byNode[node])
		switch {
		case !ok, oldPod == nil && newPod == nil, oldPod != nil && newPod != nil:
			// manage cleans up or creates; the node counts as unavailable.
			numUnavailable++
		case newPod != nil:
			if !available(newPod, minReady, r.now) {
				numUnavailable++
			}
		case !available(oldPod, minReady, r.now):
			replace = append(replace, oldPod)
			numUnavailable++
		case numUnavailable < maxUnavailable:
			candidates = append(candidates, oldPod)
		}
	}
	n := min(max(maxUnavailable-numUnavailable, 0), len(candidates))
	return append(replace, candidates[:n]...)
}

// sortedKeys makes a round's choices among nodes deterministic (kube
// walks a map).
func sortedKeys(m map[string][]*corev1.Pod) []string { return slices.Sorted(maps.Keys(m)) }
