package endpointmirror

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	endpointsliceutil "k8s.io/endpointslice/util"
)

// This file is the pure half of kube's mirroring reconciler: from one
// Endpoints object and the slices mirrored for it so far, the slices to
// create, update and delete (reconciler.go, reconciler_helpers.go and
// utils.go of pkg/controller/endpointslicemirroring).

// portKey names one group of slices: an address type and a set of ports
// (kube's addrTypePortMapKey).
type portKey string

func newPortKey(ports []discoveryv1.EndpointPort, at discoveryv1.AddressType) portKey {
	// NewPortMapKey sorts ports in place: callers keep that order.
	return portKey(fmt.Sprintf("%s-%s", at, endpointsliceutil.NewPortMapKey(ports)))
}

func (k portKey) addressType() discoveryv1.AddressType {
	if strings.HasPrefix(string(k), string(discoveryv1.AddressTypeIPv6)) {
		return discoveryv1.AddressTypeIPv6
	}
	return discoveryv1.AddressTypeIPv4
}

// desired is the endpoints and ports each group of slices should hold.
type desired struct {
	ports     map[portKey][]discoveryv1.EndpointPort
	endpoints map[portKey]endpointsliceutil.EndpointSet
	// invalid counts addresses that are not IPs; skipped counts every
	// address not mirrored, those and the ones beyond the limit.
	invalid, skipped int
}

// desiredOf is the first half of kube's reconcile: every subset's
// addresses, at most max of each subset, by address type and ports.
func desiredOf(ep *corev1.Endpoints, max int) *desired {
	d := &desired{ports: map[portKey][]discoveryv1.EndpointPort{}, endpoints: map[portKey]endpointsliceutil.EndpointSet{}}
	for _, subset := range ep.Subsets {
		keys := d.initPorts(subset.Ports)
		added := 0
		add := func(addrs []corev1.EndpointAddress, ready bool) {
			for _, a := range addrs {
				if added >= max {
					return
				}
				e, at, ok := addressToEndpoint(a, ready)
				if !ok {
					d.invalid++
					continue
				}
				d.endpoints[keys[at]].Insert(e)
				added++
			}
		}
		add(subset.Addresses, true)
		add(subset.NotReadyAddresses, false)
		d.skipped += len(subset.Addresses) + len(subset.NotReadyAddresses) - added
	}
	return d
}

// initPorts makes the groups of one subset's ports, one per address type.
func (d *desired) initPorts(epPorts []corev1.EndpointPort) map[discoveryv1.AddressType]portKey {
	ports := make([]discoveryv1.EndpointPort, 0, len(epPorts))
	for _, p := range epPorts {
		ports = append(ports, discoveryv1.EndpointPort{Name: ptr(p.Name), Port: ptr(p.Port), Protocol: ptr(p.Protocol), AppProtocol: cloneOpt(p.AppProtocol)})
	}
	keys := map[discoveryv1.AddressType]portKey{}
	for _, at := range []discoveryv1.AddressType{discoveryv1.AddressTypeIPv4, discoveryv1.AddressTypeIPv6} {
		k := newPortKey(ports, at)
		keys[at] = k
		if d.endpoints[k] == nil {
			d.endpoints[k] = endpointsliceutil.EndpointSet{}
		}
		d.ports[k] = ports
	}
	return keys
}

// addressToEndpoint is an Endpoints address as a slice endpoint: the IP
// in its canonical form, ready, the target, node and hostname.
// ok=false when the address is not an IP.
func addressToEndpoint(a corev1.EndpointAddress, ready bool) (*discoveryv1.Endpoint, discoveryv1.AddressType, bool) {
	ip, err := netip.ParseAddr(a.IP)
	if err != nil || ip.Zone() != "" {
		return nil, "", false
	}
	at := discoveryv1.AddressTypeIPv4
	if ip.Is6() && !ip.Is4In6() {
		at = discoveryv1.AddressTypeIPv6
	}
	e := &discoveryv1.Endpoint{
		Addresses:  []string{ip.Unmap().String()},
		Conditions: discoveryv1.EndpointConditions{Ready: ptr(ready)},
		TargetRef:  a.TargetRef.DeepCopy(),
		NodeName:   cloneOpt(a.NodeName),
	}
	if a.Hostname != "" {
		e.Hostname = ptr(a.Hostname)
	}
	return e, at, true
}

// plan is what to write: kube's slicesByAction.
type plan struct {
	create, update, remove []*discoveryv1.EndpointSlice
}

// planFor compares the desired endpoints of ep with the slices mirrored
// for it (existing) and says what to write, as kube's reconcile,
// reconcileByPortMapping and recycleSlices.
func planFor(ep *corev1.Endpoints, existing []*discoveryv1.EndpointSlice, d *desired, max int) plan {
	byKey := map[portKey][]*discoveryv1.EndpointSlice{}
	for _, es := range existing {
		ports := slices.Clone(es.Ports)
		k := newPortKey(ports, es.AddressType)
		byKey[k] = append(byKey[k], es)
	}
	var p plan
	// Sorted keys: the order of writes does not depend on map order.
	for _, k := range sortedKeys(d.endpoints) {
		want := d.endpoints[k]
		have := byKey[k]
		if want.Len() == 0 {
			p.remove = append(p.remove, have...)
			continue
		}
		name := ""
		if len(have) > 0 {
			p.remove = append(p.remove, have[1:]...)
			if unchanged(have[0], want) {
				continue
			}
			name = have[0].Name
		}
		es := newSlice(ep, d.ports[k], k.addressType(), name)
		for _, e := range sortedEndpoints(want) {
			if len(es.Endpoints) >= max {
				break
			}
			es.Endpoints = append(es.Endpoints, *e)
		}
		if name != "" {
			p.update = append(p.update, es)
		} else {
			p.create = append(p.create, es)
		}
	}
	for _, k := range sortedKeys(byKey) {
		if _, ok := d.endpoints[k]; !ok {
			p.remove = append(p.remove, byKey[k]...)
		}
	}
	p.recycle()
	return p
}

// unchanged: es holds exactly the endpoints of want, equal beyond their
// identity (kube's totalChanges finding nothing to add, update or remove).
func unchanged(es *discoveryv1.EndpointSlice, want endpointsliceutil.EndpointSet) bool {
	matched := 0
	for i := range es.Endpoints {
		e := es.Endpoints[i].DeepCopy()
		got := want.Get(e)
		if got == nil || !endpointsliceutil.EndpointsEqualBeyondHash(got, e) {
			return false
		}
		matched++
	}
	return matched == want.Len()
}

// recycle turns a create and a delete of the same address type into an
// update of the slice that would have been deleted.
func (p *plan) recycle() {
	for _, at := range []discoveryv1.AddressType{discoveryv1.AddressTypeIPv4, discoveryv1.AddressTypeIPv6} {
		for {
			ci := slices.IndexFunc(p.create, func(es *discoveryv1.EndpointSlice) bool { return es.AddressType == at })
			ri := slices.IndexFunc(p.remove, func(es *discoveryv1.EndpointSlice) bool { return es.AddressType == at })
			if ci < 0 || ri < 0 {
				break
			}
			es := p.create[ci]
			es.Name, es.GenerateName = p.remove[ri].Name, ""
			p.update = append(p.update, es)
			p.create = slices.Delete(p.create, ci, ci+1)
			p.remove = slices.Delete(p.remove, ri, ri+1)
		}
	}
}

// newSlice is kube's newEndpointSlice: the Endpoints' labels and
// annotations (but two), the service-name and managed-by labels, an owner
// reference to the Endpoints, and name, or a generated name when empty.
func newSlice(ep *corev1.Endpoints, ports []discoveryv1.EndpointPort, at discoveryv1.AddressType, name string) *discoveryv1.EndpointSlice {
	es := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:       ep.Namespace,
			Labels:          map[string]string{},
			Annotations:     map[string]string{},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(ep, corev1.SchemeGroupVersion.WithKind("Endpoints"))},
		},
		AddressType: at,
		Ports:       slices.Clone(ports),
		Endpoints:   []discoveryv1.Endpoint{},
	}
	for k, v := range ep.Labels {
		es.Labels[k] = v
	}
	es.Labels[discoveryv1.LabelServiceName] = ep.Name
	es.Labels[discoveryv1.LabelManagedBy] = ManagedBy
	for k, v := range ep.Annotations {
		if k != corev1.EndpointsLastChangeTriggerTime && k != corev1.LastAppliedConfigAnnotation {
			es.Annotations[k] = v
		}
	}
	if name != "" {
		es.Name = name
	} else {
		es.GenerateName = slicePrefix(ep.Name)
	}
	return es
}

// slicePrefix is "<name>-", or the name alone when the dash would make
// the prefix too long for a generated name (kube's
// getEndpointSlicePrefix with ValidateEndpointSliceName).
func slicePrefix(name string) string {
	if len(name)+1 > validation.DNS1123SubdomainMaxLength {
		return name
	}
	return name + "-"
}

func sortedKeys[V any](m map[portKey]V) []portKey {
	keys := make([]portKey, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// sortedEndpoints is the set in address order, so that a rewrite is
// stable (kube pops them in map order).
func sortedEndpoints(s endpointsliceutil.EndpointSet) []*discoveryv1.Endpoint {
	out := s.UnsortedList()
	slices.SortFunc(out, func(a, b *discoveryv1.Endpoint) int { return strings.Compare(a.Addresses[0], b.Addresses[0]) })
	return out
}

func ptr[T any](v T) *T { return &v }

func cloneOpt[T any](p *T) *T {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}
