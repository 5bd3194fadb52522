package endpoint

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/cairn-dev/cairn/events"
	"github.com/cairn-dev/cairn/events/consumer"
	"github.com/cairn-dev/cairn/services/controlplane/controlplanetest"
)

// TestServiceLifecycle: a Service with 3 ready pods gets one slice and
// one Endpoints; a pod turning unready moves to notReadyAddresses and
// ready=false, written with the pod's change as the cause; deleting the
// Service removes its slices (the garbage collector, through their owner
// reference) and its Endpoints. A Service without a selector is left to
// whoever writes its endpoints.
func TestServiceLifecycle(t *testing.T) {
	// HTTPS: kubectl sends its token to no plain-HTTP server.
	env := start(t, controlplanetest.Options{TLS: true})
	ctx := context.Background()
	const ns = "web"
	createNamespace(t, env, ns)
	createService(t, env, service(ns, "web", intstr.FromInt32(8080)))
	pods := map[string]*corev1.Pod{}
	for i, n := range []string{"a", "b", "c"} {
		pods[n] = createPod(t, env, ns, "web", podSpec{name: n, ip: fmt.Sprintf("10.3.0.%d", i+1), ready: true})
	}
	waitFor(t, "slices", []string{"ports=[http:8080] a:rs- b:rs- c:rs-"}, func() []string { return describeSlices(managedSlices(t, env, ns, "web")) })
	waitFor(t, "endpoints", []string{"ports=[http:8080] ready=[a,b,c] notReady=[]"}, func() []string { return describeEndpoints(getEndpoints(t, env, ns, "web")) })
	ep := getEndpoints(t, env, ns, "web")
	if ep.Annotations[corev1.EndpointsLastChangeTriggerTime] == "" || ep.Labels["team"] != "web" {
		t.Errorf("endpoints annotations %v labels %v: want %s and the Service's labels", ep.Annotations, ep.Labels, corev1.EndpointsLastChangeTriggerTime)
	}

	t.Run("kubectl", func(t *testing.T) {
		if out := kubectl(t, env, "get", "endpoints", "web", "-n", ns); !strings.Contains(out, "10.3.0.1:8080,10.3.0.2:8080,10.3.0.3:8080") {
			t.Errorf("kubectl get endpoints:\n%s", out)
		}
		// describe lists the slices' endpoints in their order.
		out := kubectl(t, env, "describe", "svc", "web", "-n", ns)
		m := regexp.MustCompile(`(?m)^Endpoints:\s+(\S+)$`).FindStringSubmatch(out)
		if m == nil {
			t.Fatalf("kubectl describe svc has no Endpoints line:\n%s", out)
		}
		got := strings.Split(m[1], ",")
		slices.Sort(got)
		if want := []string{"10.3.0.1:8080", "10.3.0.2:8080", "10.3.0.3:8080"}; !slices.Equal(got, want) {
			t.Errorf("kubectl describe svc: endpoints %v, want %v:\n%s", got, want, out)
		}
	})

	t.Run("deleted by hand, written again", func(t *testing.T) {
		es := managedSlices(t, env, ns, "web")[0]
		if err := env.Client.DiscoveryV1().EndpointSlices(ns).Delete(ctx, es.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := env.Client.CoreV1().Endpoints(ns).Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "slices written again", []string{"ports=[http:8080] a:rs- b:rs- c:rs-"}, func() []string {
			items := managedSlices(t, env, ns, "web")
			if len(items) == 1 && items[0].Name == es.Name {
				return nil // the deleted one, still listed
			}
			return describeSlices(items)
		})
		waitFor(t, "endpoints written again", []string{"ports=[http:8080] ready=[a,b,c] notReady=[]"}, func() []string { return describeEndpoints(getEndpoints(t, env, ns, "web")) })
	})
	t.Run("default/kubernetes is the apiserver's", func(t *testing.T) {
		if n := len(managedSlices(t, env, metav1.NamespaceDefault, "kubernetes")); n != 0 {
			t.Errorf("%d slices of default/kubernetes managed by %s", n, ManagedBy)
		}
		if ep := getEndpoints(t, env, metav1.NamespaceDefault, "kubernetes"); len(ep.Subsets) != 1 {
			t.Errorf("default/kubernetes Endpoints: %+v, want the apiserver's one address", ep.Subsets)
		}
	})

	unready := setReady(t, env, pods["b"], "10.3.0.2", false)
	waitFor(t, "slices after b turned unready", []string{"ports=[http:8080] a:rs- b:--- c:rs-"}, func() []string { return describeSlices(managedSlices(t, env, ns, "web")) })
	waitFor(t, "endpoints after b turned unready", []string{"ports=[http:8080] ready=[a,c] notReady=[b]"}, func() []string { return describeEndpoints(getEndpoints(t, env, ns, "web")) })
	t.Run("causation", func(t *testing.T) {
		rev, err := events.ParseRevision(unready.ResourceVersion)
		if err != nil {
			t.Fatal(err)
		}
		cause := eventAt(t, env, "", "pods", ns, "b", rev)
		for _, r := range []struct{ group, resource string }{{"discovery.k8s.io", "endpointslices"}, {"", "endpoints"}} {
			var found bool
			for _, ev := range eventsFrom(t, env, r.group, r.resource, ns, rev) {
				if ev.Type == events.Modified {
					found = true
					if ev.CausationID != cause.ID {
						t.Errorf("%s %s modified with causation %q, want %q (b's status change)", r.resource, ev.Name, ev.CausationID, cause.ID)
					}
				}
			}
			if !found {
				t.Errorf("no %s change on the log after b's", r.resource)
			}
		}
	})

	// A Service without a selector: endpoints written by hand stay.
	manual := service(ns, "manual", intstr.FromInt32(8080))
	manual.Spec.Selector = nil
	createService(t, env, manual)
	hand := &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "manual"},
		Subsets: []corev1.EndpointSubset{{Addresses: []corev1.EndpointAddress{{IP: "192.0.2.1"}}, Ports: []corev1.EndpointPort{{Port: 8080}}}}}
	if _, err := env.Client.CoreV1().Endpoints(ns).Create(ctx, hand, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	if err := env.Client.CoreV1().Services(ns).Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, wait, "the slices and Endpoints of the deleted Service to go", func() bool {
		_, err := env.Client.CoreV1().Endpoints(ns).Get(ctx, "web", metav1.GetOptions{})
		return len(managedSlices(t, env, ns, "web")) == 0 && err != nil
	})
	controlplanetest.WaitForLog(t, env)
	time.Sleep(500 * time.Millisecond) // what the controllers would do to "manual" is done by now
	got := getEndpoints(t, env, ns, "manual")
	if len(got.Subsets) != 1 || got.Subsets[0].Addresses[0].IP != "192.0.2.1" {
		t.Errorf("hand-written Endpoints of a Service without a selector: %+v", got.Subsets)
	}
	if n := len(managedSlices(t, env, ns, "manual")); n != 0 {
		t.Errorf("%d slices for a Service without a selector", n)
	}
}

// TestScaleOut: two sharded managers split the Services; every Service
// gets exactly one slice and one Endpoints, created once (no replica
// writes another's); when one manager stops, the other takes its
// Services over and keeps their endpoints current.
func TestScaleOut(t *testing.T) {
	env := controlplanetest.Start(t)
	createNode(t, env)
	const ns, services = "scale", 12
	createNamespace(t, env, ns)
	start := controlplanetest.WaitForLog(t, env)
	sharded := func(id string) func(*consumer.ManagerOptions) {
		return func(o *consumer.ManagerOptions) {
			o.Shard = &consumer.ShardOptions{Group: "endpoint-test", Identity: id, Partitions: 4, LeaseTTL: 2 * time.Second, Marker: "endpoint-test-"}
		}
	}
	stop1 := runStoppable(t, env, sharded("one"))
	runManager(t, env, sharded("two"))
	var pods []*corev1.Pod
	for i := range services {
		name := fmt.Sprintf("svc%02d", i)
		createService(t, env, service(ns, name, intstr.FromInt32(8080)))
		pods = append(pods, createPod(t, env, ns, name, podSpec{name: name + "-a", ip: fmt.Sprintf("10.4.%d.1", i), ready: true}))
	}
	for i := range services {
		name := fmt.Sprintf("svc%02d", i)
		waitFor(t, "slices of "+name, []string{"ports=[http:8080] " + name + "-a:rs-"}, func() []string { return describeSlices(managedSlices(t, env, ns, name)) })
	}
	stop1()
	for i, p := range pods {
		setReady(t, env, p, fmt.Sprintf("10.4.%d.1", i), false)
	}
	for i := range services {
		name := fmt.Sprintf("svc%02d", i)
		waitFor(t, "slices of "+name+" after the takeover", []string{"ports=[http:8080] " + name + "-a:---"}, func() []string { return describeSlices(managedSlices(t, env, ns, name)) })
		waitFor(t, "endpoints of "+name, []string{"ports=[http:8080] ready=[] notReady=[" + name + "-a]"}, func() []string { return describeEndpoints(getEndpoints(t, env, ns, name)) })
	}
	for _, r := range []struct{ group, resource string }{{"discovery.k8s.io", "endpointslices"}, {"", "endpoints"}} {
		created := map[string]int{}
		for _, ev := range eventsFrom(t, env, r.group, r.resource, ns, events.Revision(start)) {
			if ev.Type == events.Added {
				created[ev.Name]++
			}
		}
		if len(created) != services {
			t.Errorf("%s created: %v, want one for each of %d Services", r.resource, created, services)
		}
		for name, n := range created {
			if n != 1 {
				t.Errorf("%s %s created %d times", r.resource, name, n)
			}
		}
	}
	for i := range services {
		if n := len(managedSlices(t, env, ns, fmt.Sprintf("svc%02d", i))); n != 1 {
			t.Errorf("svc%02d has %d slices", i, n)
		}
	}
}

// runStoppable runs a manager with both controllers, as runManager, and
// returns its stop.
func runStoppable(t *testing.T, env *controlplanetest.Env, tweak func(*consumer.ManagerOptions)) (stop func()) {
	t.Helper()
	return controlplanetest.RunStoppable(t, newManager(t, env, tweak))
}

// eventsFrom reads the log's events of a resource in ns from revision
// from on.
func eventsFrom(t *testing.T, env *controlplanetest.Env, group, resource, ns string, from events.Revision) []*events.Event {
	t.Helper()
	controlplanetest.WaitForLog(t, env)
	var out []*events.Event
	err := events.Tail(context.Background(), env.JS, events.TailOptions{Group: group, Resource: resource, Namespace: ns, FromRevision: from}, func(ev *events.Event) error {
		out = append(out, ev)
		return nil
	})
	if err != nil {
		t.Fatalf("tail: %v", err)
	}
	return out
}

// eventAt is the event of revision r of an object, once the log has it.
func eventAt(t *testing.T, env *controlplanetest.Env, group, resource, ns, name string, r events.Revision) *events.Event {
	t.Helper()
	var found *events.Event
	eventually(t, wait, fmt.Sprintf("event %d on the log", r), func() bool {
		for _, ev := range eventsFrom(t, env, group, resource, ns, r) {
			if ev.Revision == r && ev.Name == name {
				found = ev
			}
		}
		return found != nil
	})
	return found
}

// kubectl runs the machine's kubectl against env as its admin.
func kubectl(t *testing.T, env *controlplanetest.Env, args ...string) string {
	t.Helper()
	path, err := exec.LookPath("kubectl")
	if err != nil {
		t.Skip("no kubectl")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, append([]string{"--kubeconfig", env.Kubeconfig}, args...)...)
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir()) // no discovery cache of other runs
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl %v: %v\n%s", args, err, out)
	}
	return string(out)
}
