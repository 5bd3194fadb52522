package apitest

import (
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cairn-dev/cairn/services/controlplane/controlplanetest"
)

// TestSelectors lists with label and field selectors.
func TestSelectors(t *testing.T) {
	env := controlplanetest.Start(t)
	ctx := ctxFor(t, 60*time.Second)
	pods := env.Client.CoreV1().Pods("default")

	// a: unscheduled, Running; b: on n1, Pending; c: on n2.
	a := labeledPod("a", map[string]string{"app": "web", "tier": "fe"})
	b := labeledPod("b", map[string]string{"app": "web", "tier": "be"})
	b.Spec.NodeName = "n1"
	c := labeledPod("c", map[string]string{"app": "db"})
	c.Spec.NodeName = "n2"
	for _, p := range []*corev1.Pod{a, b, c} {
		if _, err := pods.Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	ca, err := pods.Get(ctx, "a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ca.Status.Phase = corev1.PodRunning
	if _, err := pods.UpdateStatus(ctx, ca, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	evs := env.Client.CoreV1().Events("default")
	for _, target := range []string{"a", "b", "a"} {
		ev := &corev1.Event{
			ObjectMeta:     metav1.ObjectMeta{GenerateName: "ev-"},
			InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "default", Name: target},
			Reason:         "Test", Message: "m", Type: corev1.EventTypeNormal,
		}
		if _, err := evs.Create(ctx, ev, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	tests := []struct {
		name   string
		labels string
		fields string
		want   []string
	}{
		{name: "label equality", labels: "app=web", want: []string{"a", "b"}},
		{name: "label set and inequality", labels: "app in (web,db),tier!=be", want: []string{"a", "c"}},
		{name: "label exists", labels: "tier", want: []string{"a", "b"}},
		{name: "label does not exist", labels: "!tier", want: []string{"c"}},
		{name: "metadata.name", fields: "metadata.name=b", want: []string{"b"}},
		{name: "metadata.namespace", fields: "metadata.namespace=default", want: []string{"a", "b", "c"}},
		{name: "status.phase", fields: "status.phase=Running", want: []string{"a"}},
		{name: "status.phase negated", fields: "status.phase!=Running", want: []string{"b", "c"}},
		{name: "spec.nodeName", fields: "spec.nodeName=n2", want: []string{"c"}},
		{name: "unscheduled", fields: "spec.nodeName=", want: []string{"a"}},
		{name: "labels and fields", labels: "app=web", fields: "spec.nodeName!=n1", want: []string{"a"}},
		{name: "nothing matches", labels: "app=none", want: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := pods.List(ctx, metav1.ListOptions{LabelSelector: tt.labels, FieldSelector: tt.fields})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, p := range l.Items {
				got = append(got, p.Name)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}

	t.Run("involvedObject.name on events", func(t *testing.T) {
		l, err := evs.List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=a,involvedObject.kind=Pod"})
		if err != nil {
			t.Fatal(err)
		}
		if len(l.Items) != 2 {
			t.Fatalf("got %d events, want 2", len(l.Items))
		}
		for _, e := range l.Items {
			if e.InvolvedObject.Name != "a" {
				t.Errorf("event %s is about %s", e.Name, e.InvolvedObject.Name)
			}
		}
	})

	t.Run("all namespaces with a field selector", func(t *testing.T) {
		l, err := env.Client.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=n1"})
		if err != nil {
			t.Fatal(err)
		}
		if len(l.Items) != 1 || l.Items[0].Name != "b" {
			t.Errorf("got %d pods", len(l.Items))
		}
	})

	refusals := []struct {
		name, query string
	}{
		{"unsupported field", "fieldSelector=spec.hostname%3Dx"},
		{"malformed label selector", "labelSelector=app%20in%20(web"},
		{"malformed field selector", "fieldSelector=spec.nodeName"},
	}
	for _, tt := range refusals {
		t.Run(tt.name, func(t *testing.T) {
			r := do(t, env, call{method: http.MethodGet, path: podsPath + "?" + tt.query})
			if st := status(t, r); r.code != http.StatusBadRequest || st.Reason != metav1.StatusReasonBadRequest {
				t.Errorf("got %d %s: %s", r.code, st.Reason, r.body)
			}
		})
	}
}

// TestPagination pages through 25 items with limit 10.
func TestPagination(t *testing.T) {
	env := controlplanetest.Start(t)
	ctx := ctxFor(t, 60*time.Second)
	if _, err := env.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "page"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cms := env.Client.CoreV1().ConfigMaps("page")
	var all []string
	for i := range 25 {
		name := fmt.Sprintf("cm-%02d", i)
		all = append(all, name)
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"odd": fmt.Sprint(i%2 == 1)}}}
		if _, err := cms.Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// Something in another namespace that must not show up.
	if _, err := env.Client.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm-99"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	t.Run("three pages at one resourceVersion", func(t *testing.T) {
		wantSizes := []int{10, 10, 5}
		wantRemaining := []*int64{ptr(int64(15)), ptr(int64(5)), nil}
		var got []string
		var rv, cont string
		for page := 0; ; page++ {
			if page >= len(wantSizes) {
				t.Fatalf("more than %d pages", len(wantSizes))
			}
			l, err := cms.List(ctx, metav1.ListOptions{Limit: 10, Continue: cont})
			if err != nil {
				t.Fatalf("page %d: %v", page, err)
			}
			if page == 0 {
				rv = l.ResourceVersion
				// A write after the first page must not show in the others.
				if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm-zz-late"}}, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
				if _, err := cms.Update(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm-24"}, Data: map[string]string{"k": "v"}}, metav1.UpdateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			if l.ResourceVersion != rv {
				t.Errorf("page %d at resourceVersion %s, first page at %s", page, l.ResourceVersion, rv)
			}
			if len(l.Items) != wantSizes[page] {
				t.Errorf("page %d has %d items, want %d", page, len(l.Items), wantSizes[page])
			}
			if !eqPtr(l.RemainingItemCount, wantRemaining[page]) {
				t.Errorf("page %d remainingItemCount %v, want %v", page, deref(l.RemainingItemCount), deref(wantRemaining[page]))
			}
			for _, cm := range l.Items {
				got = append(got, cm.Name)
				if cm.Name == "cm-24" && len(cm.Data) > 0 {
					t.Errorf("cm-24 shows an update made after the first page")
				}
			}
			cont = l.Continue
			if cont == "" {
				break
			}
		}
		if !slices.Equal(got, all) {
			t.Errorf("paged through %v, want %v", got, all)
		}
	})

	t.Run("limit with a label selector", func(t *testing.T) {
		var got []string
		cont := ""
		for range 10 {
			l, err := cms.List(ctx, metav1.ListOptions{Limit: 5, Continue: cont, LabelSelector: "odd=true"})
			if err != nil {
				t.Fatal(err)
			}
			if len(l.Items) > 5 {
				t.Errorf("page of %d items over limit 5", len(l.Items))
			}
			for _, cm := range l.Items {
				got = append(got, cm.Name)
			}
			if cont = l.Continue; cont == "" {
				break
			}
		}
		var want []string
		for i, n := range all {
			if i%2 == 1 {
				want = append(want, n)
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("got %v, want %v", got, want)
		}
	})

	t.Run("bad continue token", func(t *testing.T) {
		_, err := cms.List(ctx, metav1.ListOptions{Limit: 10, Continue: "not-a-token"})
		if !apierrors.IsBadRequest(err) {
			t.Errorf("got %v, want 400", err)
		}
	})
}

func ptr[T any](v T) *T { return &v }

func eqPtr(a, b *int64) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

func deref(p *int64) any {
	if p == nil {
		return nil
	}
	return *p
}
