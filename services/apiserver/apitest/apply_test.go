package apitest

import (
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"

	"github.com/cairn-dev/cairn/services/controlplane/controlplanetest"
)

// TestServerSideApply drives server-side apply through client-go: an apply
// creates, a later apply by the same manager changes and removes what it
// owns, another manager's apply of an owned field conflicts unless forced,
// and once an object is applied, plain updates are tracked too.
func TestServerSideApply(t *testing.T) {
	env := controlplanetest.Start(t)
	ctx := ctxFor(t, 30*time.Second)
	deps := env.Client.AppsV1().Deployments("default")
	web := func(replicas int32, image string, labels map[string]string) *appsv1ac.DeploymentApplyConfiguration {
		spec := appsv1ac.DeploymentSpec().
			WithSelector(metav1ac.LabelSelector().WithMatchLabels(map[string]string{"app": "web"})).
			WithTemplate(corev1ac.PodTemplateSpec().
				WithLabels(map[string]string{"app": "web"}).
				WithSpec(corev1ac.PodSpec().WithContainers(corev1ac.Container().WithName("c").WithImage(image))))
		if replicas > 0 {
			spec.WithReplicas(replicas)
		}
		return appsv1ac.Deployment("web", "default").WithLabels(labels).WithSpec(spec)
	}
	owners := func(d *appsv1.Deployment) (out []string) {
		for _, e := range d.ManagedFields {
			out = append(out, e.Manager+"/"+string(e.Operation))
		}
		slices.Sort(out)
		return out
	}

	d, err := deps.Apply(ctx, web(2, "nginx:1", map[string]string{"team": "a", "extra": "x"}), metav1.ApplyOptions{FieldManager: "alice"})
	if err != nil {
		t.Fatalf("apply (create): %v", err)
	}
	if *d.Spec.Replicas != 2 || d.Labels["extra"] != "x" || !slices.Equal(owners(d), []string{"alice/Apply"}) {
		t.Fatalf("created: replicas %d labels %v managers %v", *d.Spec.Replicas, d.Labels, owners(d))
	}
	if d.Spec.RevisionHistoryLimit == nil || *d.Spec.RevisionHistoryLimit != 10 {
		t.Errorf("created without defaults: %+v", d.Spec)
	}

	// alice changes the image and drops a label she owned.
	if d, err = deps.Apply(ctx, web(2, "nginx:2", map[string]string{"team": "a"}), metav1.ApplyOptions{FieldManager: "alice"}); err != nil {
		t.Fatalf("apply (update): %v", err)
	}
	if d.Spec.Template.Spec.Containers[0].Image != "nginx:2" || d.Labels["extra"] != "" || d.Labels["team"] != "a" {
		t.Errorf("after alice's second apply: image %s labels %v", d.Spec.Template.Spec.Containers[0].Image, d.Labels)
	}

	// bob applies replicas, which alice owns with another value.
	bob := appsv1ac.Deployment("web", "default").WithSpec(appsv1ac.DeploymentSpec().WithReplicas(3))
	_, err = deps.Apply(ctx, bob, metav1.ApplyOptions{FieldManager: "bob"})
	if !apierrors.IsConflict(err) || !strings.Contains(err.Error(), ".spec.replicas") || !strings.Contains(err.Error(), `"alice"`) {
		t.Fatalf("bob's apply of alice's field: %v, want a conflict on .spec.replicas with alice", err)
	}
	if d, err = deps.Apply(ctx, bob, metav1.ApplyOptions{FieldManager: "bob", Force: true}); err != nil {
		t.Fatalf("forced apply: %v", err)
	}
	if *d.Spec.Replicas != 3 || !slices.Equal(owners(d), []string{"alice/Apply", "bob/Apply"}) {
		t.Errorf("after bob's forced apply: replicas %d managers %v", *d.Spec.Replicas, owners(d))
	}
	// alice no longer owns replicas: leaving it out does not remove it.
	if d, err = deps.Apply(ctx, web(0, "nginx:2", map[string]string{"team": "a"}), metav1.ApplyOptions{FieldManager: "alice"}); err != nil {
		t.Fatal(err)
	}
	if *d.Spec.Replicas != 3 {
		t.Errorf("replicas %d after alice left it out, want bob's 3", *d.Spec.Replicas)
	}

	// The scale subresource of an applied object is tracked too.
	sc, err := deps.GetScale(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sc.Spec.Replicas = 4
	if _, err := deps.UpdateScale(ctx, "web", sc, metav1.UpdateOptions{FieldManager: "scaler"}); err != nil {
		t.Fatalf("scale an applied deployment: %v", err)
	}
	if d, err = deps.Get(ctx, "web", metav1.GetOptions{}); err != nil || *d.Spec.Replicas != 4 || !slices.Contains(owners(d), "scaler/Update") {
		t.Fatalf("after scaling: %v, managers %v", err, owners(d))
	}

	// A plain update of an applied object is tracked.
	d.Spec.Template.Spec.Containers[0].Image = "nginx:3"
	if d, err = deps.Update(ctx, d, metav1.UpdateOptions{FieldManager: "carol"}); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(owners(d), "carol/Update") {
		t.Errorf("managers after carol's update: %v", owners(d))
	}
	// alice's apply of her old image now conflicts with carol.
	_, err = deps.Apply(ctx, web(0, "nginx:2", map[string]string{"team": "a"}), metav1.ApplyOptions{FieldManager: "alice"})
	if !apierrors.IsConflict(err) || !strings.Contains(err.Error(), `"carol"`) {
		t.Errorf("alice's apply over carol's image: %v, want a conflict with carol", err)
	}

	t.Run("bad input", func(t *testing.T) {
		before := settle(t, env)
		path := "/apis/apps/v1/namespaces/default/deployments/web"
		for _, tt := range []struct {
			name, path, ct, body string
			code                 int
		}{
			{"no field manager", path, applyPatchCT, "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\n", http.StatusUnprocessableEntity},
			{"force on a merge patch", path + "?force=true", "application/merge-patch+json", `{}`, http.StatusUnprocessableEntity},
			{"malformed YAML", path + "?fieldManager=m", applyPatchCT, "kind: [", http.StatusBadRequest},
			{"wrong kind", path + "?fieldManager=m", applyPatchCT, "apiVersion: v1\nkind: Pod\nmetadata: {name: web}\n", http.StatusBadRequest},
			{"wrong name", path + "?fieldManager=m", applyPatchCT, "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: other}\n", http.StatusBadRequest},
			{"invalid result", path + "?fieldManager=m&force=true", applyPatchCT, "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec: {replicas: -1}\n", http.StatusUnprocessableEntity},
			{"create invalid", "/apis/apps/v1/namespaces/default/deployments/new?fieldManager=m", applyPatchCT, "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: new}\n", http.StatusUnprocessableEntity},
		} {
			r := do(t, env, call{method: http.MethodPatch, path: tt.path, contentType: tt.ct, body: []byte(tt.body)})
			if r.code != tt.code {
				t.Errorf("%s: %d %s, want %d", tt.name, r.code, r.body, tt.code)
				continue
			}
			status(t, r)
		}
		requireNothingWritten(t, env, before)
	})
}

const applyPatchCT = "application/apply-patch+yaml"
