package apitest

import (
	"context"
	"fmt"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/cairn-dev/cairn/services/apiserver"
	"github.com/cairn-dev/cairn/services/apiserver/rbac"
	"github.com/cairn-dev/cairn/services/controlplane/controlplanetest"
)

// Sizes of the authorization benchmark.
const (
	authzPolicies = 1000 // Roles and as many RoleBindings, besides alice's
	authzPods     = 5000 // per authorizer
	authzClients  = 32
	authzNS       = "authz"
)

// BenchmarkAuthz creates pods as alice, an ordinary user whose RoleBinding
// is one of 1,001 in the namespace (1,001 Roles too, and the bootstrap
// policy), through the full path, on one control plane whose authorizer
// switches between the RBAC authorizer and one that allows everything
// (apiserver.AlwaysAllow): after a warm-up round, four rounds, RBAC,
// AlwaysAllow, AlwaysAllow, RBAC, so both see the same objects, caches and
// machine load. Run
// it with -benchtime=1x (go tool task bench:authz); it reports creates/s
// and p99-ms of each and the ratio of the rates.
func BenchmarkAuthz(b *testing.B) {
	for i := 0; i < b.N; i++ {
		sw := &switchAuthz{}
		sw.allow.Store(true)
		env := controlplanetest.Start(b, controlplanetest.Options{Authorizer: sw, Fsync: true})
		sw.rbac.Store(env.ControlPlane.RBAC)
		sw.allow.Store(false)
		loadPolicy(b, env)
		var lat [2][]time.Duration
		var took [2]time.Duration
		// A warm-up round, then RBAC, AlwaysAllow, AlwaysAllow, RBAC, so
		// that a drift of the machine's load weighs on both alike.
		createAs(b, env, "warm")
		for round, mode := range []int{0, 1, 1, 0} { // 0: RBAC, 1: AlwaysAllow
			sw.allow.Store(mode == 1)
			l, d := createAs(b, env, fmt.Sprintf("r%d", round))
			lat[mode] = append(lat[mode], l...)
			took[mode] += d
		}
		rate := func(m int) float64 { return float64(len(lat[m])) / took[m].Seconds() }
		p99 := func(m int) time.Duration {
			slices.Sort(lat[m])
			return lat[m][len(lat[m])*99/100]
		}
		b.ReportMetric(rate(0), "rbac-creates/s")
		b.ReportMetric(float64(p99(0).Microseconds())/1000, "rbac-p99-ms")
		b.ReportMetric(rate(1), "allow-creates/s")
		b.ReportMetric(float64(p99(1).Microseconds())/1000, "allow-p99-ms")
		b.ReportMetric(rate(0)/rate(1), "ratio")
		b.Logf("%d creates each, %d clients, %d Roles/RoleBindings: RBAC %.0f creates/s (p99 %v), AlwaysAllow %.0f creates/s (p99 %v)",
			len(lat[0]), authzClients, authzPolicies+1, rate(0), p99(0), rate(1), p99(1))
	}
}

// switchAuthz is the RBAC authorizer or AlwaysAllow.
type switchAuthz struct {
	rbac  atomic.Pointer[rbac.Authorizer]
	allow atomic.Bool
}

func (s *switchAuthz) Authorize(ctx context.Context, a apiserver.Attributes) (bool, string) {
	if s.allow.Load() {
		return apiserver.AlwaysAllow{}.Authorize(ctx, a)
	}
	return s.rbac.Load().Authorize(ctx, a)
}

// loadPolicy creates the namespace, 1,000 Roles and RoleBindings for other
// users and alice's, and waits until the authorizer knows alice's.
func loadPolicy(b *testing.B, env *controlplanetest.Env) {
	ctx := context.Background()
	if _, err := env.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: authzNS}}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range authzClients {
		wg.Go(func() {
			for {
				n := next.Add(1)
				if n > authzPolicies+1 {
					return
				}
				name, user := fmt.Sprintf("role-%04d", n), fmt.Sprintf("user-%04d", n)
				if n == authzPolicies+1 {
					user = "alice"
				}
				if _, err := env.Client.RbacV1().Roles(authzNS).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name},
					Rules: []rbacv1.PolicyRule{{Verbs: []string{"create", "get"}, APIGroups: []string{""}, Resources: []string{"pods"}}}},
					metav1.CreateOptions{}); err != nil {
					b.Error(err)
					return
				}
				if _, err := env.Client.RbacV1().RoleBindings(authzNS).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
					RoleRef: rbacv1.RoleRef{Kind: "Role", Name: name}, Subjects: []rbacv1.Subject{{Kind: "User", Name: user}}},
					metav1.CreateOptions{}); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	for {
		r, err := env.Client.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
			Spec: authorizationv1.SubjectAccessReviewSpec{User: "alice", ResourceAttributes: &authorizationv1.ResourceAttributes{
				Namespace: authzNS, Verb: "create", Resource: "pods"}}}, metav1.CreateOptions{})
		if err != nil {
			b.Fatal(err)
		}
		if r.Status.Allowed {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// createAs creates authzPods/2 pods as alice with authzClients clients and
// returns their latencies and the time it took.
func createAs(b *testing.B, env *controlplanetest.Env, prefix string) ([]time.Duration, time.Duration) {
	return createPodsAs(b, env, controlplanetest.UserToken, authzNS, prefix, authzPods/2)
}

// createPodsAs creates n pods in ns with the token's identity, from
// authzClients clients, and returns their latencies and the time it took.
func createPodsAs(b *testing.B, env *controlplanetest.Env, token, ns, prefix string, n int) ([]time.Duration, time.Duration) {
	lat := make([]time.Duration, n)
	var next atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range authzClients {
		cfg := rest.CopyConfig(env.ConfigFor(token))
		cfg.Dial = (&net.Dialer{}).DialContext
		cs := kubernetes.NewForConfigOrDie(cfg)
		wg.Go(func() {
			for {
				i := next.Add(1)
				if i > int64(n) {
					return
				}
				pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%06d", prefix, i)},
					Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "busybox:1.36"}}}}
				t0 := time.Now()
				if _, err := cs.CoreV1().Pods(ns).Create(context.Background(), pod, metav1.CreateOptions{}); err != nil {
					b.Error(err)
					return
				}
				lat[i-1] = time.Since(t0)
			}
		})
	}
	wg.Wait()
	return lat, time.Since(start)
}
