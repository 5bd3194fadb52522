package endpointmirror

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/cairn-dev/cairn/events"
	"github.com/cairn-dev/cairn/events/consumer"
	"github.com/cairn-dev/cairn/events/consumer/consumertest"
	"github.com/cairn-dev/cairn/services/controlplane/controlplanetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const wait = 30 * time.Second

func newManager(t *testing.T, env *controlplanetest.Env, tweak func(*consumer.ManagerOptions), opts Options) *consumer.Manager {
	t.Helper()
	m := consumertest.Manager(t, env, controlplanetest.ControllerToken, controlplanetest.Logger("ENDPOINTMIRROR_TEST_LOG"), tweak)
	if _, err := New(m, opts); err != nil {
		t.Fatal(err)
	}
	return m
}

func createNamespace(t *testing.T, env *controlplanetest.Env, ns string) {
	t.Helper()
	_, err := env.Client.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
}

// selectorless is a Service without a selector on port 80.
func selectorless(ns, name string) *corev1.Service {
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)}}}}
}

func endpoints(ns, name string, ready, notReady []string) *corev1.Endpoints {
	ep := &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"team": "ext"}}}
	s := corev1.EndpointSubset{Ports: []corev1.EndpointPort{{Name: "http", Port: 8080, Protocol: corev1.ProtocolTCP}}}
	for _, ip := range ready {
		s.Addresses = append(s.Addresses, corev1.EndpointAddress{IP: ip})
	}
	for _, ip := range notReady {
		s.NotReadyAddresses = append(s.NotReadyAddresses, corev1.EndpointAddress{IP: ip})
	}
	ep.Subsets = []corev1.EndpointSubset{s}
	return ep
}

// mirroredSlices lists the slices mirrored for Endpoints ns/name.
func mirroredSlices(t *testing.T, env *controlplanetest.Env, ns, name string) []discoveryv1.EndpointSlice {
	t.Helper()
	l, err := env.Client.DiscoveryV1().EndpointSlices(ns).List(context.Background(), metav1.ListOptions{
		LabelSelector: discoveryv1.LabelServiceName + "=" + name + "," + discoveryv1.LabelManagedBy + "=" + ManagedBy})
	if err != nil {
		t.Fatal(err)
	}
	return l.Items
}

// summary is one line per slice, sorted: its ports and address:r|-.
func summary(items []discoveryv1.EndpointSlice) []string {
	var out []string
	for _, es := range items {
		var ports, eps []string
		for _, p := range es.Ports {
			ports = append(ports, fmt.Sprintf("%s:%d", *p.Name, *p.Port))
		}
		for _, e := range es.Endpoints {
			r := "-"
			if e.Conditions.Ready != nil && *e.Conditions.Ready {
				r = "r"
			}
			eps = append(eps, e.Addresses[0]+":"+r)
		}
		slices.Sort(eps)
		out = append(out, fmt.Sprintf("%s [%s] %s", es.AddressType, strings.Join(ports, ","), strings.Join(eps, " ")))
	}
	slices.Sort(out)
	return out
}

func waitSlices(t *testing.T, env *controlplanetest.Env, ns, name, what string, want []string) {
	t.Helper()
	var got []string
	ok := within(wait, func() bool {
		got = summary(mirroredSlices(t, env, ns, name))
		return slices.Equal(got, want)
	})
	if !ok {
		t.Fatalf("%s: slices %q, want %q", what, got, want)
	}
}

// TestMirroring: the Endpoints of a Service without a selector are
// mirrored, follow their changes, are put back when someone edits or
// deletes the mirror, and go when the Service gains a selector, when the
// Endpoints go, and never exist for skip-mirror Endpoints or Endpoints
// without a Service.
func TestMirroring(t *testing.T) {
	env := controlplanetest.Start(t)
	controlplanetest.RunSynced(t, newManager(t, env, nil, Options{MaxEndpointsPerSubset: 3}))
	ctx := context.Background()
	const ns = "ext"
	createNamespace(t, env, ns)
	svcs, eps := env.Client.CoreV1().Services(ns), env.Client.CoreV1().Endpoints(ns)
	if _, err := svcs.Create(ctx, selectorless(ns, "db"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := eps.Create(ctx, endpoints(ns, "db", []string{"192.0.2.10", "192.0.2.11"}, []string{"192.0.2.12"}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitSlices(t, env, ns, "db", "mirrored", []string{"IPv4 [http:8080] 192.0.2.10:r 192.0.2.11:r 192.0.2.12:-"})
	es := mirroredSlices(t, env, ns, "db")[0]
	if es.Labels["team"] != "ext" || len(es.OwnerReferences) != 1 || es.OwnerReferences[0].Kind != "Endpoints" {
		t.Errorf("mirrored slice labels %v owners %v", es.Labels, es.OwnerReferences)
	}

	t.Run("follows the Endpoints", func(t *testing.T) {
		cur, err := eps.Get(ctx, "db", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cur.Subsets = endpoints(ns, "db", []string{"192.0.2.10", "192.0.2.12"}, nil).Subsets
		if _, err := eps.Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		waitSlices(t, env, ns, "db", "after the update", []string{"IPv4 [http:8080] 192.0.2.10:r 192.0.2.12:r"})
		if got := mirroredSlices(t, env, ns, "db"); got[0].Name != es.Name {
			t.Errorf("slice %s replaced by %s, want it updated in place", es.Name, got[0].Name)
		}
	})

	t.Run("an edit of the mirror is undone", func(t *testing.T) {
		cur := mirroredSlices(t, env, ns, "db")[0]
		cur.Endpoints = cur.Endpoints[:1]
		if _, err := env.Client.DiscoveryV1().EndpointSlices(ns).Update(ctx, &cur, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		waitSlices(t, env, ns, "db", "after the edit", []string{"IPv4 [http:8080] 192.0.2.10:r 192.0.2.12:r"})
		if err := env.Client.DiscoveryV1().EndpointSlices(ns).Delete(ctx, cur.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		var got []discoveryv1.EndpointSlice
		if !within(wait, func() bool {
			got = mirroredSlices(t, env, ns, "db")
			return len(got) == 1 && got[0].Name != cur.Name
		}) {
			t.Fatalf("after deleting the mirror: %v", summary(got))
		}
	})

	t.Run("over the limit", func(t *testing.T) {
		cur, err := eps.Get(ctx, "db", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cur.Subsets = endpoints(ns, "db", []string{"192.0.2.1", "192.0.2.2", "192.0.2.3", "192.0.2.4"}, []string{"192.0.2.5"}).Subsets
		if _, err := eps.Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		waitSlices(t, env, ns, "db", "over the limit", []string{"IPv4 [http:8080] 192.0.2.1:r 192.0.2.2:r 192.0.2.3:r"})
		var reasons []string
		if !within(wait, func() bool {
			l, err := env.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=db"})
			if err != nil {
				t.Fatal(err)
			}
			reasons = nil
			for _, e := range l.Items {
				reasons = append(reasons, e.Reason+": "+e.Message)
			}
			return slices.ContainsFunc(reasons, func(s string) bool {
				return strings.HasPrefix(s, ReasonTooManyAddressesToMirror+": A max of 3 addresses can be mirrored to EndpointSlices per Endpoints subset. 2 addresses were skipped")
			})
		}) {
			t.Errorf("events %q: want %s", reasons, ReasonTooManyAddressesToMirror)
		}
	})

	t.Run("a selector takes the Service away", func(t *testing.T) {
		cur, err := svcs.Get(ctx, "db", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cur.Spec.Selector = map[string]string{"app": "db"}
		if _, err := svcs.Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		waitSlices(t, env, ns, "db", "with a selector", nil)
		cur.Spec.Selector = nil
		if cur, err = svcs.Get(ctx, "db", metav1.GetOptions{}); err != nil {
			t.Fatal(err)
		}
		cur.Spec.Selector = nil
		if _, err := svcs.Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		// Without a selector again, and no endpoints controller in this
		// test to touch the Endpoints: mirrored again.
		waitSlices(t, env, ns, "db", "selector removed", []string{"IPv4 [http:8080] 192.0.2.1:r 192.0.2.2:r 192.0.2.3:r"})
	})

	t.Run("not mirrored", func(t *testing.T) {
		// No Service of that name.
		if _, err := eps.Create(ctx, endpoints(ns, "orphan", []string{"192.0.2.20"}, nil), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := svcs.Create(ctx, selectorless(ns, "skip"), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		skip := endpoints(ns, "skip", []string{"192.0.2.21"}, nil)
		skip.Labels[discoveryv1.LabelSkipMirror] = "true"
		if _, err := eps.Create(ctx, skip, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		// A marker the controller mirrors after it looked at the others.
		if _, err := svcs.Create(ctx, selectorless(ns, "marker"), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := eps.Create(ctx, endpoints(ns, "marker", []string{"192.0.2.22"}, nil), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		waitSlices(t, env, ns, "marker", "marker", []string{"IPv4 [http:8080] 192.0.2.22:r"})
		controlplanetest.WaitForLog(t, env)
		for _, name := range []string{"orphan", "skip"} {
			if got := mirroredSlices(t, env, ns, name); len(got) != 0 {
				t.Errorf("%s mirrored: %v", name, summary(got))
			}
		}
	})

	t.Run("Endpoints deleted", func(t *testing.T) {
		if err := eps.Delete(ctx, "db", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		waitSlices(t, env, ns, "db", "Endpoints deleted", nil)
	})
}

// TestMirroringScaleOut: two sharded replicas mirror every Endpoints
// object once (each slice created once); when one stops, the other
// takes its keys over and follows their changes.
func TestMirroringScaleOut(t *testing.T) {
	env := controlplanetest.Start(t)
	const ns, n = "scale", 10
	createNamespace(t, env, ns)
	start := controlplanetest.WaitForLog(t, env)
	sharded := func(id string) func(*consumer.ManagerOptions) {
		return func(o *consumer.ManagerOptions) {
			o.Shard = &consumer.ShardOptions{Group: "mirror-test", Identity: id, Partitions: 4, LeaseTTL: 2 * time.Second, Marker: "mirror-test-"}
		}
	}
	stop1 := controlplanetest.RunStoppable(t, newManager(t, env, sharded("one"), Options{}))
	controlplanetest.RunSynced(t, newManager(t, env, sharded("two"), Options{}))
	ctx := context.Background()
	for i := range n {
		name := fmt.Sprintf("ext%02d", i)
		if _, err := env.Client.CoreV1().Services(ns).Create(ctx, selectorless(ns, name), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := env.Client.CoreV1().Endpoints(ns).Create(ctx, endpoints(ns, name, []string{fmt.Sprintf("192.0.2.%d", i+1)}, nil), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range n {
		name := fmt.Sprintf("ext%02d", i)
		waitSlices(t, env, ns, name, name, []string{fmt.Sprintf("IPv4 [http:8080] 192.0.2.%d:r", i+1)})
	}
	stop1()
	for i := range n {
		name := fmt.Sprintf("ext%02d", i)
		cur, err := env.Client.CoreV1().Endpoints(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cur.Subsets = endpoints(ns, name, nil, []string{fmt.Sprintf("192.0.2.%d", i+1)}).Subsets
		if _, err := env.Client.CoreV1().Endpoints(ns).Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range n {
		name := fmt.Sprintf("ext%02d", i)
		waitSlices(t, env, ns, name, name+" after the takeover", []string{fmt.Sprintf("IPv4 [http:8080] 192.0.2.%d:-", i+1)})
	}
	controlplanetest.WaitForLog(t, env)
	created := map[string]int{}
	err := events.Tail(ctx, env.JS, events.TailOptions{Group: "discovery.k8s.io", Resource: "endpointslices", Namespace: ns, FromRevision: events.Revision(start)}, func(ev *events.Event) error {
		if ev.Type == events.Added {
			created[ev.Name]++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(created) != n {
		t.Errorf("slices created: %v, want one for each of %d Endpoints", created, n)
	}
	for name, c := range created {
		if c != 1 {
			t.Errorf("slice %s created %d times", name, c)
		}
	}
}

// within polls cond until it holds (true) or d passes (false).
func within(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
}
