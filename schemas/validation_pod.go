package schemas

import (
	"fmt"
	"math"
	"path"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// This file ports the pod and pod-spec parts of
// k8s.io/kubernetes/pkg/apis/core/validation/validation.go, with the same
// field paths, error types and messages. The checks not ported are listed
// in the report that came with it (security contexts, affinity, topology
// spread, DNS config, resource claims, ...).

const fileModeErrorMsg = "must be a number between 0 and 0777 (octal), both inclusive"

func validateDNS1123Label(value string, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range validation.IsDNS1123Label(value) {
		errs = append(errs, field.Invalid(fldPath, value, msg))
	}
	return errs
}

func validateQualifiedName(value string, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range validation.IsQualifiedName(value) {
		errs = append(errs, field.Invalid(fldPath, value, msg))
	}
	return errs
}

func validateNameWith(fn apivalidation.ValidateNameFunc, value string, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range fn(value, false) {
		errs = append(errs, field.Invalid(fldPath, value, msg))
	}
	return errs
}

// validatePodCreate is ValidatePodCreate.
func validatePodCreate(pod *corev1.Pod) field.ErrorList {
	errs := validatePodMetadataAndSpec(pod)
	specPath := field.NewPath("spec")
	// Ephemeral containers can only be added through their subresource.
	if len(pod.Spec.EphemeralContainers) > 0 {
		errs = append(errs, field.Forbidden(specPath.Child("ephemeralContainers"), "cannot be set on create"))
	}
	if pod.Spec.NodeName != "" && len(pod.Spec.SchedulingGates) != 0 {
		errs = append(errs, field.Forbidden(specPath.Child("nodeName"), "cannot be set until all schedulingGates have been cleared"))
	}
	return errs
}

// validatePodMetadataAndSpec checks what create and update share.
func validatePodMetadataAndSpec(pod *corev1.Pod) field.ErrorList {
	specPath := field.NewPath("spec")
	errs := validateObjectMeta(&pod.ObjectMeta, true, apivalidation.NameIsDNSSubdomain, field.NewPath("metadata"))
	errs = append(errs, validatePodSpec(&pod.Spec, specPath)...)
	// Only for pods, not templates, for backwards compatibility.
	if pod.Spec.ServiceAccountName == "" {
		for vi, v := range pod.Spec.Volumes {
			if v.Projected == nil {
				continue
			}
			for si, s := range v.Projected.Sources {
				if s.ServiceAccountToken != nil {
					p := specPath.Child("volumes").Index(vi).Child("projected", "sources").Index(si).Child("serviceAccountToken")
					errs = append(errs, field.Forbidden(p, "must not be specified when serviceAccountName is not set"))
				}
			}
		}
	}
	return errs
}

// validatePodTemplateSpec is ValidatePodTemplateSpec.
func validatePodTemplateSpec(t *corev1.PodTemplateSpec, fldPath *field.Path) field.ErrorList {
	errs := metav1validation.ValidateLabels(t.Labels, fldPath.Child("labels"))
	errs = append(errs, apivalidation.ValidateAnnotations(t.Annotations, fldPath.Child("annotations"))...)
	errs = append(errs, validatePodSpec(&t.Spec, fldPath.Child("spec"))...)
	if len(t.Spec.EphemeralContainers) > 0 {
		errs = append(errs, field.Forbidden(fldPath.Child("spec", "ephemeralContainers"), "ephemeral containers not allowed in pod template"))
	}
	return errs
}

// validatePodSpec is ValidatePodSpec.
func validatePodSpec(spec *corev1.PodSpec, fldPath *field.Path) field.ErrorList {
	vols, errs := validateVolumes(spec.Volumes, fldPath.Child("volumes"))
	errs = append(errs, validateContainers(spec.Containers, vols, fldPath.Child("containers"))...)
	errs = append(errs, validateInitContainers(spec.InitContainers, spec.Containers, vols, fldPath.Child("initContainers"))...)
	errs = append(errs, validateRestartPolicy(spec.RestartPolicy, fldPath.Child("restartPolicy"))...)
	errs = append(errs, validateDNSPolicy(spec.DNSPolicy, fldPath.Child("dnsPolicy"))...)
	errs = append(errs, metav1validation.ValidateLabels(spec.NodeSelector, fldPath.Child("nodeSelector"))...)
	errs = append(errs, validateTolerations(spec.Tolerations, fldPath.Child("tolerations"))...)
	errs = append(errs, validateReadinessGates(spec.ReadinessGates, fldPath.Child("readinessGates"))...)
	errs = append(errs, validateSchedulingGates(spec.SchedulingGates, fldPath.Child("schedulingGates"))...)
	if spec.ServiceAccountName != "" {
		errs = append(errs, validateNameWith(apivalidation.NameIsDNSSubdomain, spec.ServiceAccountName, fldPath.Child("serviceAccountName"))...)
	}
	if spec.NodeName != "" {
		errs = append(errs, validateNameWith(apivalidation.NameIsDNSSubdomain, spec.NodeName, fldPath.Child("nodeName"))...)
	}
	if spec.ActiveDeadlineSeconds != nil {
		if v := *spec.ActiveDeadlineSeconds; v < 1 || v > math.MaxInt32 {
			errs = append(errs, field.Invalid(fldPath.Child("activeDeadlineSeconds"), v, validation.InclusiveRangeError(1, math.MaxInt32)))
		}
	}
	if spec.Hostname != "" {
		errs = append(errs, validateDNS1123Label(spec.Hostname, fldPath.Child("hostname"))...)
	}
	if spec.Subdomain != "" {
		errs = append(errs, validateDNS1123Label(spec.Subdomain, fldPath.Child("subdomain"))...)
	}
	if spec.PriorityClassName != "" {
		errs = append(errs, validateNameWith(apivalidation.NameIsDNSSubdomain, spec.PriorityClassName, fldPath.Child("priorityClassName"))...)
	}
	if spec.PreemptionPolicy != nil {
		errs = append(errs, validatePreemptionPolicy(spec.PreemptionPolicy, fldPath.Child("preemptionPolicy"))...)
	}
	return errs
}

func validateRestartPolicy(p corev1.RestartPolicy, fldPath *field.Path) field.ErrorList {
	switch p {
	case corev1.RestartPolicyAlways, corev1.RestartPolicyOnFailure, corev1.RestartPolicyNever:
		return nil
	case "":
		return field.ErrorList{field.Required(fldPath, "")}
	default:
		valid := []corev1.RestartPolicy{corev1.RestartPolicyAlways, corev1.RestartPolicyOnFailure, corev1.RestartPolicyNever}
		return field.ErrorList{field.NotSupported(fldPath, p, valid)}
	}
}

func validateDNSPolicy(p corev1.DNSPolicy, fldPath *field.Path) field.ErrorList {
	switch p {
	case corev1.DNSClusterFirstWithHostNet, corev1.DNSClusterFirst, corev1.DNSDefault, corev1.DNSNone:
		return nil
	case "":
		return field.ErrorList{field.Required(fldPath, "")}
	default:
		valid := []corev1.DNSPolicy{corev1.DNSClusterFirstWithHostNet, corev1.DNSClusterFirst, corev1.DNSDefault, corev1.DNSNone}
		return field.ErrorList{field.NotSupported(fldPath, p, valid)}
	}
}

func validatePreemptionPolicy(p *corev1.PreemptionPolicy, fldPath *field.Path) field.ErrorList {
	switch *p {
	case corev1.PreemptLowerPriority, corev1.PreemptNever:
		return nil
	case "":
		return field.ErrorList{field.Required(fldPath, "")}
	default:
		valid := []corev1.PreemptionPolicy{corev1.PreemptLowerPriority, corev1.PreemptNever}
		return field.ErrorList{field.NotSupported(fldPath, *p, valid)}
	}
}

func validateReadinessGates(gates []corev1.PodReadinessGate, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, g := range gates {
		errs = append(errs, validateQualifiedName(string(g.ConditionType), fldPath.Index(i).Child("conditionType"))...)
	}
	return errs
}

func validateSchedulingGates(gates []corev1.PodSchedulingGate, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	seen := sets.New[string]()
	for i, g := range gates {
		errs = append(errs, validateQualifiedName(g.Name, fldPath.Index(i))...)
		if seen.Has(g.Name) {
			errs = append(errs, field.Duplicate(fldPath.Index(i), g.Name))
		}
		seen.Insert(g.Name)
	}
	return errs
}

// validateTolerations is ValidateTolerations.
func validateTolerations(ts []corev1.Toleration, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, t := range ts {
		idx := fldPath.Index(i)
		if t.Key != "" {
			errs = append(errs, metav1validation.ValidateLabelName(t.Key, idx.Child("key"))...)
		}
		// An empty key with operator Exists matches every taint.
		if t.Key == "" && t.Operator != corev1.TolerationOpExists {
			errs = append(errs, field.Invalid(idx.Child("operator"), t.Operator,
				"operator must be Exists when `key` is empty, which means \"match all values and all keys\""))
		}
		if t.TolerationSeconds != nil && t.Effect != corev1.TaintEffectNoExecute {
			errs = append(errs, field.Invalid(idx.Child("effect"), t.Effect,
				"effect must be 'NoExecute' when `tolerationSeconds` is set"))
		}
		switch t.Operator {
		case corev1.TolerationOpEqual, "":
			for _, msg := range validation.IsValidLabelValue(t.Value) {
				errs = append(errs, field.Invalid(idx.Child("operator"), t.Value, msg))
			}
		case corev1.TolerationOpExists:
			if t.Value != "" {
				errs = append(errs, field.Invalid(idx.Child("operator"), t, "value must be empty when `operator` is 'Exists'"))
			}
		default:
			valid := []corev1.TolerationOperator{corev1.TolerationOpEqual, corev1.TolerationOpExists}
			errs = append(errs, field.NotSupported(idx.Child("operator"), t.Operator, valid))
		}
		if t.Effect != "" {
			errs = append(errs, validateTaintEffect(t.Effect, true, idx.Child("effect"))...)
		}
	}
	return errs
}

func validateTaintEffect(e corev1.TaintEffect, allowEmpty bool, fldPath *field.Path) field.ErrorList {
	if !allowEmpty && e == "" {
		return field.ErrorList{field.Required(fldPath, "")}
	}
	switch e {
	case corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute:
		return nil
	default:
		valid := []corev1.TaintEffect{corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute}
		return field.ErrorList{field.NotSupported(fldPath, e, valid)}
	}
}

// validateContainers is validateContainers for the regular containers.
func validateContainers(cs []corev1.Container, vols map[string]corev1.VolumeSource, fldPath *field.Path) field.ErrorList {
	if len(cs) == 0 {
		return field.ErrorList{field.Required(fldPath, "")}
	}
	var errs field.ErrorList
	names := sets.New[string]()
	for i := range cs {
		c := &cs[i]
		p := fldPath.Index(i)
		errs = append(errs, validateContainerCommon(c, vols, p)...)
		// Collisions with init container names are reported there.
		if names.Has(c.Name) {
			errs = append(errs, field.Duplicate(p.Child("name"), c.Name))
		} else {
			names.Insert(c.Name)
		}
		if c.RestartPolicy != nil {
			errs = append(errs, field.Forbidden(p.Child("restartPolicy"), "may not be set for non-init containers"))
		}
		if c.Lifecycle != nil {
			errs = append(errs, validateLifecycle(c.Lifecycle, p.Child("lifecycle"))...)
		}
		errs = append(errs, validateLivenessProbe(c.LivenessProbe, p.Child("livenessProbe"))...)
		errs = append(errs, validateReadinessProbe(c.ReadinessProbe, p.Child("readinessProbe"))...)
		errs = append(errs, validateStartupProbe(c.StartupProbe, p.Child("startupProbe"))...)
	}
	errs = append(errs, checkHostPortConflicts(cs, fldPath)...)
	return errs
}

// validateInitContainers is validateInitContainers.
func validateInitContainers(cs, regular []corev1.Container, vols map[string]corev1.VolumeSource, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	names := sets.New[string]()
	for _, c := range regular {
		names.Insert(c.Name)
	}
	for i := range cs {
		c := &cs[i]
		p := fldPath.Index(i)
		errs = append(errs, validateContainerCommon(c, vols, p)...)
		restartAlways := false
		if c.RestartPolicy != nil {
			if *c.RestartPolicy != corev1.ContainerRestartPolicyAlways {
				errs = append(errs, field.NotSupported(p.Child("restartPolicy"), *c.RestartPolicy, []string{string(corev1.ContainerRestartPolicyAlways)}))
			}
			restartAlways = *c.RestartPolicy == corev1.ContainerRestartPolicyAlways
		}
		// Names are unique across regular and init containers.
		if names.Has(c.Name) {
			errs = append(errs, field.Duplicate(p.Child("name"), c.Name))
		} else if c.Name != "" {
			names.Insert(c.Name)
		}
		// Init containers run one by one, so ports only conflict within one.
		errs = append(errs, checkHostPortConflicts([]corev1.Container{*c}, fldPath)...)
		if restartAlways {
			if c.Lifecycle != nil {
				errs = append(errs, validateLifecycle(c.Lifecycle, p.Child("lifecycle"))...)
			}
			errs = append(errs, validateLivenessProbe(c.LivenessProbe, p.Child("livenessProbe"))...)
			errs = append(errs, validateReadinessProbe(c.ReadinessProbe, p.Child("readinessProbe"))...)
			errs = append(errs, validateStartupProbe(c.StartupProbe, p.Child("startupProbe"))...)
			continue
		}
		if c.Lifecycle != nil {
			errs = append(errs, field.Forbidden(p.Child("lifecycle"), "may not be set for init containers without restartPolicy=Always"))
		}
		if c.LivenessProbe != nil {
			errs = append(errs, field.Forbidden(p.Child("livenessProbe"), "may not be set for init containers without restartPolicy=Always"))
		}
		if c.ReadinessProbe != nil {
			errs = append(errs, field.Forbidden(p.Child("readinessProbe"), "may not be set for init containers"))
		}
		if c.StartupProbe != nil {
			errs = append(errs, field.Forbidden(p.Child("startupProbe"), "may not be set for init containers without restartPolicy=Always"))
		}
	}
	return errs
}

// validateContainerCommon is what every container type shares.
func validateContainerCommon(c *corev1.Container, vols map[string]corev1.VolumeSource, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if c.Name == "" {
		errs = append(errs, field.Required(p.Child("name"), ""))
	} else {
		errs = append(errs, validateDNS1123Label(c.Name, p.Child("name"))...)
	}
	// Leading and trailing whitespace is not rejected here, for backwards
	// compatibility (" " is a special token in some pod templates).
	if c.Image == "" {
		errs = append(errs, field.Required(p.Child("image"), ""))
	}
	switch c.TerminationMessagePolicy {
	case corev1.TerminationMessageReadFile, corev1.TerminationMessageFallbackToLogsOnError:
	case "":
		errs = append(errs, field.Required(p.Child("terminationMessagePolicy"), "must be 'File' or 'FallbackToLogsOnError'"))
	default:
		valid := []string{string(corev1.TerminationMessageReadFile), string(corev1.TerminationMessageFallbackToLogsOnError)}
		errs = append(errs, field.NotSupported(p.Child("terminationMessagePolicy"), c.TerminationMessagePolicy, valid))
	}
	errs = append(errs, validateContainerPorts(c.Ports, p.Child("ports"))...)
	errs = append(errs, validateEnv(c.Env, p.Child("env"))...)
	errs = append(errs, validateEnvFrom(c.EnvFrom, p.Child("envFrom"))...)
	errs = append(errs, validateVolumeMounts(c.VolumeMounts, vols, p.Child("volumeMounts"))...)
	errs = append(errs, validatePullPolicy(c.ImagePullPolicy, p.Child("imagePullPolicy"))...)
	errs = append(errs, validateResourceRequirements(&c.Resources, p.Child("resources"))...)
	return errs
}

func validatePullPolicy(p corev1.PullPolicy, fldPath *field.Path) field.ErrorList {
	switch p {
	case corev1.PullAlways, corev1.PullIfNotPresent, corev1.PullNever:
		return nil
	case "":
		return field.ErrorList{field.Required(fldPath, "")}
	default:
		valid := []string{string(corev1.PullAlways), string(corev1.PullIfNotPresent), string(corev1.PullNever)}
		return field.ErrorList{field.NotSupported(fldPath, p, valid)}
	}
}

var supportedPortProtocols = []string{string(corev1.ProtocolSCTP), string(corev1.ProtocolTCP), string(corev1.ProtocolUDP)}

func validateContainerPorts(ports []corev1.ContainerPort, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	names := sets.New[string]()
	for i, port := range ports {
		idx := fldPath.Index(i)
		if port.Name != "" {
			if msgs := validation.IsValidPortName(port.Name); len(msgs) != 0 {
				for _, msg := range msgs {
					errs = append(errs, field.Invalid(idx.Child("name"), port.Name, msg))
				}
			} else if names.Has(port.Name) {
				errs = append(errs, field.Duplicate(idx.Child("name"), port.Name))
			} else {
				names.Insert(port.Name)
			}
		}
		if port.ContainerPort == 0 {
			errs = append(errs, field.Required(idx.Child("containerPort"), ""))
		} else {
			for _, msg := range validation.IsValidPortNum(int(port.ContainerPort)) {
				errs = append(errs, field.Invalid(idx.Child("containerPort"), port.ContainerPort, msg))
			}
		}
		if port.HostPort != 0 {
			for _, msg := range validation.IsValidPortNum(int(port.HostPort)) {
				errs = append(errs, field.Invalid(idx.Child("hostPort"), port.HostPort, msg))
			}
		}
		if port.Protocol == "" {
			errs = append(errs, field.Required(idx.Child("protocol"), ""))
		} else if !sets.New(supportedPortProtocols...).Has(string(port.Protocol)) {
			errs = append(errs, field.NotSupported(idx.Child("protocol"), port.Protocol, supportedPortProtocols))
		}
	}
	return errs
}

// checkHostPortConflicts is AccumulateUniqueHostPorts over one set of
// containers.
func checkHostPortConflicts(cs []corev1.Container, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	seen := sets.New[string]()
	for ci, c := range cs {
		for pi, port := range c.Ports {
			if port.HostPort == 0 {
				continue
			}
			key := fmt.Sprintf("%s/%s/%d", port.Protocol, port.HostIP, port.HostPort)
			if seen.Has(key) {
				errs = append(errs, field.Duplicate(fldPath.Index(ci).Child("ports").Index(pi).Child("hostPort"), key))
			} else {
				seen.Insert(key)
			}
		}
	}
	return errs
}

var validEnvFieldPaths = sets.New(
	"metadata.name", "metadata.namespace", "metadata.uid", "spec.nodeName",
	"spec.serviceAccountName", "status.hostIP", "status.hostIPs",
	"status.podIP", "status.podIPs")

func validateEnv(vars []corev1.EnvVar, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, ev := range vars {
		idx := fldPath.Index(i)
		if ev.Name == "" {
			errs = append(errs, field.Required(idx.Child("name"), ""))
		} else {
			// RelaxedEnvironmentVariableValidation is on by default.
			for _, msg := range validation.IsRelaxedEnvVarName(ev.Name) {
				errs = append(errs, field.Invalid(idx.Child("name"), ev.Name, msg))
			}
		}
		errs = append(errs, validateEnvVarValueFrom(ev, idx.Child("valueFrom"))...)
	}
	return errs
}

func validateEnvVarValueFrom(ev corev1.EnvVar, fldPath *field.Path) field.ErrorList {
	if ev.ValueFrom == nil {
		return nil
	}
	var errs field.ErrorList
	n := 0
	if fr := ev.ValueFrom.FieldRef; fr != nil {
		n++
		p := fldPath.Child("fieldRef")
		if fr.APIVersion == "" {
			errs = append(errs, field.Required(p.Child("apiVersion"), ""))
		}
		switch {
		case fr.FieldPath == "":
			errs = append(errs, field.Required(p.Child("fieldPath"), ""))
		case strings.HasPrefix(fr.FieldPath, "metadata.labels[") || strings.HasPrefix(fr.FieldPath, "metadata.annotations["):
		case !validEnvFieldPaths.Has(fr.FieldPath):
			errs = append(errs, field.NotSupported(p.Child("fieldPath"), fr.FieldPath, sets.List(validEnvFieldPaths)))
		}
	}
	if ev.ValueFrom.ResourceFieldRef != nil {
		n++
		if ev.ValueFrom.ResourceFieldRef.Resource == "" {
			errs = append(errs, field.Required(fldPath.Child("resourceFieldRef", "resource"), ""))
		}
	}
	if r := ev.ValueFrom.ConfigMapKeyRef; r != nil {
		n++
		errs = append(errs, validateKeySelector(r.Name, r.Key, fldPath.Child("configMapKeyRef"))...)
	}
	if r := ev.ValueFrom.SecretKeyRef; r != nil {
		n++
		errs = append(errs, validateKeySelector(r.Name, r.Key, fldPath.Child("secretKeyRef"))...)
	}
	switch {
	case n == 0:
		errs = append(errs, field.Invalid(fldPath, "", "must specify one of: `fieldRef`, `resourceFieldRef`, `configMapKeyRef` or `secretKeyRef`"))
	case ev.Value != "":
		errs = append(errs, field.Invalid(fldPath, "", "may not be specified when `value` is not empty"))
	case n > 1:
		errs = append(errs, field.Invalid(fldPath, "", "may not have more than one field specified at a time"))
	}
	return errs
}

func validateKeySelector(name, key string, fldPath *field.Path) field.ErrorList {
	errs := validateNameWith(apivalidation.NameIsDNSSubdomain, name, fldPath.Child("name"))
	if key == "" {
		errs = append(errs, field.Required(fldPath.Child("key"), ""))
	} else {
		for _, msg := range validation.IsConfigMapKey(key) {
			errs = append(errs, field.Invalid(fldPath.Child("key"), key, msg))
		}
	}
	return errs
}

func validateEnvFrom(vars []corev1.EnvFromSource, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, ev := range vars {
		idx := fldPath.Index(i)
		if ev.Prefix != "" {
			for _, msg := range validation.IsRelaxedEnvVarName(ev.Prefix) {
				errs = append(errs, field.Invalid(idx.Child("prefix"), ev.Prefix, msg))
			}
		}
		n := 0
		if ev.ConfigMapRef != nil {
			n++
			errs = append(errs, validateEnvSourceName(ev.ConfigMapRef.Name, idx.Child("configMapRef"))...)
		}
		if ev.SecretRef != nil {
			n++
			errs = append(errs, validateEnvSourceName(ev.SecretRef.Name, idx.Child("secretRef"))...)
		}
		if n == 0 {
			errs = append(errs, field.Invalid(fldPath, "", "must specify one of: `configMapRef` or `secretRef`"))
		} else if n > 1 {
			errs = append(errs, field.Invalid(fldPath, "", "may not have more than one field specified at a time"))
		}
	}
	return errs
}

func validateEnvSourceName(name string, fldPath *field.Path) field.ErrorList {
	if name == "" {
		return field.ErrorList{field.Required(fldPath.Child("name"), "")}
	}
	return validateNameWith(apivalidation.NameIsDNSSubdomain, name, fldPath.Child("name"))
}

func validateVolumeMounts(mounts []corev1.VolumeMount, vols map[string]corev1.VolumeSource, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	points := sets.New[string]()
	for i, m := range mounts {
		idx := fldPath.Index(i)
		if m.Name == "" {
			errs = append(errs, field.Required(idx.Child("name"), ""))
		}
		if _, ok := vols[m.Name]; !ok {
			errs = append(errs, field.NotFound(idx.Child("name"), m.Name))
		}
		if m.MountPath == "" {
			errs = append(errs, field.Required(idx.Child("mountPath"), ""))
		}
		if points.Has(m.MountPath) {
			errs = append(errs, field.Invalid(idx.Child("mountPath"), m.MountPath, "must be unique"))
		}
		points.Insert(m.MountPath)
		if m.SubPath != "" {
			errs = append(errs, validateLocalDescendingPath(m.SubPath, fldPath.Child("subPath"))...)
		}
	}
	return errs
}

func validateLocalDescendingPath(p string, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if path.IsAbs(p) {
		errs = append(errs, field.Invalid(fldPath, p, "must be a relative path"))
	}
	return append(errs, validatePathNoBacksteps(p, fldPath)...)
}

func validatePathNoBacksteps(p string, fldPath *field.Path) field.ErrorList {
	for _, item := range strings.Split(strings.ReplaceAll(p, `\`, "/"), "/") {
		if item == ".." {
			return field.ErrorList{field.Invalid(fldPath, p, "must not contain '..'")}
		}
	}
	return nil
}

func validateLocalNonReservedPath(p string, fldPath *field.Path) field.ErrorList {
	errs := validateLocalDescendingPath(p, fldPath)
	// "..data" and the like are used by the atomic writer.
	if strings.HasPrefix(p, "..") && !strings.HasPrefix(p, "../") {
		errs = append(errs, field.Invalid(fldPath, p, "must not start with '..'"))
	}
	return errs
}

// validateResourceRequirements is ValidateResourceRequirements for
// container resources: names, non-negative quantities and requests not
// above limits.
func validateResourceRequirements(r *corev1.ResourceRequirements, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	limPath := fldPath.Child("limits")
	reqPath := fldPath.Child("requests")
	for _, name := range sortedKeys(resourceNames(r.Limits)) {
		q := r.Limits[corev1.ResourceName(name)]
		p := limPath.Key(name)
		errs = append(errs, validateContainerResourceName(name, p)...)
		errs = append(errs, validateQuantityValue(name, q, p)...)
	}
	for _, name := range sortedKeys(resourceNames(r.Requests)) {
		q := r.Requests[corev1.ResourceName(name)]
		p := reqPath.Key(name)
		errs = append(errs, validateContainerResourceName(name, p)...)
		errs = append(errs, validateQuantityValue(name, q, p)...)
		lim, ok := r.Limits[corev1.ResourceName(name)]
		if !ok {
			continue
		}
		if q.Cmp(lim) != 0 && !overcommitAllowed(name) {
			errs = append(errs, field.Invalid(reqPath, q.String(), fmt.Sprintf("must be equal to %s limit of %s", name, lim.String())))
		} else if q.Cmp(lim) > 0 {
			errs = append(errs, field.Invalid(reqPath, q.String(), fmt.Sprintf("must be less than or equal to %s limit of %s", name, lim.String())))
		}
	}
	return errs
}

func resourceNames(l corev1.ResourceList) map[string]bool {
	m := make(map[string]bool, len(l))
	for k := range l {
		m[string(k)] = true
	}
	return m
}

// overcommitAllowed: native resources (no domain, or a kubernetes.io
// domain) except huge pages may have requests below limits; extended
// resources may not.
func overcommitAllowed(name string) bool {
	if strings.HasPrefix(name, corev1.ResourceHugePagesPrefix) {
		return false
	}
	return !strings.Contains(name, "/") || strings.Contains(strings.SplitN(name, "/", 2)[0], "kubernetes.io")
}

var standardContainerResources = sets.New("cpu", "memory", "ephemeral-storage")

func validateContainerResourceName(name string, fldPath *field.Path) field.ErrorList {
	errs := validateQualifiedName(name, fldPath)
	if !strings.Contains(name, "/") {
		if !standardContainerResources.Has(name) && !strings.HasPrefix(name, corev1.ResourceHugePagesPrefix) {
			errs = append(errs, field.Invalid(fldPath, name, "must be a standard resource for containers"))
		}
	}
	return errs
}

func validateQuantityValue(name string, q resource.Quantity, fldPath *field.Path) field.ErrorList {
	if q.Cmp(resource.Quantity{}) < 0 {
		return field.ErrorList{field.Invalid(fldPath, q.String(), apivalidation.IsNegativeErrorMsg)}
	}
	return nil
}

// Probes and handlers.

func validateLivenessProbe(p *corev1.Probe, fldPath *field.Path) field.ErrorList {
	if p == nil {
		return nil
	}
	errs := validateProbe(p, fldPath)
	if p.SuccessThreshold != 1 {
		errs = append(errs, field.Invalid(fldPath.Child("successThreshold"), p.SuccessThreshold, "must be 1"))
	}
	return errs
}

func validateReadinessProbe(p *corev1.Probe, fldPath *field.Path) field.ErrorList {
	if p == nil {
		return nil
	}
	errs := validateProbe(p, fldPath)
	if p.TerminationGracePeriodSeconds != nil {
		errs = append(errs, field.Invalid(fldPath.Child("terminationGracePeriodSeconds"), p.TerminationGracePeriodSeconds, "must not be set for readinessProbes"))
	}
	return errs
}

func validateStartupProbe(p *corev1.Probe, fldPath *field.Path) field.ErrorList {
	if p == nil {
		return nil
	}
	errs := validateProbe(p, fldPath)
	if p.SuccessThreshold != 1 {
		errs = append(errs, field.Invalid(fldPath.Child("successThreshold"), p.SuccessThreshold, "must be 1"))
	}
	return errs
}

func validateProbe(p *corev1.Probe, fldPath *field.Path) field.ErrorList {
	h := p.ProbeHandler
	errs := validateHandler(h.Exec, h.HTTPGet, h.TCPSocket, h.GRPC, nil, fldPath)
	errs = append(errs, apivalidation.ValidateNonnegativeField(int64(p.InitialDelaySeconds), fldPath.Child("initialDelaySeconds"))...)
	errs = append(errs, apivalidation.ValidateNonnegativeField(int64(p.TimeoutSeconds), fldPath.Child("timeoutSeconds"))...)
	errs = append(errs, apivalidation.ValidateNonnegativeField(int64(p.PeriodSeconds), fldPath.Child("periodSeconds"))...)
	errs = append(errs, apivalidation.ValidateNonnegativeField(int64(p.SuccessThreshold), fldPath.Child("successThreshold"))...)
	errs = append(errs, apivalidation.ValidateNonnegativeField(int64(p.FailureThreshold), fldPath.Child("failureThreshold"))...)
	if p.TerminationGracePeriodSeconds != nil && *p.TerminationGracePeriodSeconds <= 0 {
		errs = append(errs, field.Invalid(fldPath.Child("terminationGracePeriodSeconds"), *p.TerminationGracePeriodSeconds, "must be greater than 0"))
	}
	return errs
}

func validateLifecycle(l *corev1.Lifecycle, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, h := range []struct {
		name string
		h    *corev1.LifecycleHandler
	}{{"postStart", l.PostStart}, {"preStop", l.PreStop}} {
		if h.h != nil {
			errs = append(errs, validateHandler(h.h.Exec, h.h.HTTPGet, h.h.TCPSocket, nil, h.h.Sleep, fldPath.Child(h.name))...)
		}
	}
	return errs
}

// validateHandler checks that exactly one handler is set and validates it.
func validateHandler(exec *corev1.ExecAction, httpGet *corev1.HTTPGetAction, tcp *corev1.TCPSocketAction, grpc *corev1.GRPCAction, sleep *corev1.SleepAction, fldPath *field.Path) field.ErrorList {
	o := &oneOf{path: fldPath, what: "handler type"}
	one := o.add
	one(exec != nil, "exec", func(p *field.Path) field.ErrorList {
		if len(exec.Command) == 0 {
			return field.ErrorList{field.Required(p.Child("command"), "")}
		}
		return nil
	})
	one(httpGet != nil, "httpGet", func(p *field.Path) field.ErrorList {
		var e field.ErrorList
		if httpGet.Path == "" {
			e = append(e, field.Required(p.Child("path"), ""))
		}
		e = append(e, validatePortNumOrName(httpGet.Port, p.Child("port"))...)
		if httpGet.Scheme != corev1.URISchemeHTTP && httpGet.Scheme != corev1.URISchemeHTTPS {
			e = append(e, field.NotSupported(p.Child("scheme"), httpGet.Scheme, []string{string(corev1.URISchemeHTTP), string(corev1.URISchemeHTTPS)}))
		}
		for i, h := range httpGet.HTTPHeaders {
			for _, msg := range validation.IsHTTPHeaderName(h.Name) {
				e = append(e, field.Invalid(p.Child("httpHeaders").Index(i).Child("name"), h.Name, msg))
			}
		}
		return e
	})
	one(tcp != nil, "tcpSocket", func(p *field.Path) field.ErrorList {
		return validatePortNumOrName(tcp.Port, p.Child("port"))
	})
	one(grpc != nil, "grpc", func(p *field.Path) field.ErrorList {
		var e field.ErrorList
		for _, msg := range validation.IsValidPortNum(int(grpc.Port)) {
			e = append(e, field.Invalid(p.Child("port"), grpc.Port, msg))
		}
		return e
	})
	one(sleep != nil, "sleep", func(p *field.Path) field.ErrorList {
		if sleep.Seconds < 0 {
			return field.ErrorList{field.Invalid(p.Child("seconds"), sleep.Seconds, "must be non-negative")}
		}
		return nil
	})
	return o.result()
}

func validatePortNumOrName(port intstr.IntOrString, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch port.Type {
	case intstr.Int:
		for _, msg := range validation.IsValidPortNum(port.IntValue()) {
			errs = append(errs, field.Invalid(fldPath, port.IntValue(), msg))
		}
	case intstr.String:
		for _, msg := range validation.IsValidPortName(port.StrVal) {
			errs = append(errs, field.Invalid(fldPath, port.StrVal, msg))
		}
	default:
		errs = append(errs, field.InternalError(fldPath, fmt.Errorf("unknown type: %v", port.Type)))
	}
	return errs
}
