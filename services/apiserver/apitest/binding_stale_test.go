package apitest

import (
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/cairn-dev/cairn/schemas/fit"
	"github.com/cairn-dev/cairn/services/apiserver"
	"github.com/cairn-dev/cairn/services/apiserver/storage"
	"github.com/cairn-dev/cairn/services/controlplane/controlplanetest"
)

// The apiserver caches what a binding checks against (the node's
// allocatable, its ledger); these tests change both behind the cache's back
// and require the overcommit check to see the change.

// bindTo binds a pod of the default namespace to node through cs.
func bindTo(t *testing.T, cs kubernetes.Interface, pod, node string) error {
	t.Helper()
	return cs.CoreV1().Pods("default").Bind(ctxFor(t, 30*time.Second), &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: pod},
		Target: corev1.ObjectReference{Kind: "Node", Name: node}}, metav1.CreateOptions{})
}

func requireRefused(t *testing.T, err error, pod, want string) {
	t.Helper()
	if !apierrors.IsConflict(err) || !strings.Contains(err.Error(), want) {
		t.Errorf("bind %s: got %v, want 409 %q", pod, err, want)
	}
	if !fit.IsOvercommitted(err) {
		t.Errorf("bind %s: got %v, want a %s cause", pod, err, fit.CauseOvercommitted)
	}
}

func createDefaultPods(t *testing.T, env *controlplanetest.Env, pods ...*corev1.Pod) map[string]*corev1.Pod {
	t.Helper()
	out := map[string]*corev1.Pod{}
	for _, p := range pods {
		p.Namespace = "default"
		out[p.Name] = controlplanetest.CreatePod(t, env, p)
	}
	return out
}

// TestBindingNodeResized: a Node status update that shrinks allocatable
// after a binding refuses the next binding that no longer fits; one that
// grows it admits a binding the old size would refuse.
func TestBindingNodeResized(t *testing.T) {
	env := controlplanetest.Start(t)
	ctx := ctxFor(t, 60*time.Second)
	nodes := env.Client.CoreV1().Nodes()
	if _, err := nodes.Create(ctx, nodeWith("n", "1", "1Gi", "10"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	createDefaultPods(t, env, podRequesting("a", "600m", "100Mi"), podRequesting("b", "200m", "100Mi"),
		podRequesting("c", "100m", "100Mi"), podRequesting("d", "1", "100Mi"))
	if err := bindTo(t, env.Client, "a", "n"); err != nil {
		t.Fatalf("bind a: %v", err)
	}
	resize := func(cpu string) {
		t.Helper()
		n, err := nodes.Get(ctx, "n", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		n.Status.Allocatable[corev1.ResourceCPU] = resource.MustParse(cpu)
		if _, err := nodes.UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	resize("700m")
	requireRefused(t, bindTo(t, env.Client, "b", "n"), "b", "binding rejected: node n: Insufficient cpu (requested 200, allocated 600 of 700)")
	if err := bindTo(t, env.Client, "c", "n"); err != nil {
		t.Fatalf("bind c (fits in 700m): %v", err)
	}
	resize("2")
	if err := bindTo(t, env.Client, "d", "n"); err != nil {
		t.Fatalf("bind d after the node grew to 2 cpus: %v", err)
	}
}

// TestBindingLedgerRewritten: the ledger rewritten behind the apiserver's
// back (in the JSON format of earlier versions) is what the next binding
// checks against.
func TestBindingLedgerRewritten(t *testing.T) {
	env := controlplanetest.Start(t)
	ctx := ctxFor(t, 60*time.Second)
	if _, err := env.Client.CoreV1().Nodes().Create(ctx, nodeWith("n", "1", "1Gi", "10"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pods := createDefaultPods(t, env, podRequesting("a", "100m", "10Mi"), podRequesting("x", "800m", "10Mi"),
		podRequesting("b", "200m", "10Mi"), podRequesting("c", "100m", "10Mi"))
	if err := bindTo(t, env.Client, "a", "n"); err != nil {
		t.Fatalf("bind a: %v", err)
	}
	// Another writer (an older apiserver) has put x on the node too.
	ledger := storage.Allocation{Pods: map[string]storage.AllocatedPod{}}
	for _, name := range []string{"a", "x"} {
		ledger.Pods[storage.Key("", "pods", "default", name)] = storage.AllocatedPod{UID: string(pods[name].UID), Requests: fit.PodRequests(pods[name], fit.Options{})}
	}
	old, err := json.Marshal(ledger)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := env.Etcd.Put(ctx, storage.AllocPrefix+"n", string(old)); err != nil {
		t.Fatal(err)
	}
	requireRefused(t, bindTo(t, env.Client, "b", "n"), "b", "Insufficient cpu (requested 200, allocated 900 of 1000)")
	if err := bindTo(t, env.Client, "c", "n"); err != nil {
		t.Fatalf("bind c (fits exactly): %v", err)
	}
	got, err := env.Store.Allocation(ctx, "n")
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Pods) != 3 || got.Total().MilliCPU != 1000 {
		t.Errorf("ledger after binding c: %v, want a, x and c (1000m)", got.Pods)
	}
}

// TestBindingNodeRecreated: a node deleted after a binding is bound to as
// a node that does not exist; recreated with less room, it refuses what
// no longer fits.
func TestBindingNodeRecreated(t *testing.T) {
	env := controlplanetest.Start(t)
	ctx := ctxFor(t, 60*time.Second)
	nodes := env.Client.CoreV1().Nodes()
	if _, err := nodes.Create(ctx, nodeWith("n", "1", "1Gi", "10"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	createDefaultPods(t, env, podRequesting("a", "600m", "10Mi"), podRequesting("b", "200m", "10Mi"),
		podRequesting("c", "100m", "10Mi"), podRequesting("d", "1", "10Mi"))
	if err := bindTo(t, env.Client, "a", "n"); err != nil {
		t.Fatalf("bind a: %v", err)
	}
	if err := nodes.Delete(ctx, "n", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// No node, no capacity to check: d (1 cpu) binds.
	if err := bindTo(t, env.Client, "d", "n"); err != nil {
		t.Fatalf("bind d to the deleted node: %v", err)
	}
	if err := env.Client.CoreV1().Pods("default").Delete(ctx, "d", *metav1.NewDeleteOptions(0)); err != nil {
		t.Fatal(err)
	}
	if _, err := nodes.Create(ctx, nodeWith("n", "700m", "1Gi", "10"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	requireRefused(t, bindTo(t, env.Client, "b", "n"), "b", "binding rejected: node n: Insufficient cpu (requested 200, allocated 600 of 700)")
	if err := bindTo(t, env.Client, "c", "n"); err != nil {
		t.Fatalf("bind c (fits in 700m once d is gone): %v", err)
	}
}

// secondServer serves the API of env from a second apiserver on the same
// etcd and log, as a replica would.
func secondServer(t *testing.T, env *controlplanetest.Env) *kubernetes.Clientset {
	t.Helper()
	return replicaServer(t, env, func(*apiserver.Config) {})
}

// replicaServer is secondServer with a Config that tweak adjusts.
func replicaServer(t *testing.T, env *controlplanetest.Env, tweak func(*apiserver.Config)) *kubernetes.Clientset {
	t.Helper()
	cfg := apiserver.Config{
		Store:    storage.New(env.Etcd),
		Registry: env.Registry,
		Hub:      env.Hub,
		Authenticator: apiserver.TokenAuthenticator{
			controlplanetest.AdminToken: {User: "admin", Groups: []string{apiserver.GroupMasters}},
		},
	}
	tweak(&cfg)
	srv, err := apiserver.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	cs, err := kubernetes.NewForConfig(&rest.Config{Host: ts.URL, BearerToken: controlplanetest.AdminToken, QPS: -1})
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// TestBindingTwoServers: two apiservers bind to the same nodes, one after
// the other and concurrently; exactly as many pods as fit are bound,
// whichever server each binding goes through.
func TestBindingTwoServers(t *testing.T) {
	env := controlplanetest.Start(t)
	ctx := ctxFor(t, 90*time.Second)
	servers := []kubernetes.Interface{env.Client, secondServer(t, env)}
	for _, n := range []*corev1.Node{nodeWith("seq", "1", "8Gi", "110"), nodeWith("conc", "1", "8Gi", "110")} {
		if _, err := env.Client.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// One after the other, alternating: each server's view of the
	// ledger is stale every other time.
	const seq = 8 // 300m each: 3 fit
	for i := range seq {
		createDefaultPods(t, env, podRequesting(fmt.Sprintf("s%d", i), "300m", "10Mi"))
	}
	bound := 0
	for i := range seq {
		err := bindTo(t, servers[i%2], fmt.Sprintf("s%d", i), "seq")
		switch {
		case err == nil:
			bound++
		case apierrors.IsConflict(err):
		default:
			t.Errorf("bind s%d: %v", i, err)
		}
	}
	if bound != 3 {
		t.Errorf("bound %d pods of 300m to a node of 1 cpu, want 3", bound)
	}

	const n = 40 // 100m each: 10 fit
	for i := range n {
		createDefaultPods(t, env, podRequesting(fmt.Sprintf("p%d", i), "100m", "10Mi"))
	}
	bound, refused := raceBindings(t, n, func(i int) error {
		return bindTo(t, servers[i%2], fmt.Sprintf("p%d", i), "conc")
	})
	if bound != 10 || refused != n-10 {
		t.Errorf("bound %d, refused %d; want 10 and %d", bound, refused, n-10)
	}
	list, err := env.Client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=conc"})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 10 {
		t.Errorf("%d pods on node conc, want 10", len(list.Items))
	}
	got, err := env.Store.Allocation(ctx, "conc")
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Pods) != 10 || got.Total().MilliCPU != 1000 {
		t.Errorf("ledger of conc: %d pods, %dm; want 10, 1000m", len(got.Pods), got.Total().MilliCPU)
	}
}
