package history

import (
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
)

var dsKind = appsv1.SchemeGroupVersion.WithKind("DaemonSet")

func parent(name string) *appsv1.DaemonSet {
	return &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-" + name)}}
}

func raw(s string) runtime.RawExtension { return runtime.RawExtension{Raw: []byte(s)} }

func TestControllerRevisionName(t *testing.T) {
	long := strings.Repeat("a", 300)
	tests := []struct {
		prefix, hash, want string
	}{
		{"ds", "abc", "ds-abc"},
		{long, "abc", long[:223] + "-abc"},
		{long[:223], "h", long[:223] + "-h"},
	}
	for _, tt := range tests {
		if got := ControllerRevisionName(tt.prefix, tt.hash); got != tt.want {
			t.Errorf("ControllerRevisionName(%d bytes, %q) = %q, want %q", len(tt.prefix), tt.hash, got, tt.want)
		}
		if len(ControllerRevisionName(tt.prefix, "0123456789")) > 253-19 {
			t.Errorf("name of %d-byte prefix too long", len(tt.prefix))
		}
	}
}

func TestHashControllerRevision(t *testing.T) {
	a := &appsv1.ControllerRevision{Data: raw(`{"spec":1}`)}
	b := &appsv1.ControllerRevision{Data: raw(`{"spec":2}`)}
	zero, one := int32(0), int32(1)
	ha := HashControllerRevision(a, nil)
	if ha != HashControllerRevision(a.DeepCopy(), nil) {
		t.Fatal("hash is not deterministic")
	}
	for name, h := range map[string]string{
		"other data":  HashControllerRevision(b, nil),
		"probe 0":     HashControllerRevision(a, &zero),
		"probe 1":     HashControllerRevision(a, &one),
		"object data": HashControllerRevision(&appsv1.ControllerRevision{Data: runtime.RawExtension{Object: parent("x")}}, nil),
	} {
		if h == ha {
			t.Errorf("%s: hash %q equals the plain one", name, h)
		}
	}
	if HashControllerRevision(a, &zero) == HashControllerRevision(a, &one) {
		t.Error("collision counts 0 and 1 hash the same")
	}
	// FNV-32 of `{"spec":1}` is 4077887745, which SafeEncodeString renders
	// as below (computed outside Go): names match kube's for the same Data.
	if ha != "84ccddcc89" {
		t.Errorf("hash %q, want 84ccddcc89", ha)
	}
	for _, r := range ha {
		if !strings.ContainsRune("bcdfghjklmnpqrstvwxz2456789", r) {
			t.Errorf("hash %q has %q, not a SafeEncodeString rune", ha, r)
		}
	}
}

func TestNewControllerRevision(t *testing.T) {
	ds := parent("web")
	count := int32(2)
	tmpl := map[string]string{"app": "web"}
	cr := NewControllerRevision(ds, dsKind, tmpl, raw(`{"a":1}`), 3, &count)
	hash := HashControllerRevision(cr, &count)
	if cr.Name != "web-"+hash || cr.Namespace != "ns" || cr.Revision != 3 {
		t.Errorf("name %q namespace %q revision %d", cr.Name, cr.Namespace, cr.Revision)
	}
	if cr.Labels[HashLabel] != hash || cr.Labels["app"] != "web" {
		t.Errorf("labels %v", cr.Labels)
	}
	ref := metav1.GetControllerOf(cr)
	if ref == nil || ref.UID != ds.UID || ref.Kind != "DaemonSet" || ref.APIVersion != "apps/v1" || !*ref.BlockOwnerDeletion {
		t.Errorf("controller ref %+v", ref)
	}
	cr.Labels["x"] = "y"
	if _, ok := tmpl["x"]; ok {
		t.Error("the template's labels were modified")
	}
}

func TestSortControllerRevisions(t *testing.T) {
	t0 := metav1.NewTime(time.Unix(1000, 0))
	t1 := metav1.NewTime(time.Unix(2000, 0))
	rev := func(name string, n int64, ts metav1.Time) *appsv1.ControllerRevision {
		return &appsv1.ControllerRevision{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: ts}, Revision: n}
	}
	tests := []struct {
		name string
		in   []*appsv1.ControllerRevision
		want []string
	}{
		{"by revision", []*appsv1.ControllerRevision{rev("c", 3, t0), rev("a", 1, t0), rev("b", 2, t0)}, []string{"a", "b", "c"}},
		{"ties by time", []*appsv1.ControllerRevision{rev("a", 1, t1), rev("b", 1, t0)}, []string{"b", "a"}},
		{"ties by name", []*appsv1.ControllerRevision{rev("b", 1, t0), rev("a", 1, t0)}, []string{"a", "b"}},
		{"empty", nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			SortControllerRevisions(tt.in)
			var got []string
			for _, r := range tt.in {
				got = append(got, r.Name)
			}
			if strings.Join(got, ",") != strings.Join(tt.want, ",") {
				t.Errorf("order %v, want %v", got, tt.want)
			}
		})
	}
}

func TestEqualRevision(t *testing.T) {
	withHash := func(data, hash string) *appsv1.ControllerRevision {
		cr := &appsv1.ControllerRevision{Data: raw(data)}
		if hash != "" {
			cr.Labels = map[string]string{HashLabel: hash}
		}
		return cr
	}
	tests := []struct {
		name     string
		lhs, rhs *appsv1.ControllerRevision
		want     bool
	}{
		{"both nil", nil, nil, true},
		{"one nil", withHash("{}", ""), nil, false},
		{"same data", withHash(`{"a":1}`, ""), withHash(`{"a":1}`, ""), true},
		{"other data", withHash(`{"a":1}`, ""), withHash(`{"a":2}`, ""), false},
		{"decimal hashes differ", withHash(`{"a":1}`, "1"), withHash(`{"a":1}`, "2"), false},
		{"decimal hashes agree", withHash(`{"a":1}`, "7"), withHash(`{"a":1}`, "7"), true},
		{"encoded hashes ignored", withHash(`{"a":1}`, "bcd"), withHash(`{"a":1}`, "xyz"), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := EqualRevision(tt.lhs, tt.rhs); got != tt.want {
				t.Errorf("EqualRevision = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestFindEqualRevisionsAndNext(t *testing.T) {
	a1 := &appsv1.ControllerRevision{ObjectMeta: metav1.ObjectMeta{Name: "a1"}, Data: raw(`{"a":1}`), Revision: 4}
	b := &appsv1.ControllerRevision{ObjectMeta: metav1.ObjectMeta{Name: "b"}, Data: raw(`{"b":1}`), Revision: 7}
	a2 := &appsv1.ControllerRevision{ObjectMeta: metav1.ObjectMeta{Name: "a2"}, Data: raw(`{"a":1}`), Revision: 2}
	revs := []*appsv1.ControllerRevision{a1, b, a2}
	eq := FindEqualRevisions(revs, &appsv1.ControllerRevision{Data: raw(`{"a":1}`)})
	if len(eq) != 2 || eq[0] != a1 || eq[1] != a2 {
		t.Errorf("FindEqualRevisions = %v", eq)
	}
	if got := NextRevision(revs); got != 8 {
		t.Errorf("NextRevision = %d, want 8", got)
	}
	if got := NextRevision(nil); got != 1 {
		t.Errorf("NextRevision(nil) = %d, want 1", got)
	}
}
