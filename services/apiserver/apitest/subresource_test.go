package apitest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cairn-dev/cairn/services/controlplane/controlplanetest"
)

// TestSubresources covers status, scale and binding.
func TestSubresources(t *testing.T) {
	env := controlplanetest.Start(t)
	ctx := ctxFor(t, 60*time.Second)
	pods := env.Client.CoreV1().Pods("default")
	deps := env.Client.AppsV1().Deployments("default")

	t.Run("status", func(t *testing.T) {
		p, err := pods.Create(ctx, testPod("st"), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		// PUT status with a spec change: only status changes.
		upd := p.DeepCopy()
		upd.Status.Phase = corev1.PodRunning
		upd.Status.PodIP = "10.0.0.7"
		upd.Spec.Containers[0].Image = "changed:1"
		got, err := pods.UpdateStatus(ctx, upd, metav1.UpdateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got.Status.Phase != corev1.PodRunning || got.Status.PodIP != "10.0.0.7" {
			t.Errorf("status not written: %+v", got.Status)
		}
		if got.Spec.Containers[0].Image != "busybox:1.36" {
			t.Errorf("status update changed the image to %q", got.Spec.Containers[0].Image)
		}
		// PUT main resource with a status change: status stays.
		upd = got.DeepCopy()
		upd.Status.Phase = corev1.PodFailed
		upd.Labels["after"] = "status"
		got, err = pods.Update(ctx, upd, metav1.UpdateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got.Status.Phase != corev1.PodRunning {
			t.Errorf("update of the main resource changed the phase to %q", got.Status.Phase)
		}
		if got.Labels["after"] != "status" {
			t.Errorf("labels %v", got.Labels)
		}
		// Patch of status.
		got, err = pods.Patch(ctx, "st", types.MergePatchType, []byte(`{"status":{"phase":"Succeeded"},"spec":{"activeDeadlineSeconds":5}}`), metav1.PatchOptions{}, "status")
		if err != nil {
			t.Fatal(err)
		}
		if got.Status.Phase != corev1.PodSucceeded || got.Spec.ActiveDeadlineSeconds != nil {
			t.Errorf("status patch: phase %q, activeDeadlineSeconds %v", got.Status.Phase, got.Spec.ActiveDeadlineSeconds)
		}
		stored, err := pods.Get(ctx, "st", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if stored.Status.Phase != corev1.PodSucceeded || stored.Spec.Containers[0].Image != "busybox:1.36" {
			t.Errorf("stored: phase %q image %q", stored.Status.Phase, stored.Spec.Containers[0].Image)
		}
		if _, err := pods.UpdateStatus(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "nope", Namespace: "default"}}, metav1.UpdateOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("status of a missing pod: got %v, want 404", err)
		}
	})

	t.Run("scale", func(t *testing.T) {
		if _, err := deps.Create(ctx, testDeployment("web", 1), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		sc, err := deps.GetScale(ctx, "web", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if sc.Spec.Replicas != 1 || sc.Status.Selector != "app=web" || sc.Kind != "Scale" && sc.Kind != "" {
			t.Errorf("scale %+v", sc)
		}
		steps := []struct {
			name string
			do   func() (*autoscalingv1.Scale, error)
			want int32
		}{
			{"PUT", func() (*autoscalingv1.Scale, error) {
				s := sc.DeepCopy()
				s.Spec.Replicas = 3
				return deps.UpdateScale(ctx, "web", s, metav1.UpdateOptions{})
			}, 3},
			{"merge PATCH", func() (*autoscalingv1.Scale, error) {
				return patchScale(t, env, "application/merge-patch+json", `{"spec":{"replicas":5}}`)
			}, 5},
			{"JSON PATCH", func() (*autoscalingv1.Scale, error) {
				return patchScale(t, env, "application/json-patch+json", `[{"op":"replace","path":"/spec/replicas","value":2}]`)
			}, 2},
		}
		for _, s := range steps {
			got, err := s.do()
			if err != nil {
				t.Fatalf("%s: %v", s.name, err)
			}
			if got.Spec.Replicas != s.want {
				t.Errorf("%s: scale says %d, want %d", s.name, got.Spec.Replicas, s.want)
			}
			d, err := deps.Get(ctx, "web", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if *d.Spec.Replicas != s.want {
				t.Errorf("%s: deployment has %d replicas, want %d", s.name, *d.Spec.Replicas, s.want)
			}
			if got.ResourceVersion != d.ResourceVersion {
				t.Errorf("%s: scale at %s, deployment at %s", s.name, got.ResourceVersion, d.ResourceVersion)
			}
		}
		// A stale scale update conflicts; a negative one is invalid.
		before := settle(t, env)
		if _, err := deps.UpdateScale(ctx, "web", sc, metav1.UpdateOptions{}); !apierrors.IsConflict(err) {
			t.Errorf("stale scale: got %v, want 409", err)
		}
		cur, err := deps.GetScale(ctx, "web", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cur.Spec.Replicas = -1
		if _, err := deps.UpdateScale(ctx, "web", cur, metav1.UpdateOptions{}); !apierrors.IsInvalid(err) {
			t.Errorf("negative scale: got %v, want 422", err)
		}
		requireNothingWritten(t, env, before)
		if _, err := deps.GetScale(ctx, "missing", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("scale of a missing deployment: got %v, want 404", err)
		}
		if _, err := env.Client.CoreV1().RESTClient().Get().Namespace("default").Resource("pods").Name("st").SubResource("scale").Do(ctx).Get(); !apierrors.IsNotFound(err) {
			t.Errorf("scale of a pod: got %v, want 404", err)
		}
	})

	t.Run("binding", func(t *testing.T) {
		if _, err := pods.Create(ctx, testPod("bindme"), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		bind := func(node string) error {
			return pods.Bind(ctx, &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: "bindme"},
				Target: corev1.ObjectReference{Kind: "Node", Name: node}}, metav1.CreateOptions{})
		}
		if err := bind("n1"); err != nil {
			t.Fatalf("bind: %v", err)
		}
		p, err := pods.Get(ctx, "bindme", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if p.Spec.NodeName != "n1" {
			t.Errorf("nodeName %q, want n1", p.Spec.NodeName)
		}
		scheduled := false
		for _, c := range p.Status.Conditions {
			scheduled = scheduled || c.Type == corev1.PodScheduled && c.Status == corev1.ConditionTrue
		}
		if !scheduled {
			t.Errorf("no PodScheduled condition: %+v", p.Status.Conditions)
		}
		before := settle(t, env)
		if err := bind("n2"); !apierrors.IsConflict(err) {
			t.Errorf("second binding: got %v, want 409", err)
		}
		if err := pods.Bind(ctx, &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: "missing"}, Target: corev1.ObjectReference{Name: "n1"}}, metav1.CreateOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("binding a missing pod: got %v, want 404", err)
		}
		if err := pods.Bind(ctx, &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: "bindme"}}, metav1.CreateOptions{}); !apierrors.IsInvalid(err) {
			t.Errorf("binding without a target: got %v, want 422", err)
		}
		requireNothingWritten(t, env, before)
		if p, _ := pods.Get(ctx, "bindme", metav1.GetOptions{}); p.Spec.NodeName != "n1" {
			t.Errorf("nodeName now %q", p.Spec.NodeName)
		}
	})
}

// patchScale patches deployments/web/scale; the answer is a Scale.
func patchScale(t *testing.T, env *controlplanetest.Env, ct, patch string) (*autoscalingv1.Scale, error) {
	r := do(t, env, call{method: http.MethodPatch, path: "/apis/apps/v1/namespaces/default/deployments/web/scale", contentType: ct, body: []byte(patch)})
	if r.code != http.StatusOK {
		return nil, fmt.Errorf("patch scale: %d %s", r.code, r.body)
	}
	var sc autoscalingv1.Scale
	if err := json.Unmarshal(r.body, &sc); err != nil {
		return nil, err
	}
	if sc.Kind != "Scale" || sc.APIVersion != "autoscaling/v1" || sc.Name != "web" {
		return nil, fmt.Errorf("patch scale answered %s", r.body)
	}
	return &sc, nil
}
