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

// Prepare is kube's initIPFamilyFields on a single-stack IPv4 cluster, run
// before validation: the cluster IP fields are validated first, ipFamilyPolicy defaults to SingleStack and
// ipFamilies to [IPv4] (an update keeps what the old service had), and
// what needs IPv6 is refused.
func (a *Allocator) Prepare(svc, old *corev1.Service) field.ErrorList {
	if !schemas.NeedsClusterIP(svc) {
		return nil
	}
	// kube's loose pre-validation, so that what follows sees IPs.
	if errs := schemas.ValidateServiceClusterIPs(svc); len(errs) > 0 {
		return errs
	}
	spec := &svc.Spec
	if old != nil && schemas.NeedsClusterIP(old) {
		if len(spec.IPFamilies) == 0 {
			spec.IPFamilies = slices.Clone(old.Spec.IPFamilies)
		}
		if spec.IPFamilyPolicy == nil && old.Spec.IPFamilyPolicy != nil {
			p := *old.Spec.IPFamilyPolicy
			spec.IPFamilyPolicy = &p
		}
	}
	var errs field.ErrorList
	specPath := field.NewPath("spec")
	if p := spec.IPFamilyPolicy; p != nil && *p == corev1.IPFamilyPolicyRequireDualStack {
		errs = append(errs, field.Invalid(specPath.Child("ipFamilyPolicy"), *p, "this cluster is not configured for dual-stack services"))
	}
	for i, f := range spec.IPFamilies {
		if f == corev1.IPv6Protocol {
			errs = append(errs, field.Invalid(specPath.Child("ipFamilies").Index(i), f, "not configured on this cluster"))
		}
	}
	for i, s := range spec.ClusterIPs {
		if ip, err := netip.ParseAddr(s); err == nil && ip.Is6() && !ip.Is4In6() {
			errs = append(errs, field.Invalid(specPath.Child("clusterIPs").Index(i), s, "IPv6 is not configured on this cluster"))
		}
	}
	if len(errs) > 0 {
		return errs
	}
	if spec.IPFamilyPolicy == nil {
		p := corev1.IPFamilyPolicySingleStack
		spec.IPFamilyPolicy = &p
	}
	if len(spec.IPFamilies) == 0 {
		spec.IPFamilies = []corev1.IPFamily{corev1.IPv4Protocol}
	}
	return nil
}

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
