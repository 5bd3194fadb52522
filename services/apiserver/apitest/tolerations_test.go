package apitest

import (
	"encoding/json"
	"net/http"
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cairn-dev/cairn/events"
	"github.com/cairn-dev/cairn/services/controlplane/controlplanetest"
)

// noExecute is a toleration of the NoExecute taint key for seconds, as the
// DefaultTolerationSeconds plugin adds it.
func noExecute(key string, seconds int64) corev1.Toleration {
	return corev1.Toleration{Key: key, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute,
		TolerationSeconds: ptr(seconds)}
}

// TestDefaultTolerationSeconds covers kube's DefaultTolerationSeconds
// admission plugin: pods tolerate the not-ready and unreachable NoExecute
// taints for 300 s unless they already tolerate them, in what create
// returns, what etcd holds and what the log publishes; dry runs included.
func TestDefaultTolerationSeconds(t *testing.T) {
	env := controlplanetest.Start(t)
	ctx := ctxFor(t, 90*time.Second)
	pods := env.Client.CoreV1().Pods("default")
	notReady := noExecute(corev1.TaintNodeNotReady, 300)
	unreachable := noExecute(corev1.TaintNodeUnreachable, 300)

	tests := []struct {
		name string
		have []corev1.Toleration
		want []corev1.Toleration
	}{
		{name: "none", want: []corev1.Toleration{notReady, unreachable}},
		{
			name: "own unreachable kept",
			have: []corev1.Toleration{noExecute(corev1.TaintNodeUnreachable, 6000)},
			want: []corev1.Toleration{noExecute(corev1.TaintNodeUnreachable, 6000), notReady},
		},
		{
			name: "exists with empty key tolerates both",
			have: []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
			want: []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
		},
		{
			name: "empty effect matches NoExecute",
			have: []corev1.Toleration{{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists}},
			want: []corev1.Toleration{{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists}, unreachable},
		},
		{
			name: "other effect does not",
			have: []corev1.Toleration{{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
			want: []corev1.Toleration{
				{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
				notReady, unreachable,
			},
		},
		{
			// kube's plugin looks at key and effect only.
			name: "equal with a value counts",
			have: []corev1.Toleration{{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpEqual, Value: "x", Effect: corev1.TaintEffectNoExecute}},
			want: []corev1.Toleration{
				{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpEqual, Value: "x", Effect: corev1.TaintEffectNoExecute},
				notReady,
			},
		},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := testPod("tol-" + string(rune('a'+i)))
			p.Spec.Tolerations = tt.have

			dry, err := pods.Create(ctx, p.DeepCopy(), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
			if err != nil {
				t.Fatalf("dry-run create: %v", err)
			}
			if !reflect.DeepEqual(dry.Spec.Tolerations, tt.want) {
				t.Errorf("dry-run create returned %v, want %v", dry.Spec.Tolerations, tt.want)
			}

			before := settle(t, env)
			created, err := pods.Create(ctx, p.DeepCopy(), metav1.CreateOptions{})
			if err != nil {
				t.Fatalf("create: %v", err)
			}
			if !reflect.DeepEqual(created.Spec.Tolerations, tt.want) {
				t.Errorf("create returned %v, want %v", created.Spec.Tolerations, tt.want)
			}
			got, err := pods.Get(ctx, p.Name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got.Spec.Tolerations, tt.want) {
				t.Errorf("stored %v, want %v", got.Spec.Tolerations, tt.want)
			}
			if logged := loggedPod(t, env, before, events.Added, p.Name); !reflect.DeepEqual(logged.Spec.Tolerations, tt.want) {
				t.Errorf("published %v, want %v", logged.Spec.Tolerations, tt.want)
			}
		})
	}

	t.Run("any client", func(t *testing.T) {
		r := do(t, env, call{method: http.MethodPost, path: podsPath, contentType: "application/yaml",
			body: []byte("apiVersion: v1\nkind: Pod\nmetadata: {name: tol-raw}\nspec: {containers: [{name: c, image: busybox:1.36}]}\n")})
		if r.code != http.StatusCreated {
			t.Fatalf("create: %d %s", r.code, r.body)
		}
		var p corev1.Pod
		if err := json.Unmarshal(r.body, &p); err != nil {
			t.Fatal(err)
		}
		if want := []corev1.Toleration{notReady, unreachable}; !reflect.DeepEqual(p.Spec.Tolerations, want) {
			t.Errorf("got %v, want %v", p.Spec.Tolerations, want)
		}
	})

	t.Run("update", func(t *testing.T) {
		p, err := pods.Create(ctx, testPod("tol-update"), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		// An update keeps the tolerations and adds no second copy; a
		// default the update leaves out is put back rather than refused,
		// as in kube, whose plugin also admits updates, before the
		// generation is compared.
		gen := p.Generation
		p.Labels["v"] = "2"
		p.Spec.Tolerations = nil
		p, err = pods.Update(ctx, p, metav1.UpdateOptions{})
		if err != nil {
			t.Fatalf("update: %v", err)
		}
		if want := []corev1.Toleration{notReady, unreachable}; p.Labels["v"] != "2" || !reflect.DeepEqual(p.Spec.Tolerations, want) {
			t.Errorf("after update: labels %v, tolerations %v, want %v", p.Labels, p.Spec.Tolerations, want)
		}
		if p.Generation != gen {
			t.Errorf("generation %d after a labels-only update, want %d", p.Generation, gen)
		}
		// One the update drops is appended again.
		p.Spec.Tolerations = p.Spec.Tolerations[1:]
		p, err = pods.Update(ctx, p, metav1.UpdateOptions{})
		if err != nil {
			t.Fatalf("update: %v", err)
		}
		if want := []corev1.Toleration{unreachable, notReady}; !reflect.DeepEqual(p.Spec.Tolerations, want) {
			t.Errorf("after update: %v, want %v", p.Spec.Tolerations, want)
		}
		// A toleration the update adds stays, and nothing else comes.
		own := corev1.Toleration{Operator: corev1.TolerationOpExists}
		p.Spec.Tolerations = append(p.Spec.Tolerations, own)
		p, err = pods.Update(ctx, p, metav1.UpdateOptions{})
		if err != nil {
			t.Fatalf("update: %v", err)
		}
		if want := []corev1.Toleration{unreachable, notReady, own}; !reflect.DeepEqual(p.Spec.Tolerations, want) {
			t.Errorf("after second update: %v, want %v", p.Spec.Tolerations, want)
		}
	})
}

// loggedPod is the pod of the event of type typ for name published after m.
func loggedPod(t *testing.T, env *controlplanetest.Env, m logMark, typ events.Type, name string) *corev1.Pod {
	t.Helper()
	for _, ev := range eventsSince(t, env, m) {
		if ev.Resource != "pods" || ev.Name != name || ev.Type != typ {
			continue
		}
		var p corev1.Pod
		if err := json.Unmarshal(ev.Object, &p); err != nil {
			t.Fatalf("event %s: %v", ev.ID, err)
		}
		return &p
	}
	t.Fatalf("no %s event for pod %s on the log", typ, name)
	return nil
}
