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
	"github.com/cairn-dev/cairn/services/controlplane/controlplanetest"
)

// Sizes of the authorization benchmark.
const (
	authzPolicies = 1000 // Roles and as many RoleBindings, besides alice's
	authzPods     = 5000
	authzClients  = 32
)

// BenchmarkAuthz creates pods as alice, an ordinary user whose RoleBinding
// is one of 1,001 in the namespace (1,001 Roles too, and the bootstrap
// policy), through the full path, first on a control plane deciding with
// the RBAC authorizer, then, in the same process and run, on one that
// allows everything (apiserver.AlwaysAllow) with the same objects loaded.
// Run it with -benchtime=1x (go tool task bench:authz); it reports
// creates/s and p99-ms of both and the ratio of the rates.
func BenchmarkAuthz(b *testing.B) {
	for i := 0; i < b.N; i++ {
		rbacRate, rbacP99 := authzRun(b, nil)
		allowRate, allowP99 := authzRun(b, apiserver.AlwaysAllow{})
		b.ReportMetric(rbacRate, "rbac-creates/s")
		b.ReportMetric(float64(rbacP99.Microseconds())/1000, "rbac-p99-ms")
		b.ReportMetric(allowRate, "allow-creates/s")
		b.ReportMetric(float64(allowP99.Microseconds())/1000, "allow-p99-ms")
		b.ReportMetric(rbacRate/allowRate, "ratio")
		b.Logf("%d creates, %d clients, %d Roles/RoleBindings: RBAC %.0f creates/s (p99 %v), AlwaysAllow %.0f creates/s (p99 %v)",
			authzPods, authzClients, authzPolicies+1, rbacRate, rbacP99, allowRate, allowP99)
	}
}

func authzRun(b *testing.B, az apiserver.Authorizer) (float64, time.Duration) {
	env := controlplanetest.Start(b, controlplanetest.Options{Authorizer: az, Fsync: true})
	ctx := context.Background()
	ns := "authz"
	if _, err := env.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
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
				if _, err := env.Client.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name},
					Rules: []rbacv1.PolicyRule{{Verbs: []string{"create", "get"}, APIGroups: []string{""}, Resources: []string{"pods"}}}},
					metav1.CreateOptions{}); err != nil {
					b.Error(err)
					return
				}
				if _, err := env.Client.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
					RoleRef: rbacv1.RoleRef{Kind: "Role", Name: name}, Subjects: []rbacv1.Subject{{Kind: "User", Name: user}}},
					metav1.CreateOptions{}); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	// Wait until the authorizer's caches hold alice's binding.
	for {
		r, err := env.Client.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
			Spec: authorizationv1.SubjectAccessReviewSpec{User: "alice", ResourceAttributes: &authorizationv1.ResourceAttributes{
				Namespace: ns, Verb: "create", Resource: "pods"}}}, metav1.CreateOptions{})
		if err != nil {
			b.Fatal(err)
		}
		if r.Status.Allowed {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	lat := make([]time.Duration, authzPods)
	next.Store(0)
	start := time.Now()
	for range authzClients {
		cfg := rest.CopyConfig(env.ConfigFor(controlplanetest.UserToken))
		cfg.Dial = (&net.Dialer{}).DialContext
		cs := kubernetes.NewForConfigOrDie(cfg)
		wg.Go(func() {
			for {
				n := next.Add(1)
				if n > authzPods {
					return
				}
				pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("p-%06d", n)},
					Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "busybox:1.36"}}}}
				t0 := time.Now()
				if _, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
					b.Error(err)
					return
				}
				lat[n-1] = time.Since(t0)
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	slices.Sort(lat)
	return float64(authzPods) / elapsed.Seconds(), lat[len(lat)*99/100]
}
