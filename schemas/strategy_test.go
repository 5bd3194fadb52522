package schemas

import (
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func TestPrepareForCreate(t *testing.T) {
	r := testRegistry()

	t.Run("pod", func(t *testing.T) {
		res := mustLookup(t, r, "", "pods")
		pod := newPod("p")
		pod.Generation = 7
		pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.1"}
		pod.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "example.com/wait"}}
		res.Default(pod)
		res.PrepareForCreate(pod)
		if pod.Generation != 1 || pod.Status.Phase != corev1.PodPending || pod.Status.PodIP != "" {
			t.Errorf("generation %d, status %+v", pod.Generation, pod.Status)
		}
		if pod.Status.QOSClass != corev1.PodQOSBestEffort {
			t.Errorf("qos %s", pod.Status.QOSClass)
		}
		if len(pod.Status.Conditions) != 1 || pod.Status.Conditions[0].Reason != "SchedulingGated" || pod.Status.Conditions[0].Status != corev1.ConditionFalse {
			t.Errorf("conditions %+v", pod.Status.Conditions)
		}
	})

	t.Run("deployment", func(t *testing.T) {
		res := mustLookup(t, r, "apps", "deployments")
		d := newDeployment("web")
		d.Status.Replicas = 3
		res.PrepareForCreate(d)
		if d.Generation != 1 || d.Status.Replicas != 0 {
			t.Errorf("generation %d status %+v", d.Generation, d.Status)
		}
	})

	t.Run("poddisruptionbudget", func(t *testing.T) {
		res := mustLookup(t, r, "policy", "poddisruptionbudgets")
		pdb := newPodDisruptionBudget("web")
		pdb.Generation = 9
		pdb.Status = policyv1.PodDisruptionBudgetStatus{
			ObservedGeneration: 3, DisruptionsAllowed: 5, ExpectedPods: 5,
			DisruptedPods: map[string]metav1.Time{"web-0": metav1.Now()},
			Conditions:    []metav1.Condition{{Type: policyv1.DisruptionAllowedCondition, Status: metav1.ConditionTrue}},
		}
		res.Default(pdb)
		res.PrepareForCreate(pdb)
		if pdb.Generation != 1 || !apiequality.Semantic.DeepEqual(pdb.Status, policyv1.PodDisruptionBudgetStatus{}) {
			t.Errorf("generation %d, status %+v", pdb.Generation, pdb.Status)
		}
	})

	t.Run("namespace", func(t *testing.T) {
		res := mustLookup(t, r, "", "namespaces")
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "a"}, Status: corev1.NamespaceStatus{Phase: corev1.NamespaceTerminating}}
		res.PrepareForCreate(ns)
		if ns.Status.Phase != corev1.NamespaceActive || !slices.Equal(ns.Spec.Finalizers, []corev1.FinalizerName{"kubernetes"}) {
			t.Errorf("%+v", ns)
		}
		ns2 := &corev1.Namespace{Spec: corev1.NamespaceSpec{Finalizers: []corev1.FinalizerName{"example.com/x", "kubernetes"}}}
		res.PrepareForCreate(ns2)
		if len(ns2.Spec.Finalizers) != 2 {
			t.Errorf("finalizers %v", ns2.Spec.Finalizers)
		}
	})

	t.Run("node keeps status", func(t *testing.T) {
		res := mustLookup(t, r, "", "nodes")
		n := &corev1.Node{Status: corev1.NodeStatus{Phase: corev1.NodeRunning}}
		res.PrepareForCreate(n)
		if n.Status.Phase != corev1.NodeRunning || n.Generation != 0 {
			t.Errorf("%+v", n)
		}
	})
}

func TestPodQOS(t *testing.T) {
	rl := func(cpu, mem string) corev1.ResourceList {
		l := corev1.ResourceList{}
		if cpu != "" {
			l[corev1.ResourceCPU] = resource.MustParse(cpu)
		}
		if mem != "" {
			l[corev1.ResourceMemory] = resource.MustParse(mem)
		}
		return l
	}
	tests := []struct {
		name     string
		req, lim corev1.ResourceList
		want     corev1.PodQOSClass
	}{
		{"best effort", nil, nil, corev1.PodQOSBestEffort},
		{"guaranteed", rl("1", "1Gi"), rl("1", "1Gi"), corev1.PodQOSGuaranteed},
		{"burstable requests only", rl("1", ""), nil, corev1.PodQOSBurstable},
		{"burstable cpu limit only", rl("1", ""), rl("1", ""), corev1.PodQOSBurstable},
		{"burstable lower request", rl("500m", "1Gi"), rl("1", "1Gi"), corev1.PodQOSBurstable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := newPod("p")
			pod.Spec.Containers[0].Resources = corev1.ResourceRequirements{Requests: tt.req, Limits: tt.lim}
			if got := podQOS(pod); got != tt.want {
				t.Errorf("got %s", got)
			}
		})
	}
}

func TestPrepareForUpdateGeneration(t *testing.T) {
	r := testRegistry()
	tests := []struct {
		name          string
		group, plural string
		obj           func() Object
		mutate        func(Object)
		want          int64
	}{
		{"pod spec change", "", "pods", func() Object { return newPod("p") },
			func(o Object) { o.(*corev1.Pod).Spec.Containers[0].Image = "nginx:2" }, 2},
		{"pod label change", "", "pods", func() Object { return newPod("p") },
			func(o Object) { o.SetLabels(map[string]string{"x": "y"}) }, 1},
		{"pod client sets generation", "", "pods", func() Object { return newPod("p") },
			func(o Object) { o.SetGeneration(42) }, 1},
		{"deployment spec", "apps", "deployments", func() Object { return newDeployment("d") },
			func(o Object) { o.(*appsv1.Deployment).Spec.Replicas = ptrTo[int32](3) }, 2},
		{"deployment annotations", "apps", "deployments", func() Object { return newDeployment("d") },
			func(o Object) { o.SetAnnotations(map[string]string{"a": "b"}) }, 2},
		{"deployment labels", "apps", "deployments", func() Object { return newDeployment("d") },
			func(o Object) { o.SetLabels(map[string]string{"a": "b"}) }, 1},
		{"replicaset annotations", "apps", "replicasets", func() Object { return newReplicaSet("r") },
			func(o Object) { o.SetAnnotations(map[string]string{"a": "b"}) }, 1},
		{"replicaset spec", "apps", "replicasets", func() Object { return newReplicaSet("r") },
			func(o Object) { o.(*appsv1.ReplicaSet).Spec.MinReadySeconds = 5 }, 2},
		{"poddisruptionbudget spec", "policy", "poddisruptionbudgets", func() Object { return newPodDisruptionBudget("b") },
			func(o Object) {
				half := intstr.FromString("50%")
				o.(*policyv1.PodDisruptionBudget).Spec.MinAvailable = &half
			}, 2},
		{"poddisruptionbudget labels and annotations", "policy", "poddisruptionbudgets", func() Object { return newPodDisruptionBudget("b") },
			func(o Object) {
				o.SetLabels(map[string]string{"a": "b"})
				o.SetAnnotations(map[string]string{"a": "b"})
			}, 1},
		{"poddisruptionbudget status through the main resource", "policy", "poddisruptionbudgets", func() Object { return newPodDisruptionBudget("b") },
			func(o Object) { o.(*policyv1.PodDisruptionBudget).Status.DisruptionsAllowed = 3 }, 1},
		{"configmap has none", "", "configmaps", func() Object {
			return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "d"}}
		}, func(o Object) { o.(*corev1.ConfigMap).Data = map[string]string{"a": "b"} }, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := mustLookup(t, r, tt.group, tt.plural)
			old := created(res, tt.obj())
			obj := old.DeepCopyObject().(Object)
			tt.mutate(obj)
			res.Default(obj)
			res.PrepareForUpdate(obj, old)
			if obj.GetGeneration() != tt.want {
				t.Errorf("generation %d, want %d", obj.GetGeneration(), tt.want)
			}
			if errs := res.ValidateUpdate(obj, old); len(errs) != 0 {
				t.Errorf("invalid: %v", errs)
			}
		})
	}
}

func TestPrepareUpdateKeepsStatus(t *testing.T) {
	r := testRegistry()
	res := mustLookup(t, r, "apps", "deployments")
	old := created(res, newDeployment("d"))
	old.Status.Replicas = 2
	d := old.DeepCopy()
	d.Status.Replicas = 9
	res.PrepareForUpdate(d, old)
	if d.Status.Replicas != 2 {
		t.Errorf("status changed through the main resource: %d", d.Status.Replicas)
	}

	pdbRes := mustLookup(t, r, "policy", "poddisruptionbudgets")
	oldPDB := created(pdbRes, newPodDisruptionBudget("b"))
	oldPDB.Status = policyv1.PodDisruptionBudgetStatus{ObservedGeneration: 1, DisruptionsAllowed: 1, ExpectedPods: 2}
	pdb := oldPDB.DeepCopy()
	pdb.Status = policyv1.PodDisruptionBudgetStatus{DisruptionsAllowed: 7}
	pdb.Spec.Selector = nil
	pdbRes.PrepareForUpdate(pdb, oldPDB)
	if !apiequality.Semantic.DeepEqual(pdb.Status, oldPDB.Status) || pdb.Generation != 2 {
		t.Errorf("budget update: generation %d, status %+v", pdb.Generation, pdb.Status)
	}

	nsRes := mustLookup(t, r, "", "namespaces")
	oldNS := created(nsRes, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "n"}})
	ns := oldNS.DeepCopy()
	ns.Spec.Finalizers = nil
	ns.Status.Phase = corev1.NamespaceTerminating
	nsRes.PrepareForUpdate(ns, oldNS)
	if len(ns.Spec.Finalizers) != 1 || ns.Status.Phase != corev1.NamespaceActive {
		t.Errorf("namespace update changed finalizers or status: %+v", ns)
	}
}

func TestPrepareForStatusUpdate(t *testing.T) {
	r := testRegistry()

	t.Run("pod", func(t *testing.T) {
		res := mustLookup(t, r, "", "pods")
		old := created(res, newPod("p"))
		pod := old.DeepCopy()
		pod.Spec.Containers[0].Image = "evil"
		pod.Status.Phase = corev1.PodRunning
		pod.Status.QOSClass = ""
		pod.Labels["by-kubelet"] = "yes"
		now := metav1.Now()
		pod.DeletionTimestamp = &now
		res.PrepareForStatusUpdate(pod, old)
		if pod.Spec.Containers[0].Image != "nginx:1.27" || pod.Status.Phase != corev1.PodRunning ||
			pod.Status.QOSClass != corev1.PodQOSBestEffort || pod.DeletionTimestamp != nil || pod.Labels["by-kubelet"] != "yes" {
			t.Errorf("%+v", pod)
		}
		if errs := res.ValidateStatus(pod, old); len(errs) != 0 {
			t.Errorf("invalid: %v", errs)
		}
		bad := pod.DeepCopy()
		bad.Status.PodIPs = []corev1.PodIP{{IP: "not-an-ip"}}
		if got := errKeys(res.ValidateStatus(bad, old)); !slices.Equal(got, []string{"FieldValueInvalid status.podIPs[0].ip"}) {
			t.Errorf("got %v", got)
		}
	})

	t.Run("deployment", func(t *testing.T) {
		res := mustLookup(t, r, "apps", "deployments")
		old := created(res, newDeployment("d"))
		old.Labels = map[string]string{"a": "b"}
		d := old.DeepCopy()
		d.Spec.Replicas = ptrTo[int32](5)
		d.Labels = nil
		d.Status = appsv1.DeploymentStatus{Replicas: 1, ReadyReplicas: 1, AvailableReplicas: 1}
		res.PrepareForStatusUpdate(d, old)
		if *d.Spec.Replicas != 1 || d.Labels["a"] != "b" || d.Status.Replicas != 1 || d.Generation != 1 {
			t.Errorf("%+v", d)
		}
		if errs := res.ValidateStatus(d, old); len(errs) != 0 {
			t.Errorf("invalid: %v", errs)
		}
		d.Status.ReadyReplicas = 4
		if got := errKeys(res.ValidateStatus(d, old)); !slices.Equal(got, []string{"FieldValueInvalid status.readyReplicas"}) {
			t.Errorf("got %v", got)
		}
	})

	t.Run("poddisruptionbudget", func(t *testing.T) {
		res := mustLookup(t, r, "policy", "poddisruptionbudgets")
		old := created(res, newPodDisruptionBudget("b"))
		pdb := old.DeepCopy()
		pdb.Spec.MinAvailable = nil
		pdb.Generation = 12
		pdb.Labels = map[string]string{"by-controller": "yes"}
		pdb.Status = policyv1.PodDisruptionBudgetStatus{ObservedGeneration: 1, DisruptionsAllowed: 1, CurrentHealthy: 2, DesiredHealthy: 1, ExpectedPods: 2}
		res.PrepareForStatusUpdate(pdb, old)
		// kube's status strategy keeps only the spec; labels may change.
		if pdb.Spec.MinAvailable == nil || pdb.Generation != 1 || pdb.Status.DisruptionsAllowed != 1 || pdb.Labels["by-controller"] != "yes" {
			t.Errorf("%+v", pdb)
		}
		if errs := res.ValidateStatus(pdb, old); len(errs) != 0 {
			t.Errorf("invalid: %v", errs)
		}
	})

	t.Run("namespace phase", func(t *testing.T) {
		res := mustLookup(t, r, "", "namespaces")
		old := created(res, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "n"}})
		ns := old.DeepCopy()
		ns.Status.Phase = corev1.NamespaceTerminating
		res.PrepareForStatusUpdate(ns, old)
		if got := errKeys(res.ValidateStatus(ns, old)); !slices.Equal(got, []string{"FieldValueInvalid status.phase"}) {
			t.Errorf("got %v", got)
		}
	})
}
