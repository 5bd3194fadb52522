package volumebinding

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cairn-dev/cairn/services/controllers/persistentvolume/binding"
	fw "github.com/cairn-dev/cairn/services/scheduler/framework"
)

// PreBind binds the pod's delayed claims for nodeName and waits until
// every claim of the pod is bound (see the package documentation).
func (p *Plugin) PreBind(ctx context.Context, pi *fw.PodInfo, nodeName string) *fw.Status {
	pc, st := p.classify(pi.Pod)
	if st != nil {
		return st
	}
	if len(pc.bound) == 0 && len(pc.delay) == 0 {
		return nil
	}
	// wait says, for each delayed claim, what it waits for: a static
	// volume (true) or a provisioner (false, until the cache shows the
	// selected node written here: then its loss is a failure).
	wait := map[string]*claimWait{}
	if len(pc.delay) > 0 {
		d, st := p.write(ctx, pc.delay, nodeName)
		if st != nil {
			return st
		}
		for _, b := range d.static {
			wait[b.pvc.Name] = &claimWait{static: true}
		}
		for _, pvc := range d.provision {
			wait[pvc.Name] = &claimWait{}
		}
	}
	ctx, cancel := context.WithTimeout(ctx, p.bindTimeout)
	defer cancel()
	names, _ := claimNames(pi.Pod)
	t := time.NewTicker(p.poll)
	defer t.Stop()
	for {
		done, err := p.bound(pi.Pod.Namespace, names, wait)
		if err != nil {
			return fw.AsStatus(err)
		}
		if done {
			return nil
		}
		select {
		case <-ctx.Done():
			return fw.AsStatus(fmt.Errorf("binding volumes: %w", ctx.Err()))
		case <-t.C:
		}
	}
}

// write is kube's BindPodVolumes' API part: claimRefs on the chosen
// static volumes, the selected node on the claims to provision.
func (p *Plugin) write(ctx context.Context, claims []*corev1.PersistentVolumeClaim, nodeName string) (decision, *fw.Status) {
	node, ok := p.lister.Node(nodeName)
	if !ok {
		return decision{}, fw.AsStatus(fmt.Errorf("volumebinding: node %q not found", nodeName))
	}
	pvs := volumesByClass(p.lister.Volumes())
	d, ok := p.decide(claims, pvs, node)
	if !ok {
		return d, fw.NewStatus(fw.Unschedulable, ErrReasonBindConflict)
	}
	for _, b := range d.static {
		if binding.IsVolumeBoundToClaim(b.pv, b.pvc) && b.pv.Spec.ClaimRef.UID == b.pvc.UID {
			continue
		}
		pv := b.pv.DeepCopy()
		pv.Spec.ClaimRef = &corev1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: b.pvc.Namespace,
			Name: b.pvc.Name, UID: b.pvc.UID, ResourceVersion: b.pvc.ResourceVersion}
		metav1.SetMetaDataAnnotation(&pv.ObjectMeta, binding.AnnBoundByController, "yes")
		if _, err := p.client.CoreV1().PersistentVolumes().Update(ctx, pv, metav1.UpdateOptions{}); err != nil {
			return d, fw.AsStatus(fmt.Errorf("binding volumes: bind volume %s: %w", pv.Name, err))
		}
	}
	for _, pvc := range d.provision {
		if pvc.Annotations[binding.AnnSelectedNode] == nodeName {
			continue
		}
		n := pvc.DeepCopy()
		metav1.SetMetaDataAnnotation(&n.ObjectMeta, binding.AnnSelectedNode, nodeName)
		if _, err := p.client.CoreV1().PersistentVolumeClaims(n.Namespace).Update(ctx, n, metav1.UpdateOptions{}); err != nil {
			return d, fw.AsStatus(fmt.Errorf("binding volumes: select node for claim %s/%s: %w", n.Namespace, n.Name, err))
		}
	}
	return d, nil
}

// bound reports whether every claim is bound to an existing volume bound
// back to it (kube's checkBindings); an error when a claim to provision
// lost its selected node (the provisioner gave up on that node).
func (p *Plugin) bound(ns string, names []string, wait map[string]*claimWait) (bool, error) {
	all := true
	for _, name := range names {
		pvc, ok := p.lister.Claim(ns, name)
		if !ok {
			return false, fmt.Errorf("binding volumes: persistentvolumeclaim %q not found", name)
		}
		if pvc.Spec.VolumeName == "" || !metav1.HasAnnotation(pvc.ObjectMeta, binding.AnnBindCompleted) {
			if w := wait[name]; w != nil && !w.static {
				_, selected := pvc.Annotations[binding.AnnSelectedNode]
				if !selected && w.seenSelected {
					return false, fmt.Errorf("binding volumes: provisioning failed for PVC %q", name)
				}
				w.seenSelected = w.seenSelected || selected
			}
			all = false
			continue
		}
		pv, ok := p.lister.Volume(pvc.Spec.VolumeName)
		if !ok || pv.Spec.ClaimRef == nil || pv.Spec.ClaimRef.UID != pvc.UID {
			all = false
		}
	}
	return all, nil
}

// claimWait is what PreBind waits for on one delayed claim.
type claimWait struct {
	static       bool
	seenSelected bool
}
