package e2etest

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/cairn-dev/cairn/ops/examples/sidecar-injector/inject"
	"github.com/cairn-dev/cairn/ops/images"
	"github.com/cairn-dev/cairn/services/cairn/cairntest"
	"github.com/cairn-dev/cairn/services/pki"
)

// appPod writes a line to the shared log every half second.
const appPod = `apiVersion: v1
kind: Pod
metadata:
  name: app
  labels:
    sidecar-inject: "true"
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: app
    image: cairn.local/busybox:1.36
    imagePullPolicy: IfNotPresent
    command: ["sh", "-c", "i=0; while true; do i=$((i+1)); echo app line $i >> /var/log/app/app.log; sleep 0.5; done"]
`

// TestSidecarInjectorExample runs the README's second example on a real
// node: the injector's image built offline and imported into the node's
// containerd, its manifest (serving certificate from the cluster CA)
// applied with one kubectl apply -f; then a labelled pod gets the logging
// sidecar, which runs and shows the app's log; the apiserver reached the
// injector through its Service, at the pod's address inside the node's
// network namespace; the timeline says who mutated the pod.
func TestSidecarInjectorExample(t *testing.T) {
	kubectl := requireNode(t)
	if _, err := exec.LookPath("ctr"); err != nil {
		t.Skip("e2etest: ctr not found (Debian's containerd package has it)")
	}
	bin := cairntest.Build(t)
	dataDir := t.TempDir()
	c := startCluster(t, bin, kubectl, dataDir, cairntest.FreeAddr(t))

	dir := t.TempDir()
	injector := filepath.Join(dir, "sidecar-injector")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	build := exec.CommandContext(ctx, "go", "build", "-o", injector, "github.com/cairn-dev/cairn/ops/examples/sidecar-injector")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build sidecar-injector: %v\n%s", err, out)
	}
	img, err := images.BuildSidecarInjector(injector, dir)
	if err != nil {
		t.Fatal(err)
	}
	if out, err := exec.CommandContext(ctx, "ctr", "--address", c.socket(), "-n", "k8s.io", "images", "import", img.Archive).CombinedOutput(); err != nil {
		t.Fatalf("ctr import: %v\n%s", err, out)
	}
	ca, err := pki.LoadCA(filepath.Join(dataDir, "pki"))
	if err != nil {
		t.Fatal(err)
	}
	manifest, err := inject.ManifestFor(ca)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "sidecar-injector.yaml")
	if err := os.WriteFile(file, manifest, 0o644); err != nil {
		t.Fatal(err)
	}
	c.OK(t, "apply", "-f", file)
	poll(t, 3*time.Minute, "the injector's Deployment available", func() error {
		r := c.Run(t, "-n", inject.Namespace, "get", "deployment", inject.Name, "-o", "jsonpath={.status.availableReplicas}")
		if r.Err != nil || strings.TrimSpace(r.Stdout) != "1" {
			return fmt.Errorf("available %q: %v", r.Stdout, r.Err)
		}
		return nil
	})

	appFile := filepath.Join(dir, "app.yaml")
	if err := os.WriteFile(appFile, []byte(appPod), 0o644); err != nil {
		t.Fatal(err)
	}
	// Until the apiserver's caches hold the injector's endpoint, the
	// webhook (failurePolicy Fail) refuses the create.
	poll(t, time.Minute, "the labelled pod admitted", func() error {
		if r := c.Run(t, "apply", "-f", appFile); r.Err != nil {
			return fmt.Errorf("%s", r)
		}
		return nil
	})
	var pod corev1.Pod
	if err := json.Unmarshal([]byte(c.OK(t, "get", "pod", "app", "-o", "json")), &pod); err != nil {
		t.Fatal(err)
	}
	if len(pod.Spec.Containers) != 2 || pod.Spec.Containers[1].Name != inject.SidecarName {
		t.Fatalf("containers %+v", pod.Spec.Containers)
	}
	poll(t, podWait, "both containers of app ready", func() error {
		if err := json.Unmarshal([]byte(c.OK(t, "get", "pod", "app", "-o", "json")), &pod); err != nil {
			return err
		}
		if !podReady(&pod) {
			return fmt.Errorf("pod %s: %+v", pod.Status.Phase, pod.Status.ContainerStatuses)
		}
		return nil
	})
	poll(t, time.Minute, "the sidecar shows the app's log", func() error {
		r := c.Run(t, "logs", "app", "-c", inject.SidecarName)
		if r.Err != nil || !strings.Contains(r.Stdout, "app line ") {
			return fmt.Errorf("logs: %s", r)
		}
		return nil
	})
	poll(t, time.Minute, "the timeline names the injector", func() error {
		out, err := exec.Command(bin, "timeline", "pod/app", "--data-dir", dataDir).CombinedOutput()
		if err != nil || !strings.Contains(string(out), "mutated by "+inject.WebhookName) {
			return fmt.Errorf("timeline: %v\n%s", err, out)
		}
		return nil
	})
}
