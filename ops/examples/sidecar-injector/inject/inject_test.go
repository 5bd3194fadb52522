package inject_test

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/pem"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/utils/ptr"

	"github.com/cairn-dev/cairn/ops/examples/sidecar-injector/inject"
	"github.com/cairn-dev/cairn/services/controlplane/controlplanetest"
	"github.com/cairn-dev/cairn/services/pki"
)

func pod(labels map[string]string, containers ...corev1.Container) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: "default", Labels: labels}, Spec: corev1.PodSpec{Containers: containers}}
}

func applyPatch(t *testing.T, p *corev1.Pod, patch []byte) *corev1.Pod {
	t.Helper()
	obj, _ := json.Marshal(p)
	dec, err := jsonpatch.DecodePatch(patch)
	if err != nil {
		t.Fatal(err)
	}
	out, err := dec.Apply(obj)
	if err != nil {
		t.Fatalf("patch does not apply: %v", err)
	}
	var got corev1.Pod
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	return &got
}

func TestPatch(t *testing.T) {
	app := corev1.Container{Name: "app", Image: "cairn.local/busybox:1.36"}
	withMount := corev1.Container{Name: "web", Image: "x", VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}}
	tests := []struct {
		name string
		pod  *corev1.Pod
		want bool
	}{
		{"not labelled", pod(nil, app), false},
		{"labelled false", pod(map[string]string{inject.Label: "false"}, app), false},
		{"labelled", pod(map[string]string{inject.Label: "true"}, app), true},
		{"labelled, volumes and mounts already", func() *corev1.Pod {
			p := pod(map[string]string{inject.Label: "true"}, app, withMount)
			p.Spec.Volumes = []corev1.Volume{{Name: "data"}}
			p.Annotations = map[string]string{"a/b": "c"}
			return p
		}(), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			patch, err := inject.Injector{}.Patch(tt.pod)
			if err != nil {
				t.Fatal(err)
			}
			if !tt.want {
				if patch != nil {
					t.Fatalf("patch %s", patch)
				}
				return
			}
			got := applyPatch(t, tt.pod, patch)
			n := len(tt.pod.Spec.Containers)
			if len(got.Spec.Containers) != n+1 || got.Spec.Containers[n].Name != inject.SidecarName {
				t.Fatalf("containers %+v", got.Spec.Containers)
			}
			for _, c := range got.Spec.Containers {
				if !containsMount(c.VolumeMounts, inject.VolumeName) {
					t.Errorf("container %s has no %s mount", c.Name, inject.VolumeName)
				}
			}
			if len(got.Spec.Volumes) != len(tt.pod.Spec.Volumes)+1 || got.Annotations["sidecar-injector.cairn.dev/injected"] != inject.SidecarName {
				t.Errorf("volumes %+v annotations %v", got.Spec.Volumes, got.Annotations)
			}
			if inject.Wants(got) {
				t.Error("an injected pod wants another sidecar")
			}
		})
	}
}

func containsMount(ms []corev1.VolumeMount, name string) bool {
	for _, m := range ms {
		if m.Name == name {
			return true
		}
	}
	return false
}

// TestInjectThroughTheAPIServer serves the injector over HTTPS on loopback
// and registers it (by url) with a real control plane: a labelled pod is
// stored with the sidecar, an unlabelled one without, and the event of the
// labelled pod names the webhook.
func TestInjectThroughTheAPIServer(t *testing.T) {
	env := controlplanetest.Start(t)
	srv := httptest.NewTLSServer(inject.Injector{}.Handler())
	t.Cleanup(srv.Close)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	cfg, err := env.Client.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx, &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: inject.Name},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{Name: inject.WebhookName,
			ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: ptr.To(srv.URL + "/mutate"), CABundle: ca},
			Rules: []admissionregistrationv1.RuleWithOperations{{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
				Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}}}},
			ObjectSelector: &metav1.LabelSelector{MatchLabels: map[string]string{inject.Label: "true"}},
			SideEffects:    ptr.To(admissionregistrationv1.SideEffectClassNone), AdmissionReviewVersions: []string{"v1"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	controlplanetest.Eventually(t, 30*time.Second, "webhook loaded", func() bool { return env.Webhooks.Loaded(true, inject.Name, cfg.ResourceVersion) })
	pods := env.Client.CoreV1().Pods("default")
	app := corev1.Container{Name: "app", Image: inject.DefaultImage, Command: []string{"sleep", "3600"}}
	in, err := pods.Create(ctx, pod(map[string]string{inject.Label: "true"}, app), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(in.Spec.Containers) != 2 || in.Spec.Containers[1].Name != inject.SidecarName {
		t.Fatalf("containers %+v", in.Spec.Containers)
	}
	plain := pod(map[string]string{"app": "plain"}, app)
	plain.Name = "plain"
	out, err := pods.Create(ctx, plain, metav1.CreateOptions{})
	if err != nil || len(out.Spec.Containers) != 1 {
		t.Fatalf("unlabelled pod: %v %+v", err, out)
	}
}

// TestManifest checks the example's YAML: the six objects, and that the
// apiserver accepts each as valid (server-side dry run).
func TestManifest(t *testing.T) {
	ca, err := pki.Load(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	out, err := inject.ManifestFor(ca)
	if err != nil {
		t.Fatal(err)
	}
	env := controlplanetest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(out), 4096)
	var kinds []string
	dry := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}
	for {
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			break
		}
		var tm metav1.TypeMeta
		_ = json.Unmarshal(raw, &tm)
		kinds = append(kinds, tm.Kind)
		var err error
		switch tm.Kind {
		case "Namespace":
			var o corev1.Namespace
			_ = json.Unmarshal(raw, &o)
			_, err = env.Client.CoreV1().Namespaces().Create(ctx, &o, metav1.CreateOptions{})
		case "Secret":
			var o corev1.Secret
			_ = json.Unmarshal(raw, &o)
			_, err = env.Client.CoreV1().Secrets(o.Namespace).Create(ctx, &o, dry)
		case "Deployment":
			var o appsv1.Deployment
			_ = json.Unmarshal(raw, &o)
			_, err = env.Client.AppsV1().Deployments(o.Namespace).Create(ctx, &o, dry)
		case "Service":
			var o corev1.Service
			_ = json.Unmarshal(raw, &o)
			_, err = env.Client.CoreV1().Services(o.Namespace).Create(ctx, &o, dry)
		case "MutatingWebhookConfiguration":
			var o admissionregistrationv1.MutatingWebhookConfiguration
			_ = json.Unmarshal(raw, &o)
			_, err = env.Client.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx, &o, dry)
		}
		if err != nil {
			t.Errorf("%s: %v", tm.Kind, err)
		}
	}
	if got := strings.Join(kinds, " "); got != "Namespace Secret Deployment Service MutatingWebhookConfiguration" {
		t.Errorf("kinds %s", got)
	}
}
