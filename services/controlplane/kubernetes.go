package controlplane

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"time"

	"github.com/oklog/ulid/v2"
	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/uuid"

	"github.com/cairn-dev/cairn/events"
	"github.com/cairn-dev/cairn/schemas"
	"github.com/cairn-dev/cairn/services/apiserver/servicealloc"
	"github.com/cairn-dev/cairn/services/apiserver/storage"
)

// The default/kubernetes Service and its endpoints, as kube-apiserver
// keeps them: the Service gets the first address of the service range at
// start-up (kube's bootstrap controller), and each apiserver holds a lease
// on its address under LeasePrefix (an etcd lease with a 15 s TTL, renewed
// by keepalives, which are no writes); every 10 s each apiserver lists the
// live leases and, when they differ from what is stored, writes the
// kubernetes Endpoints and EndpointSlice (kube's lease endpoint
// reconciler, pkg/controlplane/reconcilers/lease.go). They are written by
// system:apiserver straight to storage, each one committed change on the
// log, as Bootstrap writes the system namespaces.

// LeasePrefix holds one key per live apiserver, "<ip>:<port>".
const LeasePrefix = "/cairn/apiserverleases/"

// The reconciler's timing: kube's --endpoint-reconciler lease TTL and
// interval.
const (
	endpointLeaseTTL      = 15 // seconds
	endpointReconcileEach = 10 * time.Second
)

// Names of kube's.
const (
	kubernetesService = "kubernetes"
	labelSkipMirror   = "endpointslice.kubernetes.io/skip-mirror"
)

// systemMeta is the write metadata of a change the apiserver makes itself.
func systemMeta(verb string) *events.WriteMeta {
	id := ulid.Make().String()
	return &events.WriteMeta{ID: id, Verb: verb, CorrelationID: id, Time: time.Now().UTC(),
		Actor: events.Actor{User: "system:apiserver", Groups: []string{"system:masters"}}}
}

// EnsureKubernetesService creates default/kubernetes if it does not exist:
// ClusterIP, the first address of the range, port 443 "https" to the
// apiserver's port, committed with its allocation.
func EnsureKubernetesService(ctx context.Context, st *storage.Store, reg *schemas.Registry, alloc *servicealloc.Allocator, port int) error {
	res, ok := reg.Lookup("", "v1", "services")
	if !ok {
		return errors.New("controlplane: services not registered")
	}
	key := storage.Key("", "services", metav1.NamespaceDefault, kubernetesService)
	ports := []corev1.ServicePort{{Name: "https", Port: 443, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt(port)}}
	if kv, err := st.Get(ctx, key); err == nil {
		return updateKubernetesPorts(ctx, st, res, kv, ports)
	} else if !errors.Is(err, storage.ErrNotFound) {
		return fmt.Errorf("controlplane: kubernetes service: %w", err)
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: kubernetesService, Namespace: metav1.NamespaceDefault,
			Labels: map[string]string{"provider": "kubernetes", "component": "apiserver"}},
		Spec: corev1.ServiceSpec{
			Ports:     ports,
			ClusterIP: alloc.IPs.At(0).String(),
			Type:      corev1.ServiceTypeClusterIP,
		},
	}
	res.Default(svc)
	res.PrepareForCreate(svc)
	if errs := alloc.Prepare(svc, nil); len(errs) > 0 {
		return fmt.Errorf("controlplane: kubernetes service: %w", errs.ToAggregate())
	}
	svc.UID = uuid.NewUUID()
	svc.CreationTimestamp = metav1.NewTime(time.Now().Truncate(time.Second))
	svc.Generation = 1
	as, err := alloc.Assign(svc, nil, nil)
	if err != nil {
		return fmt.Errorf("controlplane: kubernetes service: %w", err)
	}
	if errs := res.ValidateCreate(svc); len(errs) > 0 {
		return fmt.Errorf("controlplane: kubernetes service: %w", errs.ToAggregate())
	}
	val, err := encodeSystem(svc, res)
	if err != nil {
		return err
	}
	_, err = st.Create(ctx, key, val, systemMeta("create"), as.Extra)
	var ce *storage.ClaimError
	switch {
	case err == nil, errors.Is(err, storage.ErrExists):
		return nil
	case errors.As(err, &ce):
		return fmt.Errorf("controlplane: kubernetes service: %s is held by another service", svc.Spec.ClusterIP)
	}
	return fmt.Errorf("controlplane: kubernetes service: %w", err)
}

// updateKubernetesPorts gives a stored kubernetes Service this apiserver's
// ports, as kube's bootstrap controller reconciles them at start-up (an
// apiserver restarted on another port). A concurrent write wins; the next
// start tries again.
func updateKubernetesPorts(ctx context.Context, st *storage.Store, res *schemas.Resource, kv storage.KV, ports []corev1.ServicePort) error {
	svc := &corev1.Service{}
	if err := json.Unmarshal(kv.Value, svc); err != nil {
		return fmt.Errorf("controlplane: decode the kubernetes service: %w", err)
	}
	if apiequality.Semantic.DeepEqual(svc.Spec.Ports, ports) {
		return nil
	}
	svc.Spec.Ports = ports
	val, err := encodeSystem(svc, res)
	if err != nil {
		return err
	}
	if _, _, err := st.Update(ctx, kv.Key, val, kv.Revision, systemMeta("update")); err != nil && !errors.Is(err, storage.ErrConflict) {
		return fmt.Errorf("controlplane: kubernetes service: %w", err)
	}
	return nil
}

func encodeSystem(obj schemas.Object, res *schemas.Resource) ([]byte, error) {
	obj.GetObjectKind().SetGroupVersionKind(res.GVK())
	obj.SetResourceVersion("")
	b, err := json.Marshal(obj)
	if err != nil {
		return nil, fmt.Errorf("controlplane: encode %s: %w", res.Kind, err)
	}
	return b, nil
}

// AdvertiseAddress is the address the kubernetes Service's endpoints list
// for an apiserver listening on listen (host:port), unless advertise is
// set: the listen IP, or for an unspecified one (0.0.0.0) the first
// non-loopback IPv4 address of the host.
func AdvertiseAddress(advertise, listen string) (netip.Addr, error) {
	if advertise != "" {
		ip, err := netip.ParseAddr(advertise)
		if err != nil {
			return netip.Addr{}, fmt.Errorf("controlplane: --advertise-address: %w", err)
		}
		return ip, nil
	}
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("controlplane: listen address %q: %w", listen, err)
	}
	ip, err := netip.ParseAddr(host)
	if err != nil || ip.IsUnspecified() {
		if addrs, err := net.InterfaceAddrs(); err == nil {
			for _, a := range addrs {
				if n, ok := a.(*net.IPNet); ok && !n.IP.IsLoopback() && n.IP.To4() != nil {
					return netip.AddrFrom4([4]byte(n.IP.To4())), nil
				}
			}
		}
		return netip.MustParseAddr("127.0.0.1"), nil
	}
	return ip, nil
}

// endpointReconciler is the lease endpoint reconciler of one apiserver.
type endpointReconciler struct {
	cli  *clientv3.Client
	st   *storage.Store
	reg  *schemas.Registry
	self netip.AddrPort
	log  *slog.Logger

	lease clientv3.LeaseID
	alive <-chan *clientv3.LeaseKeepAliveResponse
}

// start takes this apiserver's lease, kept alive until runCtx is done, and
// reconciles once, so that a started control plane has its endpoints
// written.
func (r *endpointReconciler) start(ctx, runCtx context.Context) error {
	lease, alive, err := r.hold(ctx, runCtx, LeasePrefix+r.self.String())
	if err != nil {
		return fmt.Errorf("controlplane: apiserver lease: %w", err)
	}
	r.lease, r.alive = lease, alive
	if err := r.reconcile(ctx, true); err != nil {
		return fmt.Errorf("controlplane: kubernetes endpoints: %w", err)
	}
	return nil
}

// Run keeps the lease (taken by start) and reconciles every 10 s until
// ctx is done; then it gives the lease up and reconciles once more, so
// that the endpoints lose this apiserver at once, as kube's
// RemoveEndpoints does.
func (r *endpointReconciler) Run(ctx context.Context) error {
	defer func() {
		stop, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		if r.lease != 0 {
			_, _ = r.cli.Revoke(stop, r.lease)
		}
		if err := r.reconcile(stop, false); err != nil {
			r.log.Warn("remove this apiserver from the kubernetes endpoints", "err", err)
		}
	}()
	t := time.NewTicker(endpointReconcileEach)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		case _, ok := <-r.alive:
			if ok {
				continue // a keepalive answered
			}
			// The lease is lost (etcd unreachable past the TTL): a new
			// one is taken below.
			r.alive, r.lease = nil, 0
		}
		if r.alive == nil {
			lease, alive, err := r.hold(ctx, ctx, LeasePrefix+r.self.String())
			if err != nil {
				if ctx.Err() == nil {
					r.log.Warn("apiserver lease", "err", err)
				}
				continue
			}
			r.lease, r.alive = lease, alive
		}
		if err := r.reconcile(ctx, true); err != nil && ctx.Err() == nil {
			r.log.Warn("reconcile the kubernetes endpoints", "err", err)
		}
	}
}

// hold grants the lease and puts this apiserver's key on it; keepalives go
// on until keepCtx is done.
func (r *endpointReconciler) hold(ctx, keepCtx context.Context, key string) (clientv3.LeaseID, <-chan *clientv3.LeaseKeepAliveResponse, error) {
	g, err := r.cli.Grant(ctx, endpointLeaseTTL)
	if err != nil {
		return 0, nil, err
	}
	if _, err := r.cli.Put(ctx, key, "", clientv3.WithLease(g.ID)); err != nil {
		return 0, nil, err
	}
	ch, err := r.cli.KeepAlive(keepCtx, g.ID)
	if err != nil {
		return 0, nil, err
	}
	return g.ID, ch, nil
}

// reconcile writes the endpoints of the live apiservers (with or without
// this one) where they differ from what is stored.
func (r *endpointReconciler) reconcile(ctx context.Context, withSelf bool) error {
	resp, err := r.cli.Get(ctx, LeasePrefix, clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		return fmt.Errorf("list apiserver leases: %w", err)
	}
	live := map[netip.AddrPort]bool{}
	for _, kv := range resp.Kvs {
		if ap, err := netip.ParseAddrPort(string(kv.Key)[len(LeasePrefix):]); err == nil {
			live[ap] = true
		}
	}
	live[r.self] = withSelf
	ep, want := desiredEndpoints(live, r.self.Port())
	if err := r.write(ctx, "", "endpoints", ep); err != nil {
		return err
	}
	names := map[string]bool{}
	for _, s := range want {
		names[s.Name] = true
		if err := r.write(ctx, "discovery.k8s.io", "endpointslices", s); err != nil {
			return err
		}
	}
	return r.deleteStaleSlices(ctx, names)
}

// deleteStaleSlices deletes the kubernetes Service's slices not in keep
// (those of a port no apiserver serves on any more).
func (r *endpointReconciler) deleteStaleSlices(ctx context.Context, keep map[string]bool) error {
	l, err := r.st.List(ctx, storage.Key("discovery.k8s.io", "endpointslices", metav1.NamespaceDefault, ""), storage.ListOptions{})
	if err != nil {
		return err
	}
	for _, kv := range l.Items {
		var eps discoveryv1.EndpointSlice
		if err := json.Unmarshal(kv.Value, &eps); err != nil || eps.Labels[discoveryv1.LabelServiceName] != kubernetesService || keep[eps.Name] {
			continue
		}
		if _, _, err := r.st.Delete(ctx, kv.Key, kv.Revision, systemMeta("delete")); err != nil &&
			!errors.Is(err, storage.ErrConflict) && !errors.Is(err, storage.ErrNotFound) {
			return fmt.Errorf("delete %s: %w", kv.Key, err)
		}
	}
	return nil
}

// desiredEndpoints is the kubernetes Endpoints and EndpointSlices for the
// live apiservers: one subset and one slice per port (one of each when,
// as usual, every apiserver serves on the same port; the first slice is
// named kubernetes, the others kubernetes-<port>), addresses sorted. With
// no apiserver live, the kubernetes slice stays, empty, on selfPort.
func desiredEndpoints(live map[netip.AddrPort]bool, selfPort uint16) (*corev1.Endpoints, []*discoveryv1.EndpointSlice) {
	byPort := map[uint16][]string{}
	for ap, ok := range live {
		if ok {
			byPort[ap.Port()] = append(byPort[ap.Port()], ap.Addr().String())
		}
	}
	ports := make([]uint16, 0, len(byPort))
	for p := range byPort {
		ports = append(ports, p)
	}
	slices.Sort(ports)
	if len(ports) == 0 {
		ports = []uint16{selfPort}
	}
	ep := &corev1.Endpoints{
		ObjectMeta: metav1.ObjectMeta{Name: kubernetesService, Namespace: metav1.NamespaceDefault,
			Labels: map[string]string{labelSkipMirror: "true"}},
	}
	var out []*discoveryv1.EndpointSlice
	for i, p := range ports {
		ips := byPort[p]
		slices.Sort(ips)
		port := corev1.EndpointPort{Name: "https", Port: int32(p), Protocol: corev1.ProtocolTCP}
		ss := corev1.EndpointSubset{Ports: []corev1.EndpointPort{port}}
		name := kubernetesService
		if i > 0 {
			name += "-" + strconv.Itoa(int(p))
		}
		eps := &discoveryv1.EndpointSlice{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: metav1.NamespaceDefault,
				Labels: map[string]string{discoveryv1.LabelServiceName: kubernetesService}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Ports:       []discoveryv1.EndpointPort{{Name: &port.Name, Port: &port.Port, Protocol: &port.Protocol}},
		}
		for _, ip := range ips {
			ss.Addresses = append(ss.Addresses, corev1.EndpointAddress{IP: ip})
			ready := true
			eps.Endpoints = append(eps.Endpoints, discoveryv1.Endpoint{Addresses: []string{ip}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}})
		}
		if len(ss.Addresses) > 0 {
			ep.Subsets = append(ep.Subsets, ss)
		}
		out = append(out, eps)
	}
	return ep, out
}

// write stores obj (Endpoints or an EndpointSlice) unless what is stored
// already says the same (labels and content). Its addresses are not
// validated: by default they are loopback, which kube's validation refuses
// to users; a conflict with another apiserver's write is left to the next
// round.
func (r *endpointReconciler) write(ctx context.Context, group, plural string, obj schemas.Object) error {
	res, ok := r.reg.Lookup(group, map[string]string{"": "v1", "discovery.k8s.io": "v1"}[group], plural)
	if !ok {
		return fmt.Errorf("controlplane: %s not registered", plural)
	}
	res.Default(obj)
	key := storage.Key(group, plural, obj.GetNamespace(), obj.GetName())
	kv, err := r.st.Get(ctx, key)
	if errors.Is(err, storage.ErrNotFound) {
		res.PrepareForCreate(obj)
		obj.SetUID(uuid.NewUUID())
		obj.SetCreationTimestamp(metav1.NewTime(time.Now().Truncate(time.Second)))
		val, err := encodeSystem(obj, res)
		if err != nil {
			return err
		}
		if _, err := r.st.Create(ctx, key, val, systemMeta("create")); err != nil && !errors.Is(err, storage.ErrExists) {
			return fmt.Errorf("create %s: %w", key, err)
		}
		return nil
	}
	if err != nil {
		return err
	}
	cur := res.New()
	if err := json.Unmarshal(kv.Value, cur); err != nil {
		return fmt.Errorf("decode %s: %w", key, err)
	}
	if sameEndpoints(cur, obj) {
		return nil
	}
	obj.SetUID(cur.GetUID())
	obj.SetCreationTimestamp(cur.GetCreationTimestamp())
	res.PrepareForUpdate(obj, cur)
	val, err := encodeSystem(obj, res)
	if err != nil {
		return err
	}
	if _, _, err := r.st.Update(ctx, key, val, kv.Revision, systemMeta("update")); err != nil && !errors.Is(err, storage.ErrConflict) {
		return fmt.Errorf("update %s: %w", key, err)
	}
	return nil
}

func sameEndpoints(cur, want schemas.Object) bool {
	if !apiequality.Semantic.DeepEqual(cur.GetLabels(), want.GetLabels()) {
		return false
	}
	switch w := want.(type) {
	case *corev1.Endpoints:
		return apiequality.Semantic.DeepEqual(cur.(*corev1.Endpoints).Subsets, w.Subsets)
	case *discoveryv1.EndpointSlice:
		c := cur.(*discoveryv1.EndpointSlice)
		return c.AddressType == w.AddressType && apiequality.Semantic.DeepEqual(c.Endpoints, w.Endpoints) &&
			apiequality.Semantic.DeepEqual(c.Ports, w.Ports)
	}
	return false
}
