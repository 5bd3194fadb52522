package apitest

import (
	"encoding/json"
	"net/http"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cairn-dev/cairn/services/apiserver/servicealloc"
	"github.com/cairn-dev/cairn/services/controlplane/controlplanetest"
)

func lbService(name string) *corev1.Service {
	svc := testService(name)
	svc.Spec.Type = corev1.ServiceTypeLoadBalancer
	return svc
}

// TestServiceLoadBalancer is kube-apiserver's LoadBalancer Service on a
// cluster with no load-balancer controller: node ports allocated (unless
// allocateLoadBalancerNodePorts is false), EXTERNAL-IP <pending> until
// someone writes status.loadBalancer through the status subresource (a
// write of the spec cannot), which then shows in the table; loadBalancerClass
// immutable.
func TestServiceLoadBalancer(t *testing.T) {
	env := controlplanetest.Start(t)
	ctx := ctxFor(t, 90*time.Second)
	svcs := env.Client.CoreV1().Services("default")

	got, err := svcs.Create(ctx, lbService("lb"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s := got.Spec
	if np := s.Ports[0].NodePort; np < 30000 || np > 32767 || s.AllocateLoadBalancerNodePorts == nil || !*s.AllocateLoadBalancerNodePorts ||
		s.ExternalTrafficPolicy != corev1.ServiceExternalTrafficPolicyCluster || s.HealthCheckNodePort != 0 || s.ClusterIP == "" {
		t.Errorf("LoadBalancer defaults and allocation: %+v", s)
	}
	if cells := serviceRow(t, env, "lb"); cells[1] != "LoadBalancer" || cells[3] != "<pending>" {
		t.Errorf("table row %v: want LoadBalancer <pending>", cells)
	}

	t.Run("without node ports", func(t *testing.T) {
		no := false
		svc := lbService("lb-no-ports")
		svc.Spec.AllocateLoadBalancerNodePorts = &no
		got, err := svcs.Create(ctx, svc, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got.Spec.Ports[0].NodePort != 0 {
			t.Errorf("node port %d allocated with allocateLoadBalancerNodePorts false", got.Spec.Ports[0].NodePort)
		}
		// A requested one is still honoured, as kube does.
		svc = lbService("lb-one-port")
		svc.Spec.AllocateLoadBalancerNodePorts = &no
		svc.Spec.Ports[0].NodePort = 31111
		if got, err = svcs.Create(ctx, svc, metav1.CreateOptions{}); err != nil || got.Spec.Ports[0].NodePort != 31111 {
			t.Fatalf("requested node port: %v %v", got, err)
		}
		if keys := allocKeys(t, env, servicealloc.PortKey(31111)); len(keys) != 1 {
			t.Errorf("node port 31111 not allocated: %v", keys)
		}
	})

	t.Run("status subresource", func(t *testing.T) {
		cur, err := svcs.Get(ctx, "lb", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		// The spec endpoint drops a status change.
		cur.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "192.0.2.50"}}
		upd, err := svcs.Update(ctx, cur, metav1.UpdateOptions{})
		if err != nil || len(upd.Status.LoadBalancer.Ingress) != 0 {
			t.Fatalf("status through the spec: %v %v", upd.Status, err)
		}
		upd.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "192.0.2.50"}, {Hostname: "lb.example.com"}}
		st, err := svcs.UpdateStatus(ctx, upd, metav1.UpdateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ing := st.Status.LoadBalancer.Ingress
		if len(ing) != 2 || ing[0].IP != "192.0.2.50" || ing[0].IPMode == nil || *ing[0].IPMode != corev1.LoadBalancerIPModeVIP || ing[1].IPMode != nil {
			t.Errorf("ingress %+v: want ipMode VIP defaulted on the IP", ing)
		}
		if cells := serviceRow(t, env, "lb"); cells[3] != "192.0.2.50,lb.example.com" {
			t.Errorf("table row %v: want the ingress points as EXTERNAL-IP", cells)
		}
		bad := st.DeepCopy()
		bad.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "192.0.2.300"}, {Hostname: "192.0.2.9"}}
		wantInvalid(t, env, "", "Service", []string{"status.loadBalancer.ingress[0].ip", "status.loadBalancer.ingress[1].hostname"}, func() error {
			_, err := svcs.UpdateStatus(ctx, bad, metav1.UpdateOptions{})
			return err
		})
	})

	t.Run("health-check node port for Local traffic, kept on update", func(t *testing.T) {
		svc := lbService("lb-local")
		svc.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
		got, err := svcs.Create(ctx, svc, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		hc := got.Spec.HealthCheckNodePort
		if hc < 30000 || hc > 32767 {
			t.Fatalf("health-check node port %d", hc)
		}
		// A replace with the manifest that never had it keeps it.
		svc.ResourceVersion = got.ResourceVersion
		svc.Labels = map[string]string{"v": "2"}
		upd, err := svcs.Update(ctx, svc, metav1.UpdateOptions{})
		if err != nil || upd.Spec.HealthCheckNodePort != hc {
			t.Fatalf("update: %v %v", upd, err)
		}
		// Back to Cluster traffic: the port is released.
		upd.Spec.ExternalTrafficPolicy, upd.Spec.HealthCheckNodePort = corev1.ServiceExternalTrafficPolicyCluster, 0
		if _, err := svcs.Update(ctx, upd, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		if keys := allocKeys(t, env, servicealloc.PortKey(int(hc))); len(keys) != 0 {
			t.Errorf("health-check node port %d still allocated", hc)
		}
	})

	class := func(c string) *string { return &c }
	update := func(name string, mutate func(*corev1.Service)) func() error {
		return func() error {
			cur, err := svcs.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			mutate(cur)
			_, err = svcs.Update(ctx, cur, metav1.UpdateOptions{})
			return err
		}
	}
	svc := lbService("lb-class")
	svc.Spec.LoadBalancerClass = class("example.com/lb")
	if _, err := svcs.Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	local := lbService("lb-local2")
	local.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
	if _, err := svcs.Create(ctx, local, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	create := func(mutate func(*corev1.Service)) func() error {
		return func() error {
			s := lbService("bad")
			mutate(s)
			_, err := svcs.Create(ctx, s, metav1.CreateOptions{})
			return err
		}
	}
	runInvalidCases(t, env, "", "Service", []invalidCase{
		{"loadBalancerClass changed", update("lb-class", func(s *corev1.Service) { s.Spec.LoadBalancerClass = class("example.com/other") }),
			[]string{"spec.loadBalancerClass"}},
		{"loadBalancerClass not a qualified name", create(func(s *corev1.Service) { s.Spec.LoadBalancerClass = class("a/b/c") }),
			[]string{"spec.loadBalancerClass"}},
		{"loadBalancerClass on a ClusterIP", create(func(s *corev1.Service) {
			s.Spec.Type, s.Spec.LoadBalancerClass = corev1.ServiceTypeClusterIP, class("example.com/lb")
		}), []string{"spec.loadBalancerClass"}},
		{"health-check node port on a NodePort", create(func(s *corev1.Service) {
			s.Spec.Type, s.Spec.ExternalTrafficPolicy, s.Spec.HealthCheckNodePort = corev1.ServiceTypeNodePort, corev1.ServiceExternalTrafficPolicyLocal, 31234
		}), []string{"spec.healthCheckNodePort"}},
		{"health-check node port changed", update("lb-local2", func(s *corev1.Service) { s.Spec.HealthCheckNodePort++ }),
			[]string{"spec.healthCheckNodePort"}},
		{"externalTrafficPolicy on a ClusterIP", create(func(s *corev1.Service) {
			s.Spec.Type, s.Spec.ExternalTrafficPolicy = corev1.ServiceTypeClusterIP, corev1.ServiceExternalTrafficPolicyLocal
		}), []string{"spec.externalTrafficPolicy"}},
		{"externalTrafficPolicy unknown", create(func(s *corev1.Service) { s.Spec.ExternalTrafficPolicy = "Nearest" }),
			[]string{"spec.externalTrafficPolicy"}},
		{"internalTrafficPolicy unknown", create(func(s *corev1.Service) {
			p := corev1.ServiceInternalTrafficPolicy("Nearest")
			s.Spec.InternalTrafficPolicy = &p
		}), []string{"spec.internalTrafficPolicy"}},
		{"external IPs", create(func(s *corev1.Service) { s.Spec.ExternalIPs = []string{"192.0.2.300", "127.0.0.1", "0.0.0.0"} }),
			[]string{"spec.externalIPs[0]", "spec.externalIPs[1]", "spec.externalIPs[2]"}},
		{"source ranges", create(func(s *corev1.Service) { s.Spec.LoadBalancerSourceRanges = []string{"10.0.0.0/33"} }),
			[]string{"spec.LoadBalancerSourceRanges[0]"}},
	})
}

// serviceRow is the Table row the apiserver prints for Service name.
func serviceRow(t *testing.T, env *controlplanetest.Env, name string) []any {
	t.Helper()
	r := do(t, env, call{method: http.MethodGet, path: "/api/v1/namespaces/default/services/" + name,
		header: http.Header{"Accept": {"application/json;as=Table;v=v1;g=meta.k8s.io"}}})
	var tbl metav1.Table
	if err := json.Unmarshal(r.body, &tbl); r.code != http.StatusOK || err != nil || len(tbl.Rows) != 1 {
		t.Fatalf("%d %v: %s", r.code, err, truncate(r.body))
	}
	return tbl.Rows[0].Cells
}

// TestServiceIPFamilies: ipFamilies and ipFamilyPolicy on this
// single-stack IPv4 cluster, as kube-apiserver decides them
// (initIPFamilyFields): PreferDualStack gets the one family,
// RequireDualStack and IPv6 are refused with kube's causes and nothing is
// written, and a headless Service without a selector may name both
// families.
func TestServiceIPFamilies(t *testing.T) {
	env := controlplanetest.Start(t)
	ctx := ctxFor(t, 90*time.Second)
	svcs := env.Client.CoreV1().Services("default")
	policy := func(p corev1.IPFamilyPolicy) *corev1.IPFamilyPolicy { return &p }
	v4 := []corev1.IPFamily{corev1.IPv4Protocol}
	dual := []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol}

	pref := testService("pref")
	pref.Spec.IPFamilyPolicy = policy(corev1.IPFamilyPolicyPreferDualStack)
	got, err := svcs.Create(ctx, pref, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if *got.Spec.IPFamilyPolicy != corev1.IPFamilyPolicyPreferDualStack || !slices.Equal(got.Spec.IPFamilies, v4) || len(got.Spec.ClusterIPs) != 1 {
		t.Errorf("PreferDualStack: policy %v families %v IPs %v, want one IPv4 address", *got.Spec.IPFamilyPolicy, got.Spec.IPFamilies, got.Spec.ClusterIPs)
	}

	headless := testService("headless")
	headless.Spec.Selector, headless.Spec.ClusterIP = nil, corev1.ClusterIPNone
	if got, err = svcs.Create(ctx, headless, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if *got.Spec.IPFamilyPolicy != corev1.IPFamilyPolicyRequireDualStack || !slices.Equal(got.Spec.IPFamilies, dual) {
		t.Errorf("headless without a selector: policy %v families %v, want RequireDualStack [IPv4 IPv6] as kube", *got.Spec.IPFamilyPolicy, got.Spec.IPFamilies)
	}
	headless = testService("headless-sel")
	headless.Spec.ClusterIP = corev1.ClusterIPNone
	if got, err = svcs.Create(ctx, headless, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if *got.Spec.IPFamilyPolicy != corev1.IPFamilyPolicySingleStack || !slices.Equal(got.Spec.IPFamilies, v4) {
		t.Errorf("headless with a selector: policy %v families %v", *got.Spec.IPFamilyPolicy, got.Spec.IPFamilies)
	}

	before := settle(t, env)
	require := testService("require")
	require.Spec.IPFamilyPolicy = policy(corev1.IPFamilyPolicyRequireDualStack)
	_, err = svcs.Create(ctx, require, metav1.CreateOptions{})
	wantServiceCauses(t, err, `spec.ipFamilyPolicy: Invalid value: "RequireDualStack": this cluster is not configured for dual-stack services`)

	v6 := testService("v6")
	v6.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv6Protocol}
	_, err = svcs.Create(ctx, v6, metav1.CreateOptions{})
	wantServiceCauses(t, err, `spec.ipFamilies[0]: Invalid value: "IPv6": not configured on this cluster`)

	v6 = withClusterIP(testService("v6ip"), "fd00:10:96::10")
	_, err = svcs.Create(ctx, v6, metav1.CreateOptions{})
	wantServiceCauses(t, err, `spec.clusterIPs[0]: Invalid value: ["fd00:10:96::10"]: IPv6 is not configured on this cluster`)

	two := testService("two")
	two.Spec.IPFamilies = dual
	_, err = svcs.Create(ctx, two, metav1.CreateOptions{})
	wantServiceCauses(t, err, `spec.ipFamilyPolicy: Invalid value: "SingleStack": must be 'RequireDualStack' or 'PreferDualStack' when multiple IP families are specified`)

	two.Spec.IPFamilyPolicy = policy(corev1.IPFamilyPolicyPreferDualStack)
	_, err = svcs.Create(ctx, two, metav1.CreateOptions{})
	wantServiceCauses(t, err, `spec.ipFamilies[1]: Invalid value: "IPv6": not configured on this cluster`)

	dup := testService("dup")
	dup.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv4Protocol}
	dup.Spec.IPFamilyPolicy = policy(corev1.IPFamilyPolicyPreferDualStack)
	_, err = svcs.Create(ctx, dup, metav1.CreateOptions{})
	wantServiceCauses(t, err, `spec.ipFamilies[1]: Duplicate value: "IPv4"`)
	requireNothingWritten(t, env, before)

	t.Run("the family may not change", func(t *testing.T) {
		cur, err := svcs.Get(ctx, "pref", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cur.Spec.IPFamilyPolicy = policy(corev1.IPFamilyPolicySingleStack)
		if cur, err = svcs.Update(ctx, cur, metav1.UpdateOptions{}); err != nil || *cur.Spec.IPFamilyPolicy != corev1.IPFamilyPolicySingleStack {
			t.Fatalf("PreferDualStack to SingleStack: %v %v", cur, err)
		}
		cur.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv6Protocol}
		wantInvalid(t, env, "", "Service", []string{"spec.clusterIPs[0]"}, func() error {
			_, err := svcs.Update(ctx, cur, metav1.UpdateOptions{})
			return err
		})
	})
}
