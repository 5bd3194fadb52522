package schemas

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// This file ports the PrepareForCreate / PrepareForUpdate of the registry
// strategies (pkg/registry/<group>/<resource>/strategy.go). Every update
// func first copies the old generation, as rest.BeforeUpdate does before it
// calls the strategy, so clients cannot set metadata.generation.

func keepGeneration(obj, old metav1.Object) { obj.SetGeneration(old.GetGeneration()) }

// Pods.

func preparePodCreate(pod *corev1.Pod) {
	pod.Generation = 1
	pod.Status = corev1.PodStatus{
		Phase:    corev1.PodPending,
		QOSClass: podQOS(pod),
	}
	applySchedulingGatedCondition(pod)
}

func preparePodUpdate(pod, old *corev1.Pod) {
	keepGeneration(pod, old)
	pod.Status = old.Status
	if !apiequality.Semantic.DeepEqual(pod.Spec, old.Spec) {
		pod.Generation++
	}
}

func preparePodStatusUpdate(pod, old *corev1.Pod) {
	keepGeneration(pod, old)
	pod.Spec = old.Spec
	// The status endpoint cannot set a deletion timestamp (kube clears it and
	// BeforeUpdate restores the old one) nor touch owner references, which
	// old kubelets corrupted.
	pod.DeletionTimestamp = old.DeletionTimestamp
	pod.OwnerReferences = old.OwnerReferences
	// The QoS class is immutable; backfill it when a kubelet dropped it.
	if pod.Status.QOSClass == "" {
		pod.Status.QOSClass = old.Status.QOSClass
	}
	preserveObservedGeneration(pod, old)
}

// preserveObservedGeneration keeps observedGeneration values a client
// cleared, in the status and in its conditions (per condition type, in
// order).
func preserveObservedGeneration(pod, old *corev1.Pod) {
	if pod.Status.ObservedGeneration == 0 {
		pod.Status.ObservedGeneration = old.Status.ObservedGeneration
	}
	oldGens := map[corev1.PodConditionType][]int64{}
	for _, c := range old.Status.Conditions {
		oldGens[c.Type] = append(oldGens[c.Type], c.ObservedGeneration)
	}
	for i, c := range pod.Status.Conditions {
		var g int64
		if gens := oldGens[c.Type]; len(gens) > 0 {
			g = gens[0]
			oldGens[c.Type] = gens[1:]
		}
		if c.ObservedGeneration == 0 {
			pod.Status.Conditions[i].ObservedGeneration = g
		}
	}
}

// applySchedulingGatedCondition adds {type:PodScheduled,
// reason:SchedulingGated} to a new pod with scheduling gates.
func applySchedulingGatedCondition(pod *corev1.Pod) {
	if len(pod.Spec.SchedulingGates) == 0 {
		return
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled {
			return
		}
	}
	pod.Status.Conditions = append(pod.Status.Conditions, corev1.PodCondition{
		Type:               corev1.PodScheduled,
		Status:             corev1.ConditionFalse,
		Reason:             corev1.PodReasonSchedulingGated,
		Message:            "Scheduling is blocked due to non-empty scheduling gates",
		LastTransitionTime: metav1.Now(),
	})
}

// podQOS is ComputePodQOS: Guaranteed when every container has cpu and
// memory limits equal to its requests, BestEffort when nothing is
// requested or limited, Burstable otherwise. Pod-level resources, when
// set, take the place of the containers'.
func podQOS(pod *corev1.Pod) corev1.PodQOSClass {
	requests := corev1.ResourceList{}
	limits := corev1.ResourceList{}
	zero := resource.MustParse("0")
	guaranteed := true
	add := func(into corev1.ResourceList, from corev1.ResourceList, found map[corev1.ResourceName]bool) {
		for name, q := range from {
			if name != corev1.ResourceCPU && name != corev1.ResourceMemory {
				continue
			}
			if q.Cmp(zero) != 1 {
				continue
			}
			if found != nil {
				found[name] = true
			}
			d := q.DeepCopy()
			if prev, ok := into[name]; ok {
				d.Add(prev)
			}
			into[name] = d
		}
	}
	if r := pod.Spec.Resources; r != nil && (len(r.Requests) > 0 || len(r.Limits) > 0) {
		found := map[corev1.ResourceName]bool{}
		add(requests, r.Requests, nil)
		add(limits, r.Limits, found)
		if !found[corev1.ResourceCPU] || !found[corev1.ResourceMemory] {
			guaranteed = false
		}
	} else {
		all := append(append([]corev1.Container(nil), pod.Spec.Containers...), pod.Spec.InitContainers...)
		for _, c := range all {
			found := map[corev1.ResourceName]bool{}
			add(requests, c.Resources.Requests, nil)
			add(limits, c.Resources.Limits, found)
			if !found[corev1.ResourceCPU] || !found[corev1.ResourceMemory] {
				guaranteed = false
			}
		}
	}
	if len(requests) == 0 && len(limits) == 0 {
		return corev1.PodQOSBestEffort
	}
	if guaranteed {
		for name, req := range requests {
			if lim, ok := limits[name]; !ok || lim.Cmp(req) != 0 {
				guaranteed = false
				break
			}
		}
	}
	if guaranteed && len(requests) == len(limits) {
		return corev1.PodQOSGuaranteed
	}
	return corev1.PodQOSBurstable
}

// Deployments.

func prepareDeploymentCreate(d *appsv1.Deployment) {
	d.Status = appsv1.DeploymentStatus{}
	d.Generation = 1
}

func prepareDeploymentUpdate(d, old *appsv1.Deployment) {
	keepGeneration(d, old)
	d.Status = old.Status
	// Spec changes bump the generation so scaling and template changes can
	// be told apart; annotation changes too, because annotations are copied
	// to the replica sets.
	if !apiequality.Semantic.DeepEqual(d.Spec, old.Spec) ||
		!apiequality.Semantic.DeepEqual(d.Annotations, old.Annotations) {
		d.Generation = old.Generation + 1
	}
}

func prepareDeploymentStatusUpdate(d, old *appsv1.Deployment) {
	keepGeneration(d, old)
	d.Spec = old.Spec
	d.Labels = old.Labels
}

// Replica sets and pod disruption budgets have the plainest strategy, as
// kube's replicaset and poddisruptionbudget strategies do: a controller
// owns the status, which only the status subresource writes (and it may
// change anything but the spec, metadata included), and the generation
// counts spec changes.

// specStatus is that strategy for a kind T, given a func that returns an
// object's spec and status.
type specStatus[T Object, Spec, Status any] func(T) (*Spec, *Status)

// specAndStatus makes the specStatus strategy of parts' kind.
func specAndStatus[T Object, Spec, Status any](parts func(T) (*Spec, *Status)) specStatus[T, Spec, Status] {
	return parts
}

func (parts specStatus[T, Spec, Status]) create(obj T) {
	_, status := parts(obj)
	var empty Status
	*status = empty
	obj.SetGeneration(1)
}

func (parts specStatus[T, Spec, Status]) update(obj, old T) {
	keepGeneration(obj, old)
	spec, status := parts(obj)
	oldSpec, oldStatus := parts(old)
	*status = *oldStatus
	if !apiequality.Semantic.DeepEqual(*spec, *oldSpec) {
		obj.SetGeneration(old.GetGeneration() + 1)
	}
}

func (parts specStatus[T, Spec, Status]) statusUpdate(obj, old T) {
	keepGeneration(obj, old)
	spec, _ := parts(obj)
	oldSpec, _ := parts(old)
	*spec = *oldSpec
}

func replicaSetParts(rs *appsv1.ReplicaSet) (*appsv1.ReplicaSetSpec, *appsv1.ReplicaSetStatus) {
	return &rs.Spec, &rs.Status
}

func podDisruptionBudgetParts(pdb *policyv1.PodDisruptionBudget) (*policyv1.PodDisruptionBudgetSpec, *policyv1.PodDisruptionBudgetStatus) {
	return &pdb.Spec, &pdb.Status
}

// Namespaces.

func prepareNamespaceCreate(ns *corev1.Namespace) {
	ns.Status = corev1.NamespaceStatus{Phase: corev1.NamespaceActive}
	// On create the kubernetes finalizer is required; it is not a default
	// because it may be removed over the namespace's life.
	for _, f := range ns.Spec.Finalizers {
		if f == corev1.FinalizerKubernetes {
			return
		}
	}
	ns.Spec.Finalizers = append(ns.Spec.Finalizers, corev1.FinalizerKubernetes)
}

func prepareNamespaceUpdate(ns, old *corev1.Namespace) {
	keepGeneration(ns, old)
	ns.Spec.Finalizers = old.Spec.Finalizers
	ns.Status = old.Status
}

func prepareNamespaceStatusUpdate(ns, old *corev1.Namespace) {
	keepGeneration(ns, old)
	ns.Spec = old.Spec
}

// Nodes keep their status on create: the kubelet registers a node with it.

func prepareNodeUpdate(n, old *corev1.Node) {
	keepGeneration(n, old)
	n.Status = old.Status
}

func prepareNodeStatusUpdate(n, old *corev1.Node) {
	keepGeneration(n, old)
	n.Spec = old.Spec
}

// Kinds without status or generation: configmaps, secrets, events, leases,
// priorityclasses.

func prepareNothing[T Object](T) {}

func prepareKeepGeneration[T Object](obj, old T) { keepGeneration(obj, old) }
