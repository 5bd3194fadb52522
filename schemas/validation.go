package schemas

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// This file ports the validation of the non-pod kinds from
// pkg/apis/{core,apps,coordination,policy,scheduling}/validation.

var metaPath = field.NewPath("metadata")

// Namespaces.

func validateNamespace(ns *corev1.Namespace) field.ErrorList {
	errs := validateObjectMeta(&ns.ObjectMeta, false, apivalidation.ValidateNamespaceName, metaPath)
	for i := range ns.Spec.Finalizers {
		errs = append(errs, validateFinalizerName(string(ns.Spec.Finalizers[i]), field.NewPath("spec", "finalizers"))...)
	}
	return errs
}

// validateFinalizerName is the core finalizer check: qualified names, and a
// name without a domain must be one of the standard ones.
func validateFinalizerName(name string, fldPath *field.Path) field.ErrorList {
	errs := apivalidation.ValidateFinalizerName(name, fldPath)
	return append(errs, validateKubeFinalizerName(name, fldPath)...)
}

var standardFinalizers = sets.New(string(corev1.FinalizerKubernetes), metav1.FinalizerOrphanDependents, metav1.FinalizerDeleteDependents)

func validateKubeFinalizerName(name string, fldPath *field.Path) field.ErrorList {
	if len(strings.Split(name, "/")) == 1 && !standardFinalizers.Has(name) {
		return field.ErrorList{field.Invalid(fldPath, name, "name is neither a standard finalizer name nor is it fully qualified")}
	}
	return nil
}

// validateObjectMeta is core's ValidateObjectMeta: apimachinery's checks
// plus the finalizer names.
func validateObjectMeta(m *metav1.ObjectMeta, namespaced bool, nameFn apivalidation.ValidateNameFunc, fldPath *field.Path) field.ErrorList {
	errs := apivalidation.ValidateObjectMeta(m, namespaced, nameFn, fldPath)
	for i := range m.Finalizers {
		errs = append(errs, validateKubeFinalizerName(m.Finalizers[i], fldPath.Child("finalizers").Index(i))...)
	}
	return errs
}

// validateObjectMetaUpdate is core's ValidateObjectMetaUpdate.
func validateObjectMetaUpdate(m, old *metav1.ObjectMeta, fldPath *field.Path) field.ErrorList {
	errs := apivalidation.ValidateObjectMetaUpdate(m, old, fldPath)
	for i := range m.Finalizers {
		errs = append(errs, validateKubeFinalizerName(m.Finalizers[i], fldPath.Child("finalizers").Index(i))...)
	}
	return errs
}

func validateNamespaceUpdate(ns, old *corev1.Namespace) field.ErrorList {
	return validateObjectMetaUpdate(&ns.ObjectMeta, &old.ObjectMeta, metaPath)
}

func validateNamespaceStatusUpdate(ns, old *corev1.Namespace) field.ErrorList {
	errs := validateObjectMetaUpdate(&ns.ObjectMeta, &old.ObjectMeta, metaPath)
	phase := field.NewPath("status", "phase")
	if ns.DeletionTimestamp.IsZero() {
		if ns.Status.Phase != corev1.NamespaceActive {
			errs = append(errs, field.Invalid(phase, ns.Status.Phase, "may only be 'Active' if `deletionTimestamp` is empty"))
		}
	} else if ns.Status.Phase != corev1.NamespaceTerminating {
		errs = append(errs, field.Invalid(phase, ns.Status.Phase, "may only be 'Terminating' if `deletionTimestamp` is not empty"))
	}
	return errs
}

// Nodes.

func validateNode(n *corev1.Node) field.ErrorList {
	errs := validateObjectMeta(&n.ObjectMeta, false, apivalidation.NameIsDNSSubdomain, metaPath)
	if len(n.Spec.Taints) > 0 {
		// kube reports create-time taint errors under metadata.taints.
		errs = append(errs, validateNodeTaints(n.Spec.Taints, metaPath.Child("taints"))...)
	}
	errs = append(errs, validateNodeResources(n)...)
	podCIDRs := field.NewPath("spec", "podCIDRs")
	for i, c := range n.Spec.PodCIDRs {
		errs = append(errs, validation.IsValidCIDRForLegacyField(podCIDRs.Index(i), c, false, nil)...)
	}
	seen := sets.New[string]()
	for i, c := range n.Spec.PodCIDRs {
		if seen.Has(c) {
			errs = append(errs, field.Duplicate(podCIDRs.Index(i), c))
		}
		seen.Insert(c)
	}
	if len(n.Spec.PodCIDRs) > 2 {
		errs = append(errs, field.Invalid(podCIDRs, n.Spec.PodCIDRs, "may specify no more than one CIDR for each IP family"))
	}
	return errs
}

func validateNodeUpdate(n, old *corev1.Node) field.ErrorList {
	errs := validateObjectMetaUpdate(&n.ObjectMeta, &old.ObjectMeta, metaPath)
	errs = append(errs, validateNodeResources(n)...)
	seen := map[corev1.NodeAddress]bool{}
	for i, a := range n.Status.Addresses {
		if seen[a] {
			errs = append(errs, field.Duplicate(field.NewPath("status", "addresses").Index(i), a))
		}
		seen[a] = true
	}
	// The controller manager may set a CIDR on a node that has none.
	if len(old.Spec.PodCIDRs) > 0 && !reflect.DeepEqual(old.Spec.PodCIDRs, n.Spec.PodCIDRs) {
		errs = append(errs, field.Forbidden(field.NewPath("spec", "podCIDRs"), "node updates may not change podCIDR except from \"\" to valid"))
	}
	if old.Spec.ProviderID != "" && old.Spec.ProviderID != n.Spec.ProviderID {
		errs = append(errs, field.Forbidden(field.NewPath("spec", "providerID"), "node updates may not change providerID except from \"\" to valid"))
	}
	if len(n.Spec.Taints) > 0 {
		errs = append(errs, validateNodeTaints(n.Spec.Taints, field.NewPath("spec", "taints"))...)
	}
	if n.Spec.DoNotUseExternalID != old.Spec.DoNotUseExternalID {
		errs = append(errs, field.Forbidden(field.NewPath("spec", "externalID"), "may not be updated"))
	}
	return errs
}

func validateNodeResources(n *corev1.Node) field.ErrorList {
	var errs field.ErrorList
	for _, part := range []struct {
		name string
		l    corev1.ResourceList
	}{{"capacity", n.Status.Capacity}, {"allocatable", n.Status.Allocatable}} {
		for _, k := range sortedKeys(resourceNames(part.l)) {
			q := part.l[corev1.ResourceName(k)]
			p := field.NewPath("status", part.name).Key(k)
			errs = append(errs, validateQualifiedName(k, p)...)
			if q.Cmp(resource.Quantity{}) < 0 {
				errs = append(errs, field.Invalid(p, q.String(), apivalidation.IsNegativeErrorMsg))
			}
		}
	}
	return errs
}

func validateNodeTaints(taints []corev1.Taint, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	unique := map[corev1.TaintEffect]sets.Set[string]{}
	for i, t := range taints {
		idx := fldPath.Index(i)
		errs = append(errs, metav1validation.ValidateLabelName(t.Key, idx.Child("key"))...)
		if msgs := validation.IsValidLabelValue(t.Value); len(msgs) != 0 {
			errs = append(errs, field.Invalid(idx.Child("value"), t.Value, strings.Join(msgs, ";")))
		}
		errs = append(errs, validateTaintEffect(t.Effect, false, idx.Child("effect"))...)
		if unique[t.Effect].Has(t.Key) {
			dup := field.Duplicate(idx, t)
			dup.Detail = "taints must be unique by key and effect pair"
			errs = append(errs, dup)
			continue
		}
		if unique[t.Effect] == nil {
			unique[t.Effect] = sets.New[string]()
		}
		unique[t.Effect].Insert(t.Key)
	}
	return errs
}

// Secrets and config maps.

func validateSecret(s *corev1.Secret) field.ErrorList {
	errs := validateObjectMeta(&s.ObjectMeta, true, apivalidation.NameIsDNSSubdomain, metaPath)
	dataPath := field.NewPath("data")
	total := 0
	for _, k := range sortedKeys(s.Data) {
		for _, msg := range validation.IsConfigMapKey(k) {
			errs = append(errs, field.Invalid(dataPath.Key(k), k, msg))
		}
		total += len(s.Data[k])
	}
	if total > corev1.MaxSecretSize {
		errs = append(errs, field.TooLong(dataPath, "", corev1.MaxSecretSize))
	}
	requireKey := func(key string) {
		if _, ok := s.Data[key]; !ok {
			errs = append(errs, field.Required(dataPath.Key(key), ""))
		}
	}
	requireJSON := func(key string) {
		b, ok := s.Data[key]
		if !ok {
			errs = append(errs, field.Required(dataPath.Key(key), ""))
			return
		}
		if err := json.Unmarshal(b, &map[string]any{}); err != nil {
			errs = append(errs, field.Invalid(dataPath.Key(key), "<secret contents redacted>", err.Error()))
		}
	}
	switch s.Type {
	case corev1.SecretTypeServiceAccountToken:
		if s.Annotations[corev1.ServiceAccountNameKey] == "" {
			errs = append(errs, field.Required(metaPath.Child("annotations").Key(corev1.ServiceAccountNameKey), ""))
		}
	case corev1.SecretTypeDockercfg:
		requireJSON(corev1.DockerConfigKey)
	case corev1.SecretTypeDockerConfigJson:
		requireJSON(corev1.DockerConfigJsonKey)
	case corev1.SecretTypeBasicAuth:
		_, user := s.Data[corev1.BasicAuthUsernameKey]
		_, pass := s.Data[corev1.BasicAuthPasswordKey]
		if !user && !pass {
			requireKey(corev1.BasicAuthUsernameKey)
			requireKey(corev1.BasicAuthPasswordKey)
		}
	case corev1.SecretTypeSSHAuth:
		if len(s.Data[corev1.SSHAuthPrivateKey]) == 0 {
			errs = append(errs, field.Required(dataPath.Key(corev1.SSHAuthPrivateKey), ""))
		}
	case corev1.SecretTypeTLS:
		requireKey(corev1.TLSCertKey)
		requireKey(corev1.TLSPrivateKeyKey)
	}
	return errs
}

func validateSecretUpdate(s, old *corev1.Secret) field.ErrorList {
	errs := validateObjectMetaUpdate(&s.ObjectMeta, &old.ObjectMeta, metaPath)
	errs = append(errs, apivalidation.ValidateImmutableField(s.Type, old.Type, field.NewPath("type"))...)
	if old.Immutable != nil && *old.Immutable {
		if s.Immutable == nil || !*s.Immutable {
			errs = append(errs, field.Forbidden(field.NewPath("immutable"), "field is immutable when `immutable` is set"))
		}
		if !reflect.DeepEqual(s.Data, old.Data) {
			errs = append(errs, field.Forbidden(field.NewPath("data"), "field is immutable when `immutable` is set"))
		}
	}
	return append(errs, validateSecret(s)...)
}

func validateConfigMap(cm *corev1.ConfigMap) field.ErrorList {
	errs := validateObjectMeta(&cm.ObjectMeta, true, apivalidation.NameIsDNSSubdomain, metaPath)
	total := 0
	for _, k := range sortedKeys(cm.Data) {
		p := field.NewPath("data").Key(k)
		for _, msg := range validation.IsConfigMapKey(k) {
			errs = append(errs, field.Invalid(p, k, msg))
		}
		if _, dup := cm.BinaryData[k]; dup {
			errs = append(errs, field.Invalid(p, k, "duplicate of key present in binaryData"))
		}
		total += len(cm.Data[k])
	}
	for _, k := range sortedKeys(cm.BinaryData) {
		for _, msg := range validation.IsConfigMapKey(k) {
			errs = append(errs, field.Invalid(field.NewPath("binaryData").Key(k), k, msg))
		}
		total += len(cm.BinaryData[k])
	}
	if total > corev1.MaxSecretSize {
		// The empty path means the whole object.
		errs = append(errs, field.TooLong(field.NewPath(""), "", corev1.MaxSecretSize))
	}
	return errs
}

func validateConfigMapUpdate(cm, old *corev1.ConfigMap) field.ErrorList {
	errs := validateObjectMetaUpdate(&cm.ObjectMeta, &old.ObjectMeta, metaPath)
	if old.Immutable != nil && *old.Immutable {
		if cm.Immutable == nil || !*cm.Immutable {
			errs = append(errs, field.Forbidden(field.NewPath("immutable"), "field is immutable when `immutable` is set"))
		}
		if !reflect.DeepEqual(cm.Data, old.Data) {
			errs = append(errs, field.Forbidden(field.NewPath("data"), "field is immutable when `immutable` is set"))
		}
		if !reflect.DeepEqual(cm.BinaryData, old.BinaryData) {
			errs = append(errs, field.Forbidden(field.NewPath("binaryData"), "field is immutable when `immutable` is set"))
		}
	}
	return append(errs, validateConfigMap(cm)...)
}

// Events, as the core/v1 API validates them (legacyValidateEvent; the
// strict checks only apply to events.k8s.io/v1).

const (
	reportingInstanceLengthLimit = 128
	actionLengthLimit            = 128
	reasonLengthLimit            = 128
	noteLengthLimit              = 1024
)

func validateEvent(e *corev1.Event) field.ErrorList {
	var errs field.ErrorList
	nsPath := field.NewPath("involvedObject", "namespace")
	if e.EventTime.IsZero() {
		if e.InvolvedObject.Namespace == "" {
			// An empty involved namespace must go with an empty or "default"
			// event namespace, for old clients.
			if e.Namespace != metav1.NamespaceNone && e.Namespace != metav1.NamespaceDefault {
				errs = append(errs, field.Invalid(nsPath, e.InvolvedObject.Namespace, "does not match event.namespace"))
			}
		} else if e.Namespace != e.InvolvedObject.Namespace {
			errs = append(errs, field.Invalid(nsPath, e.InvolvedObject.Namespace, "does not match event.namespace"))
		}
	} else {
		if e.InvolvedObject.Namespace == "" && e.Namespace != metav1.NamespaceDefault && e.Namespace != metav1.NamespaceSystem {
			errs = append(errs, field.Invalid(nsPath, e.InvolvedObject.Namespace, "does not match event.namespace"))
		}
		rc := field.NewPath("reportingComponent")
		if e.ReportingController == "" {
			errs = append(errs, field.Required(rc, ""))
		}
		errs = append(errs, validateQualifiedName(e.ReportingController, rc)...)
		if e.ReportingInstance == "" {
			errs = append(errs, field.Required(field.NewPath("reportingInstance"), ""))
		}
		if len(e.ReportingInstance) > reportingInstanceLengthLimit {
			errs = append(errs, field.Invalid(field.NewPath("reportingInstance"), "", fmt.Sprintf("can have at most %v characters", reportingInstanceLengthLimit)))
		}
		if e.Action == "" {
			errs = append(errs, field.Required(field.NewPath("action"), ""))
		}
		if len(e.Action) > actionLengthLimit {
			errs = append(errs, field.Invalid(field.NewPath("action"), "", fmt.Sprintf("can have at most %v characters", actionLengthLimit)))
		}
		if e.Reason == "" {
			errs = append(errs, field.Required(field.NewPath("reason"), ""))
		}
		if len(e.Reason) > reasonLengthLimit {
			errs = append(errs, field.Invalid(field.NewPath("reason"), "", fmt.Sprintf("can have at most %v characters", reasonLengthLimit)))
		}
		if len(e.Message) > noteLengthLimit {
			errs = append(errs, field.Invalid(field.NewPath("message"), "", fmt.Sprintf("can have at most %v characters", noteLengthLimit)))
		}
	}
	for _, msg := range validation.IsDNS1123Subdomain(e.Namespace) {
		errs = append(errs, field.Invalid(field.NewPath("namespace"), e.Namespace, msg))
	}
	return errs
}

func validateEventUpdate(e, old *corev1.Event) field.ErrorList {
	return validateEvent(e)
}

// Leases.

func validateLease(l *coordinationv1.Lease) field.ErrorList {
	errs := validateObjectMeta(&l.ObjectMeta, true, apivalidation.NameIsDNSSubdomain, metaPath)
	return append(errs, validateLeaseSpec(&l.Spec, field.NewPath("spec"))...)
}

func validateLeaseUpdate(l, old *coordinationv1.Lease) field.ErrorList {
	errs := validateObjectMetaUpdate(&l.ObjectMeta, &old.ObjectMeta, metaPath)
	return append(errs, validateLeaseSpec(&l.Spec, field.NewPath("spec"))...)
}

func validateLeaseSpec(s *coordinationv1.LeaseSpec, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if s.LeaseDurationSeconds != nil && *s.LeaseDurationSeconds <= 0 {
		errs = append(errs, field.Invalid(fldPath.Child("leaseDurationSeconds"), s.LeaseDurationSeconds, "must be greater than 0"))
	}
	if s.LeaseTransitions != nil && *s.LeaseTransitions < 0 {
		errs = append(errs, field.Invalid(fldPath.Child("leaseTransitions"), s.LeaseTransitions, "must be greater than or equal to 0"))
	}
	if s.Strategy != nil && *s.Strategy != "" {
		if *s.Strategy != coordinationv1.OldestEmulationVersion {
			errs = append(errs, field.NotSupported(fldPath.Child("strategy"), *s.Strategy, []string{string(coordinationv1.OldestEmulationVersion)}))
		}
	}
	if s.PreferredHolder != nil && *s.PreferredHolder != "" && (s.Strategy == nil || *s.Strategy == "") {
		errs = append(errs, field.Forbidden(fldPath.Child("preferredHolder"), "may only be specified if `strategy` is defined"))
	}
	return errs
}

// Priority classes.

const (
	highestUserDefinablePriority = int32(1000000000)
	systemCriticalPriority       = 2 * highestUserDefinablePriority
	systemPriorityClassPrefix    = "system-"
)

var systemPriorityClasses = []schedulingv1.PriorityClass{
	{ObjectMeta: metav1.ObjectMeta{Name: "system-node-critical"}, Value: systemCriticalPriority + 1000},
	{ObjectMeta: metav1.ObjectMeta{Name: "system-cluster-critical"}, Value: systemCriticalPriority},
}

func isKnownSystemPriorityClass(name string, value int32, globalDefault bool) error {
	for _, s := range systemPriorityClasses {
		if s.Name != name {
			continue
		}
		if s.Value != value {
			return fmt.Errorf("value of %v PriorityClass must be %v", s.Name, s.Value)
		}
		if s.GlobalDefault != globalDefault {
			return fmt.Errorf("globalDefault of %v PriorityClass must be %v", s.Name, s.GlobalDefault)
		}
		return nil
	}
	return fmt.Errorf("%v is not a known system priority class", name)
}

func validatePriorityClass(pc *schedulingv1.PriorityClass) field.ErrorList {
	errs := validateObjectMeta(&pc.ObjectMeta, false, apivalidation.NameIsDNSSubdomain, metaPath)
	if strings.HasPrefix(pc.Name, systemPriorityClassPrefix) {
		if err := isKnownSystemPriorityClass(pc.Name, pc.Value, pc.GlobalDefault); err != nil {
			errs = append(errs, field.Forbidden(metaPath.Child("name"), "priority class names with '"+systemPriorityClassPrefix+"' prefix are reserved for system use only. error: "+err.Error()))
		}
	} else if pc.Value > highestUserDefinablePriority {
		errs = append(errs, field.Forbidden(field.NewPath("value"), fmt.Sprintf("maximum allowed value of a user defined priority is %v", highestUserDefinablePriority)))
	}
	if pc.PreemptionPolicy != nil {
		errs = append(errs, validatePreemptionPolicy(pc.PreemptionPolicy, field.NewPath("preemptionPolicy"))...)
	}
	return errs
}

func validatePriorityClassUpdate(pc, old *schedulingv1.PriorityClass) field.ErrorList {
	errs := validateObjectMetaUpdate(&pc.ObjectMeta, &old.ObjectMeta, metaPath)
	if pc.Value != old.Value {
		errs = append(errs, field.Forbidden(field.NewPath("value"), "may not be changed in an update."))
	}
	return append(errs, apivalidation.ValidateImmutableField(pc.PreemptionPolicy, old.PreemptionPolicy, field.NewPath("preemptionPolicy"))...)
}

// Deployments and replica sets.

func validateDeployment(d *appsv1.Deployment) field.ErrorList {
	errs := validateObjectMeta(&d.ObjectMeta, true, apivalidation.NameIsDNSSubdomain, metaPath)
	return append(errs, validateDeploymentSpec(&d.Spec, field.NewPath("spec"))...)
}

func validateDeploymentUpdate(d, old *appsv1.Deployment) field.ErrorList {
	errs := validateObjectMetaUpdate(&d.ObjectMeta, &old.ObjectMeta, metaPath)
	errs = append(errs, validateDeploymentSpec(&d.Spec, field.NewPath("spec"))...)
	// apps/v1 does not allow the selector to change.
	return append(errs, apivalidation.ValidateImmutableField(d.Spec.Selector, old.Spec.Selector, field.NewPath("spec", "selector"))...)
}

func validateDeploymentSpec(s *appsv1.DeploymentSpec, fldPath *field.Path) field.ErrorList {
	replicas := int32OrZero(s.Replicas)
	errs := apivalidation.ValidateNonnegativeField(int64(replicas), fldPath.Child("replicas"))
	errs = append(errs, validateSelectorAndTemplate(s.Selector, &s.Template, replicas, fldPath)...)
	errs = append(errs, validateDeploymentStrategy(&s.Strategy, fldPath.Child("strategy"))...)
	errs = append(errs, apivalidation.ValidateNonnegativeField(int64(s.MinReadySeconds), fldPath.Child("minReadySeconds"))...)
	if s.RevisionHistoryLimit != nil {
		// Zero is a valid revision history limit.
		errs = append(errs, apivalidation.ValidateNonnegativeField(int64(*s.RevisionHistoryLimit), fldPath.Child("revisionHistoryLimit"))...)
	}
	if s.ProgressDeadlineSeconds != nil {
		errs = append(errs, apivalidation.ValidateNonnegativeField(int64(*s.ProgressDeadlineSeconds), fldPath.Child("progressDeadlineSeconds"))...)
		if *s.ProgressDeadlineSeconds <= s.MinReadySeconds {
			errs = append(errs, field.Invalid(fldPath.Child("progressDeadlineSeconds"), s.ProgressDeadlineSeconds, "must be greater than minReadySeconds"))
		}
	}
	return errs
}

// validateSelectorAndTemplate is the selector part of ValidateDeploymentSpec
// and ValidateReplicaSetSpec, and ValidatePodTemplateSpecForReplicaSet.
func validateSelectorAndTemplate(sel *metav1.LabelSelector, t *corev1.PodTemplateSpec, replicas int32, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	selPath := fldPath.Child("selector")
	if sel == nil {
		errs = append(errs, field.Required(selPath, ""))
	} else {
		errs = append(errs, metav1validation.ValidateLabelSelector(sel, metav1validation.LabelSelectorValidationOptions{}, selPath)...)
		if len(sel.MatchLabels)+len(sel.MatchExpressions) == 0 {
			// kube says "deployment" for replica sets too.
			errs = append(errs, field.Invalid(selPath, sel, "empty selector is invalid for deployment"))
		}
	}
	selector, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		return append(errs, field.Invalid(selPath, sel, "invalid label selector"))
	}
	tPath := fldPath.Child("template")
	if !selector.Empty() && !selector.Matches(labels.Set(t.Labels)) {
		errs = append(errs, field.Invalid(tPath.Child("metadata", "labels"), t.Labels, "`selector` does not match template `labels`"))
	}
	errs = append(errs, validatePodTemplateSpec(t, tPath)...)
	if t.Spec.RestartPolicy != corev1.RestartPolicyAlways {
		errs = append(errs, field.NotSupported(tPath.Child("spec", "restartPolicy"), t.Spec.RestartPolicy, []string{string(corev1.RestartPolicyAlways)}))
	}
	if t.Spec.ActiveDeadlineSeconds != nil {
		errs = append(errs, field.Invalid(tPath.Child("spec", "activeDeadlineSeconds"), t.Spec.ActiveDeadlineSeconds, "activeDeadlineSeconds in ReplicaSet is not Supported"))
	}
	return errs
}

func validateDeploymentStrategy(s *appsv1.DeploymentStrategy, fldPath *field.Path) field.ErrorList {
	switch s.Type {
	case appsv1.RecreateDeploymentStrategyType:
		if s.RollingUpdate != nil {
			return field.ErrorList{field.Forbidden(fldPath.Child("rollingUpdate"), "may not be specified when strategy `type` is '"+string(appsv1.RecreateDeploymentStrategyType)+"'")}
		}
	case appsv1.RollingUpdateDeploymentStrategyType:
		// Defaulting always sets it.
		if s.RollingUpdate == nil {
			return field.ErrorList{field.Required(fldPath.Child("rollingUpdate"), "this should be defaulted and never be nil")}
		}
		return validateRollingUpdateDeployment(s.RollingUpdate, fldPath.Child("rollingUpdate"))
	default:
		valid := []string{string(appsv1.RecreateDeploymentStrategyType), string(appsv1.RollingUpdateDeploymentStrategyType)}
		return field.ErrorList{field.NotSupported(fldPath, s, valid)}
	}
	return nil
}

func validateRollingUpdateDeployment(ru *appsv1.RollingUpdateDeployment, fldPath *field.Path) field.ErrorList {
	// A nil value converts to the internal zero value, 0.
	maxUnavailable, maxSurge := intOrZero(ru.MaxUnavailable), intOrZero(ru.MaxSurge)
	errs := validatePositiveIntOrPercent(maxUnavailable, fldPath.Child("maxUnavailable"))
	errs = append(errs, validatePositiveIntOrPercent(maxSurge, fldPath.Child("maxSurge"))...)
	if intOrPercentValue(maxUnavailable) == 0 && intOrPercentValue(maxSurge) == 0 {
		errs = append(errs, field.Invalid(fldPath.Child("maxUnavailable"), maxUnavailable, "may not be 0 when `maxSurge` is 0"))
	}
	return append(errs, isNotMoreThan100Percent(maxUnavailable, fldPath.Child("maxUnavailable"))...)
}

// isNotMoreThan100Percent is apps' IsNotMoreThan100Percent: a percentage
// may not exceed 100%; integers are not limited.
func isNotMoreThan100Percent(v intstr.IntOrString, fldPath *field.Path) field.ErrorList {
	if n, isPercent := percentValue(v); isPercent && n > 100 {
		return field.ErrorList{field.Invalid(fldPath, v, "must not be greater than 100%")}
	}
	return nil
}

func intOrZero(v *intstr.IntOrString) intstr.IntOrString {
	if v == nil {
		return intstr.FromInt32(0)
	}
	return *v
}

func int32OrZero(v *int32) int32 {
	if v == nil {
		return 0
	}
	return *v
}

func validatePositiveIntOrPercent(v intstr.IntOrString, fldPath *field.Path) field.ErrorList {
	switch v.Type {
	case intstr.String:
		var errs field.ErrorList
		for _, msg := range validation.IsValidPercent(v.StrVal) {
			errs = append(errs, field.Invalid(fldPath, v, msg))
		}
		return errs
	case intstr.Int:
		return apivalidation.ValidateNonnegativeField(int64(v.IntValue()), fldPath)
	}
	return nil
}

// percentValue is getPercentValue: the number of a well-formed percentage
// ("25%"), and false for integers and malformed strings.
func percentValue(v intstr.IntOrString) (int, bool) {
	if v.Type != intstr.String || len(validation.IsValidPercent(v.StrVal)) != 0 {
		return 0, false
	}
	n, err := strconv.Atoi(strings.TrimSuffix(v.StrVal, "%"))
	if err != nil {
		return 0, false
	}
	return n, true
}

// intOrPercentValue is getIntOrPercentValue: the number, whether an int or
// a percent.
func intOrPercentValue(v intstr.IntOrString) int {
	if n, ok := percentValue(v); ok {
		return n
	}
	return v.IntValue()
}

func validateReplicaSet(rs *appsv1.ReplicaSet) field.ErrorList {
	errs := validateObjectMeta(&rs.ObjectMeta, true, apivalidation.NameIsDNSSubdomain, metaPath)
	return append(errs, validateReplicaSetSpec(&rs.Spec, field.NewPath("spec"))...)
}

func validateReplicaSetUpdate(rs, old *appsv1.ReplicaSet) field.ErrorList {
	errs := validateObjectMetaUpdate(&rs.ObjectMeta, &old.ObjectMeta, metaPath)
	errs = append(errs, validateReplicaSetSpec(&rs.Spec, field.NewPath("spec"))...)
	return append(errs, apivalidation.ValidateImmutableField(rs.Spec.Selector, old.Spec.Selector, field.NewPath("spec", "selector"))...)
}

func validateReplicaSetSpec(s *appsv1.ReplicaSetSpec, fldPath *field.Path) field.ErrorList {
	replicas := int32OrZero(s.Replicas)
	errs := apivalidation.ValidateNonnegativeField(int64(replicas), fldPath.Child("replicas"))
	errs = append(errs, apivalidation.ValidateNonnegativeField(int64(s.MinReadySeconds), fldPath.Child("minReadySeconds"))...)
	return append(errs, validateSelectorAndTemplate(s.Selector, &s.Template, replicas, fldPath)...)
}

// Status updates of apps kinds: ValidateDeploymentStatusUpdate and
// ValidateReplicaSetStatusUpdate.

func validateDeploymentStatusUpdate(d, old *appsv1.Deployment) field.ErrorList {
	errs := validateObjectMetaUpdate(&d.ObjectMeta, &old.ObjectMeta, metaPath)
	p := field.NewPath("status")
	st := d.Status
	errs = append(errs, apivalidation.ValidateNonnegativeField(st.ObservedGeneration, p.Child("observedGeneration"))...)
	for _, f := range []struct {
		name string
		v    int32
	}{{"replicas", st.Replicas}, {"updatedReplicas", st.UpdatedReplicas}, {"readyReplicas", st.ReadyReplicas},
		{"availableReplicas", st.AvailableReplicas}, {"unavailableReplicas", st.UnavailableReplicas}} {
		errs = append(errs, apivalidation.ValidateNonnegativeField(int64(f.v), p.Child(f.name))...)
	}
	if st.CollisionCount != nil {
		errs = append(errs, apivalidation.ValidateNonnegativeField(int64(*st.CollisionCount), p.Child("collisionCount"))...)
	}
	msg := "cannot be greater than status.replicas"
	if st.UpdatedReplicas > st.Replicas {
		errs = append(errs, field.Invalid(p.Child("updatedReplicas"), st.UpdatedReplicas, msg))
	}
	if st.ReadyReplicas > st.Replicas {
		errs = append(errs, field.Invalid(p.Child("readyReplicas"), st.ReadyReplicas, msg))
	}
	if st.AvailableReplicas > st.Replicas {
		errs = append(errs, field.Invalid(p.Child("availableReplicas"), st.AvailableReplicas, msg))
	}
	if st.AvailableReplicas > st.ReadyReplicas {
		errs = append(errs, field.Invalid(p.Child("availableReplicas"), st.AvailableReplicas, "cannot be greater than readyReplicas"))
	}
	if oc := old.Status.CollisionCount; oc != nil && (st.CollisionCount == nil || *st.CollisionCount < *oc) {
		errs = append(errs, field.Invalid(p.Child("collisionCount"), int32OrZero(st.CollisionCount), "cannot be decremented"))
	}
	return errs
}

func validateReplicaSetStatusUpdate(rs, old *appsv1.ReplicaSet) field.ErrorList {
	errs := validateObjectMetaUpdate(&rs.ObjectMeta, &old.ObjectMeta, metaPath)
	p := field.NewPath("status")
	st := rs.Status
	for _, f := range []struct {
		name string
		v    int64
	}{{"replicas", int64(st.Replicas)}, {"fullyLabeledReplicas", int64(st.FullyLabeledReplicas)},
		{"readyReplicas", int64(st.ReadyReplicas)}, {"availableReplicas", int64(st.AvailableReplicas)},
		{"observedGeneration", st.ObservedGeneration}} {
		errs = append(errs, apivalidation.ValidateNonnegativeField(f.v, p.Child(f.name))...)
	}
	msg := "cannot be greater than status.replicas"
	if st.FullyLabeledReplicas > st.Replicas {
		errs = append(errs, field.Invalid(p.Child("fullyLabeledReplicas"), st.FullyLabeledReplicas, msg))
	}
	if st.ReadyReplicas > st.Replicas {
		errs = append(errs, field.Invalid(p.Child("readyReplicas"), st.ReadyReplicas, msg))
	}
	if st.AvailableReplicas > st.Replicas {
		errs = append(errs, field.Invalid(p.Child("availableReplicas"), st.AvailableReplicas, msg))
	}
	if st.AvailableReplicas > st.ReadyReplicas {
		errs = append(errs, field.Invalid(p.Child("availableReplicas"), st.AvailableReplicas, "cannot be greater than readyReplicas"))
	}
	return errs
}

// Pod disruption budgets: ValidatePodDisruptionBudget and
// ValidatePodDisruptionBudgetStatusUpdate. kube checks a budget's metadata
// no further than every kind's (the name need only be a path segment, not
// a DNS subdomain), and neither does cairn.

// unhealthyPodEvictionPolicies are the supported policies, sorted as kube
// lists them in its NotSupported error.
var unhealthyPodEvictionPolicies = []string{string(policyv1.AlwaysAllow), string(policyv1.IfHealthyBudget)}

func validatePodDisruptionBudget(pdb *policyv1.PodDisruptionBudget) field.ErrorList {
	return validatePodDisruptionBudgetSpec(&pdb.Spec, metav1validation.LabelSelectorValidationOptions{}, field.NewPath("spec"))
}

// validatePodDisruptionBudgetUpdate allows spec changes, as kube has since
// 1.15. A budget stored with a selector kube now refuses may keep its
// invalid label values, so that it can still be updated.
func validatePodDisruptionBudgetUpdate(pdb, old *policyv1.PodDisruptionBudget) field.ErrorList {
	opts := metav1validation.LabelSelectorValidationOptions{
		AllowInvalidLabelValueInSelector: len(metav1validation.ValidateLabelSelector(old.Spec.Selector, metav1validation.LabelSelectorValidationOptions{}, nil)) > 0,
	}
	return validatePodDisruptionBudgetSpec(&pdb.Spec, opts, field.NewPath("spec"))
}

func validatePodDisruptionBudgetSpec(s *policyv1.PodDisruptionBudgetSpec, opts metav1validation.LabelSelectorValidationOptions, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if s.MinAvailable != nil && s.MaxUnavailable != nil {
		errs = append(errs, field.Invalid(fldPath, *s, "minAvailable and maxUnavailable cannot be both set"))
	}
	for _, f := range []struct {
		name string
		v    *intstr.IntOrString
	}{{"minAvailable", s.MinAvailable}, {"maxUnavailable", s.MaxUnavailable}} {
		if f.v != nil {
			errs = append(errs, validatePositiveIntOrPercent(*f.v, fldPath.Child(f.name))...)
			errs = append(errs, isNotMoreThan100Percent(*f.v, fldPath.Child(f.name))...)
		}
	}
	// Unlike a workload's, a budget's selector may be missing or empty.
	errs = append(errs, metav1validation.ValidateLabelSelector(s.Selector, opts, fldPath.Child("selector"))...)
	if p := s.UnhealthyPodEvictionPolicy; p != nil && !slices.Contains(unhealthyPodEvictionPolicies, string(*p)) {
		errs = append(errs, field.NotSupported(fldPath.Child("unhealthyPodEvictionPolicy"), *p, unhealthyPodEvictionPolicies))
	}
	return errs
}

func validatePodDisruptionBudgetStatusUpdate(pdb, old *policyv1.PodDisruptionBudget) field.ErrorList {
	p := field.NewPath("status")
	st := pdb.Status
	errs := metav1validation.ValidateConditions(st.Conditions, p.Child("conditions"))
	for _, f := range []struct {
		name string
		v    int32
	}{{"disruptionsAllowed", st.DisruptionsAllowed}, {"currentHealthy", st.CurrentHealthy},
		{"desiredHealthy", st.DesiredHealthy}, {"expectedPods", st.ExpectedPods}} {
		errs = append(errs, apivalidation.ValidateNonnegativeField(int64(f.v), p.Child(f.name))...)
	}
	return errs
}

// ValidateBinding is ValidatePodBinding: what a pods/binding request must
// carry.
func ValidateBinding(b *corev1.Binding) field.ErrorList {
	var errs field.ErrorList
	if b.Target.Kind != "" && b.Target.Kind != "Node" {
		errs = append(errs, field.NotSupported(field.NewPath("target", "kind"), b.Target.Kind, []string{"Node", "<empty>"}))
	}
	if b.Target.Name == "" {
		errs = append(errs, field.Required(field.NewPath("target", "name"), ""))
	}
	return errs
}
