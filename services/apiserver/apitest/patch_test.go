package apitest

import (
	"net/http"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cairn-dev/cairn/services/controlplane/controlplanetest"
)

// TestPatch applies each patch type to a pod and checks the result, and
// that a refused patch writes nothing.
func TestPatch(t *testing.T) {
	env := controlplanetest.Start(t)
	ctx := ctxFor(t, 60*time.Second)
	pods := env.Client.CoreV1().Pods("default")

	tests := []struct {
		name  string
		typ   types.PatchType
		patch string
		// wantErr is the refusal expected, nil for success.
		wantErr func(error) bool
		check   func(t *testing.T, p *corev1.Pod)
	}{
		{
			name: "JSON patch replaces and adds",
			typ:  types.JSONPatchType,
			patch: `[{"op":"replace","path":"/metadata/labels/app","value":"api"},
				{"op":"add","path":"/metadata/annotations","value":{"note":"one"}},
				{"op":"test","path":"/spec/containers/1/name","value":"d"},
				{"op":"replace","path":"/spec/containers/1/image","value":"nginx:2"}]`,
			check: func(t *testing.T, p *corev1.Pod) {
				if p.Labels["app"] != "api" || p.Annotations["note"] != "one" || p.Spec.Containers[1].Image != "nginx:2" {
					t.Errorf("got labels %v annotations %v image %q", p.Labels, p.Annotations, p.Spec.Containers[1].Image)
				}
			},
		},
		{
			name:    "JSON patch with a failing test op",
			typ:     types.JSONPatchType,
			patch:   `[{"op":"test","path":"/metadata/labels/app","value":"nope"},{"op":"remove","path":"/metadata/labels"}]`,
			wantErr: apierrors.IsInvalid,
		},
		{
			name:    "JSON patch on a missing path",
			typ:     types.JSONPatchType,
			patch:   `[{"op":"replace","path":"/spec/nothing/here","value":1}]`,
			wantErr: apierrors.IsInvalid,
		},
		{
			name:  "merge patch sets and removes map keys",
			typ:   types.MergePatchType,
			patch: `{"metadata":{"labels":{"app":null,"tier":"front"}}}`,
			check: func(t *testing.T, p *corev1.Pod) {
				if _, ok := p.Labels["app"]; ok || p.Labels["tier"] != "front" {
					t.Errorf("labels %v, want app removed and tier=front", p.Labels)
				}
			},
		},
		{
			// A merge patch replaces a list whole: this one drops container
			// c, which a pod update may not do.
			name:    "merge patch replaces the containers list",
			typ:     types.MergePatchType,
			patch:   `{"spec":{"containers":[{"name":"d","image":"nginx:3"}]}}`,
			wantErr: apierrors.IsInvalid,
		},
		{
			name:  "strategic merge patch merges containers by name",
			typ:   types.StrategicMergePatchType,
			patch: `{"spec":{"containers":[{"name":"d","image":"nginx:3"}]}}`,
			check: func(t *testing.T, p *corev1.Pod) {
				if len(p.Spec.Containers) != 2 || p.Spec.Containers[0].Name != "c" || p.Spec.Containers[0].Image != "busybox:1.36" ||
					p.Spec.Containers[1].Name != "d" || p.Spec.Containers[1].Image != "nginx:3" {
					t.Errorf("containers %+v, want c unchanged and d at nginx:3", p.Spec.Containers)
				}
			},
		},
		{
			name:  "strategic merge patch with a delete directive on a map key",
			typ:   types.StrategicMergePatchType,
			patch: `{"metadata":{"annotations":{"note":null,"other":"two"}}}`,
			check: func(t *testing.T, p *corev1.Pod) {
				if _, ok := p.Annotations["note"]; ok || p.Annotations["other"] != "two" {
					t.Errorf("annotations %v", p.Annotations)
				}
			},
		},
		{
			name:    "patch changing the name",
			typ:     types.MergePatchType,
			patch:   `{"metadata":{"name":"other"}}`,
			wantErr: apierrors.IsBadRequest,
		},
		{
			name:    "patch with a stale resourceVersion",
			typ:     types.MergePatchType,
			patch:   `{"metadata":{"resourceVersion":"2","labels":{"x":"y"}}}`,
			wantErr: apierrors.IsConflict,
		},
	}

	p := testPod("patched")
	p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "d", Image: "nginx:1"})
	if _, err := pods.Create(ctx, p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := settle(t, env)
			prev, err := pods.Get(ctx, "patched", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			got, err := pods.Patch(ctx, "patched", tt.typ, []byte(tt.patch), metav1.PatchOptions{})
			if tt.wantErr != nil {
				if err == nil || !tt.wantErr(err) {
					t.Fatalf("got %v, want a refusal", err)
				}
				requireNothingWritten(t, env, before)
				return
			}
			if err != nil {
				t.Fatalf("patch: %v", err)
			}
			if got.ResourceVersion == prev.ResourceVersion {
				t.Errorf("resourceVersion unchanged at %s", got.ResourceVersion)
			}
			tt.check(t, got)
			stored, err := pods.Get(ctx, "patched", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if stored.ResourceVersion != got.ResourceVersion {
				t.Errorf("stored resourceVersion %s, patch returned %s", stored.ResourceVersion, got.ResourceVersion)
			}
			tt.check(t, stored)
			if n := len(eventsSince(t, env, before)); n != 1 {
				t.Errorf("patch made %d events, want 1", n)
			}
		})
	}

	t.Run("patch that changes nothing is not committed", func(t *testing.T) {
		before := settle(t, env)
		cur, err := pods.Get(ctx, "patched", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		got, err := pods.Patch(ctx, "patched", types.MergePatchType, []byte(`{"metadata":{"labels":{"tier":"front"}}}`), metav1.PatchOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got.ResourceVersion != cur.ResourceVersion {
			t.Errorf("no-op patch moved resourceVersion %s to %s", cur.ResourceVersion, got.ResourceVersion)
		}
		requireNothingWritten(t, env, before)
	})

	t.Run("unsupported patch type", func(t *testing.T) {
		before := settle(t, env)
		r := do(t, env, call{method: http.MethodPatch, path: podsPath + "/patched", contentType: "text/plain",
			body: []byte("metadata:\n  labels:\n    a: b\n")})
		if st := status(t, r); r.code != http.StatusUnsupportedMediaType {
			t.Errorf("got %d %s", r.code, st.Reason)
		}
		requireNothingWritten(t, env, before)
	})

	t.Run("concurrent patches all apply", func(t *testing.T) {
		const n = 10
		errc := make(chan error, n)
		for i := range n {
			go func() {
				patch := `{"metadata":{"labels":{"c` + string(rune('a'+i)) + `":"x"}}}`
				_, err := pods.Patch(ctx, "patched", types.MergePatchType, []byte(patch), metav1.PatchOptions{})
				errc <- err
			}()
		}
		for range n {
			if err := <-errc; err != nil {
				t.Errorf("patch: %v", err)
			}
		}
		got, err := pods.Get(ctx, "patched", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for i := range n {
			if got.Labels["c"+string(rune('a'+i))] != "x" {
				t.Errorf("label c%c lost: %v", 'a'+i, got.Labels)
			}
		}
	})
}
