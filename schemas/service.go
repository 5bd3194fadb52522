package schemas

import (
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/sets"
)

// DefaultClusterIPRange is kube-apiserver's default
// --service-cluster-ip-range; here, where the apiserver's allocator and the
// nodes' proxies both find it.
const DefaultClusterIPRange = "10.96.0.0/12"

// This file is core/v1 Services: SetDefaults_Service, the strategy of
// pkg/registry/core/service (strategy.go and the allocation-independent
// parts of storage.go: normalizeClusterIPs, patchAllocatedValues,
// dropTypeDependentFields) and printService. Validation is in
// validation_service.go; allocating cluster IPs and node ports is the
// apiserver's (it needs etcd).

func serviceResource(now func() time.Time) *Resource {
	return &Resource{
		GroupVersion: gvCore, Kind: "Service", Plural: "services", Singular: "service",
		ShortNames: []string{"svc"}, Categories: []string{"all"}, Namespaced: true,
		Subresources:           []string{"status"},
		New:                    func() Object { return &corev1.Service{} },
		NewList:                func() runtime.Object { return &corev1.ServiceList{} },
		Default:                defaulter(defaultService),
		PrepareForCreate:       defaulter(prepareServiceCreate),
		PrepareForUpdate:       preparer(prepareServiceUpdate),
		PrepareForStatusUpdate: preparer(prepareServiceStatusUpdate),
		ValidateCreate:         createValidator(true, validateService),
		ValidateUpdate:         updateValidator(true, validateServiceUpdate),
		Fields:                 fieldser(true, serviceFields),
		Table:                  serviceTable(now),
	}
}

// defaultService is SetDefaults_Service.
func defaultService(svc *corev1.Service) {
	spec := &svc.Spec
	if spec.SessionAffinity == "" {
		spec.SessionAffinity = corev1.ServiceAffinityNone
	}
	if spec.SessionAffinity == corev1.ServiceAffinityNone {
		spec.SessionAffinityConfig = nil
	}
	if spec.SessionAffinity == corev1.ServiceAffinityClientIP {
		if c := spec.SessionAffinityConfig; c == nil || c.ClientIP == nil || c.ClientIP.TimeoutSeconds == nil {
			timeout := corev1.DefaultClientIPServiceAffinitySeconds
			spec.SessionAffinityConfig = &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: &timeout}}
		}
	}
	if spec.Type == "" {
		spec.Type = corev1.ServiceTypeClusterIP
	}
	for i := range spec.Ports {
		p := &spec.Ports[i]
		if p.Protocol == "" {
			p.Protocol = corev1.ProtocolTCP
		}
		if p.TargetPort == intstr.FromInt32(0) || p.TargetPort == intstr.FromString("") {
			p.TargetPort = intstr.FromInt32(p.Port)
		}
	}
	if ExternallyAccessible(svc) && spec.ExternalTrafficPolicy == "" {
		spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyCluster
	}
	if spec.InternalTrafficPolicy == nil {
		switch spec.Type {
		case corev1.ServiceTypeNodePort, corev1.ServiceTypeLoadBalancer, corev1.ServiceTypeClusterIP:
			p := corev1.ServiceInternalTrafficPolicyCluster
			spec.InternalTrafficPolicy = &p
		}
	}
	if spec.Type == corev1.ServiceTypeLoadBalancer {
		if spec.AllocateLoadBalancerNodePorts == nil {
			yes := true
			spec.AllocateLoadBalancerNodePorts = &yes
		}
		vip := corev1.LoadBalancerIPModeVIP
		for i, ing := range svc.Status.LoadBalancer.Ingress {
			if ing.IP != "" && ing.IPMode == nil {
				svc.Status.LoadBalancer.Ingress[i].IPMode = &vip
			}
		}
	}
}

// ExternallyAccessible is pkg/api/service's ExternallyAccessible: the
// service is reachable from outside the cluster (NodePort, LoadBalancer,
// or a ClusterIP with external IPs).
func ExternallyAccessible(svc *corev1.Service) bool {
	return svc.Spec.Type == corev1.ServiceTypeLoadBalancer || svc.Spec.Type == corev1.ServiceTypeNodePort ||
		(svc.Spec.Type == corev1.ServiceTypeClusterIP && len(svc.Spec.ExternalIPs) > 0)
}

// NeedsClusterIP: every type but ExternalName has a cluster IP (or None).
func NeedsClusterIP(svc *corev1.Service) bool {
	return svc.Spec.Type != corev1.ServiceTypeExternalName
}

// NeedsNodePort: NodePort and LoadBalancer services have node ports
// (unless a LoadBalancer's allocateLoadBalancerNodePorts is false, in
// which case only the ports it names are kept).
func NeedsNodePort(svc *corev1.Service) bool {
	return svc.Spec.Type == corev1.ServiceTypeNodePort || svc.Spec.Type == corev1.ServiceTypeLoadBalancer
}

// NeedsHealthCheckNodePort: a LoadBalancer with externalTrafficPolicy
// Local has a health-check node port (pkg/api/service's NeedsHealthCheck).
func NeedsHealthCheckNodePort(svc *corev1.Service) bool {
	return svc.Spec.Type == corev1.ServiceTypeLoadBalancer && svc.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal
}

// IsHeadless: the service's only cluster IP is "None".
func IsHeadless(svc *corev1.Service) bool {
	return len(svc.Spec.ClusterIPs) == 1 && svc.Spec.ClusterIPs[0] == corev1.ClusterIPNone
}

// prepareServiceCreate is svcStrategy.PrepareForCreate and the
// create half of normalizeClusterIPs: a client that sets only clusterIP
// (an old one) gets clusterIPs from it.
func prepareServiceCreate(svc *corev1.Service) {
	svc.Status = corev1.ServiceStatus{}
	if svc.Spec.ClusterIP != "" && len(svc.Spec.ClusterIPs) == 0 {
		svc.Spec.ClusterIPs = []string{svc.Spec.ClusterIP}
	}
}

// prepareServiceUpdate is what kube does to an updated service before
// validating it: patchAllocatedValues and normalizeClusterIPs (REST
// beginUpdate), then svcStrategy.PrepareForUpdate (status kept,
// dropTypeDependentFields). Services have no generation in kube.
func prepareServiceUpdate(svc, old *corev1.Service) {
	keepGeneration(svc, old)
	patchAllocatedValues(svc, old)
	normalizeClusterIPs(svc, old)
	svc.Status = old.Status
	dropTypeDependentFields(svc, old)
}

func prepareServiceStatusUpdate(svc, old *corev1.Service) {
	keepGeneration(svc, old)
	svc.Spec = old.Spec
}

// patchAllocatedValues fills in what the client left out but the server
// allocated (clusterIP, clusterIPs, node ports matched by port name, the
// health-check node port), so that a replace with a manifest that never
// had them is not a change.
func patchAllocatedValues(svc, old *corev1.Service) {
	if NeedsClusterIP(old) && NeedsClusterIP(svc) {
		if svc.Spec.ClusterIP == "" {
			svc.Spec.ClusterIP = old.Spec.ClusterIP
		}
		if len(svc.Spec.ClusterIPs) == 0 && len(old.Spec.ClusterIPs) > 0 {
			svc.Spec.ClusterIPs = old.Spec.ClusterIPs
		}
	}
	if NeedsNodePort(old) && NeedsNodePort(svc) {
		used := nodePortsUsed(old).Intersection(nodePortsUsed(svc))
		byName := map[string]int32{}
		for _, p := range old.Spec.Ports {
			byName[p.Name] = p.NodePort
		}
		for i := range svc.Spec.Ports {
			p := &svc.Spec.Ports[i]
			if p.NodePort == 0 {
				if v := byName[p.Name]; !used.Has(v) {
					p.NodePort = v
				}
			}
		}
	}
	if NeedsHealthCheckNodePort(old) && NeedsHealthCheckNodePort(svc) && svc.Spec.HealthCheckNodePort == 0 {
		svc.Spec.HealthCheckNodePort = old.Spec.HealthCheckNodePort
	}
}

func nodePortsUsed(svc *corev1.Service) sets.Set[int32] {
	used := sets.New[int32]()
	for _, p := range svc.Spec.Ports {
		if p.NodePort != 0 {
			used.Insert(p.NodePort)
		}
	}
	return used
}

// normalizeClusterIPs is the update half of kube's normalizeClusterIPs:
// it keeps clusterIP and clusterIPs in step for clients that change one.
func normalizeClusterIPs(svc, old *corev1.Service) {
	if len(old.Spec.ClusterIPs) > 0 && len(svc.Spec.ClusterIPs) == 0 && old.Spec.ClusterIP == svc.Spec.ClusterIP {
		svc.Spec.ClusterIPs = old.Spec.ClusterIPs
	}
	if old.Spec.ClusterIP == svc.Spec.ClusterIP {
		return
	}
	if old.Spec.ClusterIP != "" && svc.Spec.ClusterIP == "" {
		if slices.Equal(old.Spec.ClusterIPs, svc.Spec.ClusterIPs) {
			svc.Spec.ClusterIPs = nil
		}
	} else if slices.Equal(old.Spec.ClusterIPs, svc.Spec.ClusterIPs) {
		svc.Spec.ClusterIPs = []string{svc.Spec.ClusterIP}
	}
}

// dropTypeDependentFields wipes what a type change leaves without use, when
// the server may have set it and the client did not also change it (which
// validation then judges).
func dropTypeDependentFields(svc, old *corev1.Service) {
	if NeedsClusterIP(old) && !NeedsClusterIP(svc) {
		if slices.Equal(old.Spec.ClusterIPs, svc.Spec.ClusterIPs) && old.Spec.ClusterIP == svc.Spec.ClusterIP {
			svc.Spec.ClusterIP, svc.Spec.ClusterIPs = "", nil
		}
		if slices.Equal(old.Spec.IPFamilies, svc.Spec.IPFamilies) {
			svc.Spec.IPFamilies = nil
		}
		if ptrEqual(old.Spec.IPFamilyPolicy, svc.Spec.IPFamilyPolicy) {
			svc.Spec.IPFamilyPolicy = nil
		}
	}
	if NeedsNodePort(old) && !NeedsNodePort(svc) && sameNodePorts(old, svc) {
		for i := range svc.Spec.Ports {
			svc.Spec.Ports[i].NodePort = 0
		}
	}
	if NeedsHealthCheckNodePort(old) && !NeedsHealthCheckNodePort(svc) && old.Spec.HealthCheckNodePort == svc.Spec.HealthCheckNodePort {
		svc.Spec.HealthCheckNodePort = 0
	}
	if old.Spec.Type == corev1.ServiceTypeLoadBalancer && svc.Spec.Type != corev1.ServiceTypeLoadBalancer {
		if a, b := old.Spec.AllocateLoadBalancerNodePorts, svc.Spec.AllocateLoadBalancerNodePorts; a != nil && b != nil && *a == *b {
			svc.Spec.AllocateLoadBalancerNodePorts = nil
		}
		if ptrEqual(old.Spec.LoadBalancerClass, svc.Spec.LoadBalancerClass) {
			svc.Spec.LoadBalancerClass = nil
		}
	}
	if ExternallyAccessible(old) && !ExternallyAccessible(svc) && old.Spec.ExternalTrafficPolicy == svc.Spec.ExternalTrafficPolicy {
		svc.Spec.ExternalTrafficPolicy = ""
	}
	if svc.Spec.Type != corev1.ServiceTypeLoadBalancer {
		svc.Status.LoadBalancer = corev1.LoadBalancerStatus{}
	}
}

// sameNodePorts: the same ports (by index) have the same node ports.
func sameNodePorts(a, b *corev1.Service) bool {
	for i := range b.Spec.Ports {
		if i >= len(a.Spec.Ports) || a.Spec.Ports[i].NodePort != b.Spec.Ports[i].NodePort {
			return false
		}
	}
	return true
}

func ptrEqual[T comparable](a, b *T) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

// serviceFields are the service's field-selector attributes: kube's
// ServiceToSelectableFields adds spec.clusterIP and spec.type.
func serviceFields(svc *corev1.Service) fields.Set {
	return fields.Set{"spec.clusterIP": svc.Spec.ClusterIP, "spec.type": string(svc.Spec.Type)}
}

func serviceTable(now func() time.Time) *table {
	spec := corev1.ServiceSpec{}.SwaggerDoc()
	cols := []metav1.TableColumnDefinition{
		nameColumn,
		{Name: "Type", Type: "string", Description: spec["type"]},
		{Name: "Cluster-IP", Type: "string", Description: spec["clusterIP"]},
		{Name: "External-IP", Type: "string", Description: spec["externalIPs"]},
		{Name: "Port(s)", Type: "string", Description: spec["ports"]},
		ageColumn,
		{Name: "Selector", Type: "string", Priority: 1, Description: spec["selector"]},
	}
	return tableOf(cols, func(svc *corev1.Service) []any {
		clusterIP := "<none>"
		if len(svc.Spec.ClusterIPs) > 0 {
			clusterIP = svc.Spec.ClusterIPs[0]
		}
		ports := servicePorts(svc.Spec.Ports)
		if ports == "" {
			ports = "<none>"
		}
		return []any{svc.Name, string(svc.Spec.Type), clusterIP, serviceExternalIP(svc), ports,
			since(now, svc.CreationTimestamp), labels.FormatLabels(svc.Spec.Selector)}
	})
}

// serviceExternalIP is getServiceExternalIP (wide: load-balancer
// addresses are not shortened).
func serviceExternalIP(svc *corev1.Service) string {
	switch svc.Spec.Type {
	case corev1.ServiceTypeClusterIP, corev1.ServiceTypeNodePort:
		if len(svc.Spec.ExternalIPs) > 0 {
			return strings.Join(svc.Spec.ExternalIPs, ",")
		}
		return "<none>"
	case corev1.ServiceTypeLoadBalancer:
		lb := sets.New[string]()
		for _, ing := range svc.Status.LoadBalancer.Ingress {
			if ing.IP != "" {
				lb.Insert(ing.IP)
			} else if ing.Hostname != "" {
				lb.Insert(ing.Hostname)
			}
		}
		all := append(sets.List(lb), svc.Spec.ExternalIPs...)
		if len(all) == 0 {
			return "<pending>"
		}
		return strings.Join(all, ",")
	case corev1.ServiceTypeExternalName:
		return svc.Spec.ExternalName
	}
	return "<unknown>"
}

// servicePorts is makePortString: "80/TCP", or "80:30080/TCP" with a
// node port.
func servicePorts(ports []corev1.ServicePort) string {
	pieces := make([]string, len(ports))
	for i, p := range ports {
		pieces[i] = fmt.Sprintf("%d/%s", p.Port, p.Protocol)
		if p.NodePort > 0 {
			pieces[i] = fmt.Sprintf("%d:%d/%s", p.Port, p.NodePort, p.Protocol)
		}
	}
	return strings.Join(pieces, ",")
}
