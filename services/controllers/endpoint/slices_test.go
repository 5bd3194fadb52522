package endpoint

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/cairn-dev/cairn/services/controlplane/controlplanetest"
)

// waitFor polls describe until it returns want, or fails with the last
// thing it returned.
func waitFor(t *testing.T, what string, want []string, describe func() []string) {
	t.Helper()
	var got []string
	deadline := time.Now().Add(wait)
	for {
		if got = describe(); slices.Equal(got, want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s:\n got  %q\n want %q", what, got, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestSlices: the cases of kube's endpointslice reconciler tests, against
// a real control plane: each Service and its pods, and the slices and
// Endpoints the controllers write for them.
func TestSlices(t *testing.T) {
	env := start(t)
	named := intstr.FromString("web")
	tests := []struct {
		name string
		// svc tweaks the Service (app=<name>, port http 80 -> target).
		target intstr.IntOrString
		svc    func(*corev1.Service)
		pods   []podSpec
		// want are describeSlices' lines; wantEP describeEndpoints'.
		want, wantEP []string
	}{{
		name:   "ready-and-not",
		target: intstr.FromInt32(8080),
		pods:   []podSpec{{name: "a", ip: "10.1.0.1", ready: true}, {name: "b", ip: "10.1.0.2", ready: true}, {name: "c", ip: "10.1.0.3"}},
		want:   []string{"ports=[http:8080] a:rs- b:rs- c:---"},
		wantEP: []string{"ports=[http:8080] ready=[a,b] notReady=[c]"},
	}, {
		name:   "no-ip",
		target: intstr.FromInt32(8080),
		pods:   []podSpec{{name: "a", ip: "10.1.1.1", ready: true}, {name: "pending"}},
		want:   []string{"ports=[http:8080] a:rs-"},
		wantEP: []string{"ports=[http:8080] ready=[a] notReady=[]"},
	}, {
		// A terminating pod stays in its slice, not ready, serving as its
		// Ready condition says; Endpoints drop it.
		name:   "terminating",
		target: intstr.FromInt32(8080),
		pods:   []podSpec{{name: "a", ip: "10.1.2.1", ready: true}, {name: "gone", ip: "10.1.2.2", ready: true, terminating: true}},
		want:   []string{"ports=[http:8080] a:rs- gone:-st"},
		wantEP: []string{"ports=[http:8080] ready=[a] notReady=[]"},
	}, {
		name:   "publish-not-ready",
		target: intstr.FromInt32(8080),
		svc:    func(s *corev1.Service) { s.Spec.PublishNotReadyAddresses = true },
		pods:   []podSpec{{name: "a", ip: "10.1.3.1", ready: true}, {name: "b", ip: "10.1.3.2"}},
		want:   []string{"ports=[http:8080] a:rs- b:r--"},
		wantEP: []string{"ports=[http:8080] ready=[a,b] notReady=[]"},
	}, {
		// The named target port resolves per pod: one slice per port
		// number; a pod without the port is in a slice without ports,
		// and in no Endpoints subset.
		name:   "named-ports",
		target: named,
		pods: []podSpec{
			{name: "a", ip: "10.1.4.1", ready: true, ports: map[string]int32{"web": 8080}},
			{name: "b", ip: "10.1.4.2", ready: true, ports: map[string]int32{"web": 9090}},
			{name: "c", ip: "10.1.4.3", ready: true, ports: map[string]int32{"web": 8080, "admin": 9000}},
			{name: "none", ip: "10.1.4.4", ready: true, ports: map[string]int32{"admin": 9000}},
		},
		want:   []string{"ports=[] none:rs-", "ports=[http:8080] a:rs- c:rs-", "ports=[http:9090] b:rs-"},
		wantEP: []string{"ports=[http:8080] ready=[a,c] notReady=[]", "ports=[http:9090] ready=[b] notReady=[]"},
	}, {
		name:   "hostname",
		target: intstr.FromInt32(8080),
		svc:    func(s *corev1.Service) { s.Spec.ClusterIP = corev1.ClusterIPNone },
		pods:   []podSpec{{name: "a", ip: "10.1.5.1", ready: true, hostname: "a", subdomain: "hostname"}},
		want:   []string{"ports=[http:8080] a:rs-"},
		wantEP: []string{"ports=[http:8080] ready=[a] notReady=[]"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ns := "t-" + tt.name
			createNamespace(t, env, ns)
			svc := service(ns, tt.name, tt.target)
			if tt.svc != nil {
				tt.svc(svc)
			}
			svc = createService(t, env, svc)
			for _, ps := range tt.pods {
				createPod(t, env, ns, tt.name, ps)
			}
			waitFor(t, "slices", tt.want, func() []string { return describeSlices(managedSlices(t, env, ns, tt.name)) })
			waitFor(t, "endpoints", tt.wantEP, func() []string { return describeEndpoints(getEndpoints(t, env, ns, tt.name)) })
			checkSliceMeta(t, svc, managedSlices(t, env, ns, tt.name))
			if tt.name == "hostname" {
				checkHostname(t, env, ns, tt.name)
			}
		})
	}
}

// checkSliceMeta: every slice is the Service's (label, managed-by,
// controller owner reference), mirrors its labels, and every endpoint
// carries the node and its zone.
func checkSliceMeta(t *testing.T, svc *corev1.Service, items []discoveryv1.EndpointSlice) {
	t.Helper()
	for _, es := range items {
		ref := metav1.GetControllerOf(&es)
		if ref == nil || ref.Kind != "Service" || ref.UID != svc.UID || ref.Name != svc.Name {
			t.Errorf("slice %s: controller %+v, want Service %s", es.Name, ref, svc.UID)
		}
		if es.Labels["team"] != "web" || es.AddressType != discoveryv1.AddressTypeIPv4 || !strings.HasPrefix(es.Name, svc.Name+"-") {
			t.Errorf("slice %s: labels %v, address type %s", es.Name, es.Labels, es.AddressType)
		}
		for _, ep := range es.Endpoints {
			if deref(ep.NodeName) != testNode || deref(ep.Zone) != testZone {
				t.Errorf("slice %s: endpoint %v on node %q zone %q", es.Name, ep.Addresses, deref(ep.NodeName), deref(ep.Zone))
			}
		}
	}
}

func checkHostname(t *testing.T, env *controlplanetest.Env, ns, name string) {
	t.Helper()
	items := managedSlices(t, env, ns, name)
	if len(items) != 1 || len(items[0].Endpoints) != 1 || deref(items[0].Endpoints[0].Hostname) != "a" {
		t.Errorf("slices %+v: want one endpoint with hostname a", items)
	}
	ep := getEndpoints(t, env, ns, name)
	if ep.Subsets[0].Addresses[0].Hostname != "a" {
		t.Errorf("endpoints %+v: want hostname a", ep.Subsets)
	}
	if _, ok := ep.Labels[corev1.IsHeadlessService]; !ok {
		t.Errorf("endpoints labels %v: want %s", ep.Labels, corev1.IsHeadlessService)
	}
}

func getEndpoints(t *testing.T, env *controlplanetest.Env, ns, name string) *corev1.Endpoints {
	t.Helper()
	ep, err := env.Client.CoreV1().Endpoints(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		return &corev1.Endpoints{}
	}
	return ep
}

// TestSlicesOf250: a Service over 250 ready pods gets three slices, 100,
// 100 and 50 (--max-endpoints-per-slice); one pod turning unready rewrites
// only the slice that holds it. The Service comes after its pods, so that
// its first reconcile sees all 250: pods that arrive while slices already
// exist are placed as kube's reconciler places them, to change as few
// slices as it can (a new full slice first, then a slice of the rest,
// without filling an unchanged one), which packs them by arrival.
func TestSlicesOf250(t *testing.T) {
	env := start(t)
	const ns, name = "big", "big"
	createNamespace(t, env, ns)
	pods := make([]*corev1.Pod, 250)
	for i := range pods {
		pods[i] = createPod(t, env, ns, name, podSpec{name: fmt.Sprintf("p%03d", i), ip: fmt.Sprintf("10.2.%d.%d", i/200, i%200+1), ready: true})
	}
	createService(t, env, service(ns, name, intstr.FromInt32(8080)))
	sizes := func() []string {
		var out []string
		for _, es := range managedSlices(t, env, ns, name) {
			ready := 0
			for _, ep := range es.Endpoints {
				if deref(ep.Conditions.Ready) {
					ready++
				}
			}
			out = append(out, fmt.Sprintf("%d/%d", ready, len(es.Endpoints)))
		}
		slices.Sort(out)
		return out
	}
	waitFor(t, "slice sizes (ready/endpoints)", []string{"100/100", "100/100", "50/50"}, sizes)
	waitFor(t, "endpoints", []string{"ports=[http:8080] ready=[" + podNames(pods) + "] notReady=[]"},
		func() []string { return describeEndpoints(getEndpoints(t, env, ns, name)) })

	before := map[string]string{}
	holder := ""
	var want []string // the sizes with p123's slice one ready endpoint short
	for _, es := range managedSlices(t, env, ns, name) {
		before[es.Name] = es.ResourceVersion
		ready := len(es.Endpoints)
		for _, ep := range es.Endpoints {
			if ep.TargetRef.Name == "p123" {
				holder = es.Name
				ready--
			}
		}
		want = append(want, fmt.Sprintf("%d/%d", ready, len(es.Endpoints)))
	}
	slices.Sort(want)
	setReady(t, env, pods[123], pods[123].Status.PodIP, false)
	waitFor(t, "slice sizes after p123 turned unready", want, sizes)
	for _, es := range managedSlices(t, env, ns, name) {
		changed := before[es.Name] != es.ResourceVersion
		if changed != (es.Name == holder) {
			t.Errorf("slice %s: rewritten %v; only %s (holding p123) should be", es.Name, changed, holder)
		}
	}
}

func podNames(pods []*corev1.Pod) string {
	var names []string
	for _, p := range pods {
		names = append(names, p.Name)
	}
	return strings.Join(names, ",")
}
