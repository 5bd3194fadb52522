package binding

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/cairn-dev/cairn/services/scheduler/plugins"
)

// The annotations kube's PV controller, scheduler and external-provisioner
// read and write.
const (
	// AnnBindCompleted on a claim: its binding was completed once.
	AnnBindCompleted = "pv.kubernetes.io/bind-completed"
	// AnnBoundByController on a volume or claim: the controller made the
	// binding (absent: the user pre-bound it).
	AnnBoundByController = "pv.kubernetes.io/bound-by-controller"
	// AnnSelectedNode on a claim: the node the scheduler chose for its
	// first consumer (WaitForFirstConsumer).
	AnnSelectedNode = "volume.kubernetes.io/selected-node"
	// AnnStorageProvisioner and AnnBetaStorageProvisioner on a claim: the
	// provisioner expected to make its volume.
	AnnStorageProvisioner     = "volume.kubernetes.io/storage-provisioner"
	AnnBetaStorageProvisioner = "volume.beta.kubernetes.io/storage-provisioner"
	// AnnDynamicallyProvisioned on a volume: the provisioner that made it.
	AnnDynamicallyProvisioned = "pv.kubernetes.io/provisioned-by"
	// AnnBetaStorageClass is the class annotation older than
	// spec.storageClassName; it wins when set, as in kube.
	AnnBetaStorageClass = "volume.beta.kubernetes.io/storage-class"
	// NotSupportedProvisioner is the provisioner of classes that cannot
	// provision (static volumes only).
	NotSupportedProvisioner = "kubernetes.io/no-provisioner"
)

// ClaimClass is the class a claim asks for ("" for none).
func ClaimClass(claim *corev1.PersistentVolumeClaim) string {
	if c, ok := claim.Annotations[AnnBetaStorageClass]; ok {
		return c
	}
	if claim.Spec.StorageClassName != nil {
		return *claim.Spec.StorageClassName
	}
	return ""
}

// VolumeClass is the class of a volume ("" for none).
func VolumeClass(pv *corev1.PersistentVolume) string {
	if c, ok := pv.Annotations[AnnBetaStorageClass]; ok {
		return c
	}
	return pv.Spec.StorageClassName
}

// IsDelayBinding reports whether class binds on first consumer
// (WaitForFirstConsumer); a nil class (none, or not found) binds at once.
func IsDelayBinding(class *storagev1.StorageClass) bool {
	return class != nil && class.VolumeBindingMode != nil && *class.VolumeBindingMode == storagev1.VolumeBindingWaitForFirstConsumer
}

// IsVolumeBoundToClaim reports whether volume is bound or pre-bound to
// claim: its claimRef names it and, when the claimRef has a UID, has its
// UID.
func IsVolumeBoundToClaim(volume *corev1.PersistentVolume, claim *corev1.PersistentVolumeClaim) bool {
	ref := volume.Spec.ClaimRef
	if ref == nil || ref.Name != claim.Name || ref.Namespace != claim.Namespace {
		return false
	}
	return ref.UID == "" || ref.UID == claim.UID
}

// VolumeModeMismatch reports whether the claim's and the volume's
// volumeMode differ (unset is Filesystem).
func VolumeModeMismatch(claim *corev1.PersistentVolumeClaimSpec, pv *corev1.PersistentVolumeSpec) bool {
	want, have := corev1.PersistentVolumeFilesystem, corev1.PersistentVolumeFilesystem
	if claim.VolumeMode != nil {
		want = *claim.VolumeMode
	}
	if pv.VolumeMode != nil {
		have = *pv.VolumeMode
	}
	return want != have
}

// HasAccessModes reports whether the volume offers every access mode the
// claim asks for.
func HasAccessModes(claim *corev1.PersistentVolumeClaim, volume *corev1.PersistentVolume) bool {
	return containsAll(volume.Spec.AccessModes, claim.Spec.AccessModes)
}

func containsAll(have, want []corev1.PersistentVolumeAccessMode) bool {
	for _, m := range want {
		if !slices.Contains(have, m) {
			return false
		}
	}
	return true
}

// CheckNodeAffinity returns an error unless volume's
// spec.nodeAffinity.required admits node (no affinity admits every node).
func CheckNodeAffinity(volume *corev1.PersistentVolume, node *corev1.Node) error {
	na := volume.Spec.NodeAffinity
	if na == nil || na.Required == nil {
		return nil
	}
	match, err := plugins.NodeSelectorMatch(na.Required)
	if err != nil {
		return fmt.Errorf("binding: volume %s node affinity: %w", volume.Name, err)
	}
	// kube matches the node's labels only (CheckNodeAffinity builds a
	// node from them): a term on metadata.name never matches.
	if !match(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Labels: node.Labels}}) {
		return fmt.Errorf("binding: no matching NodeSelectorTerms")
	}
	return nil
}

// FindMatchingVolume is kube's FindMatchingVolume over volumes (see the
// package documentation). node is set in the scheduler's path only;
// excluded names volumes chosen already for other claims of the same pod;
// delayBinding (controller path only) returns pre-bound volumes but no
// others. nil, nil is no match.
func FindMatchingVolume(claim *corev1.PersistentVolumeClaim, volumes []*corev1.PersistentVolume, node *corev1.Node,
	excluded map[string]bool, delayBinding bool) (*corev1.PersistentVolume, error) {
	requested := claim.Spec.Resources.Requests[corev1.ResourceStorage]
	class := ClaimClass(claim)
	var selector labels.Selector
	if claim.Spec.Selector != nil {
		s, err := metav1.LabelSelectorAsSelector(claim.Spec.Selector)
		if err != nil {
			return nil, fmt.Errorf("binding: claim %s/%s selector: %w", claim.Namespace, claim.Name, err)
		}
		selector = s
	}
	var smallest *corev1.PersistentVolume
	var smallestQty resource.Quantity
	for _, v := range volumes {
		if excluded[v.Name] {
			continue
		}
		bound := IsVolumeBoundToClaim(v, claim)
		if v.Spec.ClaimRef != nil && !bound {
			continue
		}
		qty := v.Spec.Capacity[corev1.ResourceStorage]
		if qty.Cmp(requested) < 0 || VolumeModeMismatch(&claim.Spec, &v.Spec) || v.DeletionTimestamp != nil {
			continue
		}
		affinityOK := node == nil || CheckNodeAffinity(v, node) == nil
		if bound {
			// A pre-bound volume the node cannot reach rules the node
			// out for the claim.
			if !affinityOK {
				return nil, nil
			}
			return v, nil
		}
		if node == nil && delayBinding {
			continue
		}
		if v.Status.Phase != corev1.VolumeAvailable ||
			(selector != nil && !selector.Matches(labels.Set(v.Labels))) ||
			VolumeClass(v) != class || !affinityOK ||
			(node != nil && !HasAccessModes(claim, v)) {
			continue
		}
		if smallest == nil || smallestQty.Cmp(qty) > 0 {
			smallest, smallestQty = v, qty
		}
	}
	return smallest, nil
}

// FindBestMatch is the PV controller's findBestMatchForClaim: the volumes
// are grouped by their set of access modes; the groups offering every
// mode the claim asks for are searched with FindMatchingVolume from the
// fewest modes up, and the first match wins (a claim for RWO takes a
// RWO-only volume before a RWO+RWX one, whatever their sizes).
func FindBestMatch(claim *corev1.PersistentVolumeClaim, volumes []*corev1.PersistentVolume, delayBinding bool) (*corev1.PersistentVolume, error) {
	groups := map[string][]*corev1.PersistentVolume{}
	modes := map[string][]corev1.PersistentVolumeAccessMode{}
	for _, v := range volumes {
		k := accessModesKey(v.Spec.AccessModes)
		groups[k] = append(groups[k], v)
		modes[k] = v.Spec.AccessModes
	}
	var keys []string
	for k, m := range modes {
		if containsAll(m, claim.Spec.AccessModes) {
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, func(a, b string) int {
		if d := len(modeSet(modes[a])) - len(modeSet(modes[b])); d != 0 {
			return d
		}
		return strings.Compare(a, b)
	})
	for _, k := range keys {
		v, err := FindMatchingVolume(claim, groups[k], nil, nil, delayBinding)
		if err != nil || v != nil {
			return v, err
		}
	}
	return nil, nil
}

func modeSet(m []corev1.PersistentVolumeAccessMode) map[corev1.PersistentVolumeAccessMode]bool {
	s := make(map[corev1.PersistentVolumeAccessMode]bool, len(m))
	for _, x := range m {
		s[x] = true
	}
	return s
}

// accessModesKey is kube's GetAccessModesAsString: the distinct modes, in
// a fixed order, joined by commas.
func accessModesKey(m []corev1.PersistentVolumeAccessMode) string {
	s := modeSet(m)
	var out []string
	for _, x := range []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce, corev1.ReadOnlyMany, corev1.ReadWriteMany, corev1.ReadWriteOncePod} {
		if s[x] {
			out = append(out, modeShort[x])
		}
	}
	return strings.Join(out, ",")
}

var modeShort = map[corev1.PersistentVolumeAccessMode]string{
	corev1.ReadWriteOnce: "RWO", corev1.ReadOnlyMany: "ROX", corev1.ReadWriteMany: "RWX", corev1.ReadWriteOncePod: "RWOP",
}
