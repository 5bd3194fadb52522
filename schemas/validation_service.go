package schemas

import (
	"fmt"
	"net/netip"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// This file ports ValidateService, ValidateServiceUpdate and
// ValidateServiceStatusUpdate of pkg/apis/core/validation, with kube's
// field paths and messages. Whether a cluster IP or node port is inside
// its range, or free, is the allocator's to say (in the apiserver), as in
// kube.

var (
	supportedSessionAffinity     = sets.New(corev1.ServiceAffinityClientIP, corev1.ServiceAffinityNone)
	supportedServiceTypes        = sets.New(corev1.ServiceTypeClusterIP, corev1.ServiceTypeNodePort, corev1.ServiceTypeLoadBalancer, corev1.ServiceTypeExternalName)
	supportedInternalTraffic     = sets.New(corev1.ServiceInternalTrafficPolicyCluster, corev1.ServiceInternalTrafficPolicyLocal)
	supportedExternalTraffic     = sets.New(corev1.ServiceExternalTrafficPolicyCluster, corev1.ServiceExternalTrafficPolicyLocal)
	supportedIPFamilies          = sets.New(corev1.IPv4Protocol, corev1.IPv6Protocol)
	supportedIPFamilyPolicies    = sets.New(corev1.IPFamilyPolicySingleStack, corev1.IPFamilyPolicyPreferDualStack, corev1.IPFamilyPolicyRequireDualStack)
	supportedServicePortProtocol = sets.New(corev1.ProtocolTCP, corev1.ProtocolUDP, corev1.ProtocolSCTP)
	supportedLoadBalancerIPModes = sets.New(corev1.LoadBalancerIPModeVIP, corev1.LoadBalancerIPModeProxy)
)

// maxClientIPAffinitySeconds is core.MaxClientIPServiceAffinitySeconds.
const maxClientIPAffinitySeconds = 86400

// validateService is ValidateService. A service's name is a DNS-1035 label.
func validateService(svc *corev1.Service) field.ErrorList {
	errs := apivalidation.ValidateObjectMeta(&svc.ObjectMeta, true, apivalidation.NameIsDNS1035Label, metaPath)
	specPath := field.NewPath("spec")
	spec := &svc.Spec
	headless := IsHeadless(svc)
	if len(spec.Ports) == 0 && !headless && spec.Type != corev1.ServiceTypeExternalName {
		errs = append(errs, field.Required(specPath.Child("ports"), ""))
	}
	switch spec.Type {
	case corev1.ServiceTypeLoadBalancer, corev1.ServiceTypeNodePort:
		if headless {
			errs = append(errs, field.Invalid(specPath.Child("clusterIPs").Index(0), spec.ClusterIPs[0],
				fmt.Sprintf("may not be set to 'None' for %s services", spec.Type)))
		}
	case corev1.ServiceTypeExternalName:
		if len(spec.ClusterIPs) > 0 {
			errs = append(errs, field.Forbidden(specPath.Child("clusterIPs"), "may not be set for ExternalName services"))
		}
		if len(spec.IPFamilies) > 0 {
			errs = append(errs, field.Forbidden(specPath.Child("ipFamilies"), "may not be set for ExternalName services"))
		}
		if spec.IPFamilyPolicy != nil {
			errs = append(errs, field.Forbidden(specPath.Child("ipFamilyPolicy"), "may not be set for ExternalName services"))
		}
		// The name (a CNAME) may end in a dot, fully qualified.
		if cname := strings.TrimSuffix(spec.ExternalName, "."); cname != "" {
			errs = append(errs, validateNameWith(apivalidation.NameIsDNSSubdomain, cname, specPath.Child("externalName"))...)
		} else {
			errs = append(errs, field.Required(specPath.Child("externalName"), ""))
		}
	}
	names := sets.New[string]()
	for i := range spec.Ports {
		errs = append(errs, validateServicePort(&spec.Ports[i], len(spec.Ports) > 1, names, specPath.Child("ports").Index(i))...)
	}
	if spec.Selector != nil {
		errs = append(errs, metav1validation.ValidateLabels(spec.Selector, specPath.Child("selector"))...)
	}
	errs = append(errs, validateSessionAffinity(spec, specPath)...)
	errs = append(errs, validateClusterIPsRelatedFields(svc)...)
	for i, ip := range spec.ExternalIPs {
		p := specPath.Child("externalIPs").Index(i)
		if e := validation.IsValidIP(p, ip); len(e) > 0 {
			errs = append(errs, e...)
		} else {
			errs = append(errs, validateNonSpecialIP(ip, p)...)
		}
	}
	if spec.Type == "" {
		errs = append(errs, field.Required(specPath.Child("type"), ""))
	} else if !supportedServiceTypes.Has(spec.Type) {
		errs = append(errs, field.NotSupported(specPath.Child("type"), spec.Type, sets.List(supportedServiceTypes)))
	}
	errs = append(errs, validateServicePortSets(spec, specPath)...)
	errs = append(errs, validateLoadBalancerFields(svc, specPath)...)
	errs = append(errs, validateTrafficPolicies(svc, specPath)...)
	return errs
}

func validateServicePort(sp *corev1.ServicePort, requireName bool, names sets.Set[string], fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if requireName && sp.Name == "" {
		errs = append(errs, field.Required(fldPath.Child("name"), ""))
	} else if sp.Name != "" {
		errs = append(errs, validateDNS1123Label(sp.Name, fldPath.Child("name"))...)
		if names.Has(sp.Name) {
			errs = append(errs, field.Duplicate(fldPath.Child("name"), sp.Name))
		} else {
			names.Insert(sp.Name)
		}
	}
	for _, msg := range validation.IsValidPortNum(int(sp.Port)) {
		errs = append(errs, field.Invalid(fldPath.Child("port"), sp.Port, msg))
	}
	if sp.Protocol == "" {
		errs = append(errs, field.Required(fldPath.Child("protocol"), ""))
	} else if !supportedServicePortProtocol.Has(sp.Protocol) {
		errs = append(errs, field.NotSupported(fldPath.Child("protocol"), sp.Protocol, sets.List(supportedServicePortProtocol)))
	}
	errs = append(errs, validatePortNumOrName(sp.TargetPort, fldPath.Child("targetPort"))...)
	if sp.AppProtocol != nil {
		errs = append(errs, validateQualifiedName(*sp.AppProtocol, fldPath.Child("appProtocol"))...)
	}
	return errs
}

func validateSessionAffinity(spec *corev1.ServiceSpec, specPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	p := specPath.Child("sessionAffinity")
	switch {
	case spec.SessionAffinity == "":
		errs = append(errs, field.Required(p, ""))
	case !supportedSessionAffinity.Has(spec.SessionAffinity):
		errs = append(errs, field.NotSupported(p, spec.SessionAffinity, sets.List(supportedSessionAffinity)))
	}
	cfgPath := specPath.Child("sessionAffinityConfig")
	switch spec.SessionAffinity {
	case corev1.ServiceAffinityClientIP:
		why := fmt.Sprintf("when session affinity type is %s", corev1.ServiceAffinityClientIP)
		c := spec.SessionAffinityConfig
		switch {
		case c == nil:
			errs = append(errs, field.Required(cfgPath, why))
		case c.ClientIP == nil:
			errs = append(errs, field.Required(cfgPath.Child("clientIP"), why))
		case c.ClientIP.TimeoutSeconds == nil:
			errs = append(errs, field.Required(cfgPath.Child("clientIP", "timeoutSeconds"), why))
		case *c.ClientIP.TimeoutSeconds <= 0 || *c.ClientIP.TimeoutSeconds > maxClientIPAffinitySeconds:
			errs = append(errs, field.Invalid(cfgPath.Child("clientIP", "timeoutSeconds"), *c.ClientIP.TimeoutSeconds,
				fmt.Sprintf("must be greater than 0 and less than %d", maxClientIPAffinitySeconds)))
		}
	case corev1.ServiceAffinityNone:
		if spec.SessionAffinityConfig != nil {
			errs = append(errs, field.Forbidden(cfgPath, fmt.Sprintf("must not be set when session affinity is %s", corev1.ServiceAffinityNone)))
		}
	}
	return errs
}

// validateServicePortSets checks the ports together: no node port on a
// ClusterIP service, and no (protocol, port) or (protocol, node port) pair
// twice.
func validateServicePortSets(spec *corev1.ServiceSpec, specPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	portsPath := specPath.Child("ports")
	if spec.Type == corev1.ServiceTypeClusterIP {
		for i, p := range spec.Ports {
			if p.NodePort != 0 {
				errs = append(errs, field.Forbidden(portsPath.Index(i).Child("nodePort"), "may not be used when `type` is 'ClusterIP'"))
			}
		}
	}
	type key struct {
		proto corev1.Protocol
		port  int32
	}
	nodePorts := map[key]bool{}
	for i, p := range spec.Ports {
		if p.NodePort == 0 {
			continue
		}
		k := key{p.Protocol, p.NodePort}
		if nodePorts[k] {
			errs = append(errs, field.Duplicate(portsPath.Index(i).Child("nodePort"), p.NodePort))
		}
		nodePorts[k] = true
	}
	ports := map[key]bool{}
	for i, p := range spec.Ports {
		k := key{p.Protocol, p.Port}
		if ports[k] {
			errs = append(errs, field.Duplicate(portsPath.Index(i), corev1.ServicePort{Protocol: p.Protocol, Port: p.Port}))
		}
		ports[k] = true
	}
	return errs
}

func validateLoadBalancerFields(svc *corev1.Service, specPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	spec := &svc.Spec
	lb := spec.Type == corev1.ServiceTypeLoadBalancer
	if len(spec.LoadBalancerSourceRanges) > 0 {
		p := specPath.Child("LoadBalancerSourceRanges")
		if !lb {
			errs = append(errs, field.Forbidden(p, "may only be used when `type` is 'LoadBalancer'"))
		}
		for i, v := range spec.LoadBalancerSourceRanges {
			errs = append(errs, validation.IsValidCIDR(p.Index(i), strings.TrimSpace(v))...)
		}
	} else if v, ok := svc.Annotations[corev1.AnnotationLoadBalancerSourceRangesKey]; ok {
		// The annotation that came before the field, checked the same way.
		p := field.NewPath("metadata", "annotations").Key(corev1.AnnotationLoadBalancerSourceRangesKey)
		if !lb {
			errs = append(errs, field.Forbidden(p, "may only be used when `type` is 'LoadBalancer'"))
		}
		if v = strings.TrimSpace(v); v != "" {
			for _, cidr := range strings.Split(v, ",") {
				cidr = strings.TrimSpace(cidr)
				if _, err := netip.ParsePrefix(cidr); err != nil {
					errs = append(errs, field.Invalid(p, cidr, "must be a list of IP ranges. For example, 10.240.0.0/24,10.250.0.0/24 "))
				}
			}
		}
	}
	if spec.AllocateLoadBalancerNodePorts != nil && !lb {
		errs = append(errs, field.Forbidden(specPath.Child("allocateLoadBalancerNodePorts"), "may only be used when `type` is 'LoadBalancer'"))
	}
	if lb && spec.AllocateLoadBalancerNodePorts == nil {
		errs = append(errs, field.Required(field.NewPath("allocateLoadBalancerNodePorts"), ""))
	}
	if spec.LoadBalancerClass != nil {
		p := specPath.Child("loadBalancerClass")
		if !lb {
			errs = append(errs, field.Forbidden(p, "may only be used when `type` is 'LoadBalancer'"))
		} else {
			errs = append(errs, validateQualifiedName(*spec.LoadBalancerClass, p)...)
		}
	}
	return errs
}

// validateTrafficPolicies is validateServiceExternalTrafficPolicy,
// validateServiceInternalTrafficFieldsValue and
// validateServiceTrafficDistribution.
func validateTrafficPolicies(svc *corev1.Service, specPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	spec := &svc.Spec
	etp := specPath.Child("externalTrafficPolicy")
	if !ExternallyAccessible(svc) {
		if spec.ExternalTrafficPolicy != "" {
			errs = append(errs, field.Invalid(etp, spec.ExternalTrafficPolicy, "may only be set for externally-accessible services"))
		}
	} else if spec.ExternalTrafficPolicy == "" {
		errs = append(errs, field.Required(etp, ""))
	} else if !supportedExternalTraffic.Has(spec.ExternalTrafficPolicy) {
		errs = append(errs, field.NotSupported(etp, spec.ExternalTrafficPolicy, sets.List(supportedExternalTraffic)))
	}
	hc := specPath.Child("healthCheckNodePort")
	if !NeedsHealthCheckNodePort(svc) {
		if spec.HealthCheckNodePort != 0 {
			errs = append(errs, field.Invalid(hc, spec.HealthCheckNodePort, "may only be set when `type` is 'LoadBalancer' and `externalTrafficPolicy` is 'Local'"))
		}
	} else if spec.HealthCheckNodePort == 0 {
		errs = append(errs, field.Required(hc, ""))
	} else {
		for _, msg := range validation.IsValidPortNum(int(spec.HealthCheckNodePort)) {
			errs = append(errs, field.Invalid(hc, spec.HealthCheckNodePort, msg))
		}
	}
	itp := specPath.Child("internalTrafficPolicy")
	if spec.InternalTrafficPolicy == nil {
		// Not required of ExternalName services, for historical reasons.
		if spec.Type == corev1.ServiceTypeNodePort || spec.Type == corev1.ServiceTypeLoadBalancer || spec.Type == corev1.ServiceTypeClusterIP {
			errs = append(errs, field.Required(itp, ""))
		}
	} else if !supportedInternalTraffic.Has(*spec.InternalTrafficPolicy) {
		errs = append(errs, field.NotSupported(itp, *spec.InternalTrafficPolicy, sets.List(supportedInternalTraffic)))
	}
	if d := spec.TrafficDistribution; d != nil && *d != corev1.ServiceTrafficDistributionPreferClose &&
		*d != corev1.ServiceTrafficDistributionPreferSameZone && *d != corev1.ServiceTrafficDistributionPreferSameNode {
		errs = append(errs, field.NotSupported(specPath.Child("trafficDistribution"), *d, []string{
			corev1.ServiceTrafficDistributionPreferClose, corev1.ServiceTrafficDistributionPreferSameNode, corev1.ServiceTrafficDistributionPreferSameZone}))
	}
	return errs
}

// ValidateServiceClusterIPs is ValidateServiceClusterIPsRelatedFields:
// the checks of clusterIP, clusterIPs, ipFamilies and ipFamilyPolicy,
// which kube's allocator also runs before it allocates.
func ValidateServiceClusterIPs(svc *corev1.Service) field.ErrorList {
	return validateClusterIPsRelatedFields(svc)
}

func validateClusterIPsRelatedFields(svc *corev1.Service) field.ErrorList {
	spec := &svc.Spec
	if spec.Type == corev1.ServiceTypeExternalName {
		return nil
	}
	var errs field.ErrorList
	specPath := field.NewPath("spec")
	ipsPath := specPath.Child("clusterIPs")
	if spec.ClusterIP != "" {
		if len(spec.ClusterIPs) == 0 {
			errs = append(errs, field.Required(ipsPath, ""))
		} else if spec.ClusterIPs[0] != spec.ClusterIP {
			errs = append(errs, field.Invalid(ipsPath, spec.ClusterIPs, "first value must match `clusterIP`"))
		}
	} else if len(spec.ClusterIPs) != 0 {
		errs = append(errs, field.Invalid(ipsPath, spec.ClusterIPs, "must be empty when `clusterIP` is not specified"))
	}
	seen := sets.New[corev1.IPFamily]()
	for i, f := range spec.IPFamilies {
		p := specPath.Child("ipFamilies").Index(i)
		if !supportedIPFamilies.Has(f) {
			errs = append(errs, field.NotSupported(p, f, sets.List(supportedIPFamilies)))
		}
		if seen.Has(f) {
			errs = append(errs, field.Duplicate(p, f))
		}
		seen.Insert(f)
	}
	if p := spec.IPFamilyPolicy; p != nil && !supportedIPFamilyPolicies.Has(*p) {
		errs = append(errs, field.NotSupported(specPath.Child("ipFamilyPolicy"), p, sets.List(supportedIPFamilyPolicies)))
	}
	invalidIPs := false
	for i, ip := range spec.ClusterIPs {
		if i == 0 && ip == corev1.ClusterIPNone {
			if len(spec.ClusterIPs) > 1 {
				invalidIPs = true
				errs = append(errs, field.Invalid(ipsPath, spec.ClusterIPs, "'None' must be the first and only value"))
			}
			continue
		}
		e := validation.IsValidIP(ipsPath.Index(i), ip)
		invalidIPs = invalidIPs || len(e) > 0
		errs = append(errs, e...)
	}
	if len(spec.ClusterIPs) > 2 {
		errs = append(errs, field.Invalid(ipsPath, spec.ClusterIPs, "may only hold up to 2 values"))
	}
	if invalidIPs {
		return errs
	}
	if len(spec.ClusterIPs) == 2 && isIPv6(spec.ClusterIPs[0]) == isIPv6(spec.ClusterIPs[1]) {
		errs = append(errs, field.Invalid(ipsPath, spec.ClusterIPs, "may specify no more than one IP for each IP family"))
	}
	if !IsHeadless(svc) {
		for i, ip := range spec.ClusterIPs {
			if i >= len(spec.IPFamilies) {
				break
			}
			if spec.IPFamilies[i] == corev1.IPv4Protocol && isIPv6(ip) {
				errs = append(errs, field.Invalid(ipsPath.Index(i), ip, fmt.Sprintf("expected an IPv4 value as indicated by `ipFamilies[%v]`", i)))
			}
			if spec.IPFamilies[i] == corev1.IPv6Protocol && !isIPv6(ip) {
				errs = append(errs, field.Invalid(ipsPath.Index(i), ip, fmt.Sprintf("expected an IPv6 value as indicated by `ipFamilies[%v]`", i)))
			}
		}
	}
	return errs
}

func isIPv6(s string) bool {
	a, err := netip.ParseAddr(s)
	return err == nil && a.Is6() && !a.Is4In6()
}

// validateNonSpecialIP is ValidateNonSpecialIP: an external IP may not be
// unspecified, loopback or link-local.
func validateNonSpecialIP(s string, fldPath *field.Path) field.ErrorList {
	a, err := netip.ParseAddr(s)
	if err != nil {
		return field.ErrorList{field.Invalid(fldPath, s, "must be a valid IP address")}
	}
	a = a.Unmap()
	var msg string
	switch {
	case a.IsUnspecified():
		msg = fmt.Sprintf("may not be unspecified (%v)", s)
	case a.IsLoopback():
		msg = "may not be in the loopback range (127.0.0.0/8, ::1/128)"
	case a.IsLinkLocalUnicast():
		msg = "may not be in the link-local range (169.254.0.0/16, fe80::/10)"
	case a.IsLinkLocalMulticast():
		msg = "may not be in the link-local multicast range (224.0.0.0/24, ff02::/10)"
	default:
		return nil
	}
	return field.ErrorList{field.Invalid(fldPath, s, msg)}
}

// validateServiceUpdate is ValidateServiceUpdate (the object-meta checks
// are the updateValidator's): the primary cluster IP and IP family may not
// change unless the service changes to or from ExternalName, and neither
// may the health-check node port.
func validateServiceUpdate(svc, old *corev1.Service) field.ErrorList {
	var errs field.ErrorList
	ext := svc.Spec.Type == corev1.ServiceTypeExternalName || old.Spec.Type == corev1.ServiceTypeExternalName
	ipsPath := field.NewPath("spec", "clusterIPs")
	if !ext && !(IsHeadless(old) && IsHeadless(svc)) {
		o, n := old.Spec.ClusterIPs, svc.Spec.ClusterIPs
		switch {
		case len(o) == len(n):
			for i := range o {
				if o[i] != n[i] {
					errs = append(errs, field.Invalid(ipsPath.Index(i), n, "may not change once set"))
				}
			}
		case len(o) > len(n):
			if len(n) == 0 {
				errs = append(errs, field.Invalid(ipsPath.Index(0), n, "primary clusterIP can not be unset"))
			} else if n[0] != o[0] {
				errs = append(errs, field.Invalid(ipsPath.Index(0), n, "may not change once set"))
			}
		case len(o) > 0 && n[0] != o[0]:
			errs = append(errs, field.Invalid(ipsPath.Index(0), n, "may not change once set"))
		}
	}
	if !ext && IsHeadless(old) == IsHeadless(svc) && !IsHeadless(svc) {
		o, n := old.Spec.IPFamilies, svc.Spec.IPFamilies
		if len(o) > 0 && len(n) > 0 && o[0] != n[0] {
			errs = append(errs, field.Invalid(field.NewPath("spec", "ipFamilies").Index(0), n, "may not change once set"))
		}
	}
	if old.Spec.Type == corev1.ServiceTypeLoadBalancer && svc.Spec.Type == corev1.ServiceTypeLoadBalancer &&
		!ptrEqual(old.Spec.LoadBalancerClass, svc.Spec.LoadBalancerClass) {
		errs = append(errs, field.Invalid(field.NewPath("spec", "loadBalancerClass"), svc.Spec.LoadBalancerClass, "may not change once set"))
	}
	if NeedsHealthCheckNodePort(old) && NeedsHealthCheckNodePort(svc) && old.Spec.HealthCheckNodePort != svc.Spec.HealthCheckNodePort {
		errs = append(errs, field.Forbidden(field.NewPath("spec", "healthCheckNodePort"), "field is immutable"))
	}
	return append(errs, validateService(svc)...)
}

// validateServiceStatusUpdate is ValidateServiceStatusUpdate
// (ValidateLoadBalancerStatus): an ingress point's ip is an IP, its
// hostname a DNS name and not an IP, and ipMode (VIP or Proxy) goes with
// an ip only.
func validateServiceStatusUpdate(svc, _ *corev1.Service) field.ErrorList {
	var errs field.ErrorList
	p := field.NewPath("status", "loadBalancer", "ingress")
	for i, ing := range svc.Status.LoadBalancer.Ingress {
		idx := p.Index(i)
		if ing.IP != "" {
			errs = append(errs, validation.IsValidIP(idx.Child("ip"), ing.IP)...)
		}
		switch {
		case ing.IPMode != nil && ing.IP == "":
			errs = append(errs, field.Forbidden(idx.Child("ipMode"), "may not be specified when `ip` is not"))
		case ing.IPMode != nil && !supportedLoadBalancerIPModes.Has(*ing.IPMode):
			errs = append(errs, field.NotSupported(idx.Child("ipMode"), *ing.IPMode, sets.List(supportedLoadBalancerIPModes)))
		case ing.IPMode == nil && ing.IP != "":
			errs = append(errs, field.Required(idx.Child("ipMode"), "must be specified when `ip` is set"))
		}
		if ing.Hostname != "" {
			for _, msg := range validation.IsDNS1123Subdomain(ing.Hostname) {
				errs = append(errs, field.Invalid(idx.Child("hostname"), ing.Hostname, msg))
			}
			if _, err := netip.ParseAddr(ing.Hostname); err == nil {
				errs = append(errs, field.Invalid(idx.Child("hostname"), ing.Hostname, "must be a DNS name, not an IP address"))
			}
		}
	}
	return errs
}
