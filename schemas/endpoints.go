package schemas

import (
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// This file is core/v1 Endpoints and discovery.k8s.io/v1 EndpointSlices:
// their defaults, strategies, validation (ValidateEndpoints of
// pkg/apis/core/validation, ValidateEndpointSlice of
// pkg/apis/discovery/validation) and printEndpoints /
// printEndpointSlice.

func endpointsResource(now func() time.Time) *Resource {
	return &Resource{
		GroupVersion: gvCore, Kind: "Endpoints", Plural: "endpoints", Singular: "endpoints",
		ShortNames: []string{"ep"}, Namespaced: true,
		New:              func() Object { return &corev1.Endpoints{} },
		NewList:          func() runtime.Object { return &corev1.EndpointsList{} },
		Default:          defaulter(defaultEndpoints),
		PrepareForCreate: defaulter(prepareNothing[*corev1.Endpoints]),
		PrepareForUpdate: preparer(prepareKeepGeneration[*corev1.Endpoints]),
		ValidateCreate:   createValidator(true, validateEndpoints),
		ValidateUpdate:   updateValidator(true, func(ep, _ *corev1.Endpoints) field.ErrorList { return validateEndpoints(ep) }),
		Fields:           fieldser[*corev1.Endpoints](true, nil),
		Table:            endpointsTable(now),
	}
}

func endpointSliceResource(now func() time.Time) *Resource {
	return &Resource{
		GroupVersion: gvDiscovery, Kind: "EndpointSlice", Plural: "endpointslices", Singular: "endpointslice",
		Namespaced:       true,
		New:              func() Object { return &discoveryv1.EndpointSlice{} },
		NewList:          func() runtime.Object { return &discoveryv1.EndpointSliceList{} },
		Default:          defaulter(defaultEndpointSlice),
		PrepareForCreate: defaulter(prepareEndpointSliceCreate),
		PrepareForUpdate: preparer(prepareEndpointSliceUpdate),
		ValidateCreate:   createValidator(true, validateEndpointSlice),
		ValidateUpdate:   updateValidator(true, validateEndpointSliceUpdate),
		Fields:           fieldser[*discoveryv1.EndpointSlice](true, nil),
		Table:            endpointSliceTable(now),
	}
}

// defaultEndpoints is SetObjectDefaults_Endpoints: a port's protocol is
// TCP.
func defaultEndpoints(ep *corev1.Endpoints) {
	for i := range ep.Subsets {
		for j := range ep.Subsets[i].Ports {
			if p := &ep.Subsets[i].Ports[j]; p.Protocol == "" {
				p.Protocol = corev1.ProtocolTCP
			}
		}
	}
}

// defaultEndpointSlice is SetObjectDefaults_EndpointSlice: a port's name
// is "" and its protocol TCP.
func defaultEndpointSlice(eps *discoveryv1.EndpointSlice) {
	for i := range eps.Ports {
		p := &eps.Ports[i]
		if p.Name == nil {
			empty := ""
			p.Name = &empty
		}
		if p.Protocol == nil {
			tcp := corev1.ProtocolTCP
			p.Protocol = &tcp
		}
	}
}

func prepareEndpointSliceCreate(eps *discoveryv1.EndpointSlice) { eps.Generation = 1 }

// prepareEndpointSliceUpdate bumps the generation when anything but
// metadata changed, or the labels did (kube's endpointslice strategy).
func prepareEndpointSliceUpdate(eps, old *discoveryv1.EndpointSlice) {
	keepGeneration(eps, old)
	a, b := *eps, *old
	a.ObjectMeta, b.ObjectMeta = metav1.ObjectMeta{}, metav1.ObjectMeta{}
	if !apiequality.Semantic.DeepEqual(a, b) || !apiequality.Semantic.DeepEqual(eps.Labels, old.Labels) {
		eps.Generation = old.Generation + 1
	}
}

// validateEndpoints is ValidateEndpoints: a name is a DNS subdomain, each
// subset has addresses (ports are optional for headless services).
func validateEndpoints(ep *corev1.Endpoints) field.ErrorList {
	errs := apivalidation.ValidateObjectMeta(&ep.ObjectMeta, true, apivalidation.NameIsDNSSubdomain, metaPath)
	subsetsPath := field.NewPath("subsets")
	for i, ss := range ep.Subsets {
		p := subsetsPath.Index(i)
		if len(ss.Addresses) == 0 && len(ss.NotReadyAddresses) == 0 {
			errs = append(errs, field.Required(p, "must specify `addresses` or `notReadyAddresses`"))
		}
		for j := range ss.Addresses {
			errs = append(errs, validateEndpointAddress(&ss.Addresses[j], p.Child("addresses").Index(j))...)
		}
		for j := range ss.NotReadyAddresses {
			errs = append(errs, validateEndpointAddress(&ss.NotReadyAddresses[j], p.Child("notReadyAddresses").Index(j))...)
		}
		for j := range ss.Ports {
			errs = append(errs, validateEndpointPort(&ss.Ports[j], len(ss.Ports) > 1, p.Child("ports").Index(j))...)
		}
	}
	return errs
}

func validateEndpointAddress(a *corev1.EndpointAddress, fldPath *field.Path) field.ErrorList {
	errs := validation.IsValidIP(fldPath.Child("ip"), a.IP)
	if a.Hostname != "" {
		errs = append(errs, validateDNS1123Label(a.Hostname, fldPath.Child("hostname"))...)
	}
	if a.NodeName != nil {
		errs = append(errs, validateNameWith(apivalidation.NameIsDNSSubdomain, *a.NodeName, fldPath.Child("nodeName"))...)
	}
	if len(errs) == 0 {
		errs = append(errs, validateNonSpecialIP(a.IP, fldPath.Child("ip"))...)
	}
	return errs
}

func validateEndpointPort(p *corev1.EndpointPort, requireName bool, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if requireName && p.Name == "" {
		errs = append(errs, field.Required(fldPath.Child("name"), ""))
	} else if p.Name != "" {
		errs = append(errs, validateDNS1123Label(p.Name, fldPath.Child("name"))...)
	}
	for _, msg := range validation.IsValidPortNum(int(p.Port)) {
		errs = append(errs, field.Invalid(fldPath.Child("port"), p.Port, msg))
	}
	errs = append(errs, validateProtocol(p.Protocol, fldPath.Child("protocol"))...)
	if p.AppProtocol != nil {
		errs = append(errs, validateQualifiedName(*p.AppProtocol, fldPath.Child("appProtocol"))...)
	}
	return errs
}

func validateProtocol(p corev1.Protocol, fldPath *field.Path) field.ErrorList {
	if p == "" {
		return field.ErrorList{field.Required(fldPath, "")}
	}
	if !supportedServicePortProtocol.Has(p) {
		return field.ErrorList{field.NotSupported(fldPath, p, sets.List(supportedServicePortProtocol))}
	}
	return nil
}

// The limits of pkg/apis/discovery/validation.
const (
	maxSliceTopologyLabels = 16
	maxSliceAddresses      = 100
	maxSlicePorts          = 100
	maxSliceEndpoints      = 1000
)

var supportedAddressTypes = sets.New(discoveryv1.AddressTypeIPv4, discoveryv1.AddressTypeIPv6, discoveryv1.AddressTypeFQDN)

// validateEndpointSlice is ValidateEndpointSliceCreate.
func validateEndpointSlice(eps *discoveryv1.EndpointSlice) field.ErrorList {
	errs := apivalidation.ValidateObjectMeta(&eps.ObjectMeta, true, apivalidation.NameIsDNSSubdomain, metaPath)
	if eps.AddressType == "" {
		errs = append(errs, field.Required(field.NewPath("addressType"), ""))
	} else if !supportedAddressTypes.Has(eps.AddressType) {
		errs = append(errs, field.NotSupported(field.NewPath("addressType"), eps.AddressType, sets.List(supportedAddressTypes)))
	}
	errs = append(errs, validateSliceEndpoints(eps.Endpoints, eps.AddressType, field.NewPath("endpoints"))...)
	return append(errs, validateSlicePorts(eps.Ports, field.NewPath("ports"))...)
}

// validateEndpointSliceUpdate is ValidateEndpointSliceUpdate: the address
// type is immutable.
func validateEndpointSliceUpdate(eps, old *discoveryv1.EndpointSlice) field.ErrorList {
	errs := validateEndpointSlice(eps)
	return append(errs, apivalidation.ValidateImmutableField(eps.AddressType, old.AddressType, field.NewPath("addressType"))...)
}

func validateSliceEndpoints(eps []discoveryv1.Endpoint, addrType discoveryv1.AddressType, fldPath *field.Path) field.ErrorList {
	if len(eps) > maxSliceEndpoints {
		return field.ErrorList{field.TooMany(fldPath, len(eps), maxSliceEndpoints)}
	}
	var errs field.ErrorList
	for i, ep := range eps {
		p := fldPath.Index(i)
		addrPath := p.Child("addresses")
		if len(ep.Addresses) == 0 {
			errs = append(errs, field.Required(addrPath, "must contain at least 1 address"))
		} else if len(ep.Addresses) > maxSliceAddresses {
			errs = append(errs, field.TooMany(addrPath, len(ep.Addresses), maxSliceAddresses))
		}
		for j, a := range ep.Addresses {
			ap := addrPath.Index(j)
			switch addrType {
			case discoveryv1.AddressTypeIPv4, discoveryv1.AddressTypeIPv6:
				errs = append(errs, validateSliceIP(a, addrType == discoveryv1.AddressTypeIPv6, ap)...)
			case discoveryv1.AddressTypeFQDN:
				errs = append(errs, validation.IsFullyQualifiedDomainName(ap, a)...)
			}
		}
		if ep.DeprecatedTopology != nil {
			tp := p.Child("deprecatedTopology")
			if len(ep.DeprecatedTopology) > maxSliceTopologyLabels {
				errs = append(errs, field.TooMany(tp, len(ep.DeprecatedTopology), maxSliceTopologyLabels))
			}
			errs = append(errs, metav1validation.ValidateLabels(ep.DeprecatedTopology, tp)...)
		}
		if ep.Hostname != nil {
			errs = append(errs, validateDNS1123Label(*ep.Hostname, p.Child("hostname"))...)
		}
		if ep.NodeName != nil {
			errs = append(errs, validateNameWith(apivalidation.NameIsDNSSubdomain, *ep.NodeName, p.Child("nodeName"))...)
		}
	}
	return errs
}

// validateSliceIP checks an address of an IPv4 or IPv6 slice.
func validateSliceIP(a string, v6 bool, fldPath *field.Path) field.ErrorList {
	if errs := validation.IsValidIP(fldPath, a); len(errs) > 0 {
		return errs
	}
	if isIPv6(a) != v6 {
		family := "IPv4"
		if v6 {
			family = "IPv6"
		}
		return field.ErrorList{field.Invalid(fldPath, a, "must be an "+family+" address")}
	}
	return validateNonSpecialIP(a, fldPath)
}

func validateSlicePorts(ports []discoveryv1.EndpointPort, fldPath *field.Path) field.ErrorList {
	if len(ports) > maxSlicePorts {
		return field.ErrorList{field.TooMany(fldPath, len(ports), maxSlicePorts)}
	}
	var errs field.ErrorList
	names := sets.New[string]()
	for i, port := range ports {
		p := fldPath.Index(i)
		name := ""
		if port.Name != nil {
			name = *port.Name
		}
		if name != "" {
			errs = append(errs, validateDNS1123Label(name, p.Child("name"))...)
		}
		if names.Has(name) {
			errs = append(errs, field.Duplicate(p.Child("name"), name))
		}
		names.Insert(name)
		if port.Protocol == nil {
			errs = append(errs, field.Required(p.Child("protocol"), ""))
		} else {
			errs = append(errs, validateProtocol(*port.Protocol, p.Child("protocol"))...)
		}
		if port.AppProtocol != nil {
			errs = append(errs, validateQualifiedName(*port.AppProtocol, p.Child("appProtocol"))...)
		}
	}
	return errs
}

func endpointsTable(now func() time.Time) *table {
	cols := []metav1.TableColumnDefinition{
		nameColumn,
		{Name: "Endpoints", Type: "string", Description: corev1.Endpoints{}.SwaggerDoc()["subsets"]},
		ageColumn,
	}
	return tableOf(cols, func(ep *corev1.Endpoints) []any {
		return []any{ep.Name, formatEndpoints(ep), since(now, ep.CreationTimestamp)}
	})
}

// maxListed is how many addresses or ports the endpoint tables list
// before "+ N more...".
const maxListed = 3

// formatEndpoints is printers' formatEndpoints with no port filter.
func formatEndpoints(ep *corev1.Endpoints) string {
	if len(ep.Subsets) == 0 {
		return "<none>"
	}
	var list []string
	count := 0
	for _, ss := range ep.Subsets {
		if len(ss.Ports) == 0 {
			for _, a := range ss.Addresses {
				count++
				if len(list) < maxListed {
					list = append(list, a.IP)
				}
			}
			continue
		}
		for _, port := range ss.Ports {
			for _, a := range ss.Addresses {
				count++
				if len(list) < maxListed {
					list = append(list, net.JoinHostPort(a.IP, strconv.Itoa(int(port.Port))))
				}
			}
		}
	}
	ret := strings.Join(list, ",")
	if count > maxListed {
		return fmt.Sprintf("%s + %d more...", ret, count-maxListed)
	}
	return ret
}

func endpointSliceTable(now func() time.Time) *table {
	doc := discoveryv1.EndpointSlice{}.SwaggerDoc()
	cols := []metav1.TableColumnDefinition{
		nameColumn,
		{Name: "AddressType", Type: "string", Description: doc["addressType"]},
		{Name: "Ports", Type: "string", Description: doc["ports"]},
		{Name: "Endpoints", Type: "string", Description: doc["endpoints"]},
		ageColumn,
	}
	return tableOf(cols, func(eps *discoveryv1.EndpointSlice) []any {
		var ports, addrs []string
		for _, p := range eps.Ports {
			switch {
			case p.Port != nil:
				ports = append(ports, strconv.Itoa(int(*p.Port)))
			case p.Name != nil:
				ports = append(ports, *p.Name)
			default:
				ports = append(ports, "*")
			}
		}
		for _, ep := range eps.Endpoints {
			addrs = append(addrs, ep.Addresses...)
		}
		return []any{eps.Name, string(eps.AddressType), listWithMore(ports), listWithMore(addrs), since(now, eps.CreationTimestamp)}
	})
}

// listWithMore is listWithMoreString over the first maxListed items.
func listWithMore(items []string) string {
	if len(items) > maxListed {
		return fmt.Sprintf("%s + %d more...", strings.Join(items[:maxListed], ","), len(items)-maxListed)
	}
	if len(items) == 0 {
		return "<unset>"
	}
	return strings.Join(items, ",")
}
