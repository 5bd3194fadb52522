package schemas

import (
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// The Resource of each served kind. Names, short names and categories are
// those kube's discovery shows. PrepareForStatusUpdate is nil for kinds
// without a status subresource.

func podResource(now func() time.Time) *Resource {
	return &Resource{
		GroupVersion: gvCore, Kind: "Pod", Plural: "pods", Singular: "pod",
		ShortNames: []string{"po"}, Categories: []string{"all"}, Namespaced: true,
		Subresources:           []string{"status", "binding", "eviction", "log", "exec", "attach", "portforward"},
		New:                    func() Object { return &corev1.Pod{} },
		NewList:                func() runtime.Object { return &corev1.PodList{} },
		Default:                defaulter(defaultPod),
		PrepareForCreate:       defaulter(preparePodCreate),
		PrepareForUpdate:       preparer(preparePodUpdate),
		PrepareForStatusUpdate: preparer(preparePodStatusUpdate),
		ValidateCreate:         createValidator(true, validatePodCreate),
		ValidateUpdate:         updateValidator(true, validatePodUpdate),
		Fields:                 fieldser(true, podFields),
		Table:                  podTable(now),
	}
}

func namespaceResource(now func() time.Time) *Resource {
	return &Resource{
		GroupVersion: gvCore, Kind: "Namespace", Plural: "namespaces", Singular: "namespace",
		ShortNames:             []string{"ns"},
		Subresources:           []string{"status", "finalize"},
		New:                    func() Object { return &corev1.Namespace{} },
		NewList:                func() runtime.Object { return &corev1.NamespaceList{} },
		Default:                defaulter(defaultNamespace),
		PrepareForCreate:       defaulter(prepareNamespaceCreate),
		PrepareForUpdate:       preparer(prepareNamespaceUpdate),
		PrepareForStatusUpdate: preparer(prepareNamespaceStatusUpdate),
		ValidateCreate:         createValidator(false, validateNamespace),
		ValidateUpdate:         updateValidator(false, validateNamespaceUpdate),
		Fields:                 fieldser(false, namespaceFields),
		Table:                  namespaceTable(now),
	}
}

func nodeResource(now func() time.Time) *Resource {
	return &Resource{
		GroupVersion: gvCore, Kind: "Node", Plural: "nodes", Singular: "node",
		ShortNames:             []string{"no"},
		Subresources:           []string{"status"},
		New:                    func() Object { return &corev1.Node{} },
		NewList:                func() runtime.Object { return &corev1.NodeList{} },
		Default:                defaulter(defaultNode),
		PrepareForCreate:       defaulter(prepareNothing[*corev1.Node]),
		PrepareForUpdate:       preparer(prepareNodeUpdate),
		PrepareForStatusUpdate: preparer(prepareNodeStatusUpdate),
		ValidateCreate:         createValidator(false, validateNode),
		ValidateUpdate:         updateValidator(false, validateNodeUpdate),
		Fields:                 fieldser(false, nodeFields),
		Table:                  nodeTable(now),
	}
}

func eventResource(now func() time.Time) *Resource {
	return &Resource{
		GroupVersion: gvCore, Kind: "Event", Plural: "events", Singular: "event",
		ShortNames: []string{"ev"}, Namespaced: true,
		New:              func() Object { return &corev1.Event{} },
		NewList:          func() runtime.Object { return &corev1.EventList{} },
		Default:          defaulter(defaultEvent),
		PrepareForCreate: defaulter(prepareNothing[*corev1.Event]),
		PrepareForUpdate: preparer(prepareKeepGeneration[*corev1.Event]),
		ValidateCreate:   createValidator(true, validateEvent),
		ValidateUpdate:   updateValidator(true, validateEventUpdate),
		Fields:           fieldser(true, eventFields),
		Table:            eventTable(now),
	}
}

func configMapResource(now func() time.Time) *Resource {
	return &Resource{
		GroupVersion: gvCore, Kind: "ConfigMap", Plural: "configmaps", Singular: "configmap",
		ShortNames: []string{"cm"}, Namespaced: true,
		New:              func() Object { return &corev1.ConfigMap{} },
		NewList:          func() runtime.Object { return &corev1.ConfigMapList{} },
		Default:          defaulter(defaultConfigMap),
		PrepareForCreate: defaulter(prepareNothing[*corev1.ConfigMap]),
		PrepareForUpdate: preparer(prepareKeepGeneration[*corev1.ConfigMap]),
		ValidateCreate:   createValidator(true, validateConfigMap),
		ValidateUpdate:   updateValidator(true, validateConfigMapUpdate),
		Fields:           fieldser[*corev1.ConfigMap](true, nil),
		Table:            configMapTable(now),
	}
}

func secretResource(now func() time.Time) *Resource {
	return &Resource{
		GroupVersion: gvCore, Kind: "Secret", Plural: "secrets", Singular: "secret",
		Namespaced:       true,
		New:              func() Object { return &corev1.Secret{} },
		NewList:          func() runtime.Object { return &corev1.SecretList{} },
		Default:          defaulter(defaultSecret),
		PrepareForCreate: defaulter(prepareNothing[*corev1.Secret]),
		PrepareForUpdate: preparer(prepareKeepGeneration[*corev1.Secret]),
		ValidateCreate:   createValidator(true, validateSecret),
		ValidateUpdate:   updateValidator(true, validateSecretUpdate),
		Fields:           fieldser(true, secretFields),
		Table:            secretTable(now),
	}
}

func deploymentResource(now func() time.Time) *Resource {
	return &Resource{
		GroupVersion: gvApps, Kind: "Deployment", Plural: "deployments", Singular: "deployment",
		ShortNames: []string{"deploy"}, Categories: []string{"all"}, Namespaced: true,
		Subresources:           []string{"status", "scale"},
		New:                    func() Object { return &appsv1.Deployment{} },
		NewList:                func() runtime.Object { return &appsv1.DeploymentList{} },
		Default:                defaulter(defaultDeployment),
		PrepareForCreate:       defaulter(prepareDeploymentCreate),
		PrepareForUpdate:       preparer(prepareDeploymentUpdate),
		PrepareForStatusUpdate: preparer(prepareDeploymentStatusUpdate),
		ValidateCreate:         createValidator(true, validateDeployment),
		ValidateUpdate:         updateValidator(true, validateDeploymentUpdate),
		Fields:                 fieldser[*appsv1.Deployment](true, nil),
		Table:                  deploymentTable(now),
	}
}

func replicaSetResource(now func() time.Time) *Resource {
	strategy := specAndStatus(replicaSetParts)
	return &Resource{
		GroupVersion: gvApps, Kind: "ReplicaSet", Plural: "replicasets", Singular: "replicaset",
		ShortNames: []string{"rs"}, Categories: []string{"all"}, Namespaced: true,
		Subresources:           []string{"status", "scale"},
		New:                    func() Object { return &appsv1.ReplicaSet{} },
		NewList:                func() runtime.Object { return &appsv1.ReplicaSetList{} },
		Default:                defaulter(defaultReplicaSet),
		PrepareForCreate:       defaulter(strategy.create),
		PrepareForUpdate:       preparer(strategy.update),
		PrepareForStatusUpdate: preparer(strategy.statusUpdate),
		ValidateCreate:         createValidator(true, validateReplicaSet),
		ValidateUpdate:         updateValidator(true, validateReplicaSetUpdate),
		Fields:                 fieldser(true, replicaSetFields),
		Table:                  replicaSetTable(now),
	}
}

func podDisruptionBudgetResource(now func() time.Time) *Resource {
	strategy := specAndStatus(podDisruptionBudgetParts)
	return &Resource{
		GroupVersion: gvPolicy, Kind: "PodDisruptionBudget", Plural: "poddisruptionbudgets", Singular: "poddisruptionbudget",
		ShortNames: []string{"pdb"}, Namespaced: true,
		Subresources:           []string{"status"},
		New:                    func() Object { return &policyv1.PodDisruptionBudget{} },
		NewList:                func() runtime.Object { return &policyv1.PodDisruptionBudgetList{} },
		Default:                defaulter(defaultPodDisruptionBudget),
		PrepareForCreate:       defaulter(strategy.create),
		PrepareForUpdate:       preparer(strategy.update),
		PrepareForStatusUpdate: preparer(strategy.statusUpdate),
		ValidateCreate:         createValidator(true, validatePodDisruptionBudget),
		ValidateUpdate:         updateValidator(true, validatePodDisruptionBudgetUpdate),
		Fields:                 fieldser[*policyv1.PodDisruptionBudget](true, nil),
		Table:                  podDisruptionBudgetTable(now),
	}
}

func leaseResource(now func() time.Time) *Resource {
	return &Resource{
		GroupVersion: gvCoordination, Kind: "Lease", Plural: "leases", Singular: "lease",
		Namespaced:       true,
		New:              func() Object { return &coordinationv1.Lease{} },
		NewList:          func() runtime.Object { return &coordinationv1.LeaseList{} },
		Default:          defaulter(defaultLease),
		PrepareForCreate: defaulter(prepareNothing[*coordinationv1.Lease]),
		PrepareForUpdate: preparer(prepareKeepGeneration[*coordinationv1.Lease]),
		ValidateCreate:   createValidator(true, validateLease),
		ValidateUpdate:   updateValidator(true, validateLeaseUpdate),
		Fields:           fieldser[*coordinationv1.Lease](true, nil),
		Table:            leaseTable(now),
	}
}

func priorityClassResource(now func() time.Time) *Resource {
	return &Resource{
		GroupVersion: gvScheduling, Kind: "PriorityClass", Plural: "priorityclasses", Singular: "priorityclass",
		ShortNames:       []string{"pc"},
		New:              func() Object { return &schedulingv1.PriorityClass{} },
		NewList:          func() runtime.Object { return &schedulingv1.PriorityClassList{} },
		Default:          defaulter(defaultPriorityClass),
		PrepareForCreate: defaulter(prepareNothing[*schedulingv1.PriorityClass]),
		PrepareForUpdate: preparer(prepareKeepGeneration[*schedulingv1.PriorityClass]),
		ValidateCreate:   createValidator(false, validatePriorityClass),
		ValidateUpdate:   updateValidator(false, validatePriorityClassUpdate),
		Fields:           fieldser[*schedulingv1.PriorityClass](false, nil),
		Table:            priorityClassTable(now),
	}
}

// validateStatusUpdate returns the validation kube's status strategy runs
// for obj's kind, and ok=false for kinds without a status subresource.
func validateStatusUpdate(obj, old Object) (field.ErrorList, bool) {
	var errs field.ErrorList
	switch o := obj.(type) {
	case *corev1.Pod:
		errs = validatePodStatusUpdate(o, old.(*corev1.Pod))
	case *corev1.Namespace:
		errs = validateNamespaceStatusUpdate(o, old.(*corev1.Namespace))
	case *corev1.Node:
		errs = validateNodeUpdate(o, old.(*corev1.Node))
	case *appsv1.Deployment:
		errs = validateDeploymentStatusUpdate(o, old.(*appsv1.Deployment))
	case *appsv1.ReplicaSet:
		errs = validateReplicaSetStatusUpdate(o, old.(*appsv1.ReplicaSet))
	case *corev1.Service:
		errs = validateServiceStatusUpdate(o, old.(*corev1.Service))
	case *policyv1.PodDisruptionBudget:
		errs = validatePodDisruptionBudgetStatusUpdate(o, old.(*policyv1.PodDisruptionBudget))
	default:
		return workloadStatusUpdate(obj, old)
	}
	return errs, true
}
