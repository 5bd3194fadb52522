package deployment

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func TestComputeHash(t *testing.T) {
	tmpl := newDeployment("ns", "web", 1, "nginx:1").Spec.Template
	h := ComputeHash(&tmpl, nil)
	if h == "" || strings.Trim(h, "bcdfghjklmnpqrstvwxz2456789") != "" {
		t.Fatalf("hash %q is not rand.SafeEncodeString output", h)
	}
	if again := ComputeHash(tmpl.DeepCopy(), nil); again != h {
		t.Errorf("hash not stable: %q then %q", h, again)
	}
	zero, one := int32(0), int32(1)
	if ComputeHash(&tmpl, &zero) == h || ComputeHash(&tmpl, &one) == ComputeHash(&tmpl, &zero) {
		t.Errorf("collisionCount does not change the hash")
	}
	other := tmpl.DeepCopy()
	other.Spec.Containers[0].Image = "nginx:2"
	if ComputeHash(other, nil) == h {
		t.Errorf("different templates, same hash")
	}
}

func TestEqualIgnoreHash(t *testing.T) {
	a := newDeployment("ns", "web", 1, "nginx:1").Spec.Template
	b := *a.DeepCopy()
	b.Labels = cloneAndAdd(b.Labels, appsv1.DefaultDeploymentUniqueLabelKey, "abc")
	if !equalIgnoreHash(&a, &b) {
		t.Errorf("templates differing only by the hash label are not equal")
	}
	if a.Labels[appsv1.DefaultDeploymentUniqueLabelKey] != "" {
		t.Errorf("equalIgnoreHash modified its argument")
	}
	b.Spec.Containers[0].Image = "x"
	if equalIgnoreHash(&a, &b) {
		t.Errorf("different images compare equal")
	}
}

func TestResolveFenceposts(t *testing.T) {
	tests := []struct {
		surge, unavailable string
		desired            int32
		wantSurge, wantU   int32
	}{
		{"25%", "25%", 4, 1, 1},
		{"25%", "25%", 3, 1, 0},
		{"25%", "25%", 10, 3, 2},
		{"0", "0", 5, 0, 1},
		{"0", "1%", 2, 0, 1},
		{"1", "0", 2, 1, 0},
		{"100%", "100%", 3, 3, 3},
	}
	for _, tc := range tests {
		s, u := intstr.Parse(tc.surge), intstr.Parse(tc.unavailable)
		gs, gu, err := resolveFenceposts(&s, &u, tc.desired)
		if err != nil || gs != tc.wantSurge || gu != tc.wantU {
			t.Errorf("resolveFenceposts(%s, %s, %d) = %d, %d, %v; want %d, %d", tc.surge, tc.unavailable, tc.desired, gs, gu, err, tc.wantSurge, tc.wantU)
		}
	}
}

func TestSetNewReplicaSetAnnotations(t *testing.T) {
	d := newDeployment("ns", "web", 3, "nginx:1")
	d.Spec.Strategy = rollingStrategy("1", "0")
	d.Annotations = map[string]string{"team": "a", RevisionAnnotation: "7", lastAppliedAnnotation: "{}"}
	rs := &appsv1.ReplicaSet{}

	if !setNewReplicaSetAnnotations(d, rs, 1, false) {
		t.Fatal("no change reported for a new replica set")
	}
	want := map[string]string{"team": "a", RevisionAnnotation: "1", DesiredReplicasAnnotation: "3", MaxReplicasAnnotation: "4"}
	for k, v := range want {
		if rs.Annotations[k] != v {
			t.Errorf("%s = %q, want %q", k, rs.Annotations[k], v)
		}
	}
	if _, ok := rs.Annotations[lastAppliedAnnotation]; ok {
		t.Errorf("last-applied annotation copied")
	}
	if setNewReplicaSetAnnotations(d, rs, 1, true) {
		t.Errorf("change reported for an up-to-date replica set")
	}
	// A rollback to it: revision 1 becomes 3, then 5.
	setNewReplicaSetAnnotations(d, rs, 3, true)
	setNewReplicaSetAnnotations(d, rs, 5, true)
	if rs.Annotations[RevisionAnnotation] != "5" || rs.Annotations[RevisionHistoryAnnotation] != "1,3" {
		t.Errorf("after two rollbacks: revision %q history %q, want 5 and 1,3", rs.Annotations[RevisionAnnotation], rs.Annotations[RevisionHistoryAnnotation])
	}
	// A revision never goes down.
	if setNewReplicaSetAnnotations(d, rs, 4, true) || rs.Annotations[RevisionAnnotation] != "5" {
		t.Errorf("revision lowered to %q", rs.Annotations[RevisionAnnotation])
	}
}

// TestProportion follows kube's proportional scaling: a deployment of 10
// (maxSurge 3) in mid-rollout, old 8 and new 5, is scaled to 20.
func TestProportion(t *testing.T) {
	d := newDeployment("ns", "web", 20, "nginx:1")
	d.Spec.Strategy = rollingStrategy("3", "2")
	mk := func(name string, n int32) *appsv1.ReplicaSet {
		return &appsv1.ReplicaSet{
			ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{MaxReplicasAnnotation: "13"}},
			Spec:       appsv1.ReplicaSetSpec{Replicas: &n},
		}
	}
	old, cur := mk("old", 8), mk("new", 5)
	toAdd := 20 + 3 - int32(13)
	added := int32(0)
	po := proportion(old, d, toAdd, added)
	added += po
	pn := proportion(cur, d, toAdd, added)
	if po+pn != toAdd || po != 6 || pn != 4 {
		t.Errorf("proportions %d (old) and %d (new) of %d, want 6 and 4", po, pn, toAdd)
	}
}

func TestConditions(t *testing.T) {
	var st appsv1.DeploymentStatus
	c1 := newCondition(appsv1.DeploymentProgressing, corev1.ConditionTrue, ReasonNewReplicaSet, "a", metav1.Now().Time)
	setCondition(&st, c1)
	c2 := newCondition(appsv1.DeploymentProgressing, corev1.ConditionTrue, ReasonNewRSAvailable, "b", c1.LastTransitionTime.Add(5e9))
	setCondition(&st, c2)
	got := getCondition(st, appsv1.DeploymentProgressing)
	if len(st.Conditions) != 1 || got.Reason != ReasonNewRSAvailable || !got.LastTransitionTime.Equal(&c1.LastTransitionTime) {
		t.Errorf("same status, new reason: %+v (transition time must stay)", st.Conditions)
	}
}
