package statefulset

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/cairn-dev/cairn/schemas"
)

// kubeSet is the StatefulSet of kube's TestStatefulSetCompatibility, and
// kubeRevision the name and data kube 1.34 made of it (its
// testdata/compatibility_revision_1.34.0.json; 1.33 still wrote
// "creationTimestamp":null into the template and named it
// test-c77f6d978).
func kubeSet() *appsv1.StatefulSet {
	return &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: "test", Namespace: "test", UID: "ssuid", Generation: 1, Labels: map[string]string{"sslabel": "value"}},
		Spec: appsv1.StatefulSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "foo"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{"test": "value"}, Labels: map[string]string{"app": "foo"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Image: "test", Name: "test"}}},
			},
			VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{
				ObjectMeta: metav1.ObjectMeta{Name: "test", Labels: map[string]string{"key": "value"}},
				Spec: corev1.PersistentVolumeClaimSpec{
					AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{"storage": resource.MustParse("1Gi")}},
				},
			}},
		},
	}
}

const (
	kubeRevisionName = "test-776999688b"
	kubeRevisionData = `{"spec":{"template":{"$patch":"replace","metadata":{"annotations":{"test":"value"},"labels":{"app":"foo"}},"spec":{"containers":[{"image":"test","imagePullPolicy":"Always","name":"test","resources":{},"terminationMessagePath":"/dev/termination-log","terminationMessagePolicy":"File"}],"dnsPolicy":"ClusterFirst","restartPolicy":"Always","schedulerName":"default-scheduler","securityContext":{},"terminationGracePeriodSeconds":30}}}}`
)

func defaulted(t *testing.T, set *appsv1.StatefulSet) *appsv1.StatefulSet {
	t.Helper()
	res, ok := schemas.NewRegistry().Lookup("apps", "v1", "statefulsets")
	if !ok {
		t.Fatal("no statefulsets in the registry")
	}
	res.Default(set)
	return set
}

// TestKubeCompatibility: a set stored by kube gets the revision kube made
// of it (same name, same bytes, so kubectl rollout undo matches it), and
// its pod keeps its identity and storage (kube's
// TestStatefulSetCompatibility).
func TestKubeCompatibility(t *testing.T) {
	set := defaulted(t, kubeSet())
	zero := int32(0)
	rev, err := newRevision(set, 1, &zero)
	if err != nil {
		t.Fatal(err)
	}
	if rev.Name != kubeRevisionName || string(rev.Data.Raw) != kubeRevisionData {
		t.Errorf("revision %s\n%s\nwant %s\n%s", rev.Name, rev.Data.Raw, kubeRevisionName, kubeRevisionData)
	}
	if rev.Labels["app"] != "foo" || rev.Labels["sslabel"] != "" || rev.Revision != 1 {
		t.Errorf("revision labels %v revision %d, want the template's labels and 1", rev.Labels, rev.Revision)
	}
	back, err := applyRevision(set, rev)
	if err != nil {
		t.Fatal(err)
	}
	if back.Spec.Template.Spec.Containers[0].Image != "test" || back.Name != "test" || back.Spec.Selector.MatchLabels["app"] != "foo" {
		t.Errorf("applyRevision gave %+v", back.Spec)
	}

	pod := newVersionedPod(set, set, kubeRevisionName, kubeRevisionName, 0)
	if !identityMatches(set, pod) || !storageMatches(set, pod) {
		t.Errorf("new pod %+v does not match its set", pod.ObjectMeta)
	}
	want := map[string]string{"app": "foo", "apps.kubernetes.io/pod-index": "0", "controller-revision-hash": kubeRevisionName, "statefulset.kubernetes.io/pod-name": "test-0"}
	if len(pod.Labels) != len(want) {
		t.Errorf("pod labels %v, want %v", pod.Labels, want)
	}
	for k, v := range want {
		if pod.Labels[k] != v {
			t.Errorf("pod label %s = %q, want %q", k, pod.Labels[k], v)
		}
	}
	if v := pod.Spec.Volumes; len(v) != 1 || v[0].Name != "test" || v[0].PersistentVolumeClaim == nil || v[0].PersistentVolumeClaim.ClaimName != "test-test-0" {
		t.Errorf("pod volumes %+v, want the claim test-test-0", v)
	}
	if pod.Spec.Hostname != "test-0" || pod.Annotations["test"] != "value" {
		t.Errorf("pod hostname %q annotations %v", pod.Spec.Hostname, pod.Annotations)
	}
	claims := claimsFor(set, pod)
	if c, ok := claims["test"]; !ok || c.Name != "test-test-0" || c.Namespace != "test" || c.Labels["app"] != "foo" || c.Labels["key"] != "value" {
		t.Errorf("claims %+v, want test-test-0 labelled app=foo key=value", claims)
	}
}

// TestParentAndOrdinal ports kube's TestGetParentNameAndOrdinal and
// TestIdentityMatches.
func TestParentAndOrdinal(t *testing.T) {
	tests := []struct {
		name       string
		wantParent string
		wantOrd    int
	}{
		{"db-0", "db", 0},
		{"db-12", "db", 12},
		{"my-db-3", "my-db", 3},
		{"db", "", -1},
		{"db-x", "", -1},
		{"db-99999999999", "db", -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, o := parentAndOrdinal(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: tt.name}})
			if p != tt.wantParent || o != tt.wantOrd {
				t.Errorf("parentAndOrdinal(%s) = %q, %d, want %q, %d", tt.name, p, o, tt.wantParent, tt.wantOrd)
			}
		})
	}
	set := newSet("ns", "db", 3)
	pod := newPod(set, 1)
	for name, change := range map[string]func(p *corev1.Pod){
		"other name":      func(p *corev1.Pod) { p.Name = "dc-1" },
		"other namespace": func(p *corev1.Pod) { p.Namespace = "other" },
		"no pod-name":     func(p *corev1.Pod) { delete(p.Labels, appsv1.StatefulSetPodNameLabel) },
	} {
		p := pod.DeepCopy()
		change(p)
		if identityMatches(set, p) {
			t.Errorf("%s: identity matches", name)
		}
	}
	if !identityMatches(set, pod) {
		t.Error("a new pod's identity does not match its set")
	}
}

// TestVersionedPod: below the partition a missing pod is made at the
// current revision, from it up at the update revision (kube's
// newVersionedStatefulSetPod).
func TestVersionedPod(t *testing.T) {
	current, update := newSet("ns", "db", 4), newSet("ns", "db", 4)
	update.Spec.Template.Spec.Containers[0].Image = "busybox:2"
	current.Spec.UpdateStrategy = appsv1.StatefulSetUpdateStrategy{Type: appsv1.RollingUpdateStatefulSetStrategyType,
		RollingUpdate: &appsv1.RollingUpdateStatefulSetStrategy{Partition: ptr[int32](2)}}
	for ord, want := range []string{"cur", "cur", "upd", "upd"} {
		p := newVersionedPod(current, update, "cur", "upd", ord)
		if podRevision(p) != want || (want == "upd") != (p.Spec.Containers[0].Image == "busybox:2") {
			t.Errorf("pod %d at %s with %s, want %s", ord, podRevision(p), p.Spec.Containers[0].Image, want)
		}
	}
}

// TestMaxUnavailable ports kube's getStatefulSetMaxUnavailable cases.
func TestMaxUnavailable(t *testing.T) {
	tests := []struct {
		v        *intstr.IntOrString
		replicas int
		want     int
	}{
		{nil, 5, 1},
		{ptr(intstr.FromInt32(3)), 5, 3},
		{ptr(intstr.FromString("50%")), 5, 2},
		{ptr(intstr.FromString("10%")), 5, 1},
		{ptr(intstr.FromString("100%")), 5, 5},
	}
	for _, tt := range tests {
		if got, err := maxUnavailable(tt.v, tt.replicas); err != nil || got != tt.want {
			t.Errorf("maxUnavailable(%v, %d) = %d, %v, want %d", tt.v, tt.replicas, got, err, tt.want)
		}
	}
}
