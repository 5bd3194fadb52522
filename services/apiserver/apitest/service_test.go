package apitest

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"

	"github.com/cairn-dev/cairn/services/apiserver"
	"github.com/cairn-dev/cairn/services/apiserver/servicealloc"
	"github.com/cairn-dev/cairn/services/apiserver/storage"
	"github.com/cairn-dev/cairn/services/controlplane"
	"github.com/cairn-dev/cairn/services/controlplane/controlplanetest"
)

func testService(name string, ports ...corev1.ServicePort) *corev1.Service {
	if len(ports) == 0 {
		ports = []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}}
	}
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec:       corev1.ServiceSpec{Selector: map[string]string{"app": name}, Ports: ports},
	}
}

func withClusterIP(svc *corev1.Service, ip string) *corev1.Service {
	svc.Spec.ClusterIP = ip
	return svc
}

func nodePortService(name string, nodePort int32) *corev1.Service {
	svc := testService(name, corev1.ServicePort{Port: 80, NodePort: nodePort})
	svc.Spec.Type = corev1.ServiceTypeNodePort
	return svc
}

// allocKeys lists the allocation keys under prefix.
func allocKeys(t *testing.T, env *controlplanetest.Env, prefix string) []string {
	t.Helper()
	resp, err := env.Etcd.Get(ctxFor(t, 10*time.Second), prefix, clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, kv := range resp.Kvs {
		keys = append(keys, string(kv.Key))
	}
	return keys
}

// wantServiceCauses checks err is a 422 for a Service with exactly the causes
// (field: message) want.
func wantServiceCauses(t *testing.T, err error, want ...string) {
	t.Helper()
	var se *apierrors.StatusError
	if !apierrors.IsInvalid(err) || !errors.As(err, &se) {
		t.Fatalf("got %v, want 422 Invalid", err)
	}
	st := se.ErrStatus
	if st.Details == nil || st.Details.Kind != "Service" {
		t.Fatalf("status %+v", st)
	}
	var got []string
	for _, c := range st.Details.Causes {
		got = append(got, c.Field+": "+c.Message)
	}
	if !slices.Equal(got, want) {
		t.Errorf("causes %q\nwant   %q", got, want)
	}
}

// TestService serves core/v1 Services: kube's defaults, a cluster IP and
// node ports allocated in the Service's own transaction, requested values
// honoured or refused with 422, immutability of the cluster IP, and the
// allocation released by a delete and by a type change.
func TestService(t *testing.T) {
	env := controlplanetest.Start(t)
	ctx := ctxFor(t, 90*time.Second)
	svcs := env.Client.CoreV1().Services("default")
	ips := servicealloc.MustParseIPRange(servicealloc.DefaultClusterIPRange)

	t.Run("discovery", func(t *testing.T) {
		l, err := env.Client.Discovery().ServerResourcesForGroupVersion("v1")
		if err != nil {
			t.Fatal(err)
		}
		i := slices.IndexFunc(l.APIResources, func(r metav1.APIResource) bool { return r.Name == "services" })
		if i < 0 {
			t.Fatal("no services in v1")
		}
		if r := l.APIResources[i]; !r.Namespaced || r.Kind != "Service" || !slices.Equal(r.ShortNames, []string{"svc"}) || !slices.Equal(r.Categories, []string{"all"}) {
			t.Errorf("services: %+v", r)
		}
	})

	t.Run("create allocates and defaults", func(t *testing.T) {
		got, err := svcs.Create(ctx, testService("web"), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ip, err := netip.ParseAddr(got.Spec.ClusterIP)
		if _, ok := ips.Offset(ip); err != nil || !ok || !slices.Equal(got.Spec.ClusterIPs, []string{got.Spec.ClusterIP}) {
			t.Errorf("cluster IP %q %v", got.Spec.ClusterIP, got.Spec.ClusterIPs)
		}
		s := got.Spec
		if s.Type != corev1.ServiceTypeClusterIP || s.SessionAffinity != corev1.ServiceAffinityNone || s.Ports[0].Protocol != corev1.ProtocolTCP ||
			*s.IPFamilyPolicy != corev1.IPFamilyPolicySingleStack || !slices.Equal(s.IPFamilies, []corev1.IPFamily{corev1.IPv4Protocol}) ||
			*s.InternalTrafficPolicy != corev1.ServiceInternalTrafficPolicyCluster {
			t.Errorf("defaults %+v", s)
		}
		if keys := allocKeys(t, env, servicealloc.IPKey(ip)); len(keys) != 1 {
			t.Errorf("allocation key of %v: %v", ip, keys)
		}
	})

	t.Run("requested cluster IP", func(t *testing.T) {
		got, err := svcs.Create(ctx, withClusterIP(testService("fixed"), "10.96.0.10"), metav1.CreateOptions{})
		if err != nil || got.Spec.ClusterIP != "10.96.0.10" {
			t.Fatalf("%v %v", got, err)
		}
		before := settle(t, env)
		_, err = svcs.Create(ctx, withClusterIP(testService("again"), "10.96.0.10"), metav1.CreateOptions{})
		wantServiceCauses(t, err, `spec.clusterIPs: Invalid value: ["10.96.0.10"]: failed to allocate IP 10.96.0.10: provided IP is already allocated`)
		_, err = svcs.Create(ctx, withClusterIP(testService("outside"), "10.0.0.10"), metav1.CreateOptions{})
		wantServiceCauses(t, err, `spec.clusterIPs: Invalid value: ["10.0.0.10"]: failed to allocate IP 10.0.0.10: the provided IP (10.0.0.10) is not in the valid range. The range of valid IPs is 10.96.0.0/12`)
		requireNothingWritten(t, env, before)
	})

	t.Run("node ports", func(t *testing.T) {
		got, err := svcs.Create(ctx, nodePortService("np", 0), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if p := got.Spec.Ports[0].NodePort; p < 30000 || p > 32767 || got.Spec.ExternalTrafficPolicy != corev1.ServiceExternalTrafficPolicyCluster {
			t.Errorf("node port %d, externalTrafficPolicy %q", p, got.Spec.ExternalTrafficPolicy)
		}
		if _, err := svcs.Create(ctx, nodePortService("np2", 30080), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		before := settle(t, env)
		_, err = svcs.Create(ctx, nodePortService("np3", 30080), metav1.CreateOptions{})
		wantServiceCauses(t, err, "spec.ports[0].nodePort: Invalid value: 30080: provided port is already allocated")
		_, err = svcs.Create(ctx, nodePortService("np4", 8080), metav1.CreateOptions{})
		wantServiceCauses(t, err, "spec.ports[0].nodePort: Invalid value: 8080: provided port is not in the valid range. The range of valid ports is 30000-32767")
		requireNothingWritten(t, env, before)
	})

	t.Run("LoadBalancer with local traffic gets a health-check node port", func(t *testing.T) {
		lb := testService("lb")
		lb.Spec.Type, lb.Spec.ExternalTrafficPolicy = corev1.ServiceTypeLoadBalancer, corev1.ServiceExternalTrafficPolicyLocal
		got, err := svcs.Create(ctx, lb, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		np, hc := got.Spec.Ports[0].NodePort, got.Spec.HealthCheckNodePort
		if np < 30000 || np > 32767 || hc < 30000 || hc > 32767 || np == hc || got.Spec.AllocateLoadBalancerNodePorts == nil || !*got.Spec.AllocateLoadBalancerNodePorts {
			t.Errorf("node port %d, health-check node port %d, allocateLoadBalancerNodePorts %v", np, hc, got.Spec.AllocateLoadBalancerNodePorts)
		}
		if err := svcs.Delete(ctx, "lb", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		for _, p := range []int32{np, hc} {
			if keys := allocKeys(t, env, servicealloc.PortKey(int(p))); len(keys) != 0 {
				t.Errorf("node port %d still allocated after delete", p)
			}
		}
	})

	t.Run("update keeps allocated values and refuses a changed cluster IP", func(t *testing.T) {
		cur, err := svcs.Get(ctx, "np2", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		// A replace with a manifest that never had the allocated values.
		fresh := nodePortService("np2", 0)
		fresh.ResourceVersion = cur.ResourceVersion
		fresh.Labels = map[string]string{"v": "2"}
		got, err := svcs.Update(ctx, fresh, metav1.UpdateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got.Spec.ClusterIP != cur.Spec.ClusterIP || got.Spec.Ports[0].NodePort != 30080 {
			t.Errorf("after replace: cluster IP %q node port %d", got.Spec.ClusterIP, got.Spec.Ports[0].NodePort)
		}
		before := settle(t, env)
		got.Spec.ClusterIP, got.Spec.ClusterIPs = "10.96.0.77", []string{"10.96.0.77"}
		_, err = svcs.Update(ctx, got, metav1.UpdateOptions{})
		wantServiceCauses(t, err, `spec.clusterIPs[0]: Invalid value: ["10.96.0.77"]: may not change once set`)
		requireNothingWritten(t, env, before)
	})

	t.Run("a type change releases the node port", func(t *testing.T) {
		cur, err := svcs.Get(ctx, "np2", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cur.Spec.Type = corev1.ServiceTypeClusterIP
		got, err := svcs.Update(ctx, cur, metav1.UpdateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got.Spec.Ports[0].NodePort != 0 || got.Spec.ExternalTrafficPolicy != "" {
			t.Errorf("ClusterIP service keeps node port %d / %q", got.Spec.Ports[0].NodePort, got.Spec.ExternalTrafficPolicy)
		}
		if _, err := svcs.Create(ctx, nodePortService("np5", 30080), metav1.CreateOptions{}); err != nil {
			t.Errorf("30080 after it was released: %v", err)
		}
	})

	t.Run("delete frees the address", func(t *testing.T) {
		if err := svcs.Delete(ctx, "fixed", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		if keys := allocKeys(t, env, servicealloc.IPKey(netip.MustParseAddr("10.96.0.10"))); len(keys) != 0 {
			t.Errorf("allocation left after delete: %v", keys)
		}
		if _, err := svcs.Create(ctx, withClusterIP(testService("fixed2"), "10.96.0.10"), metav1.CreateOptions{}); err != nil {
			t.Errorf("10.96.0.10 after its service was deleted: %v", err)
		}
	})

	t.Run("dry run allocates nothing", func(t *testing.T) {
		before := settle(t, env)
		got, err := svcs.Create(ctx, testService("dry"), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil || got.Spec.ClusterIP == "" {
			t.Fatalf("%v %v", got, err)
		}
		_, err = svcs.Create(ctx, withClusterIP(testService("dry2"), "10.96.0.10"), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		wantServiceCauses(t, err, `spec.clusterIPs: Invalid value: ["10.96.0.10"]: failed to allocate IP 10.96.0.10: provided IP is already allocated`)
		requireNothingWritten(t, env, before)
	})

	t.Run("table", func(t *testing.T) {
		r := do(t, env, call{method: http.MethodGet, path: "/api/v1/namespaces/default/services/np5",
			header: http.Header{"Accept": {"application/json;as=Table;v=v1;g=meta.k8s.io"}}})
		var tbl metav1.Table
		if err := json.Unmarshal(r.body, &tbl); r.code != http.StatusOK || err != nil {
			t.Fatalf("%d %v: %s", r.code, err, truncate(r.body))
		}
		if len(tbl.Rows) != 1 {
			t.Fatalf("rows %+v", tbl.Rows)
		}
		cells := tbl.Rows[0].Cells
		if cells[0] != "np5" || cells[1] != "NodePort" || cells[3] != "<none>" || cells[4] != "80:30080/TCP" || cells[6] != "app=np5" {
			t.Errorf("cells %v", cells)
		}
	})

	t.Run("invalid", func(t *testing.T) { testInvalidServices(t, env, svcs) })
}

// testInvalidServices sends bad Services: each is a 422 with kube's
// causes, and nothing is written.
func testInvalidServices(t *testing.T, env *controlplanetest.Env, svcs typedcorev1.ServiceInterface) {
	ctx := ctxFor(t, 60*time.Second)
	create := func(mutate func(*corev1.Service)) func() error {
		return func() error {
			s := testService("bad")
			mutate(s)
			_, err := svcs.Create(ctx, s, metav1.CreateOptions{})
			return err
		}
	}
	runInvalidCases(t, env, "", "Service", []invalidCase{
		{"port 0", create(func(s *corev1.Service) { s.Spec.Ports[0].Port = 0 }), []string{"spec.ports[0].port"}},
		{"port 70000", create(func(s *corev1.Service) { s.Spec.Ports[0].Port = 70000 }), []string{"spec.ports[0].port"}},
		{"cluster IP outside the range", create(func(s *corev1.Service) { s.Spec.ClusterIP = "192.168.1.1" }), []string{"spec.clusterIPs"}},
		{"not an IP", create(func(s *corev1.Service) { s.Spec.ClusterIP = "10.96.0.999" }), []string{"spec.clusterIPs[0]"}},
		{"unnamed ports", create(func(s *corev1.Service) {
			s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Port: 443})
		}), []string{"spec.ports[0].name", "spec.ports[1].name"}},
		{"ExternalName with a cluster IP", create(func(s *corev1.Service) {
			s.Spec.Type, s.Spec.ExternalName, s.Spec.ClusterIP = corev1.ServiceTypeExternalName, "db.example.com", "10.96.0.50"
		}), []string{"spec.clusterIPs"}},
		{"ExternalName without a name", create(func(s *corev1.Service) { s.Spec.Type = corev1.ServiceTypeExternalName }),
			[]string{"spec.externalName"}},
		{"changed cluster IP", func() error {
			cur, err := svcs.Get(ctx, "web", metav1.GetOptions{})
			if err != nil {
				return err
			}
			cur.Spec.ClusterIP, cur.Spec.ClusterIPs = "10.96.0.200", nil
			_, err = svcs.Update(ctx, cur, metav1.UpdateOptions{})
			return err
		}, []string{"spec.clusterIPs[0]"}},
	})
	if _, err := svcs.Get(ctx, "bad", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("get of a refused service: %v, want NotFound", err)
	}

	// kube accepts a selector on an ExternalName service (and ignores it).
	ext := testService("ext")
	ext.Spec.Type, ext.Spec.ExternalName = corev1.ServiceTypeExternalName, "db.example.com"
	got, err := svcs.Create(ctx, ext, metav1.CreateOptions{})
	if err != nil || got.Spec.ClusterIP != "" || got.Spec.Selector["app"] != "ext" {
		t.Errorf("ExternalName with a selector: %v %v", got, err)
	}
}

// serviceServer is another apiserver on env's etcd (its own client) and
// log, with the given service ranges, as a replica started with other
// flags would be.
func serviceServer(t *testing.T, env *controlplanetest.Env, ipRange, portRange string) *kubernetes.Clientset {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: env.EtcdEndpoints(), DialTimeout: 10 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return replicaServer(t, env, func(c *apiserver.Config) {
		c.Store = storage.New(cli)
		c.ServiceIPs = servicealloc.MustParseIPRange(ipRange)
		c.NodePorts = servicealloc.MustParsePortRange(portRange)
	})
}

// TestServiceRangeFull: on a /29 (six addresses) the seventh Service is
// refused as kube refuses it, 500 "range is full", and nothing is written;
// so is a node port from an exhausted range.
func TestServiceRangeFull(t *testing.T) {
	env := controlplanetest.Start(t)
	ctx := ctxFor(t, 60*time.Second)
	svcs := serviceServer(t, env, "10.200.0.0/29", "30000-30001").CoreV1().Services("default")
	seen := map[string]bool{}
	for i := range 6 {
		got, err := svcs.Create(ctx, testService(fmt.Sprintf("s%d", i)), metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("service %d of 6: %v", i, err)
		}
		seen[got.Spec.ClusterIP] = true
	}
	if len(seen) != 6 {
		t.Errorf("addresses %v", seen)
	}
	before := settle(t, env)
	_, err := svcs.Create(ctx, testService("s6"), metav1.CreateOptions{})
	var se *apierrors.StatusError
	if !errors.As(err, &se) || se.ErrStatus.Code != http.StatusInternalServerError || se.ErrStatus.Reason != metav1.StatusReasonInternalError ||
		se.ErrStatus.Message != "Internal error occurred: failed to allocate a serviceIP: range is full" {
		t.Errorf("seventh service: %v", err)
	}
	requireNothingWritten(t, env, before)

	// Node ports: two fit.
	other := serviceServer(t, env, servicealloc.DefaultClusterIPRange, "30000-30001").CoreV1().Services("default")
	for i := range 2 {
		if _, err := other.Create(ctx, nodePortService(fmt.Sprintf("np%d", i), 0), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	before = settle(t, env)
	_, err = other.Create(ctx, nodePortService("np2", 0), metav1.CreateOptions{})
	if !apierrors.IsInternalError(err) || !errors.As(err, &se) || se.ErrStatus.Message != "Internal error occurred: failed to allocate a nodePort: range is full" {
		t.Errorf("third node port: %v", err)
	}
	requireNothingWritten(t, env, before)
}

// TestServiceTwoServers: two apiservers on one etcd create 50 Services
// each, all at once; no two Services share an address, and each address
// has its allocation key.
func TestServiceTwoServers(t *testing.T) {
	env := controlplanetest.Start(t)
	ctx := ctxFor(t, 120*time.Second)
	// A /25 (126 addresses, 110 above the band kept for requested ones)
	// for 100 Services makes the two servers' random picks collide.
	const ipRange, each = "10.201.0.0/25", 50
	servers := []*kubernetes.Clientset{serviceServer(t, env, ipRange, "30000-32767"), serviceServer(t, env, ipRange, "30000-32767")}
	var wg sync.WaitGroup
	errs := make(chan error, 2*each)
	for s, cs := range servers {
		for i := range each {
			wg.Add(1)
			go func() {
				defer wg.Done()
				svc := nodePortService(fmt.Sprintf("s%d-%d", s, i), 0)
				if _, err := cs.CoreV1().Services("default").Create(ctx, svc, metav1.CreateOptions{}); err != nil {
					errs <- fmt.Errorf("%s: %w", svc.Name, err)
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	list, err := env.Client.CoreV1().Services("default").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ips, ports := map[string]string{}, map[int32]string{}
	for _, svc := range list.Items {
		if other, dup := ips[svc.Spec.ClusterIP]; dup {
			t.Errorf("%s and %s share %s", other, svc.Name, svc.Spec.ClusterIP)
		}
		ips[svc.Spec.ClusterIP] = svc.Name
		p := svc.Spec.Ports[0].NodePort
		if other, dup := ports[p]; dup {
			t.Errorf("%s and %s share node port %d", other, svc.Name, p)
		}
		ports[p] = svc.Name
	}
	r := servicealloc.MustParseIPRange(ipRange)
	inRange := 0
	for ip := range ips {
		if _, ok := r.Offset(netip.MustParseAddr(ip)); ok {
			inRange++
		}
	}
	if inRange != 2*each {
		t.Errorf("%d services in %s, want %d", inRange, ipRange, 2*each)
	}
	keys := allocKeys(t, env, servicealloc.IPPrefix+"10.201.0.")
	if len(keys) != 2*each {
		t.Errorf("%d allocation keys, want %d", len(keys), 2*each)
	}
}

// TestServiceRepair: a key no Service holds is reclaimed, and an address
// whose key was lost gets it back.
func TestServiceRepair(t *testing.T) {
	env := controlplanetest.Start(t)
	ctx := ctxFor(t, 60*time.Second)
	svc, err := env.Client.CoreV1().Services("default").Create(ctx, testService("web"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	leaked := servicealloc.IPKey(netip.MustParseAddr("10.96.3.3"))
	lost := servicealloc.IPKey(netip.MustParseAddr(svc.Spec.ClusterIP))
	if _, err := env.Etcd.Put(ctx, leaked, `{"namespace":"default","name":"gone","uid":"x"}`); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Etcd.Delete(ctx, lost); err != nil {
		t.Fatal(err)
	}
	a := servicealloc.New(env.Etcd, servicealloc.MustParseIPRange(servicealloc.DefaultClusterIPRange), servicealloc.MustParsePortRange(servicealloc.DefaultNodePortRange))
	res, err := a.Repair(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(res.Reclaimed, leaked) || !slices.Contains(res.Restored, lost) || len(res.Problems) != 0 {
		t.Errorf("repair: %+v", res)
	}
	if keys := allocKeys(t, env, leaked); len(keys) != 0 {
		t.Errorf("leaked key still there")
	}
	if keys := allocKeys(t, env, lost); len(keys) != 1 {
		t.Errorf("lost key not restored")
	}
	// The restored key holds: the address is refused to another service.
	_, err = env.Client.CoreV1().Services("default").Create(ctx, withClusterIP(testService("dup"), svc.Spec.ClusterIP), metav1.CreateOptions{})
	if !apierrors.IsInvalid(err) {
		t.Errorf("address of web after repair: %v", err)
	}
	// A second round finds nothing to do.
	if res, err := a.Repair(ctx); err != nil || len(res.Reclaimed)+len(res.Restored)+len(res.Problems) != 0 {
		t.Errorf("second repair: %+v %v", res, err)
	}
}

// TestKubernetesService: the apiserver creates default/kubernetes at
// start-up with the first address of the range, and keeps its Endpoints
// and EndpointSlice on the live apiservers' leases: a second control plane
// on the same etcd and log joins them, and leaves them when it stops.
func TestKubernetesService(t *testing.T) {
	env := controlplanetest.Start(t)
	ctx := ctxFor(t, 90*time.Second)
	svc, err := env.Client.CoreV1().Services("default").Get(ctx, "kubernetes", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	self := netip.MustParseAddrPort(env.Addr)
	if svc.Spec.ClusterIP != "10.96.0.1" || len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Name != "https" || svc.Spec.Ports[0].Port != 443 ||
		svc.Spec.Ports[0].TargetPort != intstr.FromInt(int(self.Port())) || svc.Labels["component"] != "apiserver" || svc.Spec.Selector != nil {
		t.Errorf("kubernetes service %+v", svc)
	}
	endpointsAre := func(want ...string) {
		t.Helper()
		controlplanetest.Eventually(t, 30*time.Second, fmt.Sprintf("kubernetes endpoints %v", want), func() bool {
			ep, err := env.Client.CoreV1().Endpoints("default").Get(ctx, "kubernetes", metav1.GetOptions{})
			if err != nil || ep.Labels["endpointslice.kubernetes.io/skip-mirror"] != "true" {
				return false
			}
			var got []string
			for _, ss := range ep.Subsets {
				for _, a := range ss.Addresses {
					got = append(got, fmt.Sprintf("%s:%d", a.IP, ss.Ports[0].Port))
				}
			}
			slices.Sort(got)
			l, err := env.Client.DiscoveryV1().EndpointSlices("default").List(ctx, metav1.ListOptions{LabelSelector: "kubernetes.io/service-name=kubernetes"})
			if err != nil {
				return false
			}
			var inSlices []string
			for _, s := range l.Items {
				for _, e := range s.Endpoints {
					inSlices = append(inSlices, fmt.Sprintf("%s:%d", e.Addresses[0], *s.Ports[0].Port))
				}
			}
			slices.Sort(inSlices)
			ports := map[string]bool{} // a slice per port
			for _, w := range want {
				ports[w[strings.LastIndexByte(w, ':'):]] = true
			}
			return slices.Equal(got, want) && slices.Equal(inSlices, want) && len(l.Items) == len(ports)
		})
	}
	endpointsAre(env.Addr)

	other, err := controlplane.Start(ctx, controlplane.Config{EtcdEndpoints: env.EtcdEndpoints(), NATSURL: env.NATSURL(), Listen: "127.0.0.1:0", NoFsync: true})
	if err != nil {
		t.Fatal(err)
	}
	endpointsAre(sortedStrings(env.Addr, other.Addr)...)
	other.Close()
	endpointsAre(env.Addr)

	// An apiserver that dies without a word: its lease runs out, and the
	// next round drops it.
	lease, err := env.Etcd.Grant(ctx, 12)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := env.Etcd.Put(ctx, controlplane.LeasePrefix+"127.0.0.2:"+fmt.Sprint(self.Port()), "", clientv3.WithLease(lease.ID)); err != nil {
		t.Fatal(err)
	}
	endpointsAre(sortedStrings(env.Addr, "127.0.0.2:"+fmt.Sprint(self.Port()))...)
	endpointsAre(env.Addr)
}

func sortedStrings(s ...string) []string {
	slices.Sort(s)
	return s
}
