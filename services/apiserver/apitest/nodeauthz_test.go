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
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
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
	claims := map[string]*corev1.PersistentVolumeClaim{}
	for _, c := range []string{"data", "other"} {
		pvc, err := admin.CoreV1().PersistentVolumeClaims("team").Create(ctx, &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: c},
			Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		pvc.Status.Capacity = corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("2Gi")}
		claims[c] = pvc
	}
	pod := func(name, node string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PodSpec{NodeName: node, ServiceAccountName: "bot",
			Volumes: []corev1.Volume{{Name: "s", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "used"}}},
				{Name: "d", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}}},
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
	// The status of its pod's claim, as the kubelet finishes an expansion.
	if _, err := n1.CoreV1().PersistentVolumeClaims("team").UpdateStatus(ctx, claims["data"], metav1.UpdateOptions{}); err != nil {
		t.Errorf("status of its pod's claim: %v", err)
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
				BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: "p2", UID: p2.UID}}}, metav1.CreateOptions{})
			return err
		}, `serviceaccounts/token "bot" is forbidden: node requested token bound to a pod scheduled on a different node`},
		{"a token bound to a pod without its uid", func() error {
			_, err := n1.CoreV1().ServiceAccounts("team").CreateToken(ctx, "bot", &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
				BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: "p1"}}}, metav1.CreateOptions{})
			return err
		}, `serviceaccounts/token "bot" is forbidden: node requested token with a pod binding without a uid`},
		{"an unbound token", func() error {
			_, err := n1.CoreV1().ServiceAccounts("team").CreateToken(ctx, "bot", &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
			return err
		}, `serviceaccounts/token "bot" is forbidden: node requested token not bound to a pod`},
		{"the status of a claim no pod of it uses", func() error {
			_, err := n1.CoreV1().PersistentVolumeClaims("team").UpdateStatus(ctx, claims["other"], metav1.UpdateOptions{})
			return err
		},
			`persistentvolumeclaims "other" is forbidden: User "system:node:n1" cannot update resource "persistentvolumeclaims/status" in API group "" in the namespace "team": no relationship found between node 'n1' and this object`},
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

// TestNodeRestriction: kube's NodeRestriction rules on a node's own
// objects, with real kubelet credentials: the labels a kubelet may set on
// its Node (never under node-restriction.kubernetes.io, only kubelet
// labels of kubernetes.io and k8s.io), its taints, the labels of its
// pods, evictions and mirror pods; refusals are kube's 403s and write
// nothing.
func TestNodeRestriction(t *testing.T) {
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
	must(admin.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n2"}}, metav1.CreateOptions{}))
	n1 := nodeClient(t, env, "n1")
	n3 := nodeClient(t, env, "n3")

	// A kubelet registers itself with its own labels and taints.
	node, err := n1.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{
		corev1.LabelHostname: "n1", corev1.LabelOSStable: "linux", "kubelet.kubernetes.io/role": "worker",
		"team.node.kubernetes.io/x": "y", "example.com/own": "yes"}},
		Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: "dedicated", Value: "a", Effect: corev1.TaintEffectNoSchedule}}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("a kubelet registering with kubelet labels and taints: %v", err)
	}
	for _, p := range []string{
		`{"metadata":{"labels":{"topology.kubernetes.io/zone":"z1","example.com/own":"changed"}}}`,
		`{"metadata":{"labels":{"example.com/own":null}}}`,
	} {
		if _, err := n1.CoreV1().Nodes().Patch(ctx, "n1", types.MergePatchType, []byte(p), metav1.PatchOptions{}); err != nil {
			t.Errorf("patch %s: %v", p, err)
		}
	}
	p1, err := admin.CoreV1().Pods("team").Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p1", Labels: map[string]string{"app": "a"}},
		Spec: corev1.PodSpec{NodeName: "n1", Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	must(admin.CoreV1().Pods("team").Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p2"},
		Spec: corev1.PodSpec{NodeName: "n2", Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}, metav1.CreateOptions{}))
	// A mirror pod owned by its node, by UID.
	mirror := func(name string, owner []metav1.OwnerReference) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{corev1.MirrorPodAnnotationKey: "x"},
			OwnerReferences: owner}, Spec: corev1.PodSpec{NodeName: "n1", Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}
	}
	yes := true
	ownedBy := func(uid types.UID) []metav1.OwnerReference {
		return []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: "n1", UID: uid, Controller: &yes}}
	}
	if _, err := n1.CoreV1().Pods("team").Create(ctx, mirror("static-web", ownedBy(node.UID)), metav1.CreateOptions{}); err != nil {
		t.Errorf("a mirror pod owned by its node: %v", err)
	}
	// The graph has p1 before a node may evict it or read it.
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := n1.CoreV1().Pods("team").Get(ctx, "p1", metav1.GetOptions{})
		if err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}

	m := settle(t, env)
	relabelled := p1.DeepCopy()
	relabelled.Labels["app"] = "stolen"
	secretPod := mirror("with-secret", ownedBy(node.UID))
	secretPod.Spec.Volumes = []corev1.Volume{{Name: "s", VolumeSource: corev1.VolumeSource{CSI: &corev1.CSIVolumeSource{Driver: "d",
		NodePublishSecretRef: &corev1.LocalObjectReference{Name: "creds"}}}}}
	for _, c := range []struct {
		name string
		do   func() error
		msg  string
	}{
		{"a node-restriction label", func() error {
			_, err := n1.CoreV1().Nodes().Patch(ctx, "n1", types.MergePatchType, []byte(`{"metadata":{"labels":{"node-restriction.kubernetes.io/secure":"yes"}}}`), metav1.PatchOptions{})
			return err
		}, `nodes "n1" is forbidden: is not allowed to modify labels: node-restriction.kubernetes.io/secure`},
		{"a kubernetes.io label that is not a kubelet's", func() error {
			_, err := n1.CoreV1().Nodes().Patch(ctx, "n1", types.MergePatchType, []byte(`{"metadata":{"labels":{"node-role.kubernetes.io/control-plane":"","a.k8s.io/b":"c"}}}`), metav1.PatchOptions{})
			return err
		}, `nodes "n1" is forbidden: is not allowed to modify labels: a.k8s.io/b, node-role.kubernetes.io/control-plane`},
		{"removing a kubernetes.io label through status", func() error {
			cur, err := admin.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
			if err != nil {
				return err
			}
			cur.Labels["node-role.kubernetes.io/worker"] = ""
			_, err = n1.CoreV1().Nodes().UpdateStatus(ctx, cur, metav1.UpdateOptions{})
			return err
		}, `nodes "n1" is forbidden: is not allowed to modify labels: node-role.kubernetes.io/worker`},
		{"its own taints", func() error {
			_, err := n1.CoreV1().Nodes().Patch(ctx, "n1", types.MergePatchType, []byte(`{"spec":{"taints":null}}`), metav1.PatchOptions{})
			return err
		}, `nodes "n1" is forbidden: node "n1" is not allowed to modify taints`},
		{"registering with a node-restriction label", func() error {
			_, err := n3.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n3",
				Labels: map[string]string{"node-restriction.kubernetes.io/pool": "gpu", "kubernetes.io/hostname": "n3"}}}, metav1.CreateOptions{})
			return err
		}, `nodes "n3" is forbidden: node "n3" is not allowed to set the following labels: node-restriction.kubernetes.io/pool`},
		{"registering as another node", func() error {
			_, err := n3.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n4"}}, metav1.CreateOptions{})
			return err
		}, `nodes "n4" is forbidden: node "n3" is not allowed to modify node "n4"`},
		{"the labels of its pod through status", func() error {
			_, err := n1.CoreV1().Pods("team").UpdateStatus(ctx, relabelled, metav1.UpdateOptions{})
			return err
		}, `pods "p1" is forbidden: node "n1" cannot update labels through pod status`},
		{"evicting another node's pod", func() error {
			return n1.PolicyV1().Evictions("team").Evict(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: "p2", Namespace: "team"}})
		}, `pods "p2" is forbidden: node n1 can only evict pods with spec.nodeName set to itself`},
		{"a mirror pod without its node as owner", func() error {
			_, err := n1.CoreV1().Pods("team").Create(ctx, mirror("orphan", nil), metav1.CreateOptions{})
			return err
		}, `pods "orphan" is forbidden: node "n1" can only create pods with an owner reference set to itself`},
		{"a mirror pod owned by an old node of its name", func() error {
			_, err := n1.CoreV1().Pods("team").Create(ctx, mirror("stale", ownedBy("0000")), metav1.CreateOptions{})
			return err
		}, `pods "stale" is forbidden: node n1 UID mismatch: expected 0000 got ` + string(node.UID)},
		{"a mirror pod that references a secret", func() error {
			_, err := n1.CoreV1().Pods("team").Create(ctx, secretPod, metav1.CreateOptions{})
			return err
		}, `pods "with-secret" is forbidden: node "n1" can not create pods that reference secrets`},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := c.do()
			if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), c.msg) {
				t.Errorf("got %v, want 403 %q", err, c.msg)
			}
		})
	}
	requireNothingWritten(t, env, m)

	// The admin may do all of it.
	if _, err := admin.CoreV1().Nodes().Patch(ctx, "n1", types.MergePatchType, []byte(`{"metadata":{"labels":{"node-restriction.kubernetes.io/secure":"yes"}},"spec":{"taints":null}}`), metav1.PatchOptions{}); err != nil {
		t.Errorf("admin labels and untaints the node: %v", err)
	}
	// The node may still evict its own pod.
	if err := n1.PolicyV1().Evictions("team").Evict(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: "p1", Namespace: "team"}}); err != nil {
		t.Errorf("evicting its own pod: %v", err)
	}
}
