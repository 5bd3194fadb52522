package podcontrol

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/cairn-dev/cairn/events"
	"github.com/cairn-dev/cairn/events/consumer"
)

// PodEvents routes the events of a pod cache to the owners of one kind
// that make pods (kube's addPod, updatePod and deletePod of the
// ReplicaSet and DaemonSet controllers): a pod's controller of that kind
// is queued and its expectations lowered; an orphan queues every owner
// that could adopt it.
type PodEvents struct {
	// Kind is the owners' kind: only controller references of its group
	// and kind count.
	Kind schema.GroupVersionKind
	// Expect is lowered as creations and deletions are seen.
	Expect *Expectations
	// Enqueue queues an owner's key with the event.
	Enqueue func(key string, ev *events.Event)
	// Adopters is the keys of the owners whose selector matches an
	// orphan pod.
	Adopters func(pod *corev1.Pod) []string
}

// Handler is the cache handler that does it.
func (h PodEvents) Handler() consumer.Handler[*corev1.Pod] {
	return consumer.Handler[*corev1.Pod]{OnAdd: h.add, OnUpdate: h.update, OnDelete: h.delete}
}

// ControllerOf is the key and reference of pod's controller if it is of
// kind (group and kind compared, not version).
func ControllerOf(obj metav1.Object, kind schema.GroupVersionKind) (key string, ref *metav1.OwnerReference) {
	ref = metav1.GetControllerOfNoCopy(obj)
	if ref == nil || ref.Kind != kind.Kind {
		return "", nil
	}
	if gv, err := schema.ParseGroupVersion(ref.APIVersion); err != nil || gv.Group != kind.Group {
		return "", nil
	}
	return consumer.Key(obj.GetNamespace(), ref.Name), ref
}

func (h PodEvents) add(pod *corev1.Pod, ev *events.Event) {
	if pod.DeletionTimestamp != nil {
		// Seen for the first time already terminating (a snapshot after a
		// restart): it is a deletion, not a creation.
		h.delete(pod, ev)
		return
	}
	if key, ref := ControllerOf(pod, h.Kind); ref != nil {
		h.Expect.CreationObserved(key, ref.UID)
		h.Enqueue(key, ev)
		return
	}
	if metav1.GetControllerOfNoCopy(pod) == nil {
		h.adopters(pod, ev)
	}
}

func (h PodEvents) update(old, pod *corev1.Pod, ev *events.Event) {
	if old.ResourceVersion == pod.ResourceVersion {
		return
	}
	labelsChanged := !labels.Equals(old.Labels, pod.Labels)
	if pod.DeletionTimestamp != nil {
		// Graceful deletion: the pod stops counting now, and the owner may
		// replace it without waiting for the DELETED event.
		h.delete(pod, ev)
		if labelsChanged {
			h.delete(old, ev)
		}
		return
	}
	oldKey, oldRef := ControllerOf(old, h.Kind)
	key, ref := ControllerOf(pod, h.Kind)
	refChanged := !sameRef(oldRef, ref)
	if refChanged && oldRef != nil {
		h.Enqueue(oldKey, ev)
	}
	if ref != nil {
		h.Enqueue(key, ev)
		return
	}
	if metav1.GetControllerOfNoCopy(pod) == nil && (labelsChanged || refChanged) {
		h.adopters(pod, ev)
	}
}

func (h PodEvents) delete(pod *corev1.Pod, ev *events.Event) {
	if key, ref := ControllerOf(pod, h.Kind); ref != nil {
		h.Expect.DeletionObserved(key, ref.UID, pod.UID)
		h.Enqueue(key, ev)
	}
}

func (h PodEvents) adopters(pod *corev1.Pod, ev *events.Event) {
	for _, key := range h.Adopters(pod) {
		h.Enqueue(key, ev)
	}
}

func sameRef(a, b *metav1.OwnerReference) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.UID == b.UID
}
