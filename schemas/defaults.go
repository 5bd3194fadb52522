package schemas

import (
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// This file ports SetObjectDefaults_<Kind> of k8s.io/kubernetes
// pkg/apis/core/v1, pkg/apis/apps/v1 and pkg/apis/scheduling/v1: the
// hand-written SetDefaults_* funcs and the generated walks that call them.

// defaultPod is SetObjectDefaults_Pod.
func defaultPod(pod *corev1.Pod) {
	setDefaultsPod(pod)
	defaultPodSpec(&pod.Spec)
}

// setDefaultsPod is SetDefaults_Pod: what applies to pods but not to pod
// templates.
func setDefaultsPod(pod *corev1.Pod) {
	// Requests default to limits. Only on pods, not on templates, so it is
	// done here and not on ResourceRequirements.
	for _, cs := range [][]corev1.Container{pod.Spec.Containers, pod.Spec.InitContainers} {
		for i := range cs {
			r := &cs[i].Resources
			if r.Limits == nil {
				continue
			}
			if r.Requests == nil {
				r.Requests = corev1.ResourceList{}
			}
			for k, v := range r.Limits {
				if _, ok := r.Requests[k]; !ok {
					r.Requests[k] = v.DeepCopy()
				}
			}
		}
	}
	if pod.Spec.EnableServiceLinks == nil {
		v := corev1.DefaultEnableServiceLinks
		pod.Spec.EnableServiceLinks = &v
	}
	if pod.Spec.HostNetwork {
		defaultHostNetworkPorts(pod.Spec.Containers)
		defaultHostNetworkPorts(pod.Spec.InitContainers)
	}
}

// defaultHostNetworkPorts sets hostPort to containerPort with host
// networking.
func defaultHostNetworkPorts(cs []corev1.Container) {
	for i := range cs {
		for j := range cs[i].Ports {
			if cs[i].Ports[j].HostPort == 0 {
				cs[i].Ports[j].HostPort = cs[i].Ports[j].ContainerPort
			}
		}
	}
}

// defaultPodSpec is the part of SetObjectDefaults_Pod shared with every pod
// template (SetObjectDefaults_PodTemplate): SetDefaults_PodSpec and the walk
// over volumes and containers.
func defaultPodSpec(spec *corev1.PodSpec) {
	if spec.DNSPolicy == "" {
		spec.DNSPolicy = corev1.DNSClusterFirst
	}
	if spec.RestartPolicy == "" {
		spec.RestartPolicy = corev1.RestartPolicyAlways
	}
	if spec.SecurityContext == nil {
		spec.SecurityContext = &corev1.PodSecurityContext{}
	}
	if spec.TerminationGracePeriodSeconds == nil {
		p := int64(corev1.DefaultTerminationGracePeriodSeconds)
		spec.TerminationGracePeriodSeconds = &p
	}
	if spec.SchedulerName == "" {
		spec.SchedulerName = corev1.DefaultSchedulerName
	}
	for i := range spec.Volumes {
		defaultVolume(&spec.Volumes[i])
	}
	for i := range spec.InitContainers {
		defaultContainer(&spec.InitContainers[i])
	}
	for i := range spec.Containers {
		defaultContainer(&spec.Containers[i])
	}
	for i := range spec.EphemeralContainers {
		c := corev1.Container(spec.EphemeralContainers[i].EphemeralContainerCommon)
		defaultContainer(&c)
		spec.EphemeralContainers[i].EphemeralContainerCommon = corev1.EphemeralContainerCommon(c)
	}
	roundUpResourceList(spec.Overhead)
	if spec.Resources != nil {
		roundUpResourceList(spec.Resources.Limits)
		roundUpResourceList(spec.Resources.Requests)
	}
}

// defaultContainer is SetDefaults_Container plus the generated walk over
// ports, env, resources, probes and lifecycle handlers.
func defaultContainer(c *corev1.Container) {
	if c.ImagePullPolicy == "" {
		if imageTag(c.Image) == "latest" {
			c.ImagePullPolicy = corev1.PullAlways
		} else {
			c.ImagePullPolicy = corev1.PullIfNotPresent
		}
	}
	if c.TerminationMessagePath == "" {
		c.TerminationMessagePath = corev1.TerminationMessagePathDefault
	}
	if c.TerminationMessagePolicy == "" {
		c.TerminationMessagePolicy = corev1.TerminationMessageReadFile
	}
	for j := range c.Ports {
		if c.Ports[j].Protocol == "" {
			c.Ports[j].Protocol = corev1.ProtocolTCP
		}
	}
	for j := range c.Env {
		if vf := c.Env[j].ValueFrom; vf != nil && vf.FieldRef != nil {
			defaultFieldSelector(vf.FieldRef)
		}
	}
	roundUpResourceList(c.Resources.Limits)
	roundUpResourceList(c.Resources.Requests)
	for _, p := range []*corev1.Probe{c.LivenessProbe, c.ReadinessProbe, c.StartupProbe} {
		defaultProbe(p)
	}
	if c.Lifecycle != nil {
		for _, h := range []*corev1.LifecycleHandler{c.Lifecycle.PostStart, c.Lifecycle.PreStop} {
			if h != nil && h.HTTPGet != nil {
				defaultHTTPGet(h.HTTPGet)
			}
		}
	}
}

// defaultProbe is SetDefaults_Probe with the handler defaults.
func defaultProbe(p *corev1.Probe) {
	if p == nil {
		return
	}
	if p.TimeoutSeconds == 0 {
		p.TimeoutSeconds = 1
	}
	if p.PeriodSeconds == 0 {
		p.PeriodSeconds = 10
	}
	if p.SuccessThreshold == 0 {
		p.SuccessThreshold = 1
	}
	if p.FailureThreshold == 0 {
		p.FailureThreshold = 3
	}
	if p.HTTPGet != nil {
		defaultHTTPGet(p.HTTPGet)
	}
	if p.GRPC != nil && p.GRPC.Service == nil {
		s := ""
		p.GRPC.Service = &s
	}
}

// defaultHTTPGet is SetDefaults_HTTPGetAction.
func defaultHTTPGet(h *corev1.HTTPGetAction) {
	if h.Path == "" {
		h.Path = "/"
	}
	if h.Scheme == "" {
		h.Scheme = corev1.URISchemeHTTP
	}
}

// defaultFieldSelector is SetDefaults_ObjectFieldSelector.
func defaultFieldSelector(s *corev1.ObjectFieldSelector) {
	if s.APIVersion == "" {
		s.APIVersion = "v1"
	}
}

// defaultVolume is SetDefaults_Volume and the per-source defaults.
func defaultVolume(v *corev1.Volume) {
	if v.VolumeSource == (corev1.VolumeSource{}) {
		v.VolumeSource = corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}
	}
	src := &v.VolumeSource
	if src.Image != nil && src.Image.PullPolicy == "" {
		if imageTag(src.Image.Reference) == "latest" {
			src.Image.PullPolicy = corev1.PullAlways
		} else {
			src.Image.PullPolicy = corev1.PullIfNotPresent
		}
	}
	if src.HostPath != nil && src.HostPath.Type == nil {
		t := corev1.HostPathUnset
		src.HostPath.Type = &t
	}
	if src.Secret != nil && src.Secret.DefaultMode == nil {
		m := corev1.SecretVolumeSourceDefaultMode
		src.Secret.DefaultMode = &m
	}
	if src.ConfigMap != nil && src.ConfigMap.DefaultMode == nil {
		m := corev1.ConfigMapVolumeSourceDefaultMode
		src.ConfigMap.DefaultMode = &m
	}
	if d := src.DownwardAPI; d != nil {
		if d.DefaultMode == nil {
			m := corev1.DownwardAPIVolumeSourceDefaultMode
			d.DefaultMode = &m
		}
		for j := range d.Items {
			if d.Items[j].FieldRef != nil {
				defaultFieldSelector(d.Items[j].FieldRef)
			}
		}
	}
	if p := src.Projected; p != nil {
		if p.DefaultMode == nil {
			m := corev1.ProjectedVolumeSourceDefaultMode
			p.DefaultMode = &m
		}
		for j := range p.Sources {
			s := &p.Sources[j]
			if s.DownwardAPI != nil {
				for k := range s.DownwardAPI.Items {
					if s.DownwardAPI.Items[k].FieldRef != nil {
						defaultFieldSelector(s.DownwardAPI.Items[k].FieldRef)
					}
				}
			}
			if s.ServiceAccountToken != nil && s.ServiceAccountToken.ExpirationSeconds == nil {
				hour := int64(3600)
				s.ServiceAccountToken.ExpirationSeconds = &hour
			}
		}
	}
	if e := src.Ephemeral; e != nil && e.VolumeClaimTemplate != nil {
		spec := &e.VolumeClaimTemplate.Spec
		if spec.VolumeMode == nil {
			m := corev1.PersistentVolumeFilesystem
			spec.VolumeMode = &m
		}
		roundUpResourceList(spec.Resources.Limits)
		roundUpResourceList(spec.Resources.Requests)
	}
}

// roundUpResourceList is SetDefaults_ResourceList: quantities are rounded
// up to milli scale.
func roundUpResourceList(l corev1.ResourceList) {
	for k, v := range l {
		v.RoundUp(-3)
		l[k] = v
	}
}

// imageTag returns the tag parsers.ParseImageName would find: the explicit
// tag, "latest" when there is neither tag nor digest, and "" when there is
// only a digest or the reference does not parse.
func imageTag(image string) string {
	if image == "" || strings.TrimSpace(image) != image {
		return ""
	}
	ref, digest, hasDigest := strings.Cut(image, "@")
	if hasDigest && digest == "" {
		return ""
	}
	name, tag := ref, ""
	if i := strings.LastIndex(ref, ":"); i > strings.LastIndex(ref, "/") {
		name, tag = ref[:i], ref[i+1:]
		if tag == "" {
			return ""
		}
	}
	// Repository paths are lower case (the registry host may not be).
	repo := name
	if i := strings.Index(name, "/"); i >= 0 && strings.ContainsAny(name[:i], ".:") {
		repo = name[i+1:]
	}
	if repo == "" || strings.ToLower(repo) != repo {
		return ""
	}
	if tag == "" && !hasDigest {
		return "latest"
	}
	return tag
}

// defaultNamespace is SetObjectDefaults_Namespace.
func defaultNamespace(ns *corev1.Namespace) {
	// Nameless namespaces (generateName) cannot be labelled yet.
	if ns.Name != "" {
		if ns.Labels == nil {
			ns.Labels = map[string]string{}
		}
		ns.Labels[corev1.LabelMetadataName] = ns.Name
	}
	if ns.Status.Phase == "" {
		ns.Status.Phase = corev1.NamespaceActive
	}
}

// defaultNode is SetObjectDefaults_Node.
func defaultNode(n *corev1.Node) {
	if n.Status.Allocatable == nil && n.Status.Capacity != nil {
		n.Status.Allocatable = make(corev1.ResourceList, len(n.Status.Capacity))
		for k, v := range n.Status.Capacity {
			n.Status.Allocatable[k] = v.DeepCopy()
		}
	}
	roundUpResourceList(n.Status.Capacity)
	roundUpResourceList(n.Status.Allocatable)
}

// defaultSecret is SetObjectDefaults_Secret. It also does what kube's
// conversion to the internal type does: stringData entries overwrite data
// and stringData is dropped (it is write-only).
func defaultSecret(s *corev1.Secret) {
	if s.Type == "" {
		s.Type = corev1.SecretTypeOpaque
	}
	if len(s.StringData) > 0 {
		if s.Data == nil {
			s.Data = make(map[string][]byte, len(s.StringData))
		}
		for k, v := range s.StringData {
			s.Data[k] = []byte(v)
		}
	}
	s.StringData = nil
}

// defaultConfigMap is SetObjectDefaults_ConfigMap.
func defaultConfigMap(cm *corev1.ConfigMap) {
	if cm.Data == nil {
		cm.Data = map[string]string{}
	}
}

// defaultEvent: core/v1 Event has no defaults.
func defaultEvent(*corev1.Event) {}

// defaultLease: coordination.k8s.io/v1 Lease has no defaults.
func defaultLease(*coordinationv1.Lease) {}

// defaultPodDisruptionBudget: policy/v1 PodDisruptionBudget has no
// defaults (a missing unhealthyPodEvictionPolicy means IfHealthyBudget).
func defaultPodDisruptionBudget(*policyv1.PodDisruptionBudget) {}

// defaultPriorityClass is SetDefaults_PriorityClass.
func defaultPriorityClass(pc *schedulingv1.PriorityClass) {
	if pc.PreemptionPolicy == nil {
		p := corev1.PreemptLowerPriority
		pc.PreemptionPolicy = &p
	}
}

// defaultDeployment is SetObjectDefaults_Deployment.
func defaultDeployment(d *appsv1.Deployment) {
	if d.Spec.Replicas == nil {
		d.Spec.Replicas = ptrTo[int32](1)
	}
	st := &d.Spec.Strategy
	if st.Type == "" {
		st.Type = appsv1.RollingUpdateDeploymentStrategyType
	}
	if st.Type == appsv1.RollingUpdateDeploymentStrategyType {
		if st.RollingUpdate == nil {
			st.RollingUpdate = &appsv1.RollingUpdateDeployment{}
		}
		if st.RollingUpdate.MaxUnavailable == nil {
			v := intstr.FromString("25%")
			st.RollingUpdate.MaxUnavailable = &v
		}
		if st.RollingUpdate.MaxSurge == nil {
			v := intstr.FromString("25%")
			st.RollingUpdate.MaxSurge = &v
		}
	}
	if d.Spec.RevisionHistoryLimit == nil {
		d.Spec.RevisionHistoryLimit = ptrTo[int32](10)
	}
	if d.Spec.ProgressDeadlineSeconds == nil {
		d.Spec.ProgressDeadlineSeconds = ptrTo[int32](600)
	}
	defaultPodSpec(&d.Spec.Template.Spec)
}

// defaultReplicaSet is SetObjectDefaults_ReplicaSet.
func defaultReplicaSet(rs *appsv1.ReplicaSet) {
	if rs.Spec.Replicas == nil {
		rs.Spec.Replicas = ptrTo[int32](1)
	}
	defaultPodSpec(&rs.Spec.Template.Spec)
}

func ptrTo[T any](v T) *T { return &v }
