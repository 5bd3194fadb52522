package endpoint

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/cairn-dev/cairn/events/consumer"
	"github.com/cairn-dev/cairn/events/consumer/consumertest"
	"github.com/cairn-dev/cairn/services/controllers/gc"
	"github.com/cairn-dev/cairn/services/controlplane/controlplanetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const (
	wait     = 30 * time.Second
	testNode = "node-a"
	testZone = "zone-a"
)

// start runs a control plane with a node and, on one Manager (tweak
// adjusts its options, e.g. sharding), both endpoint controllers and the
// garbage collector, and returns the environment.
func start(t *testing.T, opts ...controlplanetest.Options) *controlplanetest.Env {
	t.Helper()
	env := controlplanetest.Start(t, opts...)
	createNode(t, env)
	runManager(t, env, nil)
	return env
}

func runManager(t *testing.T, env *controlplanetest.Env, tweak func(*consumer.ManagerOptions)) *consumer.Manager {
	t.Helper()
	m := newManager(t, env, tweak)
	if _, err := gc.New(m, gc.Options{}); err != nil {
		t.Fatal(err)
	}
	controlplanetest.RunSynced(t, m)
	return m
}

// newManager is a Manager with both endpoint controllers on it.
func newManager(t *testing.T, env *controlplanetest.Env, tweak func(*consumer.ManagerOptions)) *consumer.Manager {
	t.Helper()
	m := consumertest.Manager(t, env, controlplanetest.ControllerToken, controlplanetest.Logger("ENDPOINT_TEST_LOG"), tweak)
	if _, err := NewSlices(m, SliceOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := NewEndpoints(m, EndpointsOptions{}); err != nil {
		t.Fatal(err)
	}
	return m
}

func createNode(t *testing.T, env *controlplanetest.Env) {
	t.Helper()
	_, err := env.Client.CoreV1().Nodes().Create(context.Background(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{
		Name: testNode, Labels: map[string]string{corev1.LabelTopologyZone: testZone}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
}

func createNamespace(t *testing.T, env *controlplanetest.Env, ns string) {
	t.Helper()
	_, err := env.Client.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
}

// service is a ClusterIP Service selecting app=<name> on port 80 to
// targetPort.
func service(ns, name string, target intstr.IntOrString) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"team": "web"}},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": name},
			Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: target, Protocol: corev1.ProtocolTCP}}},
	}
}

func createService(t *testing.T, env *controlplanetest.Env, svc *corev1.Service) *corev1.Service {
	t.Helper()
	out, err := env.Client.CoreV1().Services(svc.Namespace).Create(context.Background(), svc, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create service %s: %v", svc.Name, err)
	}
	return out
}

// podSpec says how the stand-in kubelet reports a pod.
type podSpec struct {
	name  string
	ip    string
	ready bool
	// ports are the container's named ports (name=number).
	ports map[string]int32
	// terminating: the pod is being deleted (held by a finalizer).
	terminating bool
	// hostname and subdomain of the pod's spec.
	hostname, subdomain string
}

// createPod creates a pod of app=app on the test node and, as a kubelet
// would, reports it Running with its IP and its Ready condition.
func createPod(t *testing.T, env *controlplanetest.Env, ns, app string, ps podSpec) *corev1.Pod {
	t.Helper()
	c := corev1.Container{Name: "c", Image: "busybox"}
	for _, n := range slices.Sorted(maps.Keys(ps.ports)) {
		c.Ports = append(c.Ports, corev1.ContainerPort{Name: n, ContainerPort: ps.ports[n], Protocol: corev1.ProtocolTCP})
	}
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: ps.name, Labels: map[string]string{"app": app}},
		Spec: corev1.PodSpec{NodeName: testNode, Containers: []corev1.Container{c},
			Hostname: ps.hostname, Subdomain: ps.subdomain},
	}
	if ps.terminating {
		p.Finalizers = []string{"test.cairn.dev/hold"}
	}
	p = controlplanetest.CreatePod(t, env, p)
	if ps.ip != "" {
		p = setReady(t, env, p, ps.ip, ps.ready)
	}
	if ps.terminating {
		ctx := context.Background()
		if err := env.Client.CoreV1().Pods(ns).Delete(ctx, p.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			// Let the namespace's pods go when the test ends.
			cur, err := env.Client.CoreV1().Pods(ns).Get(ctx, p.Name, metav1.GetOptions{})
			if err == nil {
				cur.Finalizers = nil
				_, _ = env.Client.CoreV1().Pods(ns).Update(ctx, cur, metav1.UpdateOptions{})
			}
		})
	}
	return p
}

// setReady is the stand-in kubelet's status report: Running, ip, and a
// Ready condition of ready.
func setReady(t *testing.T, env *controlplanetest.Env, p *corev1.Pod, ip string, ready bool) *corev1.Pod {
	t.Helper()
	ctx := context.Background()
	for range 10 {
		cur, err := env.Client.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		status := corev1.ConditionFalse
		if ready {
			status = corev1.ConditionTrue
		}
		cur.Status.Phase = corev1.PodRunning
		cur.Status.PodIP = ip
		cur.Status.PodIPs = []corev1.PodIP{{IP: ip}}
		cur.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: status, LastTransitionTime: metav1.Now()}}
		out, err := env.Client.CoreV1().Pods(p.Namespace).UpdateStatus(ctx, cur, metav1.UpdateOptions{})
		if err == nil {
			return out
		}
		t.Logf("update status of %s: %v (retrying)", p.Name, err)
	}
	t.Fatalf("could not update the status of %s", p.Name)
	return nil
}

// managedSlices are the slices the controller keeps for Service ns/name.
func managedSlices(t *testing.T, env *controlplanetest.Env, ns, name string) []discoveryv1.EndpointSlice {
	t.Helper()
	l, err := env.Client.DiscoveryV1().EndpointSlices(ns).List(context.Background(), metav1.ListOptions{
		LabelSelector: discoveryv1.LabelServiceName + "=" + name + "," + discoveryv1.LabelManagedBy + "=" + ManagedBy})
	if err != nil {
		t.Fatal(err)
	}
	return l.Items
}

// describeSlices summarises slices, one line each, sorted: the ports,
// then every endpoint as name:ready/serving/terminating (r, s, t for
// true, - for false).
func describeSlices(items []discoveryv1.EndpointSlice) []string {
	var out []string
	for _, es := range items {
		var ports []string
		for _, p := range es.Ports {
			ports = append(ports, fmt.Sprintf("%s:%d", deref(p.Name), deref(p.Port)))
		}
		var eps []string
		for _, ep := range es.Endpoints {
			name := ""
			if ep.TargetRef != nil {
				name = ep.TargetRef.Name
			}
			eps = append(eps, name+":"+flag(ep.Conditions.Ready, "r")+flag(ep.Conditions.Serving, "s")+flag(ep.Conditions.Terminating, "t"))
		}
		slices.Sort(eps)
		out = append(out, "ports=["+strings.Join(ports, ",")+"] "+strings.Join(eps, " "))
	}
	slices.Sort(out)
	return out
}

func flag(b *bool, s string) string {
	if b != nil && *b {
		return s
	}
	return "-"
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// describeEndpoints summarises an Endpoints object: per subset, its
// ports, ready and not-ready pod names.
func describeEndpoints(ep *corev1.Endpoints) []string {
	var out []string
	for _, s := range ep.Subsets {
		var ports, ready, notReady []string
		for _, p := range s.Ports {
			ports = append(ports, fmt.Sprintf("%s:%d", p.Name, p.Port))
		}
		for _, a := range s.Addresses {
			ready = append(ready, a.TargetRef.Name)
		}
		for _, a := range s.NotReadyAddresses {
			notReady = append(notReady, a.TargetRef.Name)
		}
		slices.Sort(ready)
		slices.Sort(notReady)
		out = append(out, fmt.Sprintf("ports=[%s] ready=[%s] notReady=[%s]", strings.Join(ports, ","), strings.Join(ready, ","), strings.Join(notReady, ",")))
	}
	slices.Sort(out)
	return out
}

// eventually polls cond until it holds or d passes.
func eventually(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	controlplanetest.Eventually(t, d, what, cond)
}
