package gc

import (
	"context"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/cairn-dev/cairn/events"
	"github.com/cairn-dev/cairn/events/consumer"
	"github.com/cairn-dev/cairn/events/consumer/consumertest"
	"github.com/cairn-dev/cairn/services/controlplane/controlplanetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const timeout = 30 * time.Second

// start runs a control plane and the collector (as the controller manager)
// until the test ends. With shared, the collector reads pods and
// ReplicaSets from typed caches asked of its manager first, as the
// controller manager's other controllers do.
func start(t *testing.T, shared bool) *controlplanetest.Env {
	t.Helper()
	env := controlplanetest.Start(t)
	m := newManager(t, env)
	var pods, rsets consumer.MetaCache
	if shared {
		pods = consumer.Meta(sharedCache[*corev1.Pod](t, m, corev1.SchemeGroupVersion.WithResource("pods"), nil))
		rsets = consumer.Meta(sharedCache[*appsv1.ReplicaSet](t, m, appsv1.SchemeGroupVersion.WithResource("replicasets"), nil))
	}
	c := runCollector(t, m, Options{})
	if shared {
		for _, r := range c.resources {
			if r.gvr.Resource == "pods" && r.cache != pods || r.gvr.Resource == "replicasets" && r.cache != rsets {
				t.Fatalf("the collector runs its own %s cache instead of the shared one", r.gvr.Resource)
			}
		}
	}
	return env
}

// newManager is a manager as the controller manager.
func newManager(t *testing.T, env *controlplanetest.Env) *consumer.Manager {
	return consumertest.Manager(t, env, controlplanetest.ControllerToken, controlplanetest.Logger("GC_TEST_LOG"), nil)
}

// runCollector adds a collector to m, runs m until the test ends and waits
// until its caches hold what the log holds: a test's writes then reach it
// as events (with their causes), not in a first snapshot.
func runCollector(t *testing.T, m *consumer.Manager, opts Options) *Controller {
	t.Helper()
	c, err := New(m, opts)
	if err != nil {
		t.Fatal(err)
	}
	controlplanetest.Run(t, m)
	eventually(t, timeout, "the collector to discover the resources", c.started.Load)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := m.WaitForSync(ctx); err != nil {
		t.Fatal(err)
	}
	return c
}

// startPartitioned runs a control plane and two collectors that split the
// keys as two scaled-out controller-manager replicas do: each owns the
// keys that hash to its half of two partitions, and its shared pod cache
// follows only the pods whose controller is in its half (as a sharded
// manager's consumer.SubjectPartitions maps shard partitions).
func startPartitioned(t *testing.T) *controlplanetest.Env {
	t.Helper()
	env := controlplanetest.Start(t)
	for i := range uint32(2) {
		var half []int
		for p := range events.Partitions {
			if uint32(p)%2 == i {
				half = append(half, p)
			}
		}
		m := newManager(t, env)
		sharedCache[*corev1.Pod](t, m, corev1.SchemeGroupVersion.WithResource("pods"), half)
		sharedCache[*appsv1.ReplicaSet](t, m, appsv1.SchemeGroupVersion.WithResource("replicasets"), nil)
		runCollector(t, m, Options{Owns: func(key string) bool { return events.KeyHash(key)%2 == i }})
	}
	return env
}

// sharedCache asks m for a typed cache of gvr, following only partitions
// parts unless parts is nil.
func sharedCache[T consumer.Object](t *testing.T, m *consumer.Manager, gvr schema.GroupVersionResource, parts []int) *consumer.Cache[T] {
	t.Helper()
	c, err := consumer.CacheFor[T](m, gvr)
	if err != nil {
		t.Fatal(err)
	}
	if parts != nil {
		c.SetPartitions(parts)
	}
	return c
}

func mkNamespace(t *testing.T, env *controlplanetest.Env, ns string) {
	t.Helper()
	_, err := env.Client.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
}

// eventually polls cond until it holds or d passes.
func eventually(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// owner is what an ownerReference needs to know of its owner.
type owner interface {
	GetName() string
	GetUID() types.UID
}

// ref is an ownerReference to o; block sets blockOwnerDeletion.
func ref(apiVersion, kind string, o owner, block bool) metav1.OwnerReference {
	r := metav1.OwnerReference{APIVersion: apiVersion, Kind: kind, Name: o.GetName(), UID: o.GetUID()}
	if block {
		r.BlockOwnerDeletion = &block
	}
	return r
}

func cmRef(o owner) metav1.OwnerReference { return ref("v1", "ConfigMap", o, false) }

func rsRef(o owner, block bool) metav1.OwnerReference {
	r := ref("apps/v1", "ReplicaSet", o, block)
	yes := true
	r.Controller = &yes
	return r
}

func createCM(t *testing.T, env *controlplanetest.Env, ns, name string, refs ...metav1.OwnerReference) *corev1.ConfigMap {
	t.Helper()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, OwnerReferences: refs}}
	got, err := env.Client.CoreV1().ConfigMaps(ns).Create(context.Background(), cm, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create configmap %s: %v", name, err)
	}
	return got
}

func createRS(t *testing.T, env *controlplanetest.Env, ns, name string) *appsv1.ReplicaSet {
	t.Helper()
	zero := int32(0)
	lbls := map[string]string{"app": name}
	rs := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: appsv1.ReplicaSetSpec{
			Replicas: &zero,
			Selector: &metav1.LabelSelector{MatchLabels: lbls},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: lbls},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx"}}},
			},
		},
	}
	got, err := env.Client.AppsV1().ReplicaSets(ns).Create(context.Background(), rs, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create replicaset %s: %v", name, err)
	}
	return got
}

// createPod creates an unbound pod (deleted at once, no kubelet needed).
func createPod(t *testing.T, env *controlplanetest.Env, ns, name string, finalizers []string, refs ...metav1.OwnerReference) *corev1.Pod {
	t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, OwnerReferences: refs, Finalizers: finalizers},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx"}}},
	}
	got, err := env.Client.CoreV1().Pods(ns).Create(context.Background(), pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create pod %s: %v", name, err)
	}
	return got
}

func cmGone(env *controlplanetest.Env, ns, name string) func() bool {
	return func() bool {
		_, err := env.Client.CoreV1().ConfigMaps(ns).Get(context.Background(), name, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	}
}

func podGone(env *controlplanetest.Env, ns, name string) func() bool {
	return func() bool {
		_, err := env.Client.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	}
}

func rsGone(env *controlplanetest.Env, ns, name string) func() bool {
	return func() bool {
		_, err := env.Client.AppsV1().ReplicaSets(ns).Get(context.Background(), name, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	}
}

func getCM(t *testing.T, env *controlplanetest.Env, ns, name string) *corev1.ConfigMap {
	t.Helper()
	cm, err := env.Client.CoreV1().ConfigMaps(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get configmap %s: %v", name, err)
	}
	return cm
}

func getPod(t *testing.T, env *controlplanetest.Env, ns, name string) *corev1.Pod {
	t.Helper()
	pod, err := env.Client.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get pod %s: %v", name, err)
	}
	return pod
}

func deleteWith(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("delete: %v", err)
	}
}

func policy(p metav1.DeletionPropagation) metav1.DeleteOptions {
	return metav1.DeleteOptions{PropagationPolicy: &p}
}

// tlsKubeconfig fronts env with a TLS proxy and writes a kubeconfig for
// it: kubectl does not send a bearer token to a plain-HTTP server, which is
// what controlplanetest serves.
func tlsKubeconfig(t *testing.T, env *controlplanetest.Env) string {
	t.Helper()
	target, err := url.Parse(env.URL)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(target)
	tr := &http.Transport{}
	proxy.Transport = tr
	proxy.FlushInterval = -1 // watches
	srv := httptest.NewTLSServer(proxy)
	t.Cleanup(func() {
		srv.CloseClientConnections()
		srv.Close()
		tr.CloseIdleConnections()
	})
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	c := clientcmdapi.NewConfig()
	c.Clusters["cairn"] = &clientcmdapi.Cluster{Server: srv.URL, CertificateAuthorityData: ca}
	c.AuthInfos["admin"] = &clientcmdapi.AuthInfo{Token: controlplanetest.AdminToken}
	c.Contexts["cairn"] = &clientcmdapi.Context{Cluster: "cairn", AuthInfo: "admin", Namespace: "default"}
	c.CurrentContext = "cairn"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*c, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// kubectl runs the machine's kubectl with kubeconfig.
func kubectl(t *testing.T, kubeconfig string, args ...string) string {
	t.Helper()
	path := "/usr/bin/kubectl"
	if _, err := os.Stat(path); err != nil {
		if path, err = exec.LookPath("kubectl"); err != nil {
			t.Skip("no kubectl")
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, args...)
	// Our kubeconfig and a private HOME, so no discovery cache or
	// credentials of other runs interfere.
	cmd.Env = []string{"KUBECONFIG=" + kubeconfig, "HOME=" + t.TempDir()}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "KUBECONFIG=") && !strings.HasPrefix(kv, "HOME=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl %v: %v\n%s", args, err, out)
	}
	return string(out)
}

// deleteEvent is the DELETED event of ns/name on the log.
func deleteEvent(t *testing.T, env *controlplanetest.Env, resource, ns, name string) *events.Event {
	t.Helper()
	var found *events.Event
	eventually(t, 10*time.Second, "the delete event of "+name, func() bool {
		err := events.Tail(context.Background(), env.JS, events.TailOptions{Resource: resource, Namespace: ns, Name: name}, func(ev *events.Event) error {
			if ev.Type == events.Deleted {
				found = ev
			}
			return nil
		})
		if err != nil {
			t.Fatalf("tail: %v", err)
		}
		return found != nil
	})
	return found
}
