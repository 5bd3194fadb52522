package servicealloc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/cairn-dev/cairn/schemas"
	"github.com/cairn-dev/cairn/services/apiserver/storage"
)

// The prefixes of the allocation keys.
const (
	IPPrefix   = "/cairn/alloc/serviceips/"
	PortPrefix = "/cairn/alloc/nodeports/"
)

// IPKey is the allocation key of a cluster IP.
func IPKey(ip netip.Addr) string { return IPPrefix + ip.String() }

// PortKey is the allocation key of a node port.
func PortKey(port int) string { return PortPrefix + strconv.Itoa(port) }

// Holder is the value of an allocation key: the Service holding it.
type Holder struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	UID       string `json:"uid"`
}

// ErrFull is the error of an allocation from a range with nothing left;
// errors.Is finds it in a *FullError.
var ErrFull = errors.New("range is full")

// FullError says which range is full, in kube's words ("failed to
// allocate a serviceIP: range is full"); kube answers it with 500.
type FullError struct{ What string }

func (e *FullError) Error() string { return "failed to allocate a " + e.What + ": " + ErrFull.Error() }

// Unwrap makes errors.Is(err, ErrFull) hold.
func (e *FullError) Unwrap() error { return ErrFull }

// InvalidError is a refused request for a value: out of its range, or
// taken. Errs are the field errors kube answers with 422.
type InvalidError struct{ Errs field.ErrorList }

func (e *InvalidError) Error() string { return e.Errs.ToAggregate().Error() }

// Allocator assigns and claims cluster IPs and node ports. It keeps no
// state of its own: etcd has the allocation. Safe for concurrent use.
type Allocator struct {
	IPs   IPRange
	Ports PortRange
	cli   *clientv3.Client
}

// New returns an Allocator over ranges ips and ports, reading the
// allocation from etcd through cli.
func New(cli *clientv3.Client, ips IPRange, ports PortRange) *Allocator {
	return &Allocator{IPs: ips, Ports: ports, cli: cli}
}

// Prepare is kube's initIPFamilyFields (pkg/registry/core/service/storage
// alloc.go) on this cluster, run before validation: it defaults
// ipFamilyPolicy (the old service's on an update; RequireDualStack for a
// headless Service without a selector, SingleStack otherwise) and
// ipFamilies (from the cluster IPs, else the cluster's family), and
// refuses with kube's field errors what the cluster cannot give: a family
// it has no range for (an IPv6 cluster IP or family here), RequireDualStack
// on a single-stack cluster, and a single-stack policy with two IPs or
// families.
func (a *Allocator) Prepare(svc, old *corev1.Service) field.ErrorList {
	if !schemas.NeedsClusterIP(svc) {
		return nil
	}
	if old != nil && matchingPreferDualStack(svc, old) {
		return nil
	}
	spec := &svc.Spec
	headlessSelectorless := spec.ClusterIP == corev1.ClusterIPNone && len(spec.Selector) == 0
	if spec.IPFamilyPolicy == nil {
		switch {
		case old != nil && old.Spec.IPFamilyPolicy != nil:
			spec.IPFamilyPolicy = ptr(*old.Spec.IPFamilyPolicy)
		case headlessSelectorless:
			spec.IPFamilyPolicy = ptr(corev1.IPFamilyPolicyRequireDualStack)
		default:
			spec.IPFamilyPolicy = ptr(corev1.IPFamilyPolicySingleStack)
		}
	}
	// kube's loose pre-validation, so that what follows sees IPs.
	if errs := schemas.ValidateServiceClusterIPs(svc); len(errs) > 0 {
		return errs
	}
	var errs field.ErrorList
	policyPath := field.NewPath("spec", "ipFamilyPolicy")
	single := *spec.IPFamilyPolicy == corev1.IPFamilyPolicySingleStack
	if old != nil {
		if single {
			// Single-stack with the fields unchanged is the intent to drop
			// the secondary family; the primary is immutable.
			if slices.Equal(old.Spec.ClusterIPs, spec.ClusterIPs) && len(spec.ClusterIPs) > 1 {
				spec.ClusterIPs = spec.ClusterIPs[:1]
			}
			if slices.Equal(old.Spec.IPFamilies, spec.IPFamilies) && len(spec.IPFamilies) > 1 {
				spec.IPFamilies = spec.IPFamilies[:1]
			}
		} else {
			if len(spec.ClusterIPs) > 0 && len(spec.ClusterIPs) < len(old.Spec.ClusterIPs) {
				errs = append(errs, field.Invalid(policyPath, spec.IPFamilyPolicy, "must be 'SingleStack' to release the secondary cluster IP"))
			}
			if len(spec.IPFamilies) > 0 && len(spec.IPFamilies) < len(old.Spec.IPFamilies) {
				errs = append(errs, field.Invalid(policyPath, spec.IPFamilyPolicy, "must be 'SingleStack' to release the secondary IP family"))
			}
		}
	}
	if single {
		if len(spec.ClusterIPs) == 2 {
			errs = append(errs, field.Invalid(policyPath, spec.IPFamilyPolicy, "must be 'RequireDualStack' or 'PreferDualStack' when multiple cluster IPs are specified"))
		}
		if len(spec.IPFamilies) == 2 {
			errs = append(errs, field.Invalid(policyPath, spec.IPFamilyPolicy, "must be 'RequireDualStack' or 'PreferDualStack' when multiple IP families are specified"))
		}
	}
	// Families inferred from the cluster IPs the client gave.
	for i, s := range spec.ClusterIPs {
		if s == corev1.ClusterIPNone {
			break
		}
		if i < len(spec.IPFamilies) {
			continue
		}
		fam := familyOf(s)
		if !a.hasFamily(fam) {
			errs = append(errs, field.Invalid(field.NewPath("spec", "clusterIPs").Index(i), spec.ClusterIPs, fmt.Sprintf("%s is not configured on this cluster", fam)))
		} else {
			spec.IPFamilies = append(spec.IPFamilies, fam)
		}
	}
	if len(errs) > 0 {
		return errs
	}
	if headlessSelectorless {
		// Allowed more than other services: a headless Service without
		// a selector may name both families on a single-stack cluster.
		if len(spec.IPFamilies) == 0 {
			spec.IPFamilies = []corev1.IPFamily{a.defaultFamily()}
		}
		if len(spec.IPFamilies) < 2 && !single {
			spec.IPFamilies = append(spec.IPFamilies, otherFamily(spec.IPFamilies[0]))
		}
		return nil
	}
	if *spec.IPFamilyPolicy == corev1.IPFamilyPolicyRequireDualStack && len(a.families()) < 2 {
		errs = append(errs, field.Invalid(policyPath, spec.IPFamilyPolicy, "this cluster is not configured for dual-stack services"))
	}
	for i, f := range spec.IPFamilies {
		if !a.hasFamily(f) {
			errs = append(errs, field.Invalid(field.NewPath("spec", "ipFamilies").Index(i), f, "not configured on this cluster"))
		}
	}
	if len(errs) > 0 {
		return errs
	}
	if len(spec.IPFamilies) == 0 {
		spec.IPFamilies = []corev1.IPFamily{a.defaultFamily()}
	}
	if !single && len(spec.IPFamilies) == 1 && len(a.families()) == 2 {
		spec.IPFamilies = append(spec.IPFamilies, otherFamily(spec.IPFamilies[0]))
	}
	return nil
}

// families are the IP families this cluster has a service range for:
// IPv4 only (IPRange is IPv4).
func (a *Allocator) families() []corev1.IPFamily { return []corev1.IPFamily{corev1.IPv4Protocol} }

func (a *Allocator) hasFamily(f corev1.IPFamily) bool { return slices.Contains(a.families(), f) }

// defaultFamily is the family of the first --service-cluster-ip-range.
func (a *Allocator) defaultFamily() corev1.IPFamily { return a.families()[0] }

func familyOf(s string) corev1.IPFamily {
	if ip, err := netip.ParseAddr(s); err == nil && ip.Is6() && !ip.Is4In6() {
		return corev1.IPv6Protocol
	}
	return corev1.IPv4Protocol
}

func otherFamily(f corev1.IPFamily) corev1.IPFamily {
	if f == corev1.IPv4Protocol {
		return corev1.IPv6Protocol
	}
	return corev1.IPv4Protocol
}

// matchingPreferDualStack is kube's isMatchingPreferDualStackClusterIPFields:
// a PreferDualStack service updated without touching its IP fields is
// neither upgraded nor downgraded when the cluster's stack changed.
func matchingPreferDualStack(svc, old *corev1.Service) bool {
	pref := func(s *corev1.Service) bool {
		return s.Spec.IPFamilyPolicy != nil && *s.Spec.IPFamilyPolicy == corev1.IPFamilyPolicyPreferDualStack
	}
	return pref(svc) && pref(old) && slices.Equal(svc.Spec.ClusterIPs, old.Spec.ClusterIPs) &&
		slices.Equal(svc.Spec.IPFamilies, old.Spec.IPFamilies)
}

func ptr[T any](v T) *T { return &v }

// Taken is the allocation as read from etcd: cluster IPs (offsets in the
// range) and node ports. A nil *Taken means "not read": Assign then
// guesses at random and the claims' compares say whether it guessed well.
type Taken struct {
	IPs   map[int]bool
	Ports map[int]bool
}

// ReadTaken reads every allocation key, keys only.
func (a *Allocator) ReadTaken(ctx context.Context) (*Taken, error) {
	t := &Taken{IPs: map[int]bool{}, Ports: map[int]bool{}}
	for _, prefix := range []string{IPPrefix, PortPrefix} {
		resp, err := a.cli.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithKeysOnly())
		if err != nil {
			return nil, fmt.Errorf("servicealloc: read allocation: %w", err)
		}
		for _, kv := range resp.Kvs {
			v := strings.TrimPrefix(string(kv.Key), prefix)
			if prefix == IPPrefix {
				if ip, err := netip.ParseAddr(v); err == nil {
					if off, ok := a.IPs.Offset(ip); ok {
						t.IPs[off] = true
					}
				}
			} else if p, err := strconv.Atoi(v); err == nil {
				t.Ports[p] = true
			}
		}
	}
	return t, nil
}

// Assignment is what Assign decided for one write.
type Assignment struct {
	// Extra claims the values the service holds now and did not before,
	// and releases those it held and does not any more.
	Extra storage.Extra
	// requested maps the claims of values the client asked for to the
	// field error that answers them when taken.
	requested map[string]*field.Error
}

// Refused turns a failed claim into the answer: the field errors of the
// requested values that were taken, or nil when only values Assign chose
// were (the caller reads the allocation and assigns again).
func (as *Assignment) Refused(ce *storage.ClaimError) field.ErrorList {
	var errs field.ErrorList
	for _, k := range ce.Taken {
		if e, ok := as.requested[k]; ok {
			errs = append(errs, e)
		}
	}
	return errs
}

// Assign fills in the cluster IP and node ports svc needs and has not got
// (old is the stored service on an update, nil on create), checks the
// requested ones against their ranges, and returns the claims and releases
// that commit the result. taken is the allocation to choose against; nil
// guesses. It returns an *InvalidError for a requested value out of range
// and a *FullError when a range has nothing left.
func (a *Allocator) Assign(svc, old *corev1.Service, taken *Taken) (*Assignment, error) {
	holder, err := json.Marshal(Holder{Namespace: svc.Namespace, Name: svc.Name, UID: string(svc.UID)})
	if err != nil {
		return nil, fmt.Errorf("servicealloc: %w", err)
	}
	as := &Assignment{requested: map[string]*field.Error{}}
	claim := func(key string, requested *field.Error) {
		as.Extra.Claims = append(as.Extra.Claims, storage.Claim{Key: key, Value: holder})
		if requested != nil {
			as.requested[key] = requested
		}
	}
	if err := a.assignIP(svc, old, taken, claim); err != nil {
		return nil, err
	}
	if err := a.assignPorts(svc, old, taken, claim); err != nil {
		return nil, err
	}
	// Release what old held and svc does not.
	if old != nil {
		now := map[string]bool{}
		for _, k := range a.Held(svc) {
			now[k] = true
		}
		for _, k := range a.Held(old) {
			if !now[k] {
				as.Extra.Releases = append(as.Extra.Releases, k)
			}
		}
	}
	return as, nil
}

// Held is the allocation keys of the values svc holds inside the ranges.
func (a *Allocator) Held(svc *corev1.Service) []string {
	var keys []string
	if schemas.NeedsClusterIP(svc) {
		for _, s := range svc.Spec.ClusterIPs {
			if ip, err := netip.ParseAddr(s); err == nil {
				if _, ok := a.IPs.Offset(ip); ok {
					keys = append(keys, IPKey(ip.Unmap()))
				}
			}
		}
	}
	for _, p := range nodePorts(svc) {
		if a.Ports.Contains(p) {
			keys = append(keys, PortKey(p))
		}
	}
	return keys
}

// nodePorts is every node port of svc, the health-check one included, each
// once (a TCP and a UDP port may share one).
func nodePorts(svc *corev1.Service) []int {
	var out []int
	for _, p := range svc.Spec.Ports {
		if p.NodePort != 0 && !slices.Contains(out, int(p.NodePort)) {
			out = append(out, int(p.NodePort))
		}
	}
	if hc := int(svc.Spec.HealthCheckNodePort); hc != 0 && !slices.Contains(out, hc) {
		out = append(out, hc)
	}
	return out
}

func (a *Allocator) assignIP(svc, old *corev1.Service, taken *Taken, claim func(string, *field.Error)) error {
	if !schemas.NeedsClusterIP(svc) || schemas.IsHeadless(svc) {
		return nil
	}
	spec := &svc.Spec
	if len(spec.ClusterIPs) == 0 {
		off, ok := a.pickIP(taken)
		if !ok {
			return &FullError{What: "serviceIP"}
		}
		ip := a.IPs.At(off).String()
		spec.ClusterIP, spec.ClusterIPs = ip, []string{ip}
		claim(IPKey(a.IPs.At(off)), nil)
		return nil
	}
	s := spec.ClusterIPs[0]
	if old != nil && schemas.NeedsClusterIP(old) && len(old.Spec.ClusterIPs) > 0 && old.Spec.ClusterIPs[0] == s {
		return nil // held already
	}
	ipsPath := field.NewPath("spec", "clusterIPs")
	fail := func(why string) *field.Error {
		return field.Invalid(ipsPath, spec.ClusterIPs, fmt.Sprintf("failed to allocate IP %v: %v", s, why))
	}
	ip, err := netip.ParseAddr(s)
	if err != nil {
		return &InvalidError{Errs: field.ErrorList{fail("not a valid IP address")}}
	}
	if _, ok := a.IPs.Offset(ip); !ok {
		return &InvalidError{Errs: field.ErrorList{fail(fmt.Sprintf("the provided IP (%v) is not in the valid range. The range of valid IPs is %s", s, a.IPs))}}
	}
	claim(IPKey(ip.Unmap()), fail("provided IP is already allocated"))
	return nil
}

// pickIP chooses a free address, from the upper part of the range while
// it has one.
func (a *Allocator) pickIP(taken *Taken) (int, bool) {
	isTaken := func(off int) bool { return taken != nil && taken.IPs[off] }
	band := a.IPs.staticBand()
	if off, ok := pick(band, a.IPs.Size(), isTaken); ok {
		return off, true
	}
	return pick(0, band, isTaken)
}

func (a *Allocator) assignPorts(svc, old *corev1.Service, taken *Taken, claim func(string, *field.Error)) error {
	held := map[int]bool{}
	if old != nil {
		for _, p := range nodePorts(old) {
			held[p] = true
		}
	}
	mine := map[int]bool{} // node ports of svc, claimed or held
	request := func(port int, fldPath *field.Path) error {
		if mine[port] {
			return nil
		}
		mine[port] = true
		if held[port] {
			return nil
		}
		if !a.Ports.Contains(port) {
			return &InvalidError{Errs: field.ErrorList{field.Invalid(fldPath, port,
				"provided port is not in the valid range. The range of valid ports is "+a.Ports.String())}}
		}
		claim(PortKey(port), field.Invalid(fldPath, port, "provided port is already allocated"))
		return nil
	}
	next := func() (int, error) {
		off, ok := pick(0, a.Ports.Size, func(off int) bool {
			p := a.Ports.Base + off
			return mine[p] || (taken != nil && taken.Ports[p])
		})
		if !ok {
			return 0, &FullError{What: "nodePort"}
		}
		p := a.Ports.Base + off
		mine[p] = true
		claim(PortKey(p), nil)
		return p, nil
	}
	spec := &svc.Spec
	allocate := schemas.NeedsNodePort(svc) && (spec.Type == corev1.ServiceTypeNodePort ||
		spec.AllocateLoadBalancerNodePorts == nil || *spec.AllocateLoadBalancerNodePorts)
	// Requested ports first, so that a random one never takes a port
	// another port of the same service asks for.
	for i := range spec.Ports {
		if p := int(spec.Ports[i].NodePort); p != 0 && schemas.NeedsNodePort(svc) {
			if err := request(p, field.NewPath("spec", "ports").Index(i).Child("nodePort")); err != nil {
				return err
			}
		}
	}
	if hc := int(spec.HealthCheckNodePort); hc != 0 && schemas.NeedsHealthCheckNodePort(svc) {
		if err := request(hc, field.NewPath("spec", "healthCheckNodePort")); err != nil {
			return err
		}
	}
	for i := range spec.Ports {
		if spec.Ports[i].NodePort == 0 && allocate {
			p, err := next()
			if err != nil {
				return err
			}
			spec.Ports[i].NodePort = int32(p)
		}
	}
	if spec.HealthCheckNodePort == 0 && schemas.NeedsHealthCheckNodePort(svc) {
		p, err := next()
		if err != nil {
			return err
		}
		spec.HealthCheckNodePort = int32(p)
	}
	return nil
}
