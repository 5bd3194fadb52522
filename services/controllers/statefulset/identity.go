package statefulset

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/strategicpatch"

	"github.com/cairn-dev/cairn/schemas"
)

// This file ports kube's stateful_set_utils.go: a pod's identity (name,
// ordinal, labels, hostname and subdomain), its claims' volumes, its
// revision, and the revision patch of a set.

// statefulPodRegex splits a pod name into its set's name and its ordinal.
var statefulPodRegex = regexp.MustCompile("(.*)-([0-9]+)$")

// parentAndOrdinal is the name of pod's set and pod's ordinal as its name
// says; ordinal is -1 for a name that is not NAME-ORDINAL.
func parentAndOrdinal(pod *corev1.Pod) (parent string, ordinal int) {
	m := statefulPodRegex.FindStringSubmatch(pod.Name)
	if len(m) < 3 {
		return "", -1
	}
	i, err := strconv.ParseInt(m[2], 10, 32)
	if err != nil {
		return m[1], -1
	}
	return m[1], int(i)
}

// ordinalOf is pod's ordinal, -1 if its name has none.
func ordinalOf(pod *corev1.Pod) int {
	_, o := parentAndOrdinal(pod)
	return o
}

// startOrdinal is the first ordinal of set (spec.ordinals.start, or 0).
func startOrdinal(set *appsv1.StatefulSet) int {
	if set.Spec.Ordinals != nil {
		return int(set.Spec.Ordinals.Start)
	}
	return 0
}

// endOrdinal is the last ordinal of set, inclusive.
func endOrdinal(set *appsv1.StatefulSet) int {
	return startOrdinal(set) + int(replicasOf(set)) - 1
}

func replicasOf(set *appsv1.StatefulSet) int32 {
	if set.Spec.Replicas == nil {
		return 1
	}
	return *set.Spec.Replicas
}

// inOrdinalRange reports whether pod's ordinal is one set keeps.
func inOrdinalRange(pod *corev1.Pod, set *appsv1.StatefulSet) bool {
	o := ordinalOf(pod)
	return o >= startOrdinal(set) && o <= endOrdinal(set)
}

// podName is the name of set's pod of that ordinal: NAME-ORDINAL.
func podName(set *appsv1.StatefulSet, ordinal int) string {
	return fmt.Sprintf("%s-%d", set.Name, ordinal)
}

// claimName is the PersistentVolumeClaim of the claim template named
// template for the pod of that ordinal: TEMPLATE-NAME-ORDINAL.
func claimName(set *appsv1.StatefulSet, template string, ordinal int) string {
	return fmt.Sprintf("%s-%s-%d", template, set.Name, ordinal)
}

// isMemberOf reports whether pod's name makes it one of set's pods.
func isMemberOf(set *appsv1.StatefulSet, pod *corev1.Pod) bool {
	parent, _ := parentAndOrdinal(pod)
	return parent == set.Name
}

// identityMatches reports whether pod has the identity of a member of set
// (kube's identityMatches).
func identityMatches(set *appsv1.StatefulSet, pod *corev1.Pod) bool {
	parent, ordinal := parentAndOrdinal(pod)
	return ordinal >= 0 && parent == set.Name && pod.Name == podName(set, ordinal) &&
		pod.Namespace == set.Namespace && pod.Labels[appsv1.StatefulSetPodNameLabel] == pod.Name
}

// storageMatches reports whether pod mounts, for each claim template of
// set, the claim of its ordinal.
func storageMatches(set *appsv1.StatefulSet, pod *corev1.Pod) bool {
	ordinal := ordinalOf(pod)
	if ordinal < 0 {
		return false
	}
	vols := make(map[string]corev1.Volume, len(pod.Spec.Volumes))
	for _, v := range pod.Spec.Volumes {
		vols[v.Name] = v
	}
	for _, t := range set.Spec.VolumeClaimTemplates {
		v, ok := vols[t.Name]
		if !ok || v.PersistentVolumeClaim == nil || v.PersistentVolumeClaim.ClaimName != claimName(set, t.Name, ordinal) {
			return false
		}
	}
	return true
}

// claimsFor are the claims of pod, keyed by their template's name, as the
// templates of set make them (kube's getPersistentVolumeClaims).
func claimsFor(set *appsv1.StatefulSet, pod *corev1.Pod) map[string]corev1.PersistentVolumeClaim {
	ordinal := ordinalOf(pod)
	out := make(map[string]corev1.PersistentVolumeClaim, len(set.Spec.VolumeClaimTemplates))
	for i := range set.Spec.VolumeClaimTemplates {
		t := &set.Spec.VolumeClaimTemplates[i]
		claim := t.DeepCopy()
		claim.Name = claimName(set, t.Name, ordinal)
		claim.Namespace = set.Namespace
		if claim.Labels == nil {
			claim.Labels = map[string]string{}
		}
		if set.Spec.Selector != nil {
			for k, v := range set.Spec.Selector.MatchLabels {
				claim.Labels[k] = v
			}
		}
		out[t.Name] = *claim
	}
	return out
}

// updateStorage points pod's volumes named after claim templates at its
// claims, replacing volumes of the same name (kube's updateStorage).
func updateStorage(set *appsv1.StatefulSet, pod *corev1.Pod) {
	if len(set.Spec.VolumeClaimTemplates) == 0 {
		return
	}
	ordinal := ordinalOf(pod)
	vols := make([]corev1.Volume, 0, len(set.Spec.VolumeClaimTemplates)+len(pod.Spec.Volumes))
	names := map[string]bool{}
	for _, t := range set.Spec.VolumeClaimTemplates {
		if names[t.Name] {
			continue
		}
		names[t.Name] = true
		vols = append(vols, corev1.Volume{Name: t.Name, VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claimName(set, t.Name, ordinal)},
		}})
	}
	for _, v := range pod.Spec.Volumes {
		if !names[v.Name] {
			vols = append(vols, v)
		}
	}
	pod.Spec.Volumes = vols
}

// initIdentity gives a new pod its identity, hostname (its name) and
// subdomain (the governing Service), so that it resolves as
// NAME-ORDINAL.SERVICE.NAMESPACE.svc once cluster DNS serves the headless
// Service. Hostname and subdomain are immutable: only set at creation.
func initIdentity(set *appsv1.StatefulSet, pod *corev1.Pod) {
	updateIdentity(set, pod)
	pod.Spec.Hostname = pod.Name
	pod.Spec.Subdomain = set.Spec.ServiceName
}

// updateIdentity sets pod's name, namespace and the pod-name and
// pod-index labels (PodIndexLabel is on by default since kube 1.32).
func updateIdentity(set *appsv1.StatefulSet, pod *corev1.Pod) {
	ordinal := ordinalOf(pod)
	pod.Name = podName(set, ordinal)
	pod.Namespace = set.Namespace
	if pod.Labels == nil {
		pod.Labels = map[string]string{}
	}
	pod.Labels[appsv1.StatefulSetPodNameLabel] = pod.Name
	pod.Labels[appsv1.PodIndexLabel] = strconv.Itoa(ordinal)
}

func isRunningAndReady(pod *corev1.Pod) bool {
	return pod.Status.Phase == corev1.PodRunning && schemas.PodReady(pod)
}

// availableAt reports whether pod is available at now (ready for
// minReadySeconds); if it is ready but not yet available, after is how
// long until it is (kube's podutil.IsPodAvailable).
func availableAt(pod *corev1.Pod, minReadySeconds int32, now time.Time) (ok bool, after time.Duration) {
	if !isRunningAndReady(pod) {
		return false, 0
	}
	if minReadySeconds == 0 {
		return true, 0
	}
	for _, c := range pod.Status.Conditions {
		if c.Type != corev1.PodReady {
			continue
		}
		if c.LastTransitionTime.IsZero() {
			return false, 0
		}
		at := c.LastTransitionTime.Add(time.Duration(minReadySeconds) * time.Second)
		if at.Before(now) {
			return true, 0
		}
		return false, at.Sub(now) + time.Millisecond
	}
	return false, 0
}

// isCreated: the apiserver has the pod (it has a phase).
func isCreated(pod *corev1.Pod) bool     { return pod.Status.Phase != "" }
func isPending(pod *corev1.Pod) bool     { return pod.Status.Phase == corev1.PodPending }
func isTerminating(pod *corev1.Pod) bool { return pod.DeletionTimestamp != nil }
func isFinished(pod *corev1.Pod) bool {
	return pod.Status.Phase == corev1.PodFailed || pod.Status.Phase == corev1.PodSucceeded
}

// isHealthy: running, ready and not terminating.
func isHealthy(pod *corev1.Pod) bool { return isRunningAndReady(pod) && !isTerminating(pod) }

// allowsBurst: Parallel pod management creates and deletes without order.
func allowsBurst(set *appsv1.StatefulSet) bool {
	return set.Spec.PodManagementPolicy == appsv1.ParallelPodManagement
}

func setPodRevision(pod *corev1.Pod, revision string) {
	if pod.Labels == nil {
		pod.Labels = map[string]string{}
	}
	pod.Labels[appsv1.StatefulSetRevisionLabel] = revision
}

// podRevision is pod's controller-revision-hash label.
func podRevision(pod *corev1.Pod) string { return pod.Labels[appsv1.StatefulSetRevisionLabel] }

// newPod is set's pod of that ordinal, from its template, with its
// identity and storage (kube's newStatefulSetPod).
func newPod(set *appsv1.StatefulSet, ordinal int) *corev1.Pod {
	t := set.Spec.Template.DeepCopy()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:            podName(set, ordinal),
			Namespace:       set.Namespace,
			Labels:          t.Labels,
			Annotations:     t.Annotations,
			Finalizers:      t.Finalizers,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(set, controllerKind)},
		},
		Spec: t.Spec,
	}
	initIdentity(set, pod)
	updateStorage(set, pod)
	return pod
}

// newVersionedPod is the pod of that ordinal at the revision it should
// have: the current one below the partition (or, without a rolling
// update, below status.currentReplicas), the update one otherwise
// (kube's newVersionedStatefulSetPod).
func newVersionedPod(currentSet, updateSet *appsv1.StatefulSet, currentRevision, updateRevision string, ordinal int) *corev1.Pod {
	ru := currentSet.Spec.UpdateStrategy.RollingUpdate
	start := startOrdinal(currentSet)
	if currentSet.Spec.UpdateStrategy.Type == appsv1.RollingUpdateStatefulSetStrategyType &&
		(ru == nil && ordinal < start+int(currentSet.Status.CurrentReplicas)) ||
		(ru != nil && ordinal < start+int(partitionOf(ru))) {
		pod := newPod(currentSet, ordinal)
		setPodRevision(pod, currentRevision)
		return pod
	}
	pod := newPod(updateSet, ordinal)
	setPodRevision(pod, updateRevision)
	return pod
}

func partitionOf(ru *appsv1.RollingUpdateStatefulSetStrategy) int32 {
	if ru == nil || ru.Partition == nil {
		return 0
	}
	return *ru.Partition
}

// revisionPatch is what a ControllerRevision of set holds: a strategic
// merge patch that replaces spec.template (kube's getPatch). kubectl
// rollout undo compares these bytes with its own encoding of the set, so
// they are made the same way: the set as JSON, then spec.template with
// "$patch": "replace", re-encoded (map keys sorted).
func revisionPatch(set *appsv1.StatefulSet) ([]byte, error) {
	data, err := json.Marshal(withTypeMeta(set))
	if err != nil {
		return nil, err
	}
	var raw map[string]any
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, err
	}
	spec, _ := raw["spec"].(map[string]any)
	template, _ := spec["template"].(map[string]any)
	if template == nil {
		return nil, fmt.Errorf("statefulset %s/%s: no spec.template", set.Namespace, set.Name)
	}
	template["$patch"] = "replace"
	return json.Marshal(map[string]any{"spec": map[string]any{"template": template}})
}

func withTypeMeta(set *appsv1.StatefulSet) *appsv1.StatefulSet {
	out := *set
	out.TypeMeta = metav1.TypeMeta{APIVersion: controllerKind.GroupVersion().String(), Kind: controllerKind.Kind}
	return &out
}

// applyRevision is set with the state revision holds restored (kube's
// ApplyRevision).
func applyRevision(set *appsv1.StatefulSet, revision *appsv1.ControllerRevision) (*appsv1.StatefulSet, error) {
	orig, err := json.Marshal(withTypeMeta(set))
	if err != nil {
		return nil, err
	}
	patched, err := strategicpatch.StrategicMergePatch(orig, revision.Data.Raw, &appsv1.StatefulSet{})
	if err != nil {
		return nil, fmt.Errorf("apply revision %s: %w", revision.Name, err)
	}
	out := &appsv1.StatefulSet{}
	if err := json.Unmarshal(patched, out); err != nil {
		return nil, fmt.Errorf("apply revision %s: %w", revision.Name, err)
	}
	return out, nil
}

// maxUnavailable is the rolling update's maxUnavailable scaled to
// replicas, at least 1 (kube's getStatefulSetMaxUnavailable).
func maxUnavailable(v *intstr.IntOrString, replicas int) (int, error) {
	n, err := intstr.GetScaledValueFromIntOrPercent(intstr.ValueOrDefault(v, intstr.FromInt32(1)), replicas, false)
	if err != nil {
		return 0, err
	}
	return max(n, 1), nil
}
