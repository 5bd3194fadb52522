package endpoint

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
)

// addrKey tells addresses apart as kube's RepackSubsets does: the same IP
// of two pods is two addresses.
type addrKey struct {
	ip  string
	uid types.UID
}

// portKey is an EndpointPort as a map key (AppProtocol by value).
type portKey struct {
	name, appProtocol string
	port              int32
	protocol          corev1.Protocol
}

func keyOfPort(p corev1.EndpointPort) portKey {
	k := portKey{name: p.Name, port: p.Port, protocol: p.Protocol}
	if p.AppProtocol != nil {
		k.appProtocol = *p.AppProtocol
	}
	return k
}

// repackSubsets is kube's endpoints.RepackSubsets: every address with
// the set of ports it offers, one subset per distinct set of addresses,
// an address ready if it is ready on any subset it came in; sorted
// (addresses by IP and pod, ports and subsets in a stable order).
func repackSubsets(subsets []corev1.EndpointSubset) []corev1.EndpointSubset {
	addrs := map[addrKey]corev1.EndpointAddress{}
	ports := map[portKey]corev1.EndpointPort{}
	// ready[port][addr]: that address offers that port, ready or not.
	ready := map[portKey]map[addrKey]bool{}
	add := func(a corev1.EndpointAddress, p portKey, r bool) {
		k := addrKey{ip: a.IP}
		if a.TargetRef != nil {
			k.uid = a.TargetRef.UID
		}
		if _, ok := addrs[k]; !ok {
			addrs[k] = a
		}
		if ready[p] == nil {
			ready[p] = map[addrKey]bool{}
		}
		ready[p][k] = ready[p][k] || r
	}
	noPort := portKey{port: -1} // keeps addresses without ports
	for _, s := range subsets {
		keys := []portKey{noPort}
		if len(s.Ports) > 0 {
			keys = keys[:0]
			for _, p := range s.Ports {
				k := keyOfPort(p)
				ports[k] = p
				keys = append(keys, k)
			}
		}
		for _, k := range keys {
			for _, a := range s.Addresses {
				add(a, k, true)
			}
			for _, a := range s.NotReadyAddresses {
				add(a, k, false)
			}
		}
	}
	type group struct {
		addrs map[addrKey]bool
		ports []corev1.EndpointPort
	}
	groups := map[string]*group{}
	for p, set := range ready {
		id := setID(set)
		g, ok := groups[id]
		if !ok {
			g = &group{addrs: set}
			groups[id] = g
		}
		if p != noPort {
			g.ports = append(g.ports, ports[p])
		}
	}
	out := make([]corev1.EndpointSubset, 0, len(groups))
	for _, id := range slices.Sorted(maps.Keys(groups)) {
		g := groups[id]
		var s corev1.EndpointSubset
		for _, k := range sortedAddrs(g.addrs) {
			if g.addrs[k] {
				s.Addresses = append(s.Addresses, addrs[k])
			} else {
				s.NotReadyAddresses = append(s.NotReadyAddresses, addrs[k])
			}
		}
		slices.SortFunc(g.ports, func(a, b corev1.EndpointPort) int {
			return cmp.Or(cmp.Compare(a.Name, b.Name), cmp.Compare(a.Port, b.Port), cmp.Compare(a.Protocol, b.Protocol))
		})
		s.Ports = g.ports
		out = append(out, s)
	}
	return out
}

func sortedAddrs(set map[addrKey]bool) []addrKey {
	return slices.SortedFunc(maps.Keys(set), func(a, b addrKey) int {
		return cmp.Or(cmp.Compare(a.ip, b.ip), cmp.Compare(a.uid, b.uid))
	})
}

// setID names a set of addresses with their readiness.
func setID(set map[addrKey]bool) string {
	var b strings.Builder
	for _, k := range sortedAddrs(set) {
		fmt.Fprintf(&b, "%s/%s/%t;", k.ip, k.uid, set[k])
	}
	return b.String()
}

// upToDate reports whether current already holds subsets, svc's labels
// and a correct capacity annotation (kube compares the same, ignoring
// the pods' resourceVersions and the headless label).
func upToDate(current *corev1.Endpoints, svc *corev1.Service, subsets []corev1.EndpointSubset) bool {
	lbls := current.Labels
	if _, ok := lbls[corev1.IsHeadlessService]; ok {
		lbls = maps.Clone(lbls)
		delete(lbls, corev1.IsHeadlessService)
	}
	return equality.Semantic.DeepEqual(withoutRVs(current.Subsets), withoutRVs(subsets)) &&
		equality.Semantic.DeepEqual(lbls, svc.Labels) && capacityAnnotationCorrect(current.Annotations, current.Subsets)
}

// withoutRVs is subsets without the pods' resourceVersions; nil and
// empty lists compare equal.
func withoutRVs(subsets []corev1.EndpointSubset) []corev1.EndpointSubset {
	if len(subsets) == 0 {
		return nil
	}
	out := make([]corev1.EndpointSubset, len(subsets))
	strip := func(as []corev1.EndpointAddress) []corev1.EndpointAddress {
		if len(as) == 0 {
			return nil
		}
		cp := make([]corev1.EndpointAddress, len(as))
		for i, a := range as {
			if a.TargetRef != nil {
				ref := *a.TargetRef
				ref.ResourceVersion = ""
				a.TargetRef = &ref
			}
			cp[i] = a
		}
		return cp
	}
	for i, s := range subsets {
		out[i] = corev1.EndpointSubset{Addresses: strip(s.Addresses), NotReadyAddresses: strip(s.NotReadyAddresses), Ports: s.Ports}
		if len(s.Ports) == 0 {
			out[i].Ports = nil
		}
	}
	return out
}

// capacityAnnotationCorrect is kube's capacityAnnotationSetCorrectly:
// false when over capacity (the subsets must be truncated) or when the
// annotation is set while under it.
func capacityAnnotationCorrect(annotations map[string]string, subsets []corev1.EndpointSubset) bool {
	n := 0
	for _, s := range subsets {
		n += len(s.Addresses) + len(s.NotReadyAddresses)
	}
	if n > MaxEndpointsCapacity {
		return false
	}
	_, ok := annotations[corev1.EndpointsOverCapacity]
	return !ok
}

// truncateEndpoints is kube's: beyond MaxEndpointsCapacity addresses,
// keep ready addresses first, each subset keeping its proportion.
func truncateEndpoints(ep *corev1.Endpoints) bool {
	totalReady, totalNotReady := 0, 0
	for _, s := range ep.Subsets {
		totalReady += len(s.Addresses)
		totalNotReady += len(s.NotReadyAddresses)
	}
	if totalReady+totalNotReady <= MaxEndpointsCapacity {
		return false
	}
	truncateReady := totalReady > MaxEndpointsCapacity
	limit, total := MaxEndpointsCapacity-totalReady, totalNotReady
	if truncateReady {
		limit, total = MaxEndpointsCapacity, totalReady
	}
	left := limit
	for i := range ep.Subsets {
		s := &ep.Subsets[i]
		in := len(s.NotReadyAddresses)
		if truncateReady {
			in = len(s.Addresses)
		}
		n := min(int(math.Ceil(float64(in)/float64(total)*float64(limit))), left)
		if truncateReady {
			s.Addresses = s.Addresses[:min(n, len(s.Addresses))]
			s.NotReadyAddresses = []corev1.EndpointAddress{}
			left -= len(s.Addresses)
		} else {
			s.NotReadyAddresses = s.NotReadyAddresses[:min(n, len(s.NotReadyAddresses))]
			left -= len(s.NotReadyAddresses)
		}
	}
	return true
}

// staleTracker remembers, per Service, the resourceVersion of Endpoints
// this controller replaced, so that a cache still holding it is known to
// be out of date (kube's staleEndpointsTracker).
type staleTracker struct {
	mu sync.Mutex
	rv map[string]string
}

func newStaleTracker() *staleTracker { return &staleTracker{rv: map[string]string{}} }

func (t *staleTracker) mark(key, rv string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.rv[key] = rv
}

func (t *staleTracker) isStale(key, rv string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.rv[key] == rv
}

func (t *staleTracker) forget(key string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.rv, key)
}
