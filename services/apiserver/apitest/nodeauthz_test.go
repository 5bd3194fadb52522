package apitest

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/cairn-dev/cairn/services/controlplane/controlplanetest"
	"github.com/cairn-dev/cairn/services/pki"
)

// nodeClient authenticates as a kubelet does: a client certificate for
// system:node:<name> in system:nodes from the cluster CA.
func nodeClient(t *testing.T, env *controlplanetest.Env, name string) kubernetes.Interface {
	t.Helper()
	ca, err := pki.LoadCA(filepath.Join(env.Dir, "pki"))
	if err != nil {
		t.Fatal(err)
	}
	cert, key, err := ca.IssueClient("system:node:"+name, []string{"system:nodes"})
	if err != nil {
		t.Fatal(err)
	}
	cfg := &rest.Config{Host: env.URL, QPS: -1, Burst: -1,
		TLSClientConfig: rest.TLSClientConfig{CAData: env.Config.TLSClientConfig.CAData, CertData: cert, KeyData: key}}
	return kubernetes.NewForConfigOrDie(cfg)
}

// TestNodeAuthorizer: with real kubelet credentials, a node reads the
// Secrets and ConfigMaps of its own pods only, one by one, writes only its
// own Node, Lease and pods, and gets tokens only bound to its own pods;
// every refusal is kube's 403 and writes nothing.
func TestNodeAuthorizer(t *testing.T) {
	env := controlplanetest.Start(t, controlplanetest.Options{TLS: true, NodeAuthorizer: true})
	ctx := ctxFor(t, 60*time.Second)
	admin := env.Client
	must := func(_ any, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team"}}, metav1.CreateOptions{}))
	for _, n := range []string{"n1", "n2"} {
		must(admin.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}}, metav1.CreateOptions{}))
	}
	for _, s := range []string{"used", "unused"} {
		must(admin.CoreV1().Secrets("team").Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: s}}, metav1.CreateOptions{}))
	}
	must(admin.CoreV1().ConfigMaps("team").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "settings"}}, metav1.CreateOptions{}))
	must(admin.CoreV1().ServiceAccounts("team").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "bot"}}, metav1.CreateOptions{}))
	pod := func(name, node string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PodSpec{NodeName: node, ServiceAccountName: "bot",
			Volumes: []corev1.Volume{{Name: "s", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "used"}}}},
			Containers: []corev1.Container{{Name: "c", Image: "busybox", EnvFrom: []corev1.EnvFromSource{
				{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "settings"}}}}}}}}
	}
	p1, err := admin.CoreV1().Pods("team").Create(ctx, pod("p1", "n1"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p2, err := admin.CoreV1().Pods("team").Create(ctx, pod("p2", "n2"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n1 := nodeClient(t, env, "n1")

	// Allowed: what its pod uses (once the graph has the pod).
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := n1.CoreV1().Secrets("team").Get(ctx, "used", metav1.GetOptions{})
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("node n1 never reads the secret of its pod: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := n1.CoreV1().ConfigMaps("team").Get(ctx, "settings", metav1.GetOptions{}); err != nil {
		t.Errorf("the configmap of its pod: %v", err)
	}
	if _, err := n1.CoreV1().Pods("team").List(ctx, metav1.ListOptions{}); err != nil {
		t.Errorf("list pods: %v", err)
	}
	if _, err := n1.CoreV1().Nodes().Patch(ctx, "n1", types.MergePatchType, []byte(`{"metadata":{"labels":{"ok":"yes"}}}`), metav1.PatchOptions{}); err != nil {
		t.Errorf("patch its own node: %v", err)
	}
	st := p1.DeepCopy()
	st.Status.Phase = corev1.PodRunning
	if _, err := n1.CoreV1().Pods("team").UpdateStatus(ctx, st, metav1.UpdateOptions{}); err != nil {
		t.Errorf("status of its own pod: %v", err)
	}
	if _, err := n1.CoreV1().ServiceAccounts("team").CreateToken(ctx, "bot", &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: "p1", UID: p1.UID}}}, metav1.CreateOptions{}); err != nil {
		t.Errorf("token for its own pod: %v", err)
	}
	if _, err := n1.CoordinationV1().Leases("kube-node-lease").Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}, metav1.CreateOptions{}); err != nil {
		t.Errorf("its own lease: %v", err)
	}

	// Refused, with kube's messages, nothing written.
	m := settle(t, env)
	st2 := p2.DeepCopy()
	st2.Status.Phase = corev1.PodRunning
	for _, c := range []struct {
		name string
		do   func() error
		msg  string
	}{
		{"a secret no pod of it uses", func() error {
			_, err := n1.CoreV1().Secrets("team").Get(ctx, "unused", metav1.GetOptions{})
			return err
		},
			`secrets "unused" is forbidden: User "system:node:n1" cannot get resource "secrets" in API group "" in the namespace "team": no relationship found between node 'n1' and this object`},
		{"listing secrets", func() error { _, err := n1.CoreV1().Secrets("team").List(ctx, metav1.ListOptions{}); return err },
			`secrets is forbidden: User "system:node:n1" cannot list resource "secrets" in API group "" in the namespace "team": No Object name found`},
		{"another node", func() error {
			_, err := n1.CoreV1().Nodes().Patch(ctx, "n2", types.MergePatchType, []byte(`{"metadata":{"labels":{"evil":"yes"}}}`), metav1.PatchOptions{})
			return err
		}, `nodes "n2" is forbidden: node "n1" is not allowed to modify node "n2"`},
		{"the status of another node's pod", func() error {
			_, err := n1.CoreV1().Pods("team").UpdateStatus(ctx, st2, metav1.UpdateOptions{})
			return err
		},
			`pods "p2" is forbidden: node "n1" can only update pod status for pods with spec.nodeName set to itself`},
		{"deleting another node's pod", func() error { return n1.CoreV1().Pods("team").Delete(ctx, "p2", metav1.DeleteOptions{}) },
			`pods "p2" is forbidden: node "n1" can only delete pods with spec.nodeName set to itself`},
		{"a pod that is not a mirror pod", func() error {
			_, err := n1.CoreV1().Pods("team").Create(ctx, pod("p3", "n1"), metav1.CreateOptions{})
			return err
		},
			`pods "p3" is forbidden: pod does not have "kubernetes.io/config.mirror" annotation, node "n1" can only create mirror pods`},
		{"a token for another node's pod", func() error {
			_, err := n1.CoreV1().ServiceAccounts("team").CreateToken(ctx, "bot", &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
				BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: "p2"}}}, metav1.CreateOptions{})
			return err
		}, `serviceaccounts/token "bot" is forbidden: node requested token bound to a pod scheduled on a different node`},
		{"an unbound token", func() error {
			_, err := n1.CoreV1().ServiceAccounts("team").CreateToken(ctx, "bot", &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
			return err
		}, `serviceaccounts/token "bot" is forbidden: node requested token not bound to a pod`},
		{"another node's lease", func() error {
			_, err := n1.CoordinationV1().Leases("kube-node-lease").Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "n2"}}, metav1.CreateOptions{})
			return err
		}, `leases.coordination.k8s.io "n2" is forbidden: can only access node lease with the same name as the requesting node`},
		{"updating another node's lease", func() error {
			_, err := n1.CoordinationV1().Leases("kube-node-lease").Update(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "n2"}}, metav1.UpdateOptions{})
			return err
		}, `leases.coordination.k8s.io "n2" is forbidden: User "system:node:n1" cannot update resource "leases" in API group "coordination.k8s.io" in the namespace "kube-node-lease": can only access node lease with the same name as the requesting node`},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := c.do()
			if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), c.msg) {
				t.Errorf("got %v, want 403 %q", err, c.msg)
			}
		})
	}
	requireNothingWritten(t, env, m)

	// The rules of a user still list with the Node authorizer in front
	// (kubectl auth can-i --list); a node's are incomplete, as in kube.
	for _, c := range []struct {
		who        kubernetes.Interface
		incomplete bool
	}{{admin, false}, {n1, true}} {
		r, err := c.who.AuthorizationV1().SelfSubjectRulesReviews().Create(ctx, &authorizationv1.SelfSubjectRulesReview{
			Spec: authorizationv1.SelfSubjectRulesReviewSpec{Namespace: "team"}}, metav1.CreateOptions{})
		if err != nil || len(r.Status.ResourceRules) == 0 || r.Status.Incomplete != c.incomplete {
			t.Errorf("rules review: %v %+v", err, r)
		}
	}
}
